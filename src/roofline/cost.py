"""The cost model: the roofline bound and the working estimate of the 'Predicting a Kernel's Time' plate,

    t = max(F / (e_c peak), B / (e_m BW)) + t_launch,

per op, and summed over a workload with the plate's readouts (FLOPs-only and bytes-only
estimates, memory-bound share, launch share). The pure functions take numpy arrays, so a sweep
over sizes is one call.
"""

from __future__ import annotations

from roofline.tables import Tabular, dump_json, jsonable  # noqa: E402

import dataclasses
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from roofline.errors import check_number
from roofline.kernels import ALL_REDUCE, Kernel, collective_group
from roofline.machines import Machine, get_machine
# MIN_EFFICIENCY (below 0.1% of peak is a typo, not a kernel) and the seed's figures: declared with their flags and queries
from roofline.parameters import MIN_EFFICIENCY, SEED_COST_MODEL  # noqa: F401 (MIN_EFFICIENCY: importable from here too)
from roofline.units import US


def time_lower_bound(kernel: Kernel, machine: Machine) -> float:
    """The roofline ("speed of light") time in seconds: max(F / peak, B / BW), with the peak of
    the kernel's dtype. BW is main memory, or the named link's for a collective. No efficiency, no
    launch overhead: op_times with its defaults."""
    machine = get_machine(machine)
    return _scalar(op_times(kernel.flops, kernel.bytes, machine.peak(kernel.dtype), bytes_per_s(kernel, machine))[2])


def hierarchical_lower_bound(kernel: Kernel, machine: Machine) -> tuple[float, str]:
    """(seconds, level): the roofline with the bandwidth of the smallest memory level that holds
    the kernel's working set (its bytes), main memory if none does. A level is at least as fast as
    every larger one (data that fits a small cache also fits the larger ones), so the bandwidth is
    the best over the holding level, the levels above it and main memory; the level named is the
    one whose bandwidth was used. Never slower than time_lower_bound."""
    machine = get_machine(machine)
    bw, level = machine.bandwidth, "main memory"
    for lvl in sorted(machine.levels, key=lambda l: l.size_bytes):
        if kernel.bytes <= lvl.size_bytes and lvl.bytes_per_s > bw:
            bw, level = lvl.bytes_per_s, lvl.name
    return float(op_times(kernel.flops, kernel.bytes, machine.peak(kernel.dtype), bw)[2]), level


def roofline_bound(kernel: Kernel, machine: Machine) -> str:
    """Which limit binds ``kernel`` on the pure roofline (binds, no efficiencies): "memory" left
    of the ridge, "compute" right of it, "link" for a collective whose link time is the larger."""
    machine = get_machine(machine)
    compute_s, memory_s, _ = op_times(kernel.flops, kernel.bytes, machine.peak(kernel.dtype), bytes_per_s(kernel, machine))
    return binds(compute_s, memory_s, getattr(kernel, "link", None))


def link_latency_s(kernel: Kernel, link_bytes_per_s: float | None = None, memory_efficiency: float | None = None,
                   launch_s: float = 0.0):
    """A collective's fixed cost per run over its link (links.collective_latency_s); 0 otherwise.
    An all-reduce (kernel.shape ("all-reduce", GPUs, bytes)) over a link whose engine all-reduce
    was measured by GPU count and size (links.all_reduce_s; given the link's bandwidth, e_m and the
    cost model's launch, which the measurement includes and the model adds apart) pays what the
    measured time adds to its bytes over e_m x the bandwidth instead."""
    link = getattr(kernel, "link", None)
    if link is None:
        return 0.0
    from roofline.links import all_reduce_s, collective_latency_s

    shape = getattr(kernel, "shape", ())
    if link_bytes_per_s is not None and len(shape) == 3 and shape[0] == ALL_REDUCE:
        measured = all_reduce_s(link, shape[1], shape[2], link_bytes_per_s, memory_efficiency, launch_s)
        if measured is not None:
            extra = np.maximum(measured - np.asarray(kernel.bytes, dtype=float) / (memory_efficiency * link_bytes_per_s), 0.0)
            return float(extra) if np.ndim(extra) == 0 else extra
    return collective_latency_s(link)


