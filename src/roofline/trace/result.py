"""What a trace produces: every recorded op with its FLOPs and bytes, the ops that had no rule, and
the conversion to roofline Kernels for the cost model. No torch here."""

from __future__ import annotations

from roofline.tables import Tabular, dump_json, rows_to_csv  # noqa: E402

import re
from dataclasses import dataclass

from roofline.kernels import Kernel
from roofline.units import DTYPE_BYTES


@dataclass(frozen=True)
class TracedOp:
    """One aten op call: ``flops`` (FLOPs) and ``bytes`` (bytes to and from main memory) from its
    rule; ``module`` is the nn.Module path that called it ("layers.0.attn.wqkv"); ``shapes`` the
    shapes of its tensor inputs."""

    name: str
    flops: float
    bytes: float
    category: str
    dtype: str
    module: str = ""
    shapes: tuple[tuple[int, ...], ...] = ()
    strides: tuple[tuple[int, ...], ...] = ()  # of its tensor inputs (elements; empty: contiguous or unknown)

    @property
    def intensity(self) -> float:
        """FLOP per byte (0 for a free op)."""
        return self.flops / self.bytes if self.bytes else 0.0

    def to_dict(self) -> dict:
        return {"name": self.name, "flops": self.flops, "bytes": self.bytes, "category": self.category,
                "dtype": self.dtype, "module": self.module, "shapes": [list(s) for s in self.shapes]}


def peak_dtype(dtype: str, machine=None) -> str:
    """The dtype whose peak a kernel of ``dtype`` runs at: itself when the machine has that peak,
    else the machine's default (integer index math, bool masks)."""
    if machine is not None:
        return dtype if dtype in machine.dtypes else machine.default_dtype
    return dtype if dtype in DTYPE_BYTES else "fp32"


def _collapse(module: str) -> str:
    """'layers.17.attn.wqkv' -> 'layers.*.attn.wqkv': identical layers fold into one row."""
    return re.sub(r"(?<=\.)\d+(?=\.|$)|^\d+(?=\.|$)", "*", module)


@dataclass(frozen=True)
class OpGroup:
    """Ops that share a key (op name, or module path and op name): calls and summed cost."""

    key: str
    calls: int
    flops: float
    bytes: float
    category: str


