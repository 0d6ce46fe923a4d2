"""The rule registry: the shapes a rule sees (TensorSpec, Call), what it returns (Cost), and the
decorator that registers one pure function per op and refuses duplicates (conventions in
roofline.trace.rules).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable


# Bytes per element of the dtypes a trace can carry (roofline dtype names; see units.DTYPE_BYTES).
ITEMSIZE = {
    "fp64": 8, "fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "fp4": 0.5,
    "int64": 8, "int32": 4, "int16": 2, "int8": 1, "uint8": 1, "bool": 1,
    "complex128": 16, "complex64": 8, "complex32": 4,
}


@dataclass(frozen=True)
class TensorSpec:
    """A tensor as a rule sees it: shape, dtype name, strides (elements; empty = contiguous)."""

    shape: tuple[int, ...]
    dtype: str = "fp32"
    strides: tuple[int, ...] = ()

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def itemsize(self) -> float:
        return ITEMSIZE.get(self.dtype, 4)

    @property
    def distinct(self) -> int:
        """Elements in memory: stride-0 (expanded) dimensions count once."""
        if not self.strides or len(self.strides) != len(self.shape):
            return self.numel
        return math.prod(n for n, s in zip(self.shape, self.strides) if s != 0)

    @property
    def read_bytes(self) -> float:
        return self.distinct * self.itemsize

    @property
    def write_bytes(self) -> float:
        return self.numel * self.itemsize


@dataclass(frozen=True)
class Call:
    """One op call: ``op`` is the schema name ("aten::mm"); ``args`` the positional arguments with
    tensors as TensorSpec (lists kept as lists); ``inputs`` every tensor argument, flattened;
    ``outputs`` every tensor returned."""

    op: str
    args: tuple = ()
    inputs: tuple[TensorSpec, ...] = ()
    outputs: tuple[TensorSpec, ...] = ()

    def tensor(self, i: int) -> TensorSpec:
        a = self.args[i]
        if not isinstance(a, TensorSpec):
            raise TypeError(f"{self.op}: argument {i} is not a tensor")
        return a


@dataclass(frozen=True)
class Cost:
    """FLOPs and bytes (to and from main memory) of one call."""

    flops: float = 0.0
    bytes: float = 0.0


@dataclass(frozen=True)
class Rule:
    fn: Callable[[Call], "Cost | None"]
    category: str

    @property
    def free(self) -> bool:
        return self.category == "view"


RULES: dict[str, Rule] = {}


def rule(*names: str, category: str):
    """Register ``fn`` as the rule for every op in ``names``; a name registered twice is an error."""

    def deco(fn):
        for name in names:
            if name in RULES:
                raise RuntimeError(f"op {name!r} has two rules")
            RULES[name] = Rule(fn, category)
        return fn

    return deco


def get_rule(op: str) -> Rule | None:
    return RULES.get(op)


# composite ops whose leading arguments are those of the op they call: a recorded call of one
# without that callee below it (torch.profiler's trace lost the event under load, seen for
# aten::layer_norm) is costed by its callee's rule rather than left out
LOST_CALLEE = {"aten::layer_norm": "aten::native_layer_norm", "aten::batch_norm": "aten::native_batch_norm"}


def lost_callee_rule(op: str, callees) -> Rule | None:
    """The callee's rule for a composite ``op`` (LOST_CALLEE) none of whose ``callees`` (names,
    the whole subtree) is that callee; None otherwise."""
    if op not in LOST_CALLEE or LOST_CALLEE[op] in callees:
        return None
    return RULES.get(LOST_CALLEE[op])


def io_bytes(call: Call) -> float:
    """Inputs read once, outputs written once."""
    return sum(t.read_bytes for t in call.inputs) + sum(t.write_bytes for t in call.outputs)


def written(call: Call) -> float:
    return sum(t.write_bytes for t in call.outputs)


def out_numel(call: Call) -> int:
    return call.outputs[0].numel if call.outputs else 0
