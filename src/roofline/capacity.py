"""Old path of roofline.plan.memory (inference_memory) and roofline.plan.decode (decode_plan), kept
because docs/planning.md imports from it."""

from roofline.plan.decode import DecodePlan, decode_plan
from roofline.plan.memory import MemoryPart, MemoryPlan, inference_memory

__all__ = ["DecodePlan", "decode_plan", "MemoryPart", "MemoryPlan", "inference_memory"]
