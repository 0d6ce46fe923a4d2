"""Planning a whole model (docs/planning.md): inference prediction, memory, decode versus batch,
training, engine steps and sweeps; numpy only, built on the core (blocks, cost, transformer).

    precision.py    Precision: weights, activations and KV cache widths (quantisation)
    parallel.py     tensor-parallel sharding and the link its all-reduces cross
    model_ops.py    the whole model as counted ops, and their sums
    inference.py    predict_model, time_to_first_token, decode_step -> ModelPrediction
    memory.py       weights + KV cache per GPU, inference_memory -> MemoryPlan
    decode.py       decode versus batch: decode_plan -> DecodePlan
    train_memory.py training memory per GPU (ZeRO, activations, layout)
    training.py     train_plan -> TrainPlan: step time, MFU, days
    step_layout.py  StepLayout: a serving deployment's layout and the kernels one GPU runs in a step
    step.py         StepCost: one serving engine step in closed form (roofline.serving runs them)
    kv_budget.py    the KV cache one serving GPU has and one sequence holds, by blocks
    sweep.py        sweep -> SweepResult: one model over tokens, batch, context or machines
    limits.py       the bounds planning searches to (MAX_CONTEXT, SEARCH_MAX_BATCH)
    render.py       the plain-text tables of those results

The names below are those the module roofline.plan held before it became this package, each
loaded from its module on first use (roofline.lazy): `roofline.plan.limits` alone loads no model.
"""

from roofline.lazy import lazy_package

__all__ = lazy_package(__name__, {
    "roofline.plan.precision": ("Precision", "computes_in", "weight_only_compute"),
    "roofline.plan.parallel": ("CROSS_NODE_LINKS", "GPUS_PER_NODE", "NODE_LINKS", "SCALE_UP_LINKS", "default_link",
                               "resolve_link", "shard", "tp_link"),
    "roofline.plan.model_ops": ("CountedOp", "Totals", "context_of", "default_cost_model", "model_ops", "predict_counted",
                                "totals"),
    "roofline.plan.inference": ("ModelPrediction", "decode_step", "predict_model", "time_by_limit", "time_to_first_token"),
    "roofline.plan.memory": ("inference_weight_bytes", "kv_bytes_per_sequence", "kv_bytes_per_token",
                             "kv_overtakes_weights_context", "max_context_within"),
    "roofline.plan.decode": ("DEFAULT_BATCHES",),
    "roofline.plan.limits": ("QUANT_DTYPES", "SEARCH_MAX_BATCH"),
})
