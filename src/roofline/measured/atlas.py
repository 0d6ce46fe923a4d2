"""A GPU's measured kernels on its roofline: every GEMM and fused attention of one model at a few
prefill lengths and decode batches, each at the FLOP/s its measured kernel reaches against the roof
(plots.atlas draws it: `roofline plot atlas`).

Each point is one op of one layer kind at one size, priced by measured.model.MeasuredKernels (the
same lookup `roofline layer --kernels` makes): its intensity (the op's FLOPs over its bytes, as the
roofline counts them) and its achieved FLOP/s, FLOPs over the measured kernel time without the
launch. Ops the tables do not price (no measured family, or a site they lack) are left out and
counted in ``left_out``; extrapolated points are kept and marked.
"""

from __future__ import annotations

from dataclasses import dataclass

from roofline.errors import RooflineError, check_number
from roofline.measured.tables import resolve

PREFILL_TOKENS = (512, 2048, 8192)  # one sequence of each, attending to itself
DECODE_BATCHES = (1, 8, 64, 256)  # sequences decoding one token each at DECODE_CONTEXT
DECODE_CONTEXT = 4096


@dataclass(frozen=True)
class AtlasPoint:
    """One measured op: ``name`` (layer kind's op), ``phase`` and ``size`` (tokens, or decode batch),
    ``family``, ``basis``, FLOPs, bytes, ``kernel_s`` (the measured kernel, no launch) and its
    ``roofline_s``."""

    name: str
    phase: str
    size: int
    family: str
    basis: str
    flops: float
    bytes: float
    kernel_s: float
    roofline_s: float

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes

    @property
    def flops_per_s(self) -> float:
        return self.flops / self.kernel_s


@dataclass(frozen=True)
class Atlas:
    """The points, the tables they came from, and the ops left out (name: why)."""

    model: str
    machine: str
    dtype: str
    tables: str  # "trtllm 1.3.0rc20"
    sources: tuple[str, ...]
    points: tuple[AtlasPoint, ...]
    left_out: tuple[tuple[str, str], ...]
    prefill_tokens: tuple[int, ...]
    decode_batches: tuple[int, ...]
    context: int


def atlas(model, machine, kernels: str, dtype: str | None = None, prefill_tokens=PREFILL_TOKENS,
          decode_batches=DECODE_BATCHES, context: int = DECODE_CONTEXT) -> Atlas:
    """The measured GEMMs and fused attention of ``model`` on ``machine`` from ``kernels``
    (ENGINE[@VERSION]) at each prefill length and decode batch (decode at ``context`` tokens)."""
    from roofline.blocks import layer_reports
    from roofline.machines import get_machine
    from roofline.measured.model import MeasuredKernels, MeasuredOpPrediction
    from roofline.transformer import get_model

    m = get_machine(machine)
    cfg = get_model(model)
    dtype = dtype or m.default_dtype
    for t in prefill_tokens:
        check_number("prefill tokens", t, integer=True, maximum=1e6)
    for b in decode_batches:
        check_number("decode batch", b, integer=True, maximum=65536)
    cm = MeasuredKernels.for_machine(m, kernels, launch_overhead_s=0.0)
    points, left, sources = [], {}, set()
    runs = [("prefill", t, dict(tokens=t, batch=1, context=None)) for t in prefill_tokens]
    runs += [("decode", b, dict(tokens=context, batch=b, context=None)) for b in decode_batches]  # decode: tokens is S
    for phase, size, kw in runs:
        for report in layer_reports(cfg, m, phase, kw["tokens"], kw["batch"], kw["context"], "flash", dtype, cm):
            kind = "" if cfg.is_uniform else f" ({report.layer_kind})"
            for op in report.prediction.ops:
                if not isinstance(op, MeasuredOpPrediction) or not op.family:
                    continue
                if op.basis == "cost model":
                    left.setdefault(op.name + kind, op.source)
                    continue
                sources.add(op.source)
                points.append(AtlasPoint(op.name + kind, phase, size, op.family, op.basis, float(op.flops),
                                         float(op.bytes), float(op.time_s - op.launch_s), float(op.roofline_s)))
    if not points:
        raise RooflineError(f"no op of {cfg.name} in {dtype} is in {kernels}'s measured tables on {m.name}"
                            + (f" ({'; '.join(f'{k}: {v}' for k, v in left.items())})" if left else ""), field="kernels")
    ts = resolve(m.key, kernels, "gemm")
    return Atlas(cfg.name, m.key, dtype, f"{ts.engine} {ts.version}", tuple(sorted(sources)), tuple(points),
                 tuple(left.items()), tuple(prefill_tokens), tuple(decode_batches), context)
