"""Deprecated alias of roofline.plan.training and roofline.plan.train_memory (train_plan, TrainPlan;
train_memory, make_layout, Layout): import from there. This old path warns and goes in the next
release (docs/development.md, "Layout")."""

import warnings

from roofline.plan.train_memory import Layout, make_layout, train_memory
from roofline.plan.training import TrainPlan, train_plan

warnings.warn("roofline.training is an old path"
              ": import from roofline.plan.training and roofline.plan.train_memory; it goes in the next release",
              DeprecationWarning, stacklevel=2)

__all__ = ["Layout", "make_layout", "train_memory", "TrainPlan", "train_plan"]
