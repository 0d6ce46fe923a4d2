"""Old path of roofline.plan.sweep, kept because docs/planning.md imports from it."""

from roofline.plan.sweep import SweepResult, sweep

__all__ = ["SweepResult", "sweep"]
