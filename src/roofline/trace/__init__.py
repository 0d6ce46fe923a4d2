"""Trace a PyTorch model, read a profiler trace (docs/tracing.md).

    import roofline.trace
    result = roofline.trace(model, token_ids)   # on the meta device: no weights in memory
    # (the package is callable; ``from roofline.trace import trace`` is the same function)
    result.total_flops, result.total_bytes, result.ops, result.unsupported
    result.predict("h100-sxm")                  # a WorkloadPrediction, like any kernel list

torch is imported only when a function here is called, so ``import roofline.trace`` works without
it (the per-op rules in rules/ and the result types need no torch).
"""

from __future__ import annotations

import sys
import types

from roofline.trace.result import OpGroup, TracedOp, TraceResult
from roofline.trace.rules import RULES, Call, Cost, TensorSpec
from roofline.extras import TORCH_EXTRA, require_torch  # re-exported: the documented home was here

def trace(module, *example_inputs, dtype=None, fused: bool = True, **example_kwargs) -> TraceResult:
    """Run ``module`` on the meta device and cost every aten op (roofline.trace.record.trace)."""
    require_torch("roofline.trace")
    from roofline.trace.record import trace as _trace

    return _trace(module, *example_inputs, dtype=dtype, fused=fused, **example_kwargs)


def profile_report(path, machine, **kwargs):
    """Read a torch.profiler Chrome trace and put each op against its bound (roofline.trace.profiler)."""
    from roofline.trace.profiler import profile_report as _report

    return _report(path, machine, **kwargs)


class _CallablePackage(types.ModuleType):
    """``roofline.trace(model, *inputs)`` calls trace() while roofline.trace stays a package
    (roofline.trace.models, roofline.trace.profiler)."""

    def __call__(self, module, *example_inputs, **kwargs) -> TraceResult:
        return trace(module, *example_inputs, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage

__all__ = ["trace", "profile_report", "TraceResult", "TracedOp", "OpGroup", "RULES", "Call", "Cost", "TensorSpec",
           "require_torch", "TORCH_EXTRA"]
