"""Deprecated alias of roofline.measure.calibrated (CalibratedModel, CalibratedWorkloadPrediction,
calibrated_model_for; fit_class and op_class from roofline.measure.residuals): import from there.
This old path warns and goes in the next release (docs/development.md, "Layout")."""

import warnings

from roofline.measure.calibrated import CalibratedModel, CalibratedWorkloadPrediction, calibrated_model_for
from roofline.measure.residuals import fit_class, op_class

warnings.warn("roofline.calibrated is an old path"
              ": import from roofline.measure.calibrated; it goes in the next release",
              DeprecationWarning, stacklevel=2)

__all__ = ["CalibratedModel", "CalibratedWorkloadPrediction", "calibrated_model_for", "fit_class", "op_class"]
