"""Old path of roofline.measure.calibrated (CalibratedModel), kept because docs/measuring.md imports
from it."""

from roofline.measure.calibrated import CalibratedModel, CalibratedWorkloadPrediction, calibrated_model_for
from roofline.measure.residuals import fit_class, op_class

__all__ = ["CalibratedModel", "CalibratedWorkloadPrediction", "calibrated_model_for", "fit_class", "op_class"]
