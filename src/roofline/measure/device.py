"""The local device: name, caches, memory, threads; torch dtypes, synchronisation, cache flush.

CPU cache sizes come from Linux sysfs (/sys/devices/system/cpu/cpu0/cache/index*), scaled to the
threads in use: a per-core cache counts once per core that runs a thread (two threads on two
cores have twice the L1 and L2 between them), a shared cache once. CUDA sizes come from
torch.cuda.get_device_properties. No level is invented where the OS does not report one.
"""

from __future__ import annotations

import math
import os
import platform
from dataclasses import dataclass
from pathlib import Path

import torch

from roofline.errors import RooflineError, check_choice

def quiet_profiler() -> None:
    """Keep torch.profiler's kineto from printing a 'USDT: ... profiler_start' / 'profiler_stop'
    pair to stderr for every recording (the calibration records dozens): its log level past USDT,
    5, unless the user set KINETO_LOG_LEVEL. Call before the first recording."""
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")


DEVICES = ("cpu", "cuda")
TORCH_DTYPES = {"fp64": torch.float64, "fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
SYSFS_CACHE = Path("/sys/devices/system/cpu/cpu0/cache")
FLUSH_LIMIT_BYTES = 2.0**30  # the cold-cache flush buffer, at most


@dataclass(frozen=True)
class DeviceInfo:
    device: str
    name: str
    vendor: str
    caches: tuple[tuple[str, float], ...]  # (name, bytes for the threads in use), smallest first
    memory_bytes: float | None
    sm_count: int | None
    threads: int
    torch_version: str


def available_cores() -> int:
    """CPU cores this process may run on (its affinity mask; the machine's count where there is none)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def check_threads(threads) -> int:
    """``threads`` for torch, at most the cores available: more only slow a measurement down, and
    thousands of threads under a process limit crash torch's thread pool."""
    from roofline.errors import check_number

    cores = available_cores()
    check_number("threads", threads, integer=True)
    if int(threads) > cores:
        raise RooflineError(f"threads {int(threads)} is more than the {cores} CPU core(s) available here", field="threads")
    return int(threads)


def torch_dtype(dtype: str) -> torch.dtype:
    try:
        return TORCH_DTYPES[dtype]
    except KeyError:
        raise RooflineError(f"dtype {dtype!r} cannot be timed here; use one of {', '.join(TORCH_DTYPES)}", field="dtype") from None


def require_device(device: str) -> str:
    check_choice("device", device, DEVICES)
    if device == "cuda" and not torch.cuda.is_available():
        raise RooflineError(f"--device cuda: no CUDA device visible to torch {torch.__version__}", field="device")
    return device


def default_dtype(device: str) -> str:
    """fp32 on a CPU (eager bf16 elementwise ops there are slow conversions), bf16 on a GPU."""
    return "fp32" if device == "cpu" else "bf16"


def synchronizer(device: str):
    return torch.cuda.synchronize if device == "cuda" else (lambda: None)


def _parse_size(text: str) -> float:
    text = text.strip()
    scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:].upper(), 1)
    return float(text.rstrip("KMGkmg")) * scale


def _cpu_count(cpu_list: str) -> int:
    n = 0
    for part in cpu_list.strip().split(","):
        if "-" in part:
            a, b = part.split("-")
            n += int(b) - int(a) + 1
        elif part:
            n += 1
    return max(n, 1)


def cpu_caches(threads: int, root: Path = SYSFS_CACHE) -> tuple[tuple[str, float], ...]:
    """Data and unified caches as (name, bytes available to ``threads`` threads), smallest first."""
    out = {}
    for index in sorted(root.glob("index*")):
        try:
            kind = (index / "type").read_text().strip()
            if kind == "Instruction":
                continue
            level = int((index / "level").read_text())
            size = _parse_size((index / "size").read_text())
            sharing = _cpu_count((index / "shared_cpu_list").read_text())
        except (OSError, ValueError):
            continue
        copies = max(1, min(math.ceil(threads / sharing), max(1, (os.cpu_count() or 1) // sharing)))
        out[f"l{level}" + ("d" if kind == "Data" else "")] = size * copies
    return tuple(sorted(out.items(), key=lambda kv: kv[1]))


def _meminfo(field: str) -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith(field + ":"):
                return float(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def available_memory_bytes(device: str) -> float:
    if device == "cuda":
        free, _ = torch.cuda.mem_get_info()
        return float(free)
    return _meminfo("MemAvailable") or 4 * 2.0**30


def _cpu_name() -> tuple[str, str]:
    name, vendor = platform.processor() or platform.machine(), ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") and name in ("", platform.machine(), platform.processor()):
                name = line.split(":", 1)[1].strip()
            elif line.startswith("vendor_id") and not vendor:
                vendor = line.split(":", 1)[1].strip()
    except OSError:
        pass
    return name or "CPU", vendor


def device_info(device: str) -> DeviceInfo:
    require_device(device)
    threads = torch.get_num_threads()
    if device == "cuda":
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        l2 = float(getattr(props, "L2_cache_size", 0) or 0)
        return DeviceInfo("cuda", props.name, "NVIDIA" if torch.version.cuda else "AMD", (("l2", l2),) if l2 else (),
                          float(props.total_memory), int(props.multi_processor_count), threads, torch.__version__)
    name, vendor = _cpu_name()
    return DeviceInfo("cpu", name, vendor, cpu_caches(threads), _meminfo("MemTotal"), None, threads, torch.__version__)


def flush_bytes(caches, limit_bytes: float = FLUSH_LIMIT_BYTES) -> float:
    """The size of make_flush's buffer: twice the last cache (64 MiB if none is known), at most
    ``limit_bytes``."""
    return float(min(2 * (caches[-1][1] if caches else 64 * 2**20), limit_bytes))


def make_flush(device: str, caches, limit_bytes: float = FLUSH_LIMIT_BYTES):
    """A function that evicts the caches: writes a buffer of flush_bytes(caches) (twice the last
    cache). For cold-cache timings; the cost model then reads main memory."""
    buf = torch.empty(int(flush_bytes(caches, limit_bytes)) // 4, dtype=torch.float32, device=device)

    def flush():
        buf.fill_(1.0)

    return flush