@dataclass(frozen=True)
class TraceResult(Tabular):
    """A traced forward pass. ``ops`` holds every op that has a rule, free ones (views) at zero,
    in execution order; ``unsupported`` names the ops that had none (their calls are counted in
    ``unsupported_calls``), so a total is a lower bound whenever ``unsupported`` is not empty."""

    model: str
    inputs: tuple[tuple[int, ...], ...]
    ops: tuple[TracedOp, ...]
    unsupported: tuple[str, ...] = ()
    unsupported_calls: tuple[tuple[str, int], ...] = ()
    fused: bool = True

    @property
    def total_flops(self) -> float:
        return float(sum(op.flops for op in self.ops))

    @property
    def total_bytes(self) -> float:
        return float(sum(op.bytes for op in self.ops))

    @property
    def intensity(self) -> float:
        return self.total_flops / self.total_bytes if self.total_bytes else 0.0

    def groups(self, by: str = "op") -> tuple[OpGroup, ...]:
        """Sum ops by name (``by="op"``) or by module path with layer numbers folded and the op
        name (``by="module"``), in order of first appearance."""
        out: dict[str, list] = {}
        for op in self.ops:
            key = op.name if by == "op" else f"{_collapse(op.module) or '(top)'}  {op.name}"
            g = out.setdefault(key, [0, 0.0, 0.0, op.category])
            g[0] += 1
            g[1] += op.flops
            g[2] += op.bytes
        return tuple(OpGroup(k, n, f, b, c) for k, (n, f, b, c) in out.items())

    def to_kernels(self, machine=None) -> list[Kernel]:
        """One Kernel per op that moves data (free ops are no kernel), named 'module: op'; with a
        machine, dtypes it has no peak for (integer index math) run at its default dtype's."""
        if machine is not None:
            from roofline.machines import get_machine

            machine = get_machine(machine)
        from roofline.trace.rules import kernel_shape

        return [Kernel(f"{op.module}: {op.name}" if op.module else op.name, op.flops, op.bytes, op.category,
                       peak_dtype(op.dtype, machine), shape=kernel_shape(op.name, op.shapes, op.strides or None)) for op in self.ops if op.bytes > 0]

    def predict(self, machine, model=None):
        """The cost model's prediction of this forward pass on ``machine`` (default: the pure
        roofline, CostModel())."""
        from roofline.cost import CostModel
        from roofline.machines import get_machine

        machine = get_machine(machine)
        return (model or CostModel()).predict(self.to_kernels(machine), machine)

    # -- rendering ---------------------------------------------------------------------------
    def to_dict(self) -> dict:
        return {"model": self.model, "inputs": [list(s) for s in self.inputs], "fused": self.fused,
                "total_flops": self.total_flops, "total_bytes": self.total_bytes,
                "unsupported": list(self.unsupported), "unsupported_calls": dict(self.unsupported_calls),
                "ops": [op.to_dict() for op in self.ops]}

    def to_json(self, **extra) -> str:
        return dump_json({**extra, **self.to_dict()})

    def rows(self, machine=None, model=None) -> list[dict]:
        """A dict per op: name, module, category, dtype, FLOPs, bytes and its input shapes ("4x8;8x16");
        on ``machine`` also its predicted seconds and bound by ``model`` (default the plain roofline),
        and with a calibrated model its interval, class and basis."""
        preds = {id(op): p for op, p in op_predictions(self, machine, model)} if machine is not None else {}
        calibrated = any(getattr(p, "low_s", None) is not None for p in preds.values())
        out = []
        for op in self.ops:
            row = {"name": op.name, "module": op.module, "category": op.category, "dtype": op.dtype, "flops": op.flops,
                   "bytes": op.bytes, "shapes": ";".join("x".join(map(str, s)) for s in op.shapes)}
            if machine is not None:
                p = preds.get(id(op))
                row.update(predicted_s=p.time_s if p else 0.0, bound=p.bound if p else "")
                if calibrated:
                    row.update(zip(("low_s", "high_s", "op_class", "extrapolated", "basis"),
                                   (p.low_s, p.high_s, p.op_class, bool(p.extrapolated), p.basis) if p else ("",) * 5))
            out.append(row)
        return out

    def to_csv(self, machine=None, model=None) -> str:
        """rows(machine, model) as CSV (Tabular's, on the machine to predict on); no ops: the header alone."""
        rows = self.rows(machine, model)
        empty = ("name", "module", "category", "dtype", "flops", "bytes", "shapes") + (("predicted_s", "bound") if machine
                                                                                      is not None else ())
        return rows_to_csv(rows, None if rows else empty)

    def group_rows(self, machine, by: str = "op", model=None) -> list[dict]:
        """The table's rows as dicts (to_table on ``machine``): per group its calls, FLOPs, bytes,
        predicted seconds (by ``model``, default the plain roofline) and bound, costliest first."""
        times = _group_times(self, machine, by, model)
        rows = []
        for g in self.groups(by):
            t = times.get(g.key, {})
            row = {"key": g.key, "calls": g.calls, "flops": g.flops, "bytes": g.bytes,
                   "predicted_s": t.get("time_s", 0.0), "bound": t.get("bound") or None}
            if "low_s" in t:  # a calibrated model: the interval, class and measured points behind it
                row.update({k: t[k] for k in ("low_s", "high_s", "op_class", "basis", "extrapolated")})
            rows.append(row)
        return sorted(rows, key=lambda r: -r["predicted_s"])

    def to_table(self, machine=None, by: str = "op", model=None) -> str:
        """Groups with calls, FLOPs, bytes, intensity and, on ``machine``, the predicted time."""
        from roofline.tables import grid
        from roofline.units import format_magnitude as _mag, format_us_cell as _us
        from roofline.units import format_intensity

        groups = self.groups(by)
        times = _group_times(self, machine, by, model) if machine is not None else {}
        total_s = sum(t["time_s"] for t in times.values())
        calibrated = any("low_s" in t for t in times.values())
        lead = ["op"] if by == "op" else ["module", "op"]  # a module group's key is "MODULE  OP"
        headers = [*lead, "calls", "FLOPs", "bytes", "FLOP/B"]
        if machine is not None:
            headers += ["time us"] + (["range us", "class"] if calibrated else []) + ["share", "bound"]
        rows = []
        for g in sorted(groups, key=lambda g: -times.get(g.key, {}).get("time_s", 0.0) if times else 0):
            key = [g.key] if by == "op" else list(g.key.rsplit("  ", 1))
            row = [*key, g.calls, _mag(g.flops), _mag(g.bytes), format_intensity(g.flops / g.bytes) if g.bytes else "-"]
            if machine is not None:
                t = times.get(g.key, {})
                row.append(_us(t.get("time_s", 0.0)))
                if calibrated:  # '*': some calls lie outside the measured points (their range widened)
                    row += [f"{_us(t['low_s'])}-{_us(t['high_s'])}" + ("*" if t["extrapolated"] else "") if "low_s" in t else "",
                            t.get("op_class", "")]
                row += [f"{t.get('time_s', 0.0) / total_s:.1%}" if total_s else "-", t.get("bound", "")]
            rows.append(row)
        total_row = ["total", *([""] * (len(lead) - 1)), sum(g.calls for g in groups), _mag(self.total_flops),
                     _mag(self.total_bytes), format_intensity(self.intensity)]
        if machine is not None:
            total_row += [_us(total_s)] + ([f"{_us(sum(t.get('low_s', 0.0) for t in times.values()))}-"
                                            f"{_us(sum(t.get('high_s', 0.0) for t in times.values()))}", ""]
                                           if calibrated else []) + ["100%", ""]
        rows.append(total_row)
        right = [h not in ("op", "module", "class", "bound") for h in headers]  # numbers right, text left
        return grid(headers, rows, right)


