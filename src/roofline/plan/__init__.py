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

The names below are those the module roofline.plan held before it became this package.
"""

from roofline.plan.precision import QUANT_DTYPES, Precision, computes_in, weight_only_compute
from roofline.plan.parallel import (CROSS_NODE_LINKS, GPUS_PER_NODE, NODE_LINKS, SCALE_UP_LINKS, default_link,
                                    resolve_link, shard, tp_link)
from roofline.plan.model_ops import (CountedOp, Totals, context_of, default_cost_model, model_ops, predict_counted,
                                     totals)
from roofline.plan.inference import ModelPrediction, decode_step, predict_model, time_by_limit, time_to_first_token
from roofline.plan.memory import (inference_weight_bytes, kv_bytes_per_sequence, kv_bytes_per_token,
                                  kv_overtakes_weights_context, max_context_within)
from roofline.plan.decode import DEFAULT_BATCHES
from roofline.plan.limits import SEARCH_MAX_BATCH

__all__ = ["CROSS_NODE_LINKS", "CountedOp", "DEFAULT_BATCHES", "GPUS_PER_NODE", "ModelPrediction", "NODE_LINKS",
           "Precision", "QUANT_DTYPES", "SCALE_UP_LINKS", "SEARCH_MAX_BATCH", "Totals", "computes_in", "context_of",
           "decode_step", "default_cost_model", "default_link", "inference_weight_bytes", "kv_bytes_per_sequence",
           "kv_bytes_per_token", "kv_overtakes_weights_context", "max_context_within", "model_ops", "predict_counted",
           "predict_model", "resolve_link", "shard", "time_by_limit", "time_to_first_token", "totals", "tp_link",
           "weight_only_compute"]
