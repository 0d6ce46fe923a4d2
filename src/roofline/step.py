"""Old path of roofline.plan.step (StepCost), kept because docs/serving.md imports from it."""

from roofline.plan.step import StepCost, StepOp, kv_cache_budget, sequence_cache_bytes

__all__ = ["StepCost", "StepOp", "kv_cache_budget", "sequence_cache_bytes"]
