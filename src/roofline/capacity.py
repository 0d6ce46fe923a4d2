"""Deprecated alias of roofline.plan.memory and roofline.plan.decode (inference_memory, MemoryPlan,
MemoryPart; decode_plan, DecodePlan): import from there. This old path warns and goes in the next
release (docs/development.md, "Layout")."""

import warnings

from roofline.plan.decode import DecodePlan, decode_plan
from roofline.plan.memory import MemoryPart, MemoryPlan, inference_memory

warnings.warn("roofline.capacity is an old path"
              ": import from roofline.plan.memory and roofline.plan.decode; it goes in the next release",
              DeprecationWarning, stacklevel=2)

__all__ = ["DecodePlan", "decode_plan", "MemoryPart", "MemoryPlan", "inference_memory"]