def bytes_per_s(kernel: Kernel, machine: Machine) -> float:
    """The bandwidth a kernel's bytes move at: main memory, or ``machine.link(kernel.link)`` for a
    collective (bytes/s per direction); for one among a known group of GPUs (its shape) what the
    group gets of the link (Machine.group_link: a point-to-point mesh gives g GPUs g - 1 peer links)."""
    link = getattr(kernel, "link", None)
    if link is None:
        return machine.bandwidth
    gpus = collective_group(kernel)
    return machine.link(link) if gpus is None else machine.group_link(link, gpus)


def op_times(flops, bytes_, peak_flops_per_s, bytes_per_s, compute_efficiency=1.0, memory_efficiency=1.0, launch_s=0.0, overlap=1.0,
             latency_s=0.0):
    """(compute_s, memory_s, time_s) for arrays of ops.

    compute_s = F / (e_c peak); memory_s = B / (e_m BW) + latency (a collective's fixed cost per
    run over its link, links.collective_latency_s; 0 for memory);
    time_s = overlapped_s(c, m, overlap) + launch."""
    compute_s = np.asarray(flops, dtype=float) / (compute_efficiency * peak_flops_per_s)
    memory_s = np.asarray(bytes_, dtype=float) / (memory_efficiency * bytes_per_s) + latency_s
    return compute_s, memory_s, overlapped_s(compute_s, memory_s, overlap) + launch_s


def overlapped_s(compute_s, memory_s, overlap=1.0):
    """The body time of an op that computes for compute_s and moves bytes for memory_s:
    max(c, m) + (1 - overlap) min(c, m). Overlap 1 is the roofline's perfect overlap (the max),
    overlap 0 none (the sum). Plain numbers stay plain numbers (the planner's fast paths); arrays
    broadcast."""
    if isinstance(compute_s, (float, int)) and isinstance(memory_s, (float, int)):
        longer, shorter = (memory_s, compute_s) if memory_s > compute_s else (compute_s, memory_s)
        return longer + (1.0 - overlap) * shorter
    if overlap == 1.0:
        return np.maximum(compute_s, memory_s)
    return np.maximum(compute_s, memory_s) + (1.0 - overlap) * np.minimum(compute_s, memory_s)


def bytes_bind(compute_s, memory_s):
    """The one rule for which limit binds: moving the bytes takes longer than the arithmetic,
    memory_s > compute_s (a tie is compute's). True/False, or a boolean array."""
    return memory_s > compute_s


def binds(compute_s, memory_s, link=None):
    """"memory" (or "link" for a collective: its bytes cross a link, not main memory) when
    bytes_bind, else "compute"; an array of them for arrays."""
    moving = "memory" if link is None else "link"
    if np.ndim(memory_s) == 0 and np.ndim(compute_s) == 0:
        return moving if bytes_bind(compute_s, memory_s) else "compute"
    return np.where(bytes_bind(np.asarray(compute_s), np.asarray(memory_s)), moving, "compute")




