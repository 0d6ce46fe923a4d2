"""The calibrated model's corrections (docs/measuring.md): the residual measured / modelled fitted over the calibration's probes of
the same op, class or category, and its leave-one-out band, and an op's residual looked up from
those fits (lookup_residual); the launch overhead per class. The class an op is calibrated by
(op_class, fit_class) and the probes' tags are in probe_classes.py; the factors for an input's
layout (strided, narrow rows) in layout_factors.py.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from roofline.kernels import Kernel
from roofline.measure.layout_factors import fit_narrow, fit_strided, probe_width, strided_factor, width_factor
from roofline.measure.measurements import Calibration, matmul_rates
from roofline.measure.probe_classes import (  # noqa: F401 (op classes and probe tags: their old home, still imported from here)
    ATTENTION_DECODE_FLOPS_PER_ELEMENT, COLD, FAMILY, MIN_PROBE_LAUNCHES, NARROW, SDPA, SDPA_PREFIX, STRIDED, TINY, WIDE,
    BodyModel, aten_name, fit_class, fit_op, op_class, probe_seconds)


INSTRUMENTS = ("wall", "profiler")


@dataclass(frozen=True)
class Residual:
    """The op's measured / modelled ratio and its multiplicative band (low <= 1 <= high)."""

    ratio: float
    low: float
    high: float
    source: str  # "op" (same block op), "class" (class probes), "category", or "none"
    extrapolated: bool = False  # the op's size lies outside the probes it was fitted on
    width: int = 0  # the row width the ratio was corrected for (width_factor), 0 when none
    strided: str = ""  # whose strided probes corrected the ratio (strided_factor): an aten op, a class, or ""
    strided_by: float = 1.0  # ... and by how much
    borrowed: str = ""  # the dtype whose probes gave the ratio, where the op's own dtype has none of its class


def fit_residuals(model: BodyModel) -> tuple[dict, dict, dict]:
    """Residual curves and bands from the calibration's probes. Block probes give ("op", dtype,
    name) -> (log bytes, log r) sorted by size and ("category", dtype, category) -> (geometric
    mean r, min r, max r), with leave-one-out bands per category ("*" pooled); class probes
    (measure.families, shape "family: ...") give ("class", dtype, class) -> (log bytes, log r),
    the mean log r of the probes at each size, with leave-one-out bands per class; and ("aten",
    dtype, op) the same over the probes of that very op. Cold class probes ("family: cold ...")
    give "class-cold" and "aten-cold" curves alike (_fit_cold), their bands under "CLASS cold".
    Class probes on narrow rows ("family: narrow ...") give ("narrow", dtype, op) -> (log width,
    log of r at that width over r at WIDE): width_factor. Strided ones ("family: strided ...")
    give ("strided", dtype, op or class) factors: layout_factors.fit_strided (the cold strided ones are not fitted).

    The probes were timed warm, so r = (t - launch) / the warm body, whatever the model's ``cold``
    (a cold prediction applies r to the main-memory body). Probes shorter than MIN_PROBE_LAUNCHES
    launches are left out: their time is mostly dispatch, and t - launch is noise."""
    got = _collect(model)
    residuals: dict = {}
    bands = _fit_block(got, residuals)
    class_bands = _fit_classes(got.by_class, residuals)
    fit_narrow(got.narrow, residuals)
    fit_strided(model, got.strided, residuals)
    return residuals, bands, class_bands


@dataclass
class _Points:
    """The probes sorted for the fits: block probes' (log bytes, log r) by (dtype, name), their r by
    (dtype, category) and each name's category; class probes' log r by (dtype, source, key) and log
    bytes; narrow probes' (width, log bytes, log r) by (dtype, op); the strided probes themselves."""

    groups: dict = field(default_factory=dict)
    by_cat: dict = field(default_factory=dict)
    cats: dict = field(default_factory=dict)
    by_class: dict = field(default_factory=dict)
    narrow: dict = field(default_factory=dict)
    strided: list = field(default_factory=list)


