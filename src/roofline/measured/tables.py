"""Measured kernel tables: where they lie, what they hold, and reading them.

The tables are those of the ``aiconfigurator-core`` package (Apache-2.0, NVIDIA's AIConfigurator),
installed by the ``roofline[measured]`` extra: kernel latencies measured per GPU, op family, engine
and engine version, laid out as ``systems/data/<gpu>/<family>/<engine>/<version>/<table>.parquet``
beside a ``collection_meta.yaml``; a version folder holding a ``reuse.yaml`` instead borrows a
table from another version of the same engine. They are read here directly with pyarrow, never
through the package's own estimator (which is not imported), lazily and each table once per
process. Latencies in these tables are in milliseconds (the GEMM table's ``latency`` for m x k by
k x n; its rows are checked against the roofline in tests/test_measured.py); everything returned
from here is in seconds.
"""

from __future__ import annotations

import functools
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from roofline.errors import RooflineError, unknown_name

PACKAGE = "aiconfigurator_core"
INSTALL = "pip install 'roofline[measured]'"
MS = 1e-3

# The package's GPU folders and the machine presets they measured (its systems/<gpu>.yaml give
# each one's memory: a100_sxm 80 GiB, h200_sxm 141 GB, l40s 46,068 MiB, gb200 189,471 MiB, b300_sxm
# 275,040 MiB, gb300 284,208 MiB). GPUs measured that have no preset here (rtx_pro_6000_server, b60) are
# listed by `roofline machines --measured` under their folder names and cannot be chosen.
PRESET_OF_GPU = {"h100_sxm": "h100-sxm", "h200_sxm": "h200", "b200_sxm": "b200", "gb200": "gb200",
                 "b300_sxm": "b300", "gb300": "gb300",
                 "a100_sxm": "a100-80gb", "l40s": "l40s"}
ENGINES = ("trtllm", "vllm", "sglang")  # the serving engines; comm/ also holds nccl and oneccl

# Presets with no measured tables and the measured preset nearest in architecture, whose kernels' efficiencies
# (roofline / measured time, per shape) are transferred onto their own roofline (MeasuredKernels.measured_on),
# marked as transferred wherever they are shown: the same generation of memory and a ridge point within 20%
# (FLOP/B at the default dtype: MI300X 247 and MI325X 218 against the H200's 206; MI355X 315 against the GB200's
# and GB300's 312.5, the B200's 292 and the B300's 290, all HBM3e, the H200's 206 too far: the GB200, whose fp8 and
# fp4 peaks are 2x and 4x its bf16 as the MI355X's are, the GB300's fp4 6x; the H100 PCIe and NVL are the SXM's
# chip; the A100 40GB the 80GB's; the L4 and RTX 4090 the L40S's Ada generation). TPUs, Gaudi and older GPUs have
# no counterpart and are refused.
NEAREST_MEASURED = {"mi300x": "h200", "mi325x": "h200", "mi355x": "gb200", "h100-pcie": "h100-sxm",
                    "h100-nvl": "h100-sxm", "a100-40gb": "a100-80gb", "l4": "l40s", "rtx-4090": "l40s"}
NVIDIA_ONLY = ("trtllm",)  # engines that run on NVIDIA GPUs alone: never transferred to another vendor's


def data_root() -> Path:
    """The package's data folder, found without importing the package; a missing package is one
    line saying how to install it."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise RooflineError(f"measured kernel tables need the aiconfigurator-core package: {INSTALL}", field="kernels")
    root = Path(list(spec.submodule_search_locations)[0]) / "systems" / "data"
    if not root.is_dir():
        raise RooflineError(f"aiconfigurator-core is installed but holds no tables at {root}: reinstall it ({INSTALL})",
                            field="kernels")
    return root


def version_key(version: str) -> tuple:
    """Newest last: 1.3.0rc20 < 1.3.0rc23 < 1.3.0; 0.5.6.post2 > 0.5.6 (PEP 440, as packaging reads it)."""
    from packaging.version import InvalidVersion, Version

    try:
        return (1, Version(version))
    except InvalidVersion:
        return (0, tuple(int(x) if x.isdigit() else -1 for x in re.findall(r"\d+|[a-z]+", version)))


@dataclass(frozen=True)
class TableSet:
    """One version folder: a GPU's measured tables of one op family by one engine version.
    ``tables``: (table name, rows, the version whose file holds it: this one, or the one a
    reuse.yaml borrows from)."""

    gpu: str
    family: str
    engine: str
    version: str
    tables: tuple[tuple[str, int, str], ...]

    @property
    def machine(self) -> str | None:
        return PRESET_OF_GPU.get(self.gpu)

    @property
    def rows(self) -> int:
        return sum(n for _, n, _ in self.tables)


def _reused(folder: Path) -> dict[str, str]:
    """{table: from_version} of a folder's reuse.yaml ({} without one)."""
    path = folder / "reuse.yaml"
    if not path.is_file():
        return {}
    import yaml  # the extra's own dependency (aiconfigurator-core requires pyyaml)

    doc = yaml.safe_load(path.read_text()) or {}
    return {str(r["table"]): str(r["from_version"]) for r in doc.get("reuse", []) if "table" in r and "from_version" in r}


