"""GEMM shapes against the hardware: output tiles over the SMs, the partial last wave, and the
tensor-core alignment rule (the roofline chapter, section 2.5; docs/tracing.md).

cuBLAS and CUTLASS split C = A B, (M, K) @ (K, N), into output tiles (typically 64-256 a side),
one thread block per tile, spread over the SMs in waves. So:

- tiles = ceil(M / tile_m) ceil(N / tile_n); a ragged edge tile costs as much as a full one;
- waves = ceil(tiles / SMs); the last wave runs at partial occupancy but takes a full wave's
  time: 133 tiles on 132 SMs take as long as 264;
- 16-bit tensor cores want every dimension a multiple of 8 elements (16 bytes: 8 for bf16/fp16,
  16 for fp8/int8, 4 for tf32). The roofline chapter's rule (section 2.5) is that a misaligned GEMM leaves the tensor-core
  path; this module takes it literally and prices such a GEMM at the CUDA-core fp32 peak (the
  worst case: recent cuBLAS versions often stay on tensor cores with slower kernels, so measure).

``gemm_estimate`` is an optional refinement of a matmul's roofline time (cost.py is unchanged):
compute time = waves x SMs x (2 tile_m tile_n K) / peak, memory time = bytes / bandwidth, and the
ratio roofline / refined is the efficiency these effects alone allow. ``gemm_advice`` says which
padding or size change removes them (the vocabulary 50,257 -> 50,304 example).
"""

from __future__ import annotations

from roofline.tables import Tabular  # noqa: E402

import math
from dataclasses import asdict, dataclass

from roofline.cost import binds, overlapped_s, time_lower_bound
from roofline.errors import MAX_COUNT, RooflineError, check_number
from roofline.kernels import matmul_kernel
from roofline.machines import Machine, get_machine
from roofline.units import DTYPE_BYTES, TERA, US

TENSOR_CORE_DTYPES = ("bf16", "fp16", "fp8", "int8", "tf32", "fp4", "int4")
ALIGN_BYTES = 16  # tensor-core operands want 16-byte-aligned rows: 8 bf16 elements (the roofline chapter, section 2.5)
CUDA_CORE_FRACTION = 1 / 15  # the roofline chapter, section 2.5: CUDA-core FP32 on an H100 is about 1/15 of the BF16 tensor peak


def alignment(dtype: str) -> int:
    """Elements per 16 bytes: the multiple every GEMM dimension needs for tensor cores (bf16 8,
    fp8 16, tf32 4)."""
    return max(1, int(ALIGN_BYTES / DTYPE_BYTES[dtype]))


def tile_count(M: int, N: int, tile_m: int = 128, tile_n: int = 128) -> int:
    """Output tiles: ceil(M / tile_m) ceil(N / tile_n)."""
    return math.ceil(M / tile_m) * math.ceil(N / tile_n)


def wave_count(tiles: int, sm_count: int) -> int:
    """Waves of thread blocks: ceil(tiles / SMs). 133 tiles on 132 SMs: 2."""
    return math.ceil(tiles / sm_count)


def wave_efficiency(tiles: int, sm_count: int) -> float:
    """Busy share of the SM-waves paid for: tiles / (waves SMs). 133 on 132: 133 / 264 = 50.4%."""
    return tiles / (wave_count(tiles, sm_count) * sm_count)


def pad_to(n: int, multiple: int) -> int:
    """The next multiple of ``multiple`` at or above n: pad_to(50257, 128) = 50304."""
    return math.ceil(n / multiple) * multiple


@dataclass(frozen=True)
class GemmEstimate:
    """One GEMM on one machine with tiles, waves and the tensor-core rule applied. Times in
    seconds; ``efficiency`` = roofline_s / time_s (1 = nothing lost to shape)."""

    M: int
    N: int
    K: int
    dtype: str
    machine: str
    tile_m: int
    tile_n: int
    sm_count: int | None
    flops: float
    bytes: float
    tiles: int
    waves: int | None
    wave_efficiency: float
    tile_efficiency: float  # useful share of the tiles' area: M N / (tiles tile_m tile_n)
    alignment: int
    misaligned: tuple[str, ...]  # names of the dimensions that are not multiples of ``alignment``
    tensor_cores: bool
    skinny: bool  # M or N below the tile: tiles and waves not modelled (GEMV / split-K kernels)
    peak_flops_per_s: float
    roofline_s: float
    compute_s: float
    memory_s: float
    time_s: float
    efficiency: float
    bound: str

    def to_dict(self) -> dict:
        d = asdict(self)
        d["misaligned"] = list(self.misaligned)
        return d


def _dims(M, N, K):
    for name, v in (("M", M), ("N", N), ("K", K)):
        check_number(name, v, maximum=MAX_COUNT, integer=True)
    return int(M), int(N), int(K)


def _cuda_core_peak(machine: Machine) -> float:
    return machine.peak("fp32") if "fp32" in machine.dtypes else machine.peak_flops * CUDA_CORE_FRACTION


