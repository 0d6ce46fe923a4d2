"""Machines: peak FLOP/s per dtype, memory bandwidth, caches and links; the presets in data/.

A Machine's public numbers keep the seed's names and units: ``peak_flops`` is dense FLOP/s at the
machine's default dtype (bf16 for most accelerators), ``bandwidth`` is main-memory (HBM/DRAM)
bytes/s. Everything else uses SI units with the unit in the name.

Presets live in ``data/machines.toml``; every number there is ``{value, source, note}`` and is
validated on load. A user machine file has the same format (see README).
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from roofline.errors import RooflineError, check_number, unknown_name
from roofline.sourced import sourced_value
from roofline.units import DTYPE_BYTES

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


# First words that name a vendor or a product line: "the NVIDIA H100", "the Gaudi 3", "the TPU v5e".
BRAND_WORDS = frozenset(w.lower() for w in (
    "NVIDIA", "AMD", "Intel", "Google", "Apple", "Qualcomm", "Huawei", "Tesla", "GeForce", "Quadro", "Radeon",
    "Instinct", "Gaudi", "TPU", "Xeon", "EPYC", "Ryzen", "Core", "Ascend", "Trainium", "Inferentia", "Cerebras", "Groq"))


def the_name(name: str, vendor: str = "") -> str:
    """A machine's name as a sentence names it: 'the H100 SXM', 'the TPU v5e', 'the NVIDIA H200
    (measured)', but a name of the user's own that is not a product's as it is: 'My accelerator'.
    A product name starts with a word that holds a digit (H100, MI300X, v5e), an acronym (RTX, TPU),
    a vendor or product-line word (BRAND_WORDS), or the machine's own ``vendor``."""
    words = str(name).split()
    first = words[0].strip("(),") if words else ""
    product = (any(c.isdigit() for c in first) or (len(first) >= 2 and first.isupper())
               or first.lower() in BRAND_WORDS or (bool(vendor) and first.lower() == vendor.lower()))
    return f"the {name}" if product else str(name)


# Sub-byte formats that a machine without their own tensor-core peak stores but does not compute
# in: weight-only quantisation (W4A16) dequantises to bf16 and runs at the bf16 peak.
STORAGE_ONLY = {"int4": "bf16", "fp4": "bf16"}


@dataclass(frozen=True)
class MemoryLevel:
    """One level of the memory hierarchy: capacity in bytes and bandwidth in bytes/s."""

    name: str
    size_bytes: float
    bytes_per_s: float


