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
    dtype: str = ""  # the dtype it computes in: its roof's peak

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
    dtype: str  # the dtype the matmuls compute in (the roof's peak)
    precision: str  # each part's dtype in words (Precision.label)
    tables: str  # "trtllm 1.3.0rc20"
    sources: tuple[str, ...]
    points: tuple[AtlasPoint, ...]
    left_out: tuple[tuple[str, str], ...]
    prefill_tokens: tuple[int, ...]
    decode_batches: tuple[int, ...]
    context: int


def atlas(model, machine, kernels: str, dtype: str | None = None, prefill_tokens=PREFILL_TOKENS,
          decode_batches=DECODE_BATCHES, context: int = DECODE_CONTEXT) -> Atlas:
    """The measured GEMMs, fused attention and routed experts of ``model`` on ``machine`` from
    ``kernels`` (ENGINE[@VERSION]) at each prefill length and decode batch (decode at ``context``
    tokens), every op of the whole pass (its layers counted), in ``dtype`` as `roofline decode
    --dtype` takes it (default: the checkpoint's storage, else the machine's dtype)."""
    from roofline.machines import get_machine
    from roofline.measured.model import MeasuredKernels, MeasuredOpPrediction
    from roofline.plan import Precision
    from roofline.plan.inference import predict_model
    from roofline.transformer import get_model

    m = get_machine(machine)
    cfg = get_model(model)
    from roofline.serving.engines import engine_precision

    # as `roofline decode --dtype` (as stored by default), with the engine's own MoE activations (engines.toml)
    precision = engine_precision(Precision.resolve(cfg, m, dtype).check_machine(m), kernels, m)
    for t in prefill_tokens:
        check_number("prefill tokens", t, integer=True, maximum=1e6)
    for b in decode_batches:
        check_number("decode batch", b, integer=True, maximum=65536)
    cm = MeasuredKernels.for_machine(m, kernels, launch_overhead_s=0.0)
    points, left, sources = [], {}, set()
    runs = [("prefill", t, dict(tokens=t, batch=1, context=None)) for t in prefill_tokens]
    runs += [("decode", b, dict(tokens=1, batch=b, context=context)) for b in decode_batches]
    for phase, size, kw in runs:
        ops = predict_model(cfg, m, phase, kw["tokens"], kw["batch"], kw["context"], "flash", precision,
                            cost_model=cm).prediction.ops
        for op in ops:
            if not isinstance(op, MeasuredOpPrediction) or not op.family:
                continue
            if op.basis == "cost model":
                left.setdefault(op.name, op.source)
                continue
            if op.basis == "fused":  # no time of its own: inside its module's (a MoE's activation)
                continue
            sources.add(op.source.split(":")[0])
            points.append(AtlasPoint(op.name, phase, size, op.family, op.basis, float(op.flops), float(op.bytes),
                                     float(op.time_s - op.launch_s), float(op.roofline_s), op.dtype))
    if not points:
        raise RooflineError(f"no op of {cfg.name} ({precision.label(scales=False)}) is in {kernels}'s measured tables on "
                            f"{m.name}"
                            + (f" ({'; '.join(f'{k}: {v}' for k, v in left.items())})" if left else ""), field="kernels")
    ts = resolve(m.key, kernels, "gemm")
    return Atlas(cfg.name, m.key, precision.compute, precision.label(scales=False), f"{ts.engine} {ts.version}", tuple(sorted(sources)), tuple(points),
                 tuple(left.items()), tuple(prefill_tokens), tuple(decode_batches), context)
