"""roofline: how fast a kernel, a transformer layer or a model can run on an accelerator.

Core API (all quantities in SI base units: FLOPs, bytes, seconds, FLOP/s, bytes/s):

    Machine, get_machine, list_machines          machines.py
    Kernel and its constructors                  kernels.py (attention's pair counts: attention_pairs.py)
    time_lower_bound, CostModel, predict         cost.py
    Model, Layer and the layer kinds             architecture.py (the kinds: mixers.py)
    from_hf_config (one loader per model_type)   hf_configs/ (a package: keys, quant, one module per family)
    get_model, list_models, TransformerConfig    model_sources.py (re-exported by transformer.py)
    count_params, flops_per_token, ...           transformer.py
    block_kernels, layer_reports                 blocks.py (Workload: workload.py)

Plots (matplotlib) live in roofline.plots and are imported only when used.
"""

from roofline.errors import RooflineError
from roofline.machines import A100_80GB, H100_SXM, Machine, get_machine, list_machines
from roofline.kernels import (
    Kernel,
    attention_pv_kernel,
    attention_scores_kernel,
    batched_matmul_kernel,
    decode_step_kernel,
    elementwise_kernel,
    embedding_kernel,
    flash_attention_kernel,
    layernorm_kernel,
    matmul_kernel,
    naive_attention_kernel,
    rmsnorm_kernel,
    softmax_kernel,
)
from roofline.cost import CostModel, OpPrediction, WorkloadPrediction, predict, seed_cost_model, speed_of_light, time_lower_bound
from roofline.architecture import MLP, Attention, LatentAttention, Layer, Mamba, Mamba2, Model, MoE
from roofline.hf_configs import from_hf_config
from roofline.transformer import (
    TransformerConfig,
    active_params,
    cache_bytes_per_sequence,
    kv_cache_bytes_per_token,
    model_summary,
    attention_flops_per_token_forward,
    count_params,
    flops_per_token,
    get_model,
    list_models,
    load_hf_config,
    matmul_params,
    six_nd,
    training_flops,
    training_time_s,
)
from roofline.blocks import Workload, block_kernels, layer_reports
import roofline.trace  # noqa: E402  callable package: roofline.trace(module, *inputs); torch loads on use


def plot_roofline(*args, **kwargs):
    """Lazy wrapper around roofline.plots.plot_roofline (imports matplotlib only when called)."""
    from roofline.plots import plot_roofline as _plot

    return _plot(*args, **kwargs)


__all__ = [name for name in dir() if not name.startswith("_")]
__version__ = "0.1.0"
