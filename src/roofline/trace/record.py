"""Run an nn.Module on the meta device under a dispatch mode that costs every aten op.

The meta device carries shapes and dtypes but no data, so a 7B-parameter model runs in well under
a second and a few megabytes. Every op the dispatcher sees is costed by its rule (rules/); an op
without a rule is counted in ``unsupported``, never dropped.

With ``fused=True`` (the default) two functional calls that a GPU runs as one kernel, but that the
meta (and CPU) dispatcher decomposes into a chain of small ops, are recorded as that one kernel:
``F.scaled_dot_product_attention`` becomes ``aten::_scaled_dot_product_flash_attention`` (the
memory-efficient kernel when there is a mask, the dtype is fp32, or V's head dim is not Q's, as in
DeepSeek's MLA: torch's flash kernel needs one head dim for Q, K and V), and ``F.rms_norm``
becomes ``aten::_fused_rms_norm``. ``fused=False`` records what the meta dispatcher does instead (the math
path: QK^T, softmax and PV as separate ops, with fp32 upcasts).
"""

from __future__ import annotations

from collections import Counter
from contextlib import nullcontext

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from roofline.trace.result import TraceResult, TracedOp
from roofline.trace.rules import Call, TensorSpec, get_rule

_DTYPES = {
    torch.float64: "fp64", torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16",
    torch.int64: "int64", torch.int32: "int32", torch.int16: "int16", torch.int8: "int8",
    torch.uint8: "uint8", torch.bool: "bool", torch.complex64: "complex64", torch.complex128: "complex128",
}
for _name in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu"):
    if hasattr(torch, _name):
        _DTYPES[getattr(torch, _name)] = "fp8"

DTYPE_BY_NAME: dict = {}  # roofline name -> torch dtype (fp8: float8_e4m3fn, the first listed)
for _dtype, _name in _DTYPES.items():
    DTYPE_BY_NAME.setdefault(_name, _dtype)


def spec(t: torch.Tensor) -> TensorSpec:
    """The rule's view of a tensor: shape, dtype name, strides."""
    strides = tuple(t.stride()) if t.layout == torch.strided else ()
    return TensorSpec(tuple(int(n) for n in t.shape), _DTYPES.get(t.dtype, "fp32"), strides)


def _specs(tree) -> tuple[TensorSpec, ...]:
    return tuple(spec(x) for x in tree_flatten(tree)[0] if isinstance(x, torch.Tensor))


def _arg(a):
    if isinstance(a, torch.Tensor):
        return spec(a)
    if isinstance(a, (list, tuple)):
        return [_arg(x) for x in a]
    return a


def make_call(func, args, kwargs, out) -> Call:
    """The rule's view of one dispatched call (the ``out=`` tensor of an out-variant is not an input)."""
    ins = {k: v for k, v in kwargs.items() if k != "out"}
    return Call(func._schema.name, tuple(_arg(a) for a in args), _specs((args, ins)), _specs(out))


def compute_dtype(call: Call) -> str:
    """The dtype whose peak the op runs at: its first floating input's, else its output's."""
    for t in call.inputs + call.outputs:
        if t.dtype in ("fp64", "fp32", "bf16", "fp16", "fp8"):
            return t.dtype
    return (call.outputs or call.inputs or (TensorSpec(()),))[0].dtype


def apply_rule(rule, call: Call):
    """The rule's Cost, or None when it does not cover these arguments (an unusual overload): the
    op is then reported as unsupported rather than guessed."""
    try:
        return rule.fn(call)
    except (TypeError, ValueError, IndexError):
        return None


_GROUPED_MM = torch.ops.aten._grouped_mm.default


def _grouped_mm_any_dtype(func, args, kwargs):
    """torch._grouped_mm(A, B, offs): its meta kernel accepts bf16 only ("Expected inputs of BF16
    type"; transformers 5's MoE experts call it), while the CPU and CUDA kernels also run fp32 and
    fp16. On meta tensors of another dtype the output's shape is taken from the meta kernel run on
    bf16 stand-ins and the output made at the inputs' dtype (or ``out_dtype``): the rule then costs
    the call as it runs, its bytes at the real width. Anything else runs as given."""
    a, b = args[0], args[1]
    if not (a.is_meta and b.is_meta and a.dtype == b.dtype and a.dtype in (torch.float32, torch.float16)):
        return func(*args, **kwargs)
    stand_in = func(a.to(torch.bfloat16), b.to(torch.bfloat16), *args[2:], **kwargs)
    dtype = kwargs.get("out_dtype") or (args[4] if len(args) > 4 and args[4] is not None else a.dtype)
    return torch.empty(stand_in.shape, dtype=dtype, device="meta")


class Recorder(TorchDispatchMode):
    """Costs every aten op dispatched inside it. ``modules`` is the nn.Module path stack kept by
    the module hooks (see trace)."""

    def __init__(self):
        super().__init__()
        self.ops: list[TracedOp] = []
        self.unsupported: Counter[str] = Counter()
        self.modules: list[str] = []
        self.paused = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = _grouped_mm_any_dtype(func, args, kwargs) if func is _GROUPED_MM else func(*args, **kwargs)
        if not self.paused:
            self.record(make_call(func, args, kwargs, out))
        return out

    def record(self, call: Call) -> None:
        rule = get_rule(call.op)
        cost = apply_rule(rule, call) if rule is not None else None
        if cost is None:
            self.unsupported[call.op] += 1
            return
        self.ops.append(TracedOp(call.op, float(cost.flops), float(cost.bytes), rule.category, compute_dtype(call),
                                 self.modules[-1] if self.modules else "", tuple(t.shape for t in call.inputs),
                                 tuple(t.strides for t in call.inputs)))


