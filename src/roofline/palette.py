"""The colours of every figure and of the workshop page: plain data, read by plots (matplotlib) and
by web (the payloads carry them, and the page's JavaScript draws with what it is given).

Red and blue mean the bound everywhere (memory red, compute blue, matplotlib's tab:red and
tab:blue), green a collective's link; the other colours name parts and series and avoid them.
"""

MEMORY_RED = "#d62728"  # memory-bound
COMPUTE_BLUE = "#1f77b4"  # compute-bound
LINK_GREEN = "#2ca02c"  # link-bound (a collective's bytes over its link)
LAUNCH_GREY = "#9e9e9e"  # launch overhead
BOUND_COLORS = {"memory": MEMORY_RED, "compute": COMPUTE_BLUE, "link": LINK_GREEN}

# memory parts: no red or blue, which mean the bound elsewhere
PART_COLORS = {"weights": "#4d4d4d", "gradients": "#9467bd", "optimizer": "#8c564b", "activations": "#e6a23c",
               "kv_cache": "#17becf"}
UNNAMED_PART_GREY = "#999999"  # a memory part without a colour of its own
VECTOR_OPS_ORANGE = "#f0a35e"  # norms, activations and embedding, beside matmuls, attention and collectives
MOE_PURPLE = "#9467bd"  # routed experts (the atlas's MoE family; tab:purple)

# the serving view's series
TTFT_COLOR = COMPUTE_BLUE  # time to first token
TPOT_COLOR = "#ff7f0e"  # time per output token (tab:orange)
MISS_GREY = "#8a94a3"  # a point that misses the targets: an open grey marker
INK = "#2b2f36"  # lines drawn in the page's text colour
