"""Old path of roofline.plan.training (train_plan) and roofline.plan.train_memory, kept because
docs/planning.md imports from it."""

from roofline.plan.train_memory import Layout, make_layout, train_memory
from roofline.plan.training import TrainPlan, train_plan

__all__ = ["Layout", "make_layout", "train_memory", "TrainPlan", "train_plan"]