@dataclass(frozen=True)
class Machine:
    """An accelerator for the roofline model.

    ``Machine("name", peak_flops, bandwidth)`` is the seed's form: peak dense FLOP/s and main-memory
    bytes/s. Presets add per-dtype peaks, memory capacity, on-chip caches, SM count, links (bytes/s
    per direction) and a default launch overhead in seconds.
    """

    name: str
    peak_flops: float
    bandwidth: float
    key: str = ""
    vendor: str = ""
    default_dtype: str = "bf16"
    peaks: tuple[tuple[str, float], ...] = ()
    memory_bytes: float | None = None
    usable_memory_bytes: float | None = None  # what the driver reports (nvidia-smi, torch): 81,559 MiB on an "80 GB" H100
    l2_bytes: float | None = None
    sm_count: int | None = None
    nvlink_gpus: int | None = None  # GPUs one NVLink domain joins when smaller than a node (a bridged PCIe pair: 2)
    scale_up_gpus: int | None = None  # the most GPUs its scale-up link (NVLink, xGMI) joins: an HGX board's 8, an NVL72's 72
    links: tuple[tuple[str, float], ...] = ()
    peer_links: tuple[tuple[str, float], ...] = ()  # a point-to-point mesh's one link to one peer (MI300X xGMI: 64 GB/s)
    launch_overhead_s: float = 0.0
    levels: tuple[MemoryLevel, ...] = ()
    sources: tuple[tuple[str, str], ...] = ()

    def __post_init__(self):
        check_number(f"{self.name or 'machine'} peak_flops", self.peak_flops)
        check_number(f"{self.name or 'machine'} bandwidth", self.bandwidth)
        check_number(f"{self.name or 'machine'} launch_overhead_s", self.launch_overhead_s, strictly=False)

    @property
    def capacity_bytes(self) -> float | None:
        """The memory a deployment can fill: what the driver reports where it is known (an engine sizes
        its KV cache from it: vLLM's gpu_memory_utilization is a share of it), else the datasheet's
        figure. An "80 GB" H100 SXM reports 81,559 MiB = 85.5e9 B."""
        return self.usable_memory_bytes or self.memory_bytes

    @property
    def capacity_text(self) -> str:
        """The capacity in words, saying which figure it is: "85.5 GB (as the driver reports; 80 GB on the datasheet)"."""
        from roofline.units import format_si

        if not self.capacity_bytes:
            return "no memory capacity given"
        if self.usable_memory_bytes and self.memory_bytes and self.usable_memory_bytes != self.memory_bytes:
            return (f"{format_si(self.usable_memory_bytes, 'B')} (as the driver reports; "
                    f"{format_si(self.memory_bytes, 'B')} on the datasheet)")
        if self.usable_memory_bytes:
            return f"{format_si(self.capacity_bytes, 'B')} (as the driver reports)"
        return f"{format_si(self.capacity_bytes, 'B')} (the datasheet's; no driver figure on file)"

    @property
    def capacity_notes(self) -> tuple[str, ...]:
        """A note for plans saying which capacity they used: the driver's figure, or the datasheet's
        where none is on file (an HBM card reports a few per cent more than its label: an "80 GB"
        H100 SXM 85.5 GB, so a plan against the label is that much short)."""
        if not self.capacity_bytes:
            return ()
        if self.usable_memory_bytes:
            return (f"memory: {self.capacity_text}",)
        return (f"memory: {self.capacity_text}: a card can report a few per cent more than its label (an \"80 GB\" "
                "H100 SXM reports 85.5 GB), so fits and caches here may be that much short",)

    @property
    def the_name(self) -> str:
        """The name as a sentence names it: 'the H100 SXM', but 'My accelerator' (see the_name)."""
        return the_name(self.name, self.vendor)

    # -- the seed's roofline -------------------------------------------------------------------
    @property
    def ridge_point(self) -> float:
        """FLOP per byte where the roofs meet, at the default dtype: peak_flops / bandwidth."""
        return self.peak_flops / self.bandwidth

    def attainable(self, intensity, dtype: str | None = None):
        """min(peak, I x bandwidth) in FLOP/s; ``intensity`` may be a numpy array."""
        out = np.minimum(self.peak(dtype), np.asarray(intensity, dtype=float) * self.bandwidth)
        return float(out) if np.ndim(out) == 0 else out

    # -- per dtype -------------------------------------------------------------------------------
    @functools.cached_property
    def dtypes(self) -> tuple[str, ...]:
        """The dtypes with a peak of their own (kept once asked: the planner checks its precision per pass)."""
        return tuple(d for d, _ in self.peaks) or (self.default_dtype,)

    def peak(self, dtype: str | None = None) -> float:
        """Dense peak FLOP/s for ``dtype`` (default: the machine's default dtype)."""
        if dtype is None or dtype == self.default_dtype or not self.peaks:
            return self.peak_flops
        for d, flops in self.peaks:
            if d == dtype:
                return flops
        if dtype not in DTYPE_BYTES:
            raise unknown_name("dtype", dtype, DTYPE_BYTES)
        if dtype in STORAGE_ONLY and STORAGE_ONLY[dtype] in self.dtypes:
            return self.peak(STORAGE_ONLY[dtype])
        raise RooflineError(f"{self.name} has no {dtype} peak; it has {', '.join(self.dtypes)}", field="dtype")

    def ridge(self, dtype: str | None = None) -> float:
        """Ridge point in FLOP/byte for ``dtype``."""
        return self.peak(dtype) / self.bandwidth

    def link(self, name: str) -> float:
        """Bytes/s per direction of the named link (nvlink, pcie, infiniband, ici, ...)."""
        for n, bw in self.links:
            if n == name:
                return bw
        raise RooflineError(
            f"{self.name} has no {name!r} link; it has {', '.join(n for n, _ in self.links) or 'none'}",
            field="link",
        )

    def group_link(self, name: str, gpus) -> float:
        """Bytes/s per direction a collective among ``gpus`` GPUs gets from the named link: the link's
        figure, or on a point-to-point mesh (a ``peer_links`` entry: MI300X's xGMI, 7 links of 64 GB/s)
        at most gpus - 1 peer links, since a GPU reaches each other GPU over its own link only: 2 GPUs
        get 64 GB/s, 8 the whole 448 (measured all-reduce bus bandwidth 47.7 and 312.9 GB/s, MLE-NET)."""
        bw = self.link(name)
        peer = dict(self.peer_links).get(name)
        if peer is None:
            return bw
        return np.minimum(bw, (np.asarray(gpus, dtype=float) - 1.0) * peer) if np.ndim(gpus) else min(bw, (gpus - 1) * peer)

    # -- what-if machines (the roofline chapter's exercise 5) ---------------------------------------------------
    def scaled(self, compute: float = 1.0, bandwidth: float = 1.0, name: str | None = None) -> "Machine":
        """The same machine with every peak multiplied by ``compute`` and main-memory bandwidth by
        ``bandwidth``."""
        check_number("compute scale", compute)
        check_number("bandwidth scale", bandwidth)
        parts = [f"{compute:g}x compute" if compute != 1 else "", f"{bandwidth:g}x bandwidth" if bandwidth != 1 else ""]
        label = name or f"{self.name} ({', '.join(p for p in parts if p) or 'as is'})"
        return dataclasses.replace(
            self,
            name=label,
            key="",
            peak_flops=self.peak_flops * compute,
            bandwidth=self.bandwidth * bandwidth,
            peaks=tuple((d, f * compute) for d, f in self.peaks),
        )