def gemm_estimate(M, N, K, machine="h100-sxm", dtype: str | None = None, tile=(128, 128)) -> GemmEstimate:
    """(M, K) @ (K, N) on ``machine``: roofline time, then tiles, waves and the tensor-core rule."""
    M, N, K = _dims(M, N, K)
    machine = get_machine(machine)
    dtype = dtype or machine.default_dtype
    tile_m, tile_n = (int(t) for t in tile)
    check_number("tile", tile_m, maximum=4096, integer=True)
    check_number("tile", tile_n, maximum=4096, integer=True)
    kernel = matmul_kernel(M, N, K, dtype)
    align = alignment(dtype)
    misaligned = tuple(n for n, v in (("M", M), ("N", N), ("K", K)) if v % align)
    tensor_cores = dtype in TENSOR_CORE_DTYPES and not misaligned
    peak = machine.peak(dtype) if (tensor_cores or dtype not in TENSOR_CORE_DTYPES) else _cuda_core_peak(machine)
    tiles = tile_count(M, N, tile_m, tile_n)
    sms = machine.sm_count
    skinny = M < tile_m or N < tile_n  # GEMV / split-K territory: libraries pick other kernels
    if skinny:
        compute_s = kernel.flops / peak
    else:
        slots = wave_count(tiles, sms) * sms if sms else tiles  # tile-sized pieces of work paid for
        compute_s = slots * 2.0 * tile_m * tile_n * K / peak
    memory_s = kernel.bytes / machine.bandwidth
    time_s = overlapped_s(compute_s, memory_s)
    roofline_s = time_lower_bound(kernel, machine)
    return GemmEstimate(
        M=M, N=N, K=K, dtype=dtype, machine=machine.name, tile_m=tile_m, tile_n=tile_n, sm_count=sms,
        flops=kernel.flops, bytes=kernel.bytes, tiles=tiles, waves=wave_count(tiles, sms) if sms else None,
        wave_efficiency=wave_efficiency(tiles, sms) if sms else 1.0,
        tile_efficiency=M * N / (tiles * tile_m * tile_n), alignment=align, misaligned=misaligned,
        tensor_cores=tensor_cores, skinny=skinny, peak_flops_per_s=peak, roofline_s=roofline_s, compute_s=compute_s,
        memory_s=memory_s, time_s=time_s, efficiency=roofline_s / time_s,
        bound=binds(compute_s, memory_s),
    )


# ---------------------------------------------------------------------------------------------
# advice
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Suggestion:
    """A change of shape and what it buys: ``speedup`` = before.time_s / after.time_s."""

    change: str
    why: str
    after: GemmEstimate
    speedup: float

    def to_dict(self) -> dict:
        return {"change": self.change, "why": self.why, "speedup": self.speedup, "after": self.after.to_dict()}


@dataclass(frozen=True)
class GemmAdvice(Tabular):
    ROWS_KEY = "suggestions"

    estimate: GemmEstimate
    suggestions: tuple[Suggestion, ...]

    def to_dict(self) -> dict:
        return {**self.estimate.to_dict(), "suggestions": [s.to_dict() for s in self.suggestions]}

    def to_table(self) -> str:
        return gemm_text(self)


def _better_m(est: GemmEstimate, machine, tile) -> list[int]:
    """The multiples of tile_m up to 2M, one below M and one above, whose compute time per row of
    M is lowest, when that beats M's by 5% or more (a partial last wave wastes the difference)."""
    t0 = math.ceil(est.M / est.tile_m)
    per_row = lambda t: gemm_estimate(t * est.tile_m, est.N, est.K, machine, est.dtype, tile).compute_s / (t * est.tile_m)  # noqa: E731
    now = est.compute_s / est.M
    out = []
    for span in (range(1, t0), range(t0 + 1, 2 * t0 + 1)):
        best = min(span, key=per_row, default=None)
        if best is not None and per_row(best) < now / 1.05:
            out.append(best * est.tile_m)
    return out


