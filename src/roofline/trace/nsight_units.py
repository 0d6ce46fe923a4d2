"""The units and numbers of Nsight exports: ncu's own unit names (nsecond, usecond, Kbyte, ...) in
units' constants, and a CSV cell as a finite number (nsight_files reads the files)."""

from __future__ import annotations

import math
import re

from roofline.units import GIB, GIGA, KIB, KILO, MEGA, MIB, MS, NS, PETA, TERA, TIB, US


# ncu's own unit names (nsecond, usecond, Kbyte, ...), in units' constants
_TIME_UNITS = {"nsecond": NS, "usecond": US, "msecond": MS, "second": 1.0, "ns": NS, "us": US, "µs": US, "ms": MS, "s": 1.0}
_SI = {"": 1.0, "K": KILO, "k": KILO, "M": MEGA, "G": GIGA, "T": TERA, "P": PETA}
_BIN = {"Ki": KIB, "Mi": MIB, "Gi": GIB, "Ti": TIB}
_COUNT_BASES = ("", "inst", "instruction", "instructions", "op", "ops", "operation", "operations", "flop", "count")
_PLAIN = re.compile(r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")
_GROUPED = re.compile(r"[-+]?[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?")
MISSING_TEXT = ("", "n/a", "na", "-", "--")


def unit_scale(unit: str, kind: str) -> float | None:
    """The factor that turns a value in ``unit`` into seconds ("time"), bytes ("bytes") or a plain
    count ("count"); None when ``unit`` is not one of that kind."""
    u = unit.strip()
    if kind == "time":
        return _TIME_UNITS.get(u)
    if kind == "bytes":
        if u in ("byte", "bytes", "B"):
            return 1.0
        for prefix, scale in _BIN.items():
            if u == f"{prefix}B":
                return scale
        for base in ("byte", "B"):
            if u.endswith(base) and u[: -len(base)] in _SI:
                return _SI[u[: -len(base)]]
        return None
    for base in _COUNT_BASES:
        if base and u.endswith(base) and u[: -len(base)] in _SI:
            return _SI[u[: -len(base)]]
    return 1.0 if u in ("", "(count)") else None


def parse_value(text: str) -> float | None:
    """A finite number from a CSV cell ('1,234.5' has a thousands separator); None when the cell
    says nothing ('', 'n/a'); ValueError when it is not a number."""
    s = str(text).strip()
    if s.lower() in MISSING_TEXT:
        return None
    if _GROUPED.fullmatch(s):
        s = s.replace(",", "")
    elif not _PLAIN.fullmatch(s):
        raise ValueError(s)
    v = float(s)
    if not math.isfinite(v) or abs(v) > 1e300:
        raise ValueError(s)
    return v