def _collect(model: BodyModel) -> _Points:
    """Every probe of the calibration as a point of the fits it belongs to (fit_residuals)."""
    cal = model.calibration
    got = _Points()
    groups, by_cat, by_class, cats, narrow, strided = got.groups, got.by_cat, got.by_class, got.cats, got.narrow, got.strided
    cold_floor = class_launch(cal, model.instrument, cold=True)
    for p in cal.probes:
        if p.shape.startswith((FAMILY + STRIDED, FAMILY + COLD + STRIDED)):  # (no cold ones since 2026-12-02)
            strided.append(p)  # a factor over its contiguous twin's curve (strided_factor), after the curves
            continue
        if p.shape.startswith(FAMILY + COLD) and not p.shape.startswith(FAMILY + COLD + TINY) and p.bytes > 0:
            _fit_cold(model, p, cold_floor, by_class)
            continue
        if p.shape.startswith((FAMILY + TINY, FAMILY + COLD)) or p.bytes <= 0:
            continue  # the class's floor (class_launch), not a point of its curve
        k = Kernel(p.op or p.name, p.flops, p.bytes, p.category, p.dtype)
        if matmul_rates(cal, p.dtype) is None:
            continue
        _, _, base, _, _ = model.base_body_s(k, cold=False)
        x = float(np.log(max(p.bytes, 1.0)))
        if p.shape.startswith(FAMILY):
            t = probe_seconds(p, model.instrument)
            launch = model.floor_band(k)[0]
            if t <= launch * MIN_PROBE_LAUNCHES:
                continue
            lr = float(np.log((t - launch) / float(base)))
            if p.shape.startswith(FAMILY + NARROW):
                width = probe_width(p.shape)
                if p.op and width:
                    narrow.setdefault((p.dtype, p.op), []).append((width, x, lr))
                continue
            by_class.setdefault((p.dtype, "class", fit_class(k)), {}).setdefault(round(x, 6), []).append(lr)
            if p.op:
                by_class.setdefault((p.dtype, "aten", fit_op(k)), {}).setdefault(round(x, 6), []).append(lr)
            continue
        if p.measured_s < MIN_PROBE_LAUNCHES * cal.launch_s:
            continue
        r = (p.measured_s - cal.launch_s) / float(base)
        groups.setdefault((p.dtype, p.name), []).append((x, float(np.log(r))))
        by_cat.setdefault((p.dtype, p.category), []).append(r)
        cats[(p.dtype, p.name)] = p.category
    return got


def _fit_block(got: _Points, residuals: dict) -> dict:
    """The block probes' curves ("op") and geometric means ("category") into ``residuals``; their
    leave-one-out bands per category ("*" pooled) returned."""
    groups, by_cat, cats = got.groups, got.by_cat, got.cats
    loo: dict[str, list[float]] = {}
    for key, pts in groups.items():
        pts.sort()
        x = np.array([a for a, _ in pts])
        y = np.array([b for _, b in pts])
        residuals[("op", *key)] = (x, y)
        loo.setdefault(cats[key], []).extend(leave_one_out(x, y))
    for (dtype, cat), rs in by_cat.items():
        gm = float(np.exp(np.mean(np.log(rs))))
        residuals[("category", dtype, cat)] = (gm, min(rs), max(rs))
    bands = {}
    pooled = [q for qs in loo.values() for q in qs]
    for cat, qs in loo.items():
        if len(qs) >= 2:
            bands[cat] = (min(1.0, min(qs)), max(1.0, max(qs)))
    if pooled:
        bands["*"] = (min(1.0, min(pooled)), max(1.0, max(pooled)))
    return bands


