"""The bounds planning searches to, shared by the plans (memory.py, decode.py) and their tables
(render.py): the longest context a memory plan searches, and the largest decode batch searched for
where the step turns compute-bound.
"""

from roofline.errors import MAX_CONTEXT, check_number  # MAX_CONTEXT: 16,777,216 tokens, shared with serving's request lengths

__all__ = ["MAX_CONTEXT", "SEARCH_MAX_BATCH", "MIN_MEMORY_FRACTION", "check_memory_fraction"]

SEARCH_MAX_BATCH = 65536  # compute-bound batches are searched up to here; the largest decode batch planned

# The least share of a GPU's memory a plan or an engine may be given (gpu_memory_utilization): the
# library's check, the CLI's --memory-fraction and the API's memory_fraction all read this bound.
MIN_MEMORY_FRACTION = 1e-3


def check_memory_fraction(value, name: str = "memory_fraction") -> float:
    """A share of a GPU's memory: MIN_MEMORY_FRACTION <= value <= 1."""
    return check_number(name, value, minimum=MIN_MEMORY_FRACTION, strictly=False, maximum=1.0)
