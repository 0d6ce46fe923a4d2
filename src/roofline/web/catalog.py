"""The machines and models a workshop app offers: the machine table (the presets and each machine
file's machines), and each machine and model as /api/machines and /api/models list them. No web
stack.
"""

from __future__ import annotations

from types import MappingProxyType

from roofline.architecture import Model
from roofline.errors import RooflineError
from roofline.machines import Machine, list_machines, load_machine_file
from roofline.transformer import model_summary
from roofline.units import US, format_si


def machine_table(machine_files: list[str] | None) -> tuple[MappingProxyType, MappingProxyType]:
    """{key: Machine} for the presets and every machine in ``machine_files``, and {key: origin}."""
    machines: dict[str, Machine] = {m.key: m for m in list_machines()}
    origin = {key: "preset" for key in machines}
    for path in machine_files or []:
        for key, m in load_machine_file(path).items():
            if key in machines:
                raise RooflineError(
                    f"machine file {str(path)!r} defines {key!r}, which is already "
                    f"{'a preset' if origin[key] == 'preset' else 'in ' + origin[key]}; rename it",
                    field="machine",
                )
            machines[key] = m
            origin[key] = str(path)
    return MappingProxyType(machines), MappingProxyType(origin)


def machine_dict(m: Machine, origin: str) -> dict:
    return {
        "key": m.key,
        "name": m.name,
        "vendor": m.vendor,
        "origin": origin,
        "default_dtype": m.default_dtype,
        "dtypes": list(m.dtypes),
        "peak_flops_per_s": m.peak_flops,
        "bytes_per_s": m.bandwidth,
        "ridge_flop_per_byte": m.ridge_point,
        "launch_overhead_s": m.launch_overhead_s,
        "launch_overhead_us": (m.launch_overhead_s or 0.0) / US,
        "label": m.name,
        "detail": f"{format_si(m.peak_flops, 'FLOP/s')} {m.default_dtype} · {format_si(m.bandwidth, 'B/s')} · "
                  f"ridge {m.ridge_point:,.0f} FLOP/byte",
    }


def model_dict(c: Model) -> dict:
    """A model as the page lists it: model_summary (layers, kinds, totals), with the attention shape
    of its first attention layer and its experts (None where it has none)."""
    a = c.first_attention
    moe = next((k.mlp for k in c.kinds if k.is_moe), None)
    return {
        **model_summary(c),
        "n_layers": c.n_layers,
        "n_heads": getattr(a, "heads", None),
        "n_kv_heads": getattr(a, "kv_heads", None),
        "head_dim": getattr(a, "head_dim", getattr(a, "qk_head_dim", None)),
        "n_experts": moe.n_experts if moe else 1,
        "experts_per_token": moe.top_k if moe else 1,
        "uniform": c.is_uniform,
        "label": c.name,
    }