# ---------------------------------------------------------------------------------------------
# fused kernels the meta dispatcher would decompose
# ---------------------------------------------------------------------------------------------


def _sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    aten = torch.ops.aten
    one_head_dim = query.shape[-1] == key.shape[-1] == value.shape[-1]
    if attn_mask is None and one_head_dim and query.dtype in (torch.float16, torch.bfloat16):
        return aten._scaled_dot_product_flash_attention(query, key, value, dropout_p, is_causal, False, scale=scale)[0]
    return aten._scaled_dot_product_efficient_attention(query, key, value, attn_mask, False, dropout_p, is_causal,
                                                       scale=scale)[0]


class FusedKernels(TorchFunctionMode):
    """Routes attention and RMSNorm to the single fused kernel a GPU runs (see module docstring).
    ``aten::_fused_rms_norm`` has no meta kernel of its own (the dispatcher decomposes it before a
    dispatch mode sees it), so it is recorded here, on ``recorder``, with an empty output."""

    def __init__(self, recorder: "Recorder"):
        super().__init__()
        self.recorder = recorder

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.scaled_dot_product_attention and args and args[0].dim() == 4:
            return _sdpa(*args, **kwargs)
        if func is F.rms_norm:
            return self._rms_norm(*args, **kwargs)
        return func(*args, **kwargs)

    def _rms_norm(self, input, normalized_shape, weight=None, eps=None):
        if weight is not None and weight.dtype != input.dtype:  # torch will not fuse these either
            return F.rms_norm(input, normalized_shape, weight, eps)
        shape = tuple(normalized_shape)
        self.recorder.paused = True
        try:
            out = torch.empty_like(input)
            rstd = torch.empty(input.shape[: input.dim() - len(shape)] + (1,) * len(shape), dtype=torch.float32,
                               device=input.device)
        finally:
            self.recorder.paused = False
        tensors = (input,) if weight is None else (input, weight)
        call = Call("aten::_fused_rms_norm", (spec(input), list(shape), None if weight is None else spec(weight), eps),
                    tuple(spec(t) for t in tensors), (spec(out), spec(rstd)))
        self.recorder.record(call)
        return out


# ---------------------------------------------------------------------------------------------
# trace
# ---------------------------------------------------------------------------------------------


def _meta(x, dtype=None):
    if not isinstance(x, torch.Tensor):
        return x
    cast = dtype if (dtype is not None and x.is_floating_point()) else x.dtype
    return torch.empty_strided(x.shape, x.stride(), dtype=cast, device="meta")


def _module_hooks(root: torch.nn.Module, stack: list[str]):
    names = {id(m): name for name, m in root.named_modules(remove_duplicate=False)}

    def pre(module, _args):
        stack.append(names.get(id(module), stack[-1] if stack else ""))

    def post(module, _args, _out):
        if stack:
            stack.pop()

    from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

    return [register_module_forward_pre_hook(pre), register_module_forward_hook(post)]


def trace(module: torch.nn.Module, *example_inputs, dtype=None, fused: bool = True, cast_inputs: bool = True,
          **example_kwargs) -> TraceResult:
    """Run ``module(*example_inputs, **example_kwargs)`` on the meta device and cost every aten op.

    The module is not changed: its parameters and buffers are swapped for meta tensors of the same
    shape (cast to ``dtype``, a torch dtype or a name like "bf16", when given) for the call; the
    inputs are moved to meta likewise, floating ones cast to ``dtype`` too unless ``cast_inputs``
    is False (inputs whose dtype was chosen on purpose). Build big models under
    ``with torch.device("meta"):`` so their weights are never allocated. Runs under no_grad: a
    forward pass, as for inference. See the module docstring for ``fused``."""
    if isinstance(dtype, str):
        from roofline.errors import unknown_name

        if dtype not in DTYPE_BY_NAME:
            raise unknown_name("dtype", dtype, DTYPE_BY_NAME)
        dtype = DTYPE_BY_NAME[dtype]
    state = {n: _meta(t, dtype) for n, t in module.named_parameters()}
    state.update({n: _meta(t, dtype) for n, t in module.named_buffers()})
    input_dtype = dtype if cast_inputs else None
    args = tuple(_meta(x, input_dtype) for x in example_inputs)
    kwargs = {k: _meta(v, input_dtype) for k, v in example_kwargs.items()}
    recorder = Recorder()
    handles = _module_hooks(module, recorder.modules)
    try:
        with torch.no_grad(), (FusedKernels(recorder) if fused else nullcontext()), recorder:
            torch.func.functional_call(module, state, args, kwargs)
    finally:
        for h in handles:
            h.remove()
    return TraceResult(
        model=type(module).__name__,
        inputs=tuple(tuple(x.shape) for x in args if isinstance(x, torch.Tensor)),
        ops=tuple(recorder.ops),
        unsupported=tuple(recorder.unsupported),
        unsupported_calls=tuple(recorder.unsupported.items()),
        fused=fused,
    )

