"""Measurement (docs/measuring.md): the measured machine file and the calibrated cost model it
gives (numpy only), and the runs on the local device through PyTorch (the `torch` extra) that
measure it: timing, `roofline calibrate` and `roofline check`.

    measurements.py  Curve, Probe, Calibration: what a calibration measured; peaks, bandwidths
    machine_file.py  the measured machine file: render_profile, write_profile, load_profile
    probe_classes.py the op classes and the probes' tags the fits read
    residuals.py     the residual fits of the calibrated model
    layout_factors.py  factors for an input's layout (strided, narrow rows)
    calibrated.py    CalibratedModel: the cost model of a measured machine file
    calibrated_predictions.py  what it predicts: an op's and a workload's time with the interval
    drift.py         the reference kernel between calibrate's probe groups: drift, load, check
    reference.py     the reference kernel timed (torch): for calibrate, check and profile
    timing.py        bench, bench_round_robin (torch)
    device.py        the device, its threads, memory and cache flush (torch)
    blockops.py      one block's ops as real PyTorch ops (torch)
    families.py      the class probes of calibrate (torch)
    calibration.py   calibrate: micro-benchmarks into a machine file (torch)
    gemm_probes.py   calibrate's skinny-M GEMM family, warm, streamed and from pools (torch)
    run_check.py     run_check: one block timed against three predictions (torch; import it from here)
    progress.py      a progress bar on stderr

Only the torch modules import torch, and only when imported: ``from roofline.measure import
calibrate`` loads it, ``roofline.measure.calibrated`` does not.
"""

from __future__ import annotations

import importlib

# (not run_check: ``from roofline.measure import run_check`` finds the submodule of that name before
# __getattr__ is asked; import it from roofline.measure.run_check)
_HOMES = {"CalibrationPlan": "calibration", "calibrate": "calibration", "default_plan": "calibration",
          "Timing": "timing", "bench": "timing", "bench_round_robin": "timing",
          "write_profile": "machine_file"}

__all__ = sorted(_HOMES)


def __getattr__(name: str):
    """The names above, each imported from its module on first use (torch loads only then)."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'roofline.measure' has no attribute {name!r}")
    return getattr(importlib.import_module(f"roofline.measure.{home}"), name)


def __dir__():
    return sorted(set(globals()) | set(_HOMES))