@functools.cache
def inventory() -> tuple[TableSet, ...]:
    """Every version folder with a table, its rows read from the parquet footers (no data read)."""
    import pyarrow.parquet as pq

    out = []
    root = data_root()
    for folder in sorted(p for p in root.glob("*/*/*/*") if p.is_dir()):
        gpu, family, engine, version = folder.relative_to(root).parts
        tables = [(f.stem, pq.read_metadata(f).num_rows, version) for f in sorted(folder.glob("*.parquet"))]
        for table, donor in _reused(folder).items():
            src = folder.parent / donor / f"{table}.parquet"
            if src.is_file() and table not in {t for t, _, _ in tables}:
                tables.append((table, pq.read_metadata(src).num_rows, donor))
        if tables:
            out.append(TableSet(gpu, family, engine, version, tuple(tables)))
    return tuple(out)


def has_tables(machine_key: str) -> bool:
    """Whether the tables measured this preset's GPU."""
    gpus = {ts.gpu for ts in inventory()}
    return any(PRESET_OF_GPU.get(g) == machine_key for g in gpus)


def transfer_source(machine, kernels: str) -> str | None:
    """The measured preset whose tables ``kernels`` transfer onto ``machine`` (NEAREST_MEASURED), or
    None where the machine has tables or no counterpart; an NVIDIA-only engine on another vendor's GPU
    is refused by name."""
    if has_tables(machine.key):
        return None
    near = NEAREST_MEASURED.get(machine.key)
    if near is None:
        return None
    engine, _ = parse_kernels(kernels)
    if engine in NVIDIA_ONLY and machine.vendor and machine.vendor.upper() != "NVIDIA":
        raise RooflineError(f"{engine} runs on NVIDIA GPUs only: no {engine} kernels for the {machine.vendor} "
                            f"{machine.name} (vllm and sglang run on it; their tables transfer from {near})",
                            field="machine", also=("kernels",))
    return near


def _gpu_of(machine_key: str) -> str:
    gpus = {ts.gpu for ts in inventory()}
    for gpu, preset in PRESET_OF_GPU.items():
        if preset == machine_key and gpu in gpus:
            return gpu
    measured = sorted(PRESET_OF_GPU[g] for g in gpus if g in PRESET_OF_GPU)
    raise RooflineError(f"no measured kernel tables for {machine_key}: they exist for {', '.join(measured)}",
                        field="machine", also=("kernels",))


@functools.cache
def current_versions() -> dict[tuple[str, str], str]:
    """{(gpu, engine): version} the package itself queries by default (systems/query_versions.yaml:
    its defaults, then each GPU's overrides; ('*', engine) for the defaults). A newer folder may
    hold a partial collection (h100_sxm moe trtllm 1.3.0rc23: two Nemotron models' shapes only)."""
    import yaml

    doc = yaml.safe_load((data_root().parent / "query_versions.yaml").read_text()) or {}
    out = {("*", e): str(v["current"]) for e, v in (doc.get("defaults") or {}).items() if v and v.get("current")}
    for gpu, engines in (doc.get("overrides") or {}).items():
        out.update({(gpu, e): str(v["current"]) for e, v in (engines or {}).items() if v and v.get("current")})
    return out


def resolve(machine_key: str, kernels: str, family: str) -> TableSet:
    """The table set of ``family`` for a machine preset and ``ENGINE[@VERSION]``: by default the
    version the package itself queries (current_versions) where it holds the family, else the
    newest that does; refused by name with what exists."""
    from roofline.measured.profile import is_profile

    if is_profile(kernels):
        raise RooflineError(f"--kernels {kernels!r}: roofline calibrate measures no {family} kernels (its profile "
                            "holds GEMMs and fused attention)", field="kernels")
    engine, version = parse_kernels(kernels)
    gpu = _gpu_of(machine_key)
    sets = [ts for ts in inventory() if ts.gpu == gpu and ts.family == family and ts.engine == engine]
    if not sets:
        have = sorted({ts.engine for ts in inventory() if ts.gpu == gpu and ts.family == family})
        raise RooflineError(f"no measured {family} tables of {engine} on {machine_key}"
                            + (f": {', '.join(have)} have them" if have else ""), field="kernels")
    if version:
        chosen = [ts for ts in sets if ts.version == version]
        if not chosen:
            raise RooflineError(f"no {engine} {version} {family} tables on {machine_key}; measured versions: "
                                f"{', '.join(sorted((ts.version for ts in sets), key=version_key))}", field="kernels")
        return chosen[0]
    current = current_versions()
    default = current.get((gpu, engine), current.get(("*", engine)))
    return next((ts for ts in sets if ts.version == default), None) or max(sets, key=lambda ts: version_key(ts.version))


