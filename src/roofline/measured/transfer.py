"""Which measured preset's kernels price a machine that has none of its own: a user's machine file, or a
preset scaled by --compute-scale / --bandwidth-scale (the presets' own counterparts are
tables.NEAREST_MEASURED's, read by tables.transfer_source)."""

from __future__ import annotations

import numpy as np

from roofline.errors import RooflineError
from roofline.machines import Machine, list_machines
from roofline.measured.profile import is_profile
from roofline.measured.tables import NEAREST_MEASURED, NVIDIA_ONLY, has_tables, parse_kernels

GPU_VENDORS = ("NVIDIA", "AMD")  # a machine file of these (or of no vendor) transfers; TPUs and Gaudi do not
RIDGE_WITHIN = 0.2  # a user's machine transfers from a measured preset whose ridge point is this close (NEAREST_MEASURED's rule)


def nearest_measured(machine: Machine, kernels: str) -> tuple[str | None, str]:
    """For a machine that is no preset (a user's machine file): the measured preset whose kernels'
    efficiencies transfer onto it, and the words saying why: of the presets with tables, those whose
    ridge point (FLOP/B at the machine's default dtype) is within RIDGE_WITHIN of this machine's, the
    nearest in log(peak) + log(bandwidth); (None, "") where none is that near, or for a preset (its
    own tables, or tables.NEAREST_MEASURED's counterpart, are transfer_source's to say). A preset scaled by
    --compute-scale / --bandwidth-scale takes its own chip's tables (or its counterpart's)."""
    presets = {m.key: m for m in list_machines()}
    if is_profile(kernels) or machine.key in presets or has_tables(machine.key) or (
            machine.vendor and machine.vendor.upper() not in GPU_VENDORS):  # a TPU's or Gaudi's: no counterpart
        return None, ""
    base = machine.key.split(" x")[0]  # a preset scaled by --compute-scale/--bandwidth-scale (cli.args keys it "KEY xC ...")
    dtype = machine.default_dtype
    ridge = machine.ridge(dtype)
    if base != machine.key and base in presets:
        near = base if has_tables(base) else NEAREST_MEASURED.get(base)
        why = f" (a scaled {base}: the efficiencies of {near}'s kernels on the scaled roofline)"
    else:
        def distance(m: Machine) -> float:
            return abs(np.log(m.peak(dtype) / machine.peak(dtype))) + abs(np.log(m.bandwidth / machine.bandwidth))

        close = [m for m in presets.values() if has_tables(m.key) and dtype in m.dtypes
                 and abs(m.ridge(dtype) / ridge - 1.0) <= RIDGE_WITHIN]
        near = min(close, key=distance).key if close else None
        if near is None:
            ridges = ", ".join(f"{m.key} {m.ridge(dtype):,.0f}" for m in presets.values() if has_tables(m.key) and dtype in m.dtypes)
            return None, (f"no measured GPU's ridge point lies within {RIDGE_WITHIN:.0%} of {machine.name}'s {ridge:,.0f} "
                          f"FLOP/B at {dtype} ({ridges}), so none is near enough to transfer from")
        why = (f" (not a preset: {near} is the measured preset nearest its {dtype} peak and bandwidth, ridge point "
               f"{presets[near].ridge(dtype):,.0f} FLOP/B against its {ridge:,.0f})")
    if near is None:
        return None, ""
    engine, _ = parse_kernels(kernels)
    if engine in NVIDIA_ONLY and machine.vendor and machine.vendor.upper() != "NVIDIA":
        raise RooflineError(f"{engine} runs on NVIDIA GPUs only: no {engine} kernels for the {machine.vendor} "
                            f"{machine.name} (vllm and sglang run on it)", field="machine", also=("kernels",))
    return near, why
