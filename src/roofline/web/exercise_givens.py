"""How the teaching-mode exercises (web.exercises) write what they give: rates and intensities
in the units the seed chapter uses, a machine's peak and bandwidth as givens, the machines that
run bf16, and the pure roofline that says which limit binds. No web stack.
"""

from __future__ import annotations

from roofline.cost import CostModel
from roofline.machines import Machine, list_machines
from roofline.units import format_intensity, format_si

ROOFLINE = CostModel()  # the pure roofline: which limit binds, without efficiencies or launches


def flops_s(x: float) -> str:
    return format_si(x, "FLOP/s", 4)


def bytes_s(x: float) -> str:
    return format_si(x, "B/s", 4)


def fpb(x: float) -> str:
    return f"{format_intensity(x)} FLOP/byte"


def bf16_machines() -> list[Machine]:
    return [m for m in list_machines() if "bf16" in m.dtypes]


def machine_given(m: Machine, dtype: str = "bf16") -> tuple[tuple[str, str], ...]:
    return ((f"{m.name} peak, {dtype} dense", flops_s(m.peak(dtype))), (f"{m.name} memory bandwidth", bytes_s(m.bandwidth)))