@dataclass(frozen=True)
class CostModel:
    """Achievable fractions of peak (``compute_efficiency`` e_c, ``memory_efficiency`` e_m; e_m also
    scales a collective's link bandwidth), a fixed
    ``launch_overhead_s`` per kernel, and ``overlap`` of compute and memory time (1 = perfect, the
    seed's max; 0 = none, their sum). With ``cuda_graph`` a whole workload pays one launch,
    shared among its ops. CostModel() is the pure roofline."""

    compute_efficiency: float = 1.0
    memory_efficiency: float = 1.0
    launch_overhead_s: float = 0.0
    overlap: float = 1.0
    cuda_graph: bool = False

    def __post_init__(self):
        e_c, e_m, t, o = self.compute_efficiency, self.memory_efficiency, self.launch_overhead_s, self.overlap
        if (type(e_c) is float and type(e_m) is float and type(t) is float and type(o) in (float, int)
                and MIN_EFFICIENCY <= e_c <= 1.0 and MIN_EFFICIENCY <= e_m <= 1.0 and 0.0 <= t <= 1.0 and 0.0 <= o <= 1.0):
            return  # plain numbers in range (NaN fails the comparisons)
        # below 0.1% of peak is a typo (a percentage given as a fraction twice), not a kernel
        check_number("compute_efficiency", self.compute_efficiency, minimum=MIN_EFFICIENCY, strictly=False, maximum=1.0)
        check_number("memory_efficiency", self.memory_efficiency, minimum=MIN_EFFICIENCY, strictly=False, maximum=1.0)
        check_number("launch_overhead_s", self.launch_overhead_s, strictly=False, maximum=1.0)
        check_number("overlap", self.overlap, strictly=False, maximum=1.0)

    def op_seconds(self, kernel: Kernel, machine: Machine, launch_s: float):
        """(compute_s, memory_s, time_s) of one run of ``kernel`` with ``launch_s`` of launch: the
        interface every cost model implements (calibrated.CalibratedModel too), which the planner's
        sums call per op."""
        bw = bytes_per_s(kernel, machine)
        return op_times(kernel.flops, kernel.bytes, machine.peak(kernel.dtype), bw, self.compute_efficiency,
                        self.memory_efficiency, launch_s, self.overlap,
                        link_latency_s(kernel, bw, self.memory_efficiency, self.launch_overhead_s))

    def priced_by(self) -> str:
        """What prices ops beyond this model's e_c, e_m and launch, for a result's notes: nothing here
        (measured.model.MeasuredKernels names its tables)."""
        return ""

    def describe(self, graph_steps: str = "") -> str:
        """One line for a table header. ``graph_steps``: which steps replay the CUDA graph, when not
        every pass does (a serving step with a prompt chunk launches each kernel)."""
        graph = (f" once per {graph_steps} (CUDA graph), per kernel in the others" if graph_steps
                 else " once per pass (CUDA graph)")
        launch = f"launch {self.launch_overhead_s / US:g} us" + (graph if self.cuda_graph else " per kernel")
        return f"e_c {self.compute_efficiency:.2f}, e_m {self.memory_efficiency:.2f}, {launch}, overlap {self.overlap:g}"

    def predict_op(self, kernel: Kernel, machine: Machine, launch_s: float | None = None) -> "OpPrediction":
        bw = bytes_per_s(kernel, machine)
        compute_s, memory_s, time_s = op_times(
            kernel.flops,
            kernel.bytes,
            machine.peak(kernel.dtype),
            bw,
            self.compute_efficiency,
            self.memory_efficiency,
            self.launch_overhead_s if launch_s is None else launch_s,
            self.overlap,
            link_latency_s(kernel, bw, self.memory_efficiency, self.launch_overhead_s),
        )
        launch = self.launch_overhead_s if launch_s is None else launch_s
        return OpPrediction(
            name=kernel.name,
            category=kernel.category,
            dtype=kernel.dtype,
            flops=kernel.flops,
            bytes=kernel.bytes,
            intensity=kernel.intensity,
            compute_s=_scalar(compute_s),
            memory_s=_scalar(memory_s),
            launch_s=launch,
            time_s=_scalar(time_s),
            bound=binds(compute_s, memory_s, getattr(kernel, "link", None)),
        )

    def predict(self, kernels: Sequence[Kernel], machine) -> "WorkloadPrediction":
        """Predict every kernel on ``machine`` and summarise."""
        machine = get_machine(machine)
        kernels = list(kernels)
        per_op_launch = self.launch_overhead_s / max(len(kernels), 1) if self.cuda_graph else None
        ops = tuple(self.predict_op(k, machine, per_op_launch) for k in kernels)
        return WorkloadPrediction.from_ops(machine.name, self, ops)


def seed_cost_model(**changes) -> CostModel:
    """The workshop's cost model (the 'Predicting a Kernel's Time' plate): e_c = 0.70, e_m = 0.85,
    t_launch = 3 us, perfect overlap."""
    params = {**SEED_COST_MODEL, **changes}  # roofline.parameters: the flags' and queries' defaults too
    return CostModel(**params)


def predict(kernels: Iterable[Kernel], machine, model: CostModel | None = None) -> "WorkloadPrediction":
    """Predict a list of kernels on a machine (default: the pure roofline)."""
    return (model or CostModel()).predict(list(kernels), machine)


def speed_of_light(kernel: Kernel, machine, measured_s):
    """Fraction of the roofline reached by a measured time: time_lower_bound / measured. Above 1
    is impossible: a units, FLOP-convention or sparse-peak mistake."""
    check_number("measured_s", measured_s)
    return time_lower_bound(kernel, get_machine(machine)) / measured_s


