"""Deprecated alias of roofline.plan.sweep (sweep, SweepResult): import from there. This old path warns
and goes in the next release (docs/development.md, "Layout")."""

import warnings

from roofline.plan.sweep import SweepResult, sweep

warnings.warn("roofline.sweep is an old path: import from roofline.plan.sweep; it goes in the next release",
              DeprecationWarning, stacklevel=2)

__all__ = ["SweepResult", "sweep"]
