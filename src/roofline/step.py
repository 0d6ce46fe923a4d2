"""Deprecated alias of roofline.plan.step (StepCost, StepOp, kv_cache_budget, sequence_cache_bytes):
import from there. This old path warns and goes in the next release (docs/development.md, "Layout")."""

import warnings

from roofline.plan.step import StepCost, StepOp, kv_cache_budget, sequence_cache_bytes

warnings.warn("roofline.step is an old path: import from roofline.plan.step; it goes in the next release",
              DeprecationWarning, stacklevel=2)

__all__ = ["StepCost", "StepOp", "kv_cache_budget", "sequence_cache_bytes"]
