"""The bounds planning searches to, shared by the plans (memory.py, decode.py) and their tables
(render.py): the longest context a memory plan searches, and the largest decode batch searched for
where the step turns compute-bound.
"""

from roofline.errors import MAX_CONTEXT, check_number  # MAX_CONTEXT: 16,777,216 tokens, shared with serving's request lengths

__all__ = ["ENGINE_MEMORY_FRACTION", "ENGINE_STEP_SEQS", "ENGINE_STEP_TOKENS", "MAX_CONTEXT", "SEARCH_MAX_BATCH",
           "MIN_MEMORY_FRACTION", "QUANT_DTYPES", "check_memory_fraction"]

# The widths a Precision takes (plan/precision.py): here, where the CLI reads its --precision choices
# without loading a model
QUANT_DTYPES = ("fp32", "bf16", "fp16", "fp8", "int8", "fp4", "int4")

SEARCH_MAX_BATCH = 65536  # compute-bound batches are searched up to here; the largest decode batch planned

# The least share of a GPU's memory a plan or an engine may be given (gpu_memory_utilization): the
# library's check, the CLI's --memory-fraction and the API's memory_fraction all read this bound.
MIN_MEMORY_FRACTION = 1e-3


def check_memory_fraction(value, name: str = "memory_fraction") -> float:
    """A share of a GPU's memory: MIN_MEMORY_FRACTION <= value <= 1."""
    return check_number(name, value, minimum=MIN_MEMORY_FRACTION, strictly=False, maximum=1.0)


# What fits is one notion across `memory`, `decode` and `serving` (docs/planning.md): an engine's share of the
# memory, less the weights and the activations of its largest step. The share and the step are serving's
# defaults (serving.Engine reads them here): vLLM's gpu_memory_utilization 0.9, max_num_batched_tokens 8,192
# and max_num_seqs 256 (vllm/engine/arg_utils.py, vllm/config: the defaults of vLLM 0.6-0.8; see engines.toml
# for each engine's own as it runs).
ENGINE_MEMORY_FRACTION = 0.9
ENGINE_STEP_TOKENS = 8192
ENGINE_STEP_SEQS = 256