# ---------------------------------------------------------------------------------------------
# Loading presets and user machine files
# ---------------------------------------------------------------------------------------------

_NUMBER_KEYS = {
    "memory_bytes",
    "usable_memory_bytes",
    "memory_bytes_per_s",
    "l2_bytes",
    "sm_count",
    "launch_overhead_s",
    "nvlink_gpus",
    "scale_up_gpus",
}
_TEXT_KEYS = {"name", "vendor", "default_dtype", "notes"}
_TABLE_KEYS = {"peak_flops_per_s", "links", "peer_links", "cache_levels"}


def machine_from_dict(key: str, spec: dict, sources: dict[str, str]) -> Machine:
    """Build a Machine from one ``[machines.KEY]`` table of a machine file."""
    where = f"machines.{key}"
    if not isinstance(spec, dict):
        raise RooflineError(f"{where}: expected a table, got {spec!r}", field="machine")
    unknown = set(spec) - _NUMBER_KEYS - _TEXT_KEYS - _TABLE_KEYS
    if unknown:
        raise RooflineError(f"{where}: unknown keys {sorted(unknown)}", field="machine")
    for needed in ("name", "peak_flops_per_s", "memory_bytes_per_s"):
        if needed not in spec:
            raise RooflineError(f"{where}: missing {needed!r}", field="machine")
    for k in _TEXT_KEYS - {"notes"}:  # printed in every table header: one printable line
        if k in spec and (not isinstance(spec[k], str) or not spec[k].isprintable() or not spec[k].strip()):
            raise RooflineError(f"{where}.{k}: must be one line of printable text, got {spec[k]!r}", field="machine")
    peaks_spec = spec["peak_flops_per_s"]
    if not isinstance(peaks_spec, dict) or not peaks_spec:
        raise RooflineError(f"{where}.peak_flops_per_s: expected a table of dtype = {{value, source}}", field="machine")
    peaks = []
    for dtype, entry in peaks_spec.items():
        if dtype not in DTYPE_BYTES:
            raise unknown_name("dtype", dtype, DTYPE_BYTES, field="machine")
        peaks.append((dtype, sourced_value(f"{where}.peak_flops_per_s.{dtype}", entry, sources)))
    default_dtype = spec.get("default_dtype", "bf16")
    peak_map = dict(peaks)
    if default_dtype not in peak_map:
        raise RooflineError(f"{where}: default_dtype {default_dtype!r} has no peak_flops_per_s entry", field="machine")
    nums = {k: sourced_value(f"{where}.{k}", spec[k], sources) for k in _NUMBER_KEYS if k in spec}
    if not isinstance(spec.get("links", {}), dict):
        raise RooflineError(f"{where}.links: expected a table of NAME = {{value, source}}, got {spec['links']!r}",
                            field="machine")
    if not isinstance(spec.get("cache_levels", []), list):
        raise RooflineError(f"{where}.cache_levels: expected an array of {{name, size_bytes, bytes_per_s}} tables, "
                            f"got {spec['cache_levels']!r}", field="machine")
    links = tuple((n, sourced_value(f"{where}.links.{n}", e, sources)) for n, e in spec.get("links", {}).items())
    if not isinstance(spec.get("peer_links", {}), dict):
        raise RooflineError(f"{where}.peer_links: expected a table of NAME = {{value, source}}, got "
                            f"{spec['peer_links']!r}", field="machine")
    peer_links = tuple((n, sourced_value(f"{where}.peer_links.{n}", e, sources)) for n, e in spec.get("peer_links", {}).items())
    unknown_peer = sorted(set(dict(peer_links)) - set(dict(links)))
    if unknown_peer:
        raise RooflineError(f"{where}.peer_links: {', '.join(unknown_peer)} is not one of its links "
                            f"({', '.join(dict(links)) or 'none'})", field="machine")
    levels = []
    for i, lvl in enumerate(spec.get("cache_levels", [])):
        if not isinstance(lvl, dict) or "name" not in lvl:
            raise RooflineError(f"{where}.cache_levels[{i}]: expected {{name, size_bytes, bytes_per_s}}", field="machine")
        levels.append(
            MemoryLevel(
                str(lvl["name"]),
                sourced_value(f"{where}.cache_levels[{i}].size_bytes", lvl.get("size_bytes"), sources),
                sourced_value(f"{where}.cache_levels[{i}].bytes_per_s", lvl.get("bytes_per_s"), sources),
            )
        )
    cited = [(f"peak {d}", spec["peak_flops_per_s"][d]["source"]) for d, _ in peaks]
    cited += [(k, spec[k]["source"]) for k in sorted(nums)]
    return Machine(
        name=str(spec["name"]),
        peak_flops=peak_map[default_dtype],
        bandwidth=sourced_value(f"{where}.memory_bytes_per_s", spec["memory_bytes_per_s"], sources),
        key=key,
        vendor=str(spec.get("vendor", "")),
        default_dtype=default_dtype,
        peaks=tuple(peaks),
        memory_bytes=nums.get("memory_bytes"),
        usable_memory_bytes=nums.get("usable_memory_bytes"),
        l2_bytes=nums.get("l2_bytes"),
        sm_count=int(nums["sm_count"]) if "sm_count" in nums else None,
        nvlink_gpus=int(nums["nvlink_gpus"]) if "nvlink_gpus" in nums else None,
        scale_up_gpus=int(nums["scale_up_gpus"]) if "scale_up_gpus" in nums else None,
        links=links,
        peer_links=peer_links,
        launch_overhead_s=nums.get("launch_overhead_s", 0.0),
        levels=tuple(levels),
        sources=tuple(cited),
    )


