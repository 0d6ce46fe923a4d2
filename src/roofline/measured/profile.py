"""A user's own calibration profile as measured kernels: the same tables, read by the same code.

`roofline calibrate` on a GPU writes a profile (docs/measuring.md) holding, among its curves, the
skinny-M GEMM family (M = 1 to 512 rows against N = K weights), a sweep of square matmuls and
fused attention probes (decode: one query against S cached keys; prefill: T = S causal; batch 1,
8 heads of 64). ``--kernels PROFILE.toml`` (anywhere ``--kernels ENGINE`` goes) reads those points
into the measured families' own tables: a gemm.GemmTable over (m, n, k) and an
attention.AttentionTable over (heads, length, batch), each point held as its efficiency against
its roofline on the profile's own machine (its measured peaks and bandwidth) and interpolated by
grid.LogGrid, so that an engine's tables and a user's calibration are interchangeable inputs to
measured.model.MeasuredKernels. Each measured time is first reduced to its body (t - launch, at
least t / 4: measurements.body_s), because the cost model adds the launch back, as the engines'
tables time kernels without it.

The GEMMs read their weights from main memory where the profile timed that ("gemm_cold": another
weight each call, as a model's forward reads each weight once), else the warm family. MoE modules
and collectives are not calibrated: ops of those families keep the cost model, and say so.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import numpy as np

from roofline.errors import RooflineError
from roofline.machines import Machine

PROFILE_SUFFIX = ".toml"
# the attention probes' shape text, as measure.families.attention_families writes it
ATTENTION_PROBE = re.compile(r"^(decode|prefill) attention T (\d+) S (\d+) (\d+)x(\d+) (\w+)$")


def is_profile(kernels) -> bool:
    """Whether ``--kernels`` names a profile file rather than ENGINE[@VERSION]."""
    return str(kernels).strip().lower().endswith(PROFILE_SUFFIX)


@functools.cache
def load(path: str):
    """(Machine, Calibration) of a profile, read once per process; a file that is not a profile is
    refused by name."""
    from roofline.measure.machine_file import NotAProfile, load_profile

    if not Path(path).is_file():
        raise RooflineError(f"--kernels {path!r}: no such profile file (roofline calibrate writes one)", field="kernels")
    try:
        return load_profile(path)
    except NotAProfile:
        raise RooflineError(f"--kernels {path!r} is a machine file with no [calibration]: measured kernels need a "
                            "profile written by roofline calibrate", field="kernels") from None


def machine_of(machine_key: str, path: str) -> Machine:
    """The profile's machine, refused unless it is the machine asked for: a profile's times are its
    own GPU's, and its efficiencies are against its own measured peaks."""
    machine, cal = load(path)
    if machine.key != machine_key:
        raise RooflineError(f"--kernels {path!r} was measured on {cal.device_name} (machine {machine.key!r}), not "
                            f"{machine_key!r}: give --machine {path} too", field="kernels", also=("machine",))
    return machine


def source(path: str) -> str:
    _, cal = load(path)
    return f"roofline calibrate {cal.date} ({cal.device_name}, {Path(path).name})"


def gemm_points(machine_key: str, path: str, dtype: str):
    """(machine, (m, n, k), body seconds, source) of the profile's GEMMs of ``dtype``: the skinny-M
    family (cold where timed) and the square matmul sweep, for gemm.gemm_table to grid."""
    from roofline.measure.measurements import body_s

    machine = machine_of(machine_key, path)
    _, cal = load(path)
    kinds = {c.kind for c in cal.gemm if c.dtype == dtype}
    family = "gemm_cold" if "gemm_cold" in kinds else "gemm"
    m, n, k, t = [], [], [], []
    for c in cal.gemm:
        if c.dtype == dtype and c.kind == family:
            m += c.size
            n += c.n
            k += c.k
            t += list(c.seconds)
    for c in cal.matmul:
        if c.dtype == dtype and c.kind == "matmul":
            m += c.size
            n += c.size
            k += c.size
            t += list(c.seconds)
    if not t:
        have = sorted({c.dtype for c in (*cal.gemm, *cal.matmul)})
        raise RooflineError(f"--kernels {path!r} measured no {dtype} GEMMs; it has {', '.join(have) or 'none'}",
                            field="dtype")
    what = "skinny-M GEMMs (weights streamed)" if family == "gemm_cold" else "skinny-M GEMMs"
    coords = tuple(np.asarray(x, dtype=float) for x in (m, n, k))
    return machine, coords, body_s(t, cal.launch_s), f"{source(path)}: {what} and square matmuls"


def attention_points(machine_key: str, path: str, decode: bool, dtypes: dict):
    """(machine, {site: [(T, S, H, d, dtype, body seconds)]}, source) of the profile's fused
    attention probes of one phase, a site keyed as attention.attention_table keys the engines'
    (``dtypes``: ours -> the tables' names): batch 1, as many KV heads as heads, no window."""
    from roofline.measure.measurements import body_s

    machine = machine_of(machine_key, path)
    _, cal = load(path)
    points: dict[tuple, list] = {}
    for p in cal.probes:
        match = ATTENTION_PROBE.match(p.shape.strip())
        if not match or (match.group(1) == "decode") != decode or match.group(6) not in dtypes:
            continue
        _, T, S, H, d, dtype = match.groups()
        table = dtypes[dtype]
        key = (table, int(H), int(d), 0) if decode else (table, table, int(H), int(d), 0)
        points.setdefault(key, []).append((float(T), float(S), float(H), float(d), dtype,
                                           float(body_s(p.measured_s, cal.launch_s))))
    if not points:
        raise RooflineError(f"--kernels {path!r} holds no {'decode' if decode else 'prefill'} attention probes",
                            field="kernels")
    return machine, points, f"{source(path)}: fused attention probes"
