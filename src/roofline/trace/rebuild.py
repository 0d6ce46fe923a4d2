"""Rebuilding a recorded op call on the meta device (torch) from what the profiler recorded:
shapes, strides, dtypes and scalar arguments, so that the rules (rules/) cost it as they cost a
traced op. A call that cannot be rebuilt says why.
"""

from __future__ import annotations

import ast

from roofline.trace.chrome_trace import PROFILER_DTYPES


_MISSING = object()


def _scalar(text):
    if text in ("", None):
        return _MISSING
    if text in ("True", "False"):
        return text == "True"
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _recorded_values(args: dict, torch):
    """Positional values from Input Dims / Input type / Concrete Inputs / Input Strides."""
    from roofline.trace.record import DTYPE_BY_NAME

    dims, types = args.get("Input Dims") or [], args.get("Input type") or []
    concrete = args.get("Concrete Inputs") or [""] * len(dims)
    strides = args.get("Input Strides") or [None] * len(dims)
    first = next((PROFILER_DTYPES[t] for t in types if t in PROFILER_DTYPES), "fp32")
    out = []
    for i, (d, t) in enumerate(zip(dims, types)):
        st = strides[i] if i < len(strides) else None
        if t in PROFILER_DTYPES:
            dt = DTYPE_BY_NAME.get(PROFILER_DTYPES[t], torch.float32)
            out.append(torch.empty_strided(d, st, dtype=dt, device="meta") if st and len(st) == len(d)
                       else torch.empty(d, dtype=dt, device="meta"))
        elif t == "TensorList":
            dt = DTYPE_BY_NAME.get(first, torch.float32)  # the list's dtype is not recorded: the call's
            out.append([torch.empty(s, dtype=dt, device="meta") for s in d])
        else:
            out.append(_scalar(concrete[i] if i < len(concrete) else ""))
    return out


_SCALAR_TYPES = {0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16", 6: "float32", 7: "float64",
                 9: "complex64", 10: "complex128", 11: "bool", 15: "bfloat16", 23: "float8_e5m2", 24: "float8_e4m3fn"}


def _convert(value, arg, torch):
    kind = str(arg.type)
    if value is _MISSING:
        value = arg.default_value if arg.has_default_value() else None
    if "device" in arg.name:
        return torch.device("meta") if value is not None or "Device" in kind else value
    if isinstance(value, int) and not isinstance(value, bool):
        if "ScalarType" in kind:
            return getattr(torch, _SCALAR_TYPES.get(value, "float32"))
        if "Layout" in kind:
            return torch.strided
        if "MemoryFormat" in kind:
            return (torch.contiguous_format, torch.preserve_format, torch.channels_last, torch.channels_last_3d)[min(value, 3)]
    return value


INTEGER_TYPES = ("long int", "int", "short int", "signed char", "unsigned char")  # index dtypes as the profiler names them


def _child_shapes(children, names) -> list[list]:
    """Input shapes of the integer-typed children named ``names`` (profiler dims), in order."""
    out = []
    for c in children or ():
        types, dims = c.args.get("Input type") or [], c.args.get("Input Dims") or []
        if c.name in names and types and types[0] in INTEGER_TYPES and dims and isinstance(dims[0], list):
            out.append(dims[0])
    return out


def _data_dependent(name: str, args: dict, children, torch):
    """(Call, dtype) for the ops whose recorded arguments do not say what they moved, read off their
    children, or None. ``aten::index``: the profiler records a ``Tensor?[]`` argument as nothing;
    on the CPU each index tensor goes through a ``reshape`` (or ``view``) child, whose shape is the
    index's. ``aten::nonzero``: its output's row count depends on the data; its ``as_strided_``
    child resizes the output to (n, ndim)."""
    from roofline.trace.record import compute_dtype, make_call

    dims, types = args.get("Input Dims") or [], args.get("Input type") or []
    if not dims or not types or types[0] not in PROFILER_DTYPES:
        return None
    dt = DTYPE_BY_NAME_FN(torch).get(PROFILER_DTYPES[types[0]], torch.float32)
    self_t = torch.empty(dims[0], dtype=dt, device="meta")
    if name == "aten::index" and len(dims) == 2 and types[1] in ("", "GenericList", "TensorList"):
        shapes = _child_shapes(children, ("aten::reshape", "aten::view", "aten::_reshape_alias"))
        if not shapes or len(shapes) > len(dims[0]):
            return None
        fn = torch.ops.aten.index.Tensor
        idx = [torch.zeros(s, dtype=torch.int64, device="meta") for s in shapes]
        try:
            out = fn(self_t, idx)
        except Exception:  # noqa: BLE001 - shapes that do not broadcast: not the call it was
            return None
        call = make_call(fn, [self_t, idx], {}, out)
        return call, compute_dtype(call)
    if name == "aten::nonzero" and len(dims) == 1:
        rows = [c.args["Input Dims"][0] for c in children or () if c.name == "aten::as_strided_"
                and (c.args.get("Input Dims") or [None])[0] and len(c.args["Input Dims"][0]) == 2]
        if not rows or rows[-1][1] != len(dims[0]):
            return None
        fn = torch.ops.aten.nonzero.default
        out = torch.empty(rows[-1], dtype=torch.int64, device="meta")
        call = make_call(fn, [self_t], {}, out)
        return call, compute_dtype(call)
    return None


def DTYPE_BY_NAME_FN(torch):  # noqa: N802 - the record module's table, imported with torch
    from roofline.trace.record import DTYPE_BY_NAME

    return DTYPE_BY_NAME


def rebuild(name: str, args: dict, children=()):
    """(Call, dtype) of a recorded op replayed on meta, or a reason string when it cannot be. The
    ops whose arguments the profiler does not fully record (``aten::index``'s index list,
    ``aten::nonzero``'s data-dependent output) are rebuilt from their ``children`` when those say."""
    import torch

    from roofline.trace.record import compute_dtype, make_call

    ns, _, op = name.partition("::")
    packet = getattr(getattr(torch.ops, ns, None), op, None) if op else None
    if packet is None:
        return "not a torch operator"
    if "Input Dims" not in args:
        return "no shapes recorded (record_shapes=True)"
    if name in ("aten::index", "aten::nonzero"):
        got = _data_dependent(name, args, children, torch)
        if got is not None:
            return got
        if name == "aten::nonzero":
            return "its output size depends on the data and no child op recorded it"
    try:
        values = _recorded_values(args, torch)
    except Exception:  # noqa: BLE001 - a shape or type the profiler would not write (negative, not a list)
        return "could not rebuild the call from the recorded shapes and arguments"
    for overload in packet.overloads():
        fn = getattr(packet, overload)
        schema = fn._schema
        if len(schema.arguments) != len(values):
            continue
        pos, kw = [], {}
        for v, a in zip(values, schema.arguments):
            v = _convert(v, a, torch)
            (kw.__setitem__(a.name, v) if a.kwarg_only else pos.append(v))
        try:
            out = fn(*pos, **kw)
        except Exception:  # noqa: BLE001 - wrong overload or an argument the profiler did not record
            continue
        call = make_call(fn, pos, kw, out)
        return call, compute_dtype(call)
    return "could not rebuild the call from the recorded shapes and arguments"