def _fit_classes(by_class: dict, residuals: dict) -> dict:
    """The class probes' curves ("class", "aten", and their cold twins) into ``residuals``; the
    classes' leave-one-out bands returned (a cold class's under "CLASS cold")."""
    class_bands: dict = {}
    for (dtype, source, key), at in by_class.items():
        x = np.array(sorted(at))
        y = np.array([float(np.mean(at[v])) for v in sorted(at)])
        residuals[(source, dtype, key)] = (x, y)
        if source not in ("class", "class-cold"):
            continue
        # how well the class curve predicted each probe it was not fitted on (every op at that size left out)
        qs = leave_one_out(x, y) + [float(np.exp(v - y[i])) for i, xv in enumerate(x) for v in at[xv]]
        band = key if source == "class" else key + " cold"
        if qs:
            lo, hi = class_bands.get(band, (1.0, 1.0))
            class_bands[band] = (min(lo, 1.0, min(qs)), max(hi, 1.0, max(qs)))
    return class_bands


OUTSIDE_WIDENING = 1.5  # an op outside its class probes' sizes: the interval is this much wider each way


def lookup_residual(residuals: dict, category_bands: dict, class_bands: dict, spread: tuple[float, float],
                    kernel: Kernel, cold: bool = False) -> Residual:
    """The op's residual from fit_residuals' (residuals, category_bands, class_bands), in the order
    CalibratedModel.residual gives, times its width factor (width_factor) and its strided factor
    (strided_factor); every band times the
    timing ``spread`` (low, high) of repeats (measurements.timing_spread)."""
    res = _fitted(residuals, category_bands, class_bands, spread, kernel, cold)
    if res.source == "op":
        return res
    factor, width = width_factor(residuals, kernel)
    if width:
        res = dataclasses.replace(res, ratio=res.ratio * factor, width=width)
    factor, whose = strided_factor(residuals, kernel)
    if whose:
        res = dataclasses.replace(res, ratio=res.ratio * factor, strided=whose, strided_by=factor)
    return res


def _fitted(residuals: dict, category_bands: dict, class_bands: dict, spread, kernel: Kernel, cold: bool) -> Residual:
    """lookup_residual before the width factor."""
    spread_lo, spread_hi = spread
    band_lo, band_hi = category_bands.get(kernel.category, category_bands.get("*", (1.0, 1.0)))
    lo, hi = band_lo * spread_lo, band_hi * spread_hi
    fit = None if cold else residuals.get(("op", kernel.dtype, kernel.name))
    if fit is not None:
        x, logr = fit
        r = float(np.exp(np.interp(np.log(max(float(np.max(kernel.bytes)), 1.0)), x, logr)))
        return Residual(r, lo, hi, "op")
    cls = fit_class(kernel)
    size = np.log(max(float(np.max(kernel.bytes)), 1.0))
    tag = "-cold" if cold else ""
    c_lo, c_hi = class_bands.get(cls + (" cold" if cold else ""), (lo, hi))

    def from_curve(fit, source, widen, outside, borrowed=""):
        """The residual of a (log bytes, log r) curve at the op's size, the class's band widened."""
        x, logr = fit
        r = float(np.exp(np.interp(size, x, logr)))
        return Residual(r, min(lo, c_lo * spread_lo) / widen, max(hi, c_hi * spread_hi) * widen, source, outside,
                        borrowed=borrowed)

    for source, key in (("aten" + tag, fit_op(kernel)), ("class" + tag, cls)):
        fit = residuals.get((source, kernel.dtype, key))
        if fit is not None:
            outside = not (fit[0][0] <= size <= fit[0][-1])
            return from_curve(fit, source, OUTSIDE_WIDENING if outside else 1.0, outside)
    fit = residuals.get(("category", kernel.dtype, kernel.category))
    if fit is not None:
        r, r_lo, r_hi = fit
        return Residual(r, min(lo, r_lo / r), max(hi, r_hi / r), "category")
    # no probe of this dtype: the same class's correction at another dtype the profile measured (an eager
    # op's dispatch and passes do not change with the width), its band widened twice over; a reviewer saw bf16
    # norms predicted 20x fast from an fp32 profile when left uncorrected
    others = [] if kernel.category == "matmul" else sorted({k[1] for k in residuals if isinstance(k, tuple) and len(k) == 3}
                                                           - {kernel.dtype})  # a GEMM's rate is measured at its own dtype
    for other in others:
        for source, key in ((("op", kernel.name),) if not cold else ()) + (("aten" + tag, fit_op(kernel)), ("class" + tag, cls)):
            fit = residuals.get((source, other, key))
            if fit is not None:
                return from_curve(fit, source, OUTSIDE_WIDENING**2, True, borrowed=other)
        fit = residuals.get(("category", other, kernel.category))
        if fit is not None:  # as its own dtype falls back to its category's mean: a busy run's short probes left out
            r, r_lo, r_hi = fit
            return Residual(r, min(lo, r_lo / r) / OUTSIDE_WIDENING**2, max(hi, r_hi / r) * OUTSIDE_WIDENING**2,
                            "category", True, borrowed=other)
    # nothing of its class at all: uncorrected, its category's band (else the timing spread) widened as outside
    # the measured points
    return Residual(1.0, lo / OUTSIDE_WIDENING, hi * OUTSIDE_WIDENING, "none", True)


