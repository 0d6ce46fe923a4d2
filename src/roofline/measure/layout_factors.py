"""Factors over an op's fitted correction for the layout of its input (residuals.lookup_residual):
a non-contiguous input (the strided class probes, on chunk views) and rows narrower than the class
probes' WIDE (the narrow ones), each fitted as log(r of the variant / r of the contiguous, wide twin).
"""

from __future__ import annotations

import numpy as np

from roofline.kernels import Kernel
from roofline.measure.measurements import matmul_rates
from roofline.measure.probe_classes import (COLD, FAMILY, MIN_PROBE_LAUNCHES, WIDE, BodyModel, aten_name, fit_class,
                                            is_scalar, probe_seconds)


def fit_narrow(narrow: dict, residuals: dict) -> None:
    """The narrow class probes, ``narrow`` (dtype, op) -> [(width, log bytes, log r)], as
    ("narrow", dtype, op) -> (log width, log of r at that width over r at WIDE, the op's "aten"
    curve), over the sizes measured at each width; width_factor reads them."""
    for (dtype, op), pts in narrow.items():
        wide = residuals.get(("aten", dtype, op))
        if wide is None:
            continue
        by_width: dict[float, list[float]] = {}
        for width, x, lr in pts:
            by_width.setdefault(float(np.log(width)), []).append(lr - float(np.interp(x, *wide)))
        lw = sorted(by_width) + [float(np.log(WIDE))]
        residuals[("narrow", dtype, op)] = (np.array(lw), np.array([float(np.mean(by_width[w])) for w in lw[:-1]] + [0.0]))


def fit_strided(model: BodyModel, probes, residuals: dict) -> None:
    """The strided class probes (elementwise ops on chunk views, timed warm) as factors over their
    contiguous twins: ("strided", dtype, op) -> (log bytes, log of r strided over r contiguous at
    that size, at least 1: a scattered read is not faster, and below that is timing noise); the
    same keyed by class (the mean over its probed ops at each size) for the class's other ops.
    The cold ones are not fitted: a cold probe's time less its cold tiny call is a difference of
    two noisy figures, and at the small sizes it put the factor anywhere from 0.6 to 5.7 between
    two calibrations of the 2-core EPYC of docs/accuracy-models.md (2026-12-02)."""
    pts: dict[tuple, dict[float, list[float]]] = {}
    for p in probes:
        if p.shape.startswith(FAMILY + COLD):
            continue
        k = Kernel(p.op or p.name, p.flops, p.bytes, p.category, p.dtype)
        twin = residuals.get(("aten", p.dtype, p.op))
        if not p.op or twin is None or p.bytes <= 0 or matmul_rates(model.calibration, p.dtype) is None:
            continue
        t = probe_seconds(p, model.instrument)
        fixed = model.floor_band(k)[0]
        if t <= fixed * MIN_PROBE_LAUNCHES:
            continue
        _, _, base, _, _ = model.base_body_s(k, cold=False)
        x = round(float(np.log(max(p.bytes, 1.0))), 6)
        lr = max(float(np.log((t - fixed) / float(base))) - float(np.interp(x, *twin)), 0.0)
        pts.setdefault(("strided", p.dtype, p.op), {}).setdefault(x, []).append(lr)
        pts.setdefault(("strided", p.dtype, fit_class(k)), {}).setdefault(x, []).append(lr)
    for key, at in pts.items():
        xs = sorted(at)
        residuals[key] = (np.array(xs), np.array([float(np.mean(at[v])) for v in xs]))


def strided_factor(residuals: dict, kernel: Kernel) -> tuple[float, str]:
    """(factor, whose probes) the correction of an op reading a non-contiguous input (kernel.shape
    (STRIDED,), trace.rules.kernel_shape) is multiplied by: the strided probes of its aten op, else
    of its class, interpolated in log bytes and constant beyond them; the same warm factor whether
    the correction is the warm or the cold curve's (_fit_strided). (1.0, "") for any other op, or
    where no strided probe was measured."""
    from roofline.trace.rules.matmul import STRIDED as STRIDED_SHAPE

    if kernel.shape != (STRIDED_SHAPE,) or kernel.category == "matmul":
        return 1.0, ""
    for key in (aten_name(kernel), fit_class(kernel)):
        fit = residuals.get(("strided", kernel.dtype, key))
        if fit is not None:
            size = np.log(max(float(np.max(kernel.bytes)), 1.0))
            return float(np.exp(np.interp(size, *fit))), key
    return 1.0, ""


def probe_width(shape: str) -> int | None:
    """The row width of a class probe's shape text ("family: narrow (2048, 8) fp32" -> 8)."""
    import re

    got = re.search(r"\((\d+), (\d+)\)", shape)
    return int(got.group(2)) if got else None


def width_factor(residuals: dict, kernel: Kernel) -> tuple[float, int]:
    """(factor, width) the op's correction is multiplied by for its row width: a row-wise op with
    a known (rows, width) (kernel.shape) whose aten op was probed on narrow rows; log of the
    factor interpolated in log width between the probed widths, 1 from WIDE up, the narrowest's
    below it. (1.0, 0) otherwise."""
    fit = residuals.get(("narrow", kernel.dtype, aten_name(kernel)))
    if fit is None or kernel.category == "matmul" or len(kernel.shape) != 2 or not all(is_scalar(x) for x in kernel.shape):
        return 1.0, 0
    width = int(kernel.shape[1])
    if width <= 0:
        return 1.0, 0
    return float(np.exp(np.interp(np.log(width), *fit))), width
