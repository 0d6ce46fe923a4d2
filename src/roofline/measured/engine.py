"""The kernels `--engine` runs on a machine without `--kernels`: one rule for the CLI and /api/serving."""

from __future__ import annotations

from roofline.errors import RooflineError
from roofline.machines import Machine
from roofline.measured.model import MeasuredKernels
from roofline.measured.tables import parse_kernels


def engine_kernels(kernels: str, machine: Machine) -> tuple[str | None, str]:
    """`--engine` without `--kernels` (the CLI's and /api/serving's one rule): the engine's measured
    ``kernels`` (ENGINE[@VERSION]) where the tables hold ``machine`` or transfer onto it (for_machine),
    with "" for a note; else None and the note saying the plate's cost model prices the ops. A version
    the tables lack is refused by name, with the hint that --kernels picks other tables."""
    try:
        MeasuredKernels.for_machine(machine, kernels)
    except RooflineError as exc:
        if parse_kernels(kernels)[1] and _has_tables(machine, kernels.partition("@")[0]):
            # the engine's tables price this machine, not at that version: refused, as --kernels would be
            raise RooflineError(f"{exc}; --engine {kernels} --kernels {kernels.partition('@')[0]} runs this version's "
                                "defaults on the engine's default tables", field="engine",
                                also=("kernels",)) from None
        return None, (f"engine {kernels}: no measured kernels ({exc}); the plate's cost model prices the ops, and the "
                      "engine's own time per step, fitted on runs priced with measured kernels, is added as is")
    return kernels, ""


def _has_tables(machine: Machine, engine: str) -> bool:
    """Whether ``engine``'s default tables price ``machine`` (its own or transferred)."""
    try:
        MeasuredKernels.for_machine(machine, engine)
    except RooflineError:
        return False
    return True