def gemm_advice(M, N, K, machine="h100-sxm", dtype: str | None = None, tile=(128, 128)) -> GemmAdvice:
    """The estimate and the shape changes that remove what it loses: pad misaligned dimensions
    (M and N to the tile, K to 64), and, for a partial last wave, the nearest sizes of M (tokens
    per batch) that fill their waves."""
    est = gemm_estimate(M, N, K, machine, dtype, tile)
    machine = get_machine(machine)
    tips: list[Suggestion] = []
    if est.misaligned or (est.tile_efficiency < 1.0 and not est.skinny):
        pM, pN = (pad_to(est.M, est.alignment), pad_to(est.N, est.alignment)) if est.skinny else (
            pad_to(est.M, est.tile_m), pad_to(est.N, est.tile_n))
        pK = pad_to(est.K, 64) if "K" in est.misaligned else est.K
        after = gemm_estimate(pM, pN, pK, machine, est.dtype, tile)
        changed = ", ".join(f"{n} {a:,} -> {b:,}" for n, a, b in (("M", est.M, pM), ("N", est.N, pN), ("K", est.K, pK)) if a != b)
        why = []
        if est.misaligned:
            why.append(f"{' and '.join(est.misaligned)} not a multiple of {est.alignment} ({est.dtype}): off the tensor-core path "
                       f"(the roofline chapter, section 2.5), priced at the CUDA-core peak, {est.peak_flops_per_s / TERA:,.0f} instead of "
                       f"{after.peak_flops_per_s / TERA:,.0f} TFLOP/s")
        if est.tile_efficiency < 1.0 and not est.skinny:
            why.append(f"ragged edge tiles: {1 - est.tile_efficiency:.1%} of the tiles' area is padding")
        if est.time_s / after.time_s >= 1.02:  # a memory-bound GEMV does not care about alignment
            tips.append(Suggestion(f"pad {changed}", "; ".join(why), after, est.time_s / after.time_s))
    if est.waves is not None and not est.skinny and est.wave_efficiency < 0.9 and est.bound == "compute":
        for m in _better_m(est, machine, tile):
            after = gemm_estimate(m, est.N, est.K, machine, est.dtype, tile)
            tips.append(Suggestion(
                f"M {est.M:,} -> {m:,}", f"{after.tiles:,} tiles fill {after.wave_efficiency:.0%} of {_waves(after.waves)} "
                f"(now {est.tiles:,} tiles fill {est.wave_efficiency:.0%} of {_waves(est.waves)})", after,
                (est.time_s / est.M) / (after.time_s / m)))
    return GemmAdvice(est, tuple(tips))


def _waves(n: int) -> str:
    return f"{n} wave" if n == 1 else f"{n} waves"


def gemm_text(advice: GemmAdvice) -> str:
    from roofline.units import format_intensity, format_si

    e = advice.estimate
    us = lambda s: f"{s / US:,.1f} us"  # noqa: E731
    lines = [
        f"GEMM ({e.M:,} x {e.K:,}) @ ({e.K:,} x {e.N:,}) {e.dtype} on {e.machine}",
        f"  FLOPs {format_si(e.flops, 'FLOP')}, bytes {format_si(e.bytes, 'B')}, intensity {format_intensity(e.flops / e.bytes)} FLOP/B",
        f"  roofline        {us(e.roofline_s)} (speed of light)",
        f"  tiles           {math.ceil(e.M / e.tile_m):,} x {math.ceil(e.N / e.tile_n):,} = {e.tiles:,} of {e.tile_m}x{e.tile_n}"
        f" ({e.tile_efficiency:.1%} of their area is the matrix)",
    ]
    if e.skinny:
        lines.append(f"  waves           M or N below the {e.tile_m}x{e.tile_n} tile: a GEMV / split-K kernel's job; "
                     "tiles and waves not modelled")
    elif e.waves is not None:
        last = e.tiles - (e.waves - 1) * e.sm_count
        lines.append(f"  waves           {e.waves:,} on {e.sm_count} SMs; the last runs {last} of {e.sm_count} tiles "
                     f"(wave efficiency {e.wave_efficiency:.1%})")
    else:
        lines.append("  waves           no SM count for this machine: wave quantisation not modelled")
    align = ("all multiples of %d: tensor cores" % e.alignment) if e.tensor_cores else (
        f"{', '.join(e.misaligned)} not a multiple of {e.alignment}: off the tensor-core path" if e.misaligned
        else f"{e.dtype} has no tensor-core path")
    lines += [
        f"  alignment       {align} (peak {e.peak_flops_per_s / TERA:,.1f} TFLOP/s)",
        f"  with shapes     {us(e.time_s)} ({e.bound}-bound; compute {us(e.compute_s)}, memory {us(e.memory_s)}): "
        f"{e.efficiency:.1%} of the roofline",
    ]
    if e.misaligned and e.dtype in TENSOR_CORE_DTYPES and e.bound == "compute":
        lines.append("  (the roofline chapter's rule taken literally, the worst case: newer cuBLAS often stays on tensor cores\n"
                     "   with a slower kernel for misaligned shapes, so measure the gain)")
    if not advice.suggestions:
        if e.efficiency > 0.99:
            why = "the shape fills its tiles and waves."
        elif e.bound == "memory":
            why = "memory-bound, so tiles, waves and alignment cost nothing here."
        else:
            why = f"{1 - e.efficiency:.0%} is lost to the shape, and no nearby M does 5% better per row."
        lines.append("\nNothing to change: " + why)
    for s in advice.suggestions:
        lines.append(f"\n{s.change}: {us(s.after.time_s)}, {s.speedup:.2f}x" + (" per token" if s.change.startswith("M ") else ""))
        lines.append(f"  why: {s.why}")
    return "\n".join(lines)


def parse_tile(text: str) -> tuple[int, int]:
    """'128x128' -> (128, 128); '64' -> (64, 64)."""
    parts = str(text).lower().replace("*", "x").split("x")
    try:
        nums = [int(p) for p in parts]
    except ValueError:
        raise RooflineError(f"--tile must look like 128x128, got {text!r}", field="tile") from None
    if len(nums) == 1:
        nums *= 2
    if len(nums) != 2 or min(nums) <= 0 or max(nums) > 4096:
        raise RooflineError(f"--tile must look like 128x128 with sides 1..4096, got {text!r}", field="tile")
    return nums[0], nums[1]