@functools.cache
def read_table(gpu: str, family: str, engine: str, version: str, table: str, columns: tuple[str, ...],
               defaults: tuple[tuple[str, object], ...] = ()):
    """Columns of one table as numpy arrays, read once per process. A column some collections lack
    takes its value from ``defaults`` (the A100's vLLM and SGLang attention tables have no
    window_size: they measured no window); any other missing column is refused by name."""
    import pyarrow.parquet as pq

    ts = next((t for t in inventory() if (t.gpu, t.family, t.engine, t.version) == (gpu, family, engine, version)), None)
    donor = next((v for name, _, v in (ts.tables if ts else ()) if name == table), None)
    if donor is None:
        raise RooflineError(f"no table {table} in {gpu}/{family}/{engine}/{version}", field="kernels")
    path = data_root() / gpu / family / engine / donor / f"{table}.parquet"
    have = set(pq.read_schema(path).names)
    fill = dict(defaults)
    missing = [c for c in columns if c not in have and c not in fill]
    if missing:
        raise RooflineError(f"{gpu}/{family}/{engine}/{donor}/{table} has no {', '.join(missing)} column: a table layout "
                            "this reader does not know", field="kernels")
    data = pq.read_table(path, columns=[c for c in columns if c in have])
    rows = data.num_rows
    return {c: _column(data.column(c)) if c in have else np.full(rows, fill[c]) for c in columns}


def _column(column) -> np.ndarray:
    """A parquet column as numpy: a text column without nulls as fixed-width str (from its distinct values: a table's
    few dtypes and kernel names over 60,000 rows, not 60,000 Python strings), any other as pyarrow gives it."""
    import pyarrow as pa

    if (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)) and not column.null_count:
        codes = column.combine_chunks().dictionary_encode()
        return np.asarray(codes.dictionary.to_pylist(), dtype=str)[codes.indices.to_numpy(zero_copy_only=False)]
    return column.to_numpy()


def parse_kernels(kernels: str) -> tuple[str, str]:
    """(engine, version) of ``ENGINE[@VERSION]``: the engine case-insensitive (TRTLLM is trtllm), the
    version as the tables name it ("" for the default); a missing engine or version is refused."""
    text = str(kernels).strip()
    engine, at, version = text.partition("@")
    engine, version = engine.strip().lower(), version.strip()
    if not engine:
        raise RooflineError(f"--kernels {kernels!r} names no engine: give trtllm, vllm or sglang, optionally "
                            "@VERSION (roofline machines --measured lists them)", field="kernels")
    if at and not version:
        raise RooflineError(f"--kernels {kernels!r}: a version after @, or no @ for the default one", field="kernels")
    if engine not in ENGINES:
        raise unknown_name("kernel engine", engine, ENGINES, field="kernels")
    return engine, version


def group_rows(*columns) -> dict[tuple, np.ndarray]:
    """The rows of a table by the values of ``columns`` (a site): {(v1, v2, ...): row indices}, with each value as
    a plain str or int (a number truncated to int), the sites in the order their first rows come and each site's
    rows in order: grouped in numpy (a table of 60,000 rows in milliseconds, not a Python pass over every row)."""
    codes = [_codes(c) for c in columns]
    if not codes or not len(codes[0][1]):
        return {}
    combined = np.zeros(len(codes[0][1]), dtype=np.int64)
    for values, inv in codes:  # one id a row for its values in every column, kept small (renumbered each column)
        combined = np.unique(combined * len(values) + inv, return_inverse=True)[1].ravel()
    _, first, inv = np.unique(combined, return_index=True, return_inverse=True)
    inv = inv.ravel()
    rows = np.split(np.argsort(inv, kind="stable"), np.cumsum(np.bincount(inv))[:-1])
    return {tuple(values[int(c[first[g]])] for values, c in codes): rows[g] for g in np.argsort(first, kind="stable")}


def _codes(column) -> tuple[list, np.ndarray]:
    """A column's distinct values (plain str or int, as group_rows keys them) and each row's index into them."""
    a = np.asarray(column)
    if a.dtype.kind in "iubf":
        u, inv = np.unique(a.astype(np.int64), return_inverse=True)
        return u.tolist(), inv.ravel()
    if a.dtype.kind == "U":
        u, inv = np.unique(a, return_inverse=True)
        return u.tolist(), inv.ravel()
    seen: dict = {}
    inv = np.fromiter((seen.setdefault(str(v) if isinstance(v, str) else int(v), len(seen)) for v in a.tolist()),
                      dtype=np.int64, count=len(a))
    return list(seen), inv
