"""The bounds planning searches to, shared by the plans (memory.py, decode.py) and their tables
(render.py): the longest context a memory plan searches, and the largest decode batch searched for
where the step turns compute-bound.
"""

from roofline.errors import MAX_CONTEXT  # 16,777,216 tokens, shared with serving's request lengths

__all__ = ["MAX_CONTEXT", "SEARCH_MAX_BATCH"]

SEARCH_MAX_BATCH = 65536  # compute-bound batches are searched up to here; the largest decode batch planned
