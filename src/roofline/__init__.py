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

Each name is imported on first use (roofline.lazy); plots (matplotlib) live in roofline.plots.
"""

from roofline.lazy import lazy_package

# each public name and the module that holds it: loaded on first use, so that `roofline --version`
# imports no numpy (roofline.lazy)
_NAMES = lazy_package(__name__, {
    "roofline.errors": ("RooflineError",),
    "roofline.machines": ("A100_80GB", "H100_SXM", "Machine", "get_machine", "list_machines"),
    "roofline.kernels": ("Kernel", "attention_pv_kernel", "attention_scores_kernel", "batched_matmul_kernel",
                         "decode_step_kernel", "elementwise_kernel", "embedding_kernel", "flash_attention_kernel",
                         "layernorm_kernel", "matmul_kernel", "naive_attention_kernel", "rmsnorm_kernel", "softmax_kernel"),
    "roofline.cost": ("CostModel", "OpPrediction", "WorkloadPrediction", "predict", "seed_cost_model", "speed_of_light",
                      "time_lower_bound"),
    "roofline.architecture": ("MLP", "Attention", "LatentAttention", "Layer", "Mamba", "Mamba2", "Model", "MoE"),
    "roofline.hf_configs": ("from_hf_config",),
    "roofline.transformer": ("TransformerConfig", "active_params", "cache_bytes_per_sequence", "kv_cache_bytes_per_token",
                             "model_summary", "attention_flops_per_token_forward", "count_params", "flops_per_token",
                             "get_model", "list_models", "load_hf_config", "matmul_params", "six_nd", "training_flops",
                             "training_time_s"),
    "roofline.blocks": ("Workload", "block_kernels", "layer_reports"),
})


def plot_roofline(*args, **kwargs):
    """Lazy wrapper around roofline.plots.plot_roofline (imports matplotlib only when called)."""
    from roofline.plots import plot_roofline as _plot

    return _plot(*args, **kwargs)


__all__ = [*_NAMES, "plot_roofline", "trace"]
__version__ = "0.1.0"