COLD_FLOOR_MARGIN = 1.2  # a cold probe under this many cold calls of a tiny tensor is mostly that call: not fitted


def _fit_cold(model: BodyModel, p, cold_floor: dict, by_class: dict) -> None:
    """One cold class probe (caches flushed before each call) as a point of its op's and class's
    cold curves ("aten-cold", "class-cold"): log((t - the cold tiny call) / the main-memory body).
    The cold tiny call (the same op on a (1, 32) tensor after a flush) is the cost of the flush to
    the dispatcher's own code and data, which a forward's ops, run again and again, keep warm."""
    k = Kernel(p.op or p.name, p.flops, p.bytes, p.category, p.dtype)
    if matmul_rates(model.calibration, p.dtype) is None:
        return
    floor = cold_floor.get((p.dtype, "aten", p.op)) or cold_floor.get((p.dtype, "class", fit_class(k)))
    t = probe_seconds(p, model.instrument)
    if floor is None or t <= floor[0] * COLD_FLOOR_MARGIN:
        return
    _, _, base, _, _ = model.base_body_s(k, cold=True)
    lr = float(np.log((t - floor[0]) / float(base)))
    x = round(float(np.log(max(p.bytes, 1.0))), 6)
    by_class.setdefault((p.dtype, "class-cold", fit_class(k)), {}).setdefault(x, []).append(lr)
    if p.op:
        by_class.setdefault((p.dtype, "aten-cold", fit_op(k)), {}).setdefault(x, []).append(lr)


def class_launch(cal: Calibration, instrument: str = "wall", cold: bool = False) -> dict:
    """The fixed cost per call from the tiny class probes (one op on a (1, 32) tensor: one eager
    call of it, whatever its size), as ``instrument`` measures it: (dtype, "aten", op) -> (median,
    min, max) over the tiny probes of that aten op (one, or a few: a mul of two tensors and one by
    a scalar, families.TINY_EXTRA_OPS); (dtype, "class", class) the same over the class's tiny
    probes (by fit_class and by op_class). ``cold``: of the tiny probes timed after a cache flush."""
    times: dict[tuple, list[float]] = {}
    tiny = FAMILY + COLD + TINY if cold else FAMILY + TINY
    for p in cal.probes:
        if p.shape.startswith(tiny):
            k = Kernel(p.op or p.name, p.flops, max(p.bytes, 1.0), p.category, p.dtype)
            t = probe_seconds(p, instrument)
            keys = {(p.dtype, "class", fit_class(k)), (p.dtype, "class", op_class(k))}
            if p.op:
                keys.add((p.dtype, "aten", p.op))
            for key in keys:
                times.setdefault(key, []).append(t)
    return {key: (float(np.median(ts)), float(min(ts)), float(max(ts))) for key, ts in times.items()}


def leave_one_out(x: np.ndarray, y: np.ndarray) -> list[float]:
    """exp(y_i - the curve through the other points at x_i), for each point (none with one point)."""
    if len(x) < 2:
        return []
    out = []
    for i in range(len(x)):
        rest = np.delete(np.arange(len(x)), i)
        out.append(float(np.exp(y[i] - np.interp(x[i], x[rest], y[rest]))))
    return out