def op_predictions(result: TraceResult, machine, model=None) -> list:
    """(op, prediction) for each op that moves bytes, by ``model`` (default the plain roofline) on
    ``machine``: a calibrated model's predictions carry an interval, a class and a basis."""
    from roofline.cost import CostModel
    from roofline.machines import get_machine
    from roofline.trace.rules import kernel_shape

    machine = get_machine(machine)
    model = model or CostModel()
    out = []
    for op in result.ops:
        if op.bytes <= 0:
            continue
        k = Kernel(op.name, op.flops, op.bytes, op.category, peak_dtype(op.dtype, machine),
                   shape=kernel_shape(op.name, op.shapes, op.strides or None))
        out.append((op, model.predict_op(k, machine)))
    return out


def _group_times(result: TraceResult, machine, by: str, model) -> dict:
    """{group key: {"time_s", "bound" ('memory'/'compute'/'mixed'), and with a calibrated model
    "low_s", "high_s" (the calls' intervals summed), "op_class", "basis" (the distinct bases, joined
    by ' | '), "extrapolated" (calls outside the measured points)}} on ``machine``."""
    out: dict[str, dict] = {}
    for op, p in op_predictions(result, machine, model):
        key = op.name if by == "op" else f"{_collapse(op.module) or '(top)'}  {op.name}"
        g = out.setdefault(key, {"time_s": 0.0, "bound": p.bound})
        g["time_s"] += p.time_s
        g["bound"] = g["bound"] if g["bound"] == p.bound else "mixed"
        if getattr(p, "low_s", None) is not None:  # a calibrated prediction
            g["low_s"] = g.get("low_s", 0.0) + p.low_s
            g["high_s"] = g.get("high_s", 0.0) + p.high_s
            classes = g.setdefault("classes", [])
            if p.op_class not in classes:
                classes.append(p.op_class)
            g["op_class"] = "/".join(classes)
            bases = g.setdefault("bases", [])
            if p.basis not in bases:
                bases.append(p.basis)
            g["basis"] = " | ".join(bases)
            g["extrapolated"] = g.get("extrapolated", 0) + bool(p.extrapolated)
    for g in out.values():
        g.pop("classes", None)
        g.pop("bases", None)
    return out
