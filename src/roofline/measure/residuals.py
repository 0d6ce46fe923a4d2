"""The calibrated model's corrections (docs/measuring.md): the class an op is calibrated by
(op_class, fit_class), the residual measured / modelled fitted over the calibration's probes of
the same op, class or category, and its leave-one-out band, and an op's residual looked up from
those fits (lookup_residual); the launch overhead per class.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from roofline.kernels import Kernel, matmul_dims
from roofline.measure.measurements import Calibration, matmul_rates


class BodyModel(Protocol):
    """What the fits read of the model they correct (calibrated.CalibratedModel): its calibration,
    its instrument, an op's body before any correction and an op's fixed cost per call."""

    @property
    def calibration(self) -> Calibration: ...

    @property
    def instrument(self) -> str: ...

    def base_body_s(self, kernel: Kernel, machine=None, cold: bool | None = None) -> tuple: ...

    def floor_band(self, kernel: Kernel, cold: bool = False) -> tuple[float, float, float] | None: ...


MIN_PROBE_LAUNCHES = 1.5  # a probe shorter than this many launch overheads is not fitted


FAMILY = "family: "  # the shape text of a class probe (measure.families), as the profile stores it
TINY = "tiny "  # ... and of a tiny one, after FAMILY or FAMILY + COLD
COLD = "cold "  # ... and of one timed with the caches flushed before each call, after FAMILY
NARROW = "narrow "  # ... and of a row-wise one on narrower rows than the others' 1,024, after FAMILY
STRIDED = "strided "  # ... and of an elementwise one on non-contiguous inputs (chunk views), after FAMILY
WIDE = 1024  # the row width of the other class probes (measure.families.WIDTH)


def op_class(kernel: Kernel) -> str:
    """The class an op is calibrated by: its category, with matmuls split into "gemm" (one matrix
    product, or unknown shape) and "bmm" (a batch of them). Every op has one: a block op, a traced
    aten op and a profiled one alike."""
    if kernel.category == "matmul":
        dims = matmul_dims(kernel.shape)
        return "bmm" if dims and _scalar(dims[0]) and dims[0] > 1 else "gemm"
    return kernel.category


def aten_name(kernel: Kernel) -> str:
    """The aten op a kernel was costed as: its name, less the module path a traced op's kernel is
    named by ('model.layers.0.mlp: aten::mm' -> 'aten::mm', TraceResult.to_kernels), so that the
    probes of that op are found whether the op comes from a trace, a profile or a probe."""
    return kernel.name.rsplit(": ", 1)[-1]


def _scalar(x) -> bool:
    return np.ndim(x) == 0


# at most: an attention op reads its K, V once per few query rows (decode's shape). FLOPs per
# element of operands are ~2 r for r query rows per K/V head (4 r S d FLOPs over 2 S d + 2 r d
# elements, S >> r): 16 is r = 8, the geometric midpoint between the decode probes' one row and
# the smallest prefill probe's 64, so that a grouped-query decode step (4 query heads per KV head:
# Mixtral, Llama 3 8B; 8: Llama 3 70B) is a decode, as an MHA one is (until 2026-12-02 the
# threshold was 8, under which an 8:1 GQA decode, ~16 FLOPs per element, was read as a prefill)
ATTENTION_DECODE_FLOPS_PER_ELEMENT = 16.0


def fit_class(kernel: Kernel) -> str:
    """The class whose probes correct an op: op_class, with attention split into its decode shape
    (a few query rows per pass over K and V: memory-bound, FLOPs per element of operands at most
    ATTENTION_DECODE_FLOPS_PER_ELEMENT) and its prefill shape (many query rows: compute-bound),
    whose measured corrections differ several-fold at the same bytes."""
    cls = op_class(kernel)
    if cls != "attention" or not np.max(kernel.bytes):
        return cls
    from roofline.units import DTYPE_BYTES

    per_element = float(np.max(kernel.flops)) * DTYPE_BYTES.get(kernel.dtype, 2) / float(np.max(kernel.bytes))
    return "attention decode" if per_element <= ATTENTION_DECODE_FLOPS_PER_ELEMENT else "attention prefill"


def fit_op(kernel: Kernel) -> str:
    """The key of an op's own probe curve ("aten" residuals): its aten op, and for an attention its
    shape too (fit_class), as the class curves split it: one SDPA kernel serves decode and prefill,
    whose corrections differ several-fold at the same bytes (and SDPA's kernels are one op: SDPA), so one curve over both read a 4:1
    grouped-query prefill of 327 kB (Qwen2-like, 8 heads of 32 over 2, T 128) between the decode
    probes of 266 kB and 1 MB: 1,720 us predicted against 755 measured on the EPYC of
    docs/accuracy-models.md (2026-12-02)."""
    op = aten_name(kernel)
    if op_class(kernel) != "attention":
        return op
    if op.startswith(SDPA_PREFIX):  # the probe is labelled by the meta trace's kernel, not the one that ran
        op = SDPA
    return f"{op} ({fit_class(kernel)})"


# SDPA's kernels (_scaled_dot_product_flash_attention_for_cpu, _efficient_attention, _flash_attention,
# _cudnn_attention): one curve. A probe is labelled by the kernel its meta trace records (efficient
# attention), while the device ran its own (on a CPU flash_attention_for_cpu), as a profiled forward records it.
SDPA_PREFIX = "aten::_scaled_dot_product_"
SDPA = "aten::scaled_dot_product_attention"


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
    give ("strided", dtype, op or class) factors: _fit_strided (the cold strided ones are not fitted).

    The probes were timed warm, so r = (t - launch) / the warm body, whatever the model's ``cold``
    (a cold prediction applies r to the main-memory body). Probes shorter than MIN_PROBE_LAUNCHES
    launches are left out: their time is mostly dispatch, and t - launch is noise."""
    cal = model.calibration
    groups: dict[tuple, list[tuple[float, float]]] = {}
    by_cat: dict[tuple, list[float]] = {}
    by_class: dict[tuple, dict[float, list[float]]] = {}
    cats: dict[tuple, str] = {}
    cold_floor = class_launch(cal, model.instrument, cold=True)
    narrow: dict[tuple, list[tuple[float, float, float]]] = {}
    strided = []
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
                width = _width(p.shape)
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
    residuals: dict = {}
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
    for (dtype, op), pts in narrow.items():
        wide = residuals.get(("aten", dtype, op))
        if wide is None:
            continue
        # log(r at this width / r at WIDE), over the sizes measured at each width
        by_width: dict[float, list[float]] = {}
        for width, x, lr in pts:
            by_width.setdefault(float(np.log(width)), []).append(lr - float(np.interp(x, *wide)))
        lw = sorted(by_width) + [float(np.log(WIDE))]
        residuals[("narrow", dtype, op)] = (np.array(lw), np.array([float(np.mean(by_width[w])) for w in lw[:-1]] + [0.0]))
    _fit_strided(model, strided, residuals)
    return residuals, bands, class_bands


def _fit_strided(model: BodyModel, probes, residuals: dict) -> None:
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


def _width(shape: str) -> int | None:
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
    if fit is None or kernel.category == "matmul" or len(kernel.shape) != 2 or not all(_scalar(x) for x in kernel.shape):
        return 1.0, 0
    width = int(kernel.shape[1])
    if width <= 0:
        return 1.0, 0
    return float(np.exp(np.interp(np.log(width), *fit))), width


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


def probe_seconds(p, instrument: str) -> float:
    """A probe's time per call as ``instrument`` measures it: torch.profiler's where it was
    profiled and that is asked for, else the timed loop's median."""
    return p.profiled_s if instrument == "profiler" and p.profiled_s else p.measured_s


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