def parse_machine_file(text: str, origin: str) -> dict[str, Machine]:
    """Parse a machine file's TOML text into {key: Machine}."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RooflineError(f"{origin}: not valid TOML ({exc})", field="machine") from None
    from roofline.files import check_file_numbers

    check_file_numbers(doc, origin, "machine")
    machines = doc.get("machines")
    if not isinstance(machines, dict) or not machines:
        raise RooflineError(f"{origin}: no [machines.NAME] table found", field="machine")
    sources = doc.get("sources", {})
    if not isinstance(sources, dict):
        raise RooflineError(f"{origin}: [sources] must be a table of KEY = \"citation\"", field="machine")
    out = {}
    for key, spec in machines.items():
        try:
            out[key] = machine_from_dict(key, spec, sources)
        except RooflineError as exc:  # every error names the file it came from
            if origin in str(exc):
                raise
            raise RooflineError(f"{origin}: {exc}", field=exc.field or "machine") from None
    return out


@functools.lru_cache(maxsize=1)
def _presets() -> dict[str, Machine]:
    text = resources.files("roofline").joinpath("data/machines.toml").read_text(encoding="utf-8")
    return parse_machine_file(text, "data/machines.toml")


def list_machines() -> list[Machine]:
    """Every preset machine, in the data file's order."""
    return list(_presets().values())


def load_machine_file(path: str | Path) -> dict[str, Machine]:
    from roofline.files import read_text

    p = Path(path)
    text = read_text(path, "machine file", "machine", 16 * 2**20)
    try:
        return parse_machine_file(text, str(p))
    except (OverflowError, RecursionError, TypeError, AttributeError) as exc:  # numbers past float range, odd tables
        raise RooflineError(f"machine file {str(p)!r} could not be read ({type(exc).__name__}: {exc})",
                            field="machine") from None


def get_machine(name) -> Machine:
    """A preset by key ('h100-sxm'), a Machine as is, or the machine in a TOML file's path."""
    if isinstance(name, Machine):
        return name
    presets = _presets()
    key = str(name).strip().lower().replace("_", "-").replace(" ", "-")
    if not key:  # the one place a name is resolved: an empty one names nothing, never a default
        raise RooflineError(f"machine {str(name)!r}: an empty name; give a preset (see `roofline machines`) or a "
                            "machine TOML file", field="machine")
    if key in presets:
        return presets[key]
    if str(name).endswith(".toml") or Path(str(name)).is_file():
        found = load_machine_file(name)
        if len(found) != 1:
            raise RooflineError(
                f"machine file {name!r} holds {len(found)} machines ({', '.join(found)}); use FILE with one machine",
                field="machine",
            )
        return next(iter(found.values()))
    if str(name) and "\x00" not in str(name) and Path(str(name)).is_dir():
        raise RooflineError(f"machine {str(name)!r} is a directory: give a preset's key (roofline machines lists them) "
                            "or a machine TOML file (roofline calibrate writes one)", field="machine")
    raise unknown_name("machine", name, presets)


H100_SXM = get_machine("h100-sxm")
A100_80GB = get_machine("a100-80gb")