def _scalar(x):
    return float(x) if np.ndim(x) == 0 else x


def _count(x):
    return int(x) if np.ndim(x) == 0 else x


# ---------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------

OP_FIELDS = ("name", "flops", "bytes", "intensity", "compute_s", "memory_s", "launch_s", "time_s", "bound")


@dataclass(frozen=True)
class OpPrediction:
    """One op's prediction: FLOPs, bytes, intensity (FLOP/byte), compute, memory, launch and total
    time in seconds, and which limit binds ("memory", "compute", or "link" for a collective, whose
    memory_s is the time its bytes take over the link)."""

    name: str
    category: str
    dtype: str
    flops: float
    bytes: float
    intensity: float
    compute_s: float
    memory_s: float
    launch_s: float
    time_s: float
    bound: str

    def to_dict(self) -> dict:
        return {k: jsonable(getattr(self, k)) for k in OP_FIELDS}

    def times(self, n) -> "OpPrediction":
        """The op run ``n`` times (its layers): "name xn", every sum multiplied by n."""
        return dataclasses.replace(self, name=f"{self.name} x{n}", flops=self.flops * n, bytes=self.bytes * n,
                                   compute_s=self.compute_s * n, memory_s=self.memory_s * n, launch_s=self.launch_s * n,
                                   time_s=self.time_s * n)


SUMMARY_FIELDS = (
    "total_s",
    "flops_only_s",
    "bytes_only_s",
    "launch_s",
    "memory_bound_ops",
    "memory_bound_share",
    "launch_share",
)


@dataclass(frozen=True)
class WorkloadPrediction(Tabular):
    """A workload's ops in order with the seed's readouts.

    flops_only_s = sum F / (e_c peak); bytes_only_s = sum B / (e_m BW); memory_bound_share is the
    share of the total time spent in memory-bound ops (their launches included); launch_share is
    the share spent in launch overhead."""

    machine: str
    model: CostModel
    ops: tuple[OpPrediction, ...]
    total_s: float = 0.0
    flops_only_s: float = 0.0
    bytes_only_s: float = 0.0
    launch_s: float = 0.0
    memory_bound_ops: int = 0
    memory_bound_share: float = 0.0
    launch_share: float = 0.0

    @classmethod
    def from_ops(cls, machine: str, model: CostModel, ops: tuple[OpPrediction, ...]) -> "WorkloadPrediction":
        total = sum(op.time_s for op in ops)
        mem = [np.asarray(op.bound) == "memory" for op in ops]
        mem_time = sum(np.where(m, op.time_s, 0.0) for m, op in zip(mem, ops))
        launch = sum(op.launch_s for op in ops)
        return cls(
            machine=machine,
            model=model,
            ops=ops,
            total_s=_scalar(total),
            flops_only_s=_scalar(sum(op.compute_s for op in ops)),
            bytes_only_s=_scalar(sum(op.memory_s for op in ops)),
            launch_s=_scalar(launch),
            memory_bound_ops=_count(sum(m.astype(int) for m in mem)) if ops else 0,
            memory_bound_share=_scalar(mem_time / total),
            launch_share=_scalar(launch / total),
        )

    def summary(self) -> dict:
        return {k: jsonable(getattr(self, k)) for k in SUMMARY_FIELDS}

    def to_dict(self) -> dict:
        return {
            "machine": self.machine,
            "compute_efficiency": self.model.compute_efficiency,
            "memory_efficiency": self.model.memory_efficiency,
            "launch_overhead_s": self.model.launch_overhead_s,
            "overlap": self.model.overlap,
            "cuda_graph": self.model.cuda_graph,
            **self.summary(),
            "ops": [op.to_dict() for op in self.ops],
        }

    def to_json(self, **extra) -> str:
        return dump_json({**extra, **self.to_dict()})

    def to_table(self) -> str:
        """The per-op table and the seed's readouts, as text (SI prefixes, microseconds)."""
        from roofline.tables import workload_table

        return workload_table(self)

    CSV_FIELDS = OP_FIELDS  # to_csv (Tabular): rows() in these columns

    def rows(self) -> list[dict]:
        """A dict per op (OpPrediction.to_dict)."""
        return [op.to_dict() for op in self.ops]


