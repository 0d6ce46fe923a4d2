"""SI constants, and the only place that parses or formats quantities.

Inside the library every quantity is a plain number in an SI base unit: FLOPs, bytes, seconds,
FLOP/s, bytes/s. Text like "3us", "3.35 TB/s", "80GB" or "50 GiB" is turned into numbers here,
and numbers are turned back into text here, for the CLI, the web page and plots.
"""

from __future__ import annotations

import math
import re

from roofline.errors import RooflineError

KILO, MEGA, GIGA, TERA, PETA = 1e3, 1e6, 1e9, 1e12, 1e15
KIB, MIB, GIB, TIB = 2.0**10, 2.0**20, 2.0**30, 2.0**40
US, MS, NS = 1e-6, 1e-3, 1e-9

# Bytes per element of each dtype the library knows (seed 000 section 2.3).
DTYPE_BYTES = {
    "fp64": 8.0,
    "fp32": 4.0,
    "tf32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "fp4": 0.5,
    "int4": 0.5,
}

_SI = {"": 1.0, "k": KILO, "K": KILO, "M": MEGA, "G": GIGA, "T": TERA, "P": PETA, "E": 1e18}
_BIN = {"Ki": KIB, "Mi": MIB, "Gi": GIB, "Ti": TIB}
_TIME = {"s": 1.0, "ms": MS, "us": US, "µs": US, "μs": US, "ns": NS}
_NUM = r"([-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)"  # ASCII digits only: '١٢' is not 12


def dtype_bytes(dtype: str) -> float:
    """Bytes per element of ``dtype`` ("bf16" -> 2.0)."""
    try:
        return DTYPE_BYTES[dtype]
    except KeyError:
        from roofline.errors import unknown_name

        raise unknown_name("dtype", dtype, DTYPE_BYTES) from None


def _bad(field: str, text: str, example: str) -> RooflineError:
    return RooflineError(f"{field}: cannot read {text!r} (expected a number like {example})", field=field)


def parse_time_s(text, field: str = "time", unit_required: bool = False) -> float:
    """'3us', '3 µs', '0.5ms', '2e-6', '2e-6s' -> seconds. A bare number is seconds, unless
    ``unit_required`` (a measured time: '12' is as likely 12 us as 12 s), when it is refused."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return float(text)
    m = re.fullmatch(_NUM + r"\s*(s|ms|us|µs|μs|ns)?", str(text).strip())
    if not m:
        raise _bad(field, text, "3us, 0.5ms or 2e-6s" if unit_required else "3us, 0.5ms or 2e-6")
    if unit_required and not m.group(2):
        raise RooflineError(f"{field} {str(text).strip()!r} has no unit: write {m.group(1)}s, {m.group(1)}ms or "
                            f"{m.group(1)}us", field=field)
    return float(m.group(1)) * _TIME[m.group(2) or "s"]


def parse_number(text, field: str = "value", unit: str = "") -> float:
    """A number with an optional SI prefix and optional unit suffix: '989T', '3.35e12', '80 GB',
    '3.35 TB/s', '64 GiB'. Binary prefixes (Ki, Mi, Gi, Ti) are powers of two."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return float(text)
    s = str(text).strip()
    if unit and s.endswith(unit):
        s = s[: -len(unit)].strip()
    m = re.fullmatch(_NUM + r"\s*(Ki|Mi|Gi|Ti|[kKMGTPE])?", s)
    if not m:
        raise _bad(field, text, f"989e12, 989T or 80G{unit}")
    scale = _BIN.get(m.group(2) or "", None) or _SI[m.group(2) or ""]
    return float(m.group(1)) * scale


def format_time(seconds: float) -> str:
    """Seconds -> '8,756 us', '1.23 ms', '20.6 days' style text."""
    s = float(seconds)
    if not math.isfinite(s):
        return str(s)
    a = abs(s)
    if a < 1e-3:
        return f"{s / US:,.1f} us" if a < 1e-5 else f"{s / US:,.0f} us"
    if a < 1.0:
        return f"{s / MS:,.2f} ms"
    if a < 3600:
        return f"{s:,.2f} s"
    if a < 86400 * 2:
        return f"{s / 3600:,.1f} h"
    return f"{s / 86400:,.1f} days"


def format_si(value: float, unit: str = "", digits: int = 3) -> str:
    """1.7e11 -> '170 G' + unit, with ``digits`` significant digits."""
    v = float(value)
    if v == 0 or not math.isfinite(v):
        return f"{v:g} {unit}".strip()
    for prefix, scale in (("E", 1e18), ("P", PETA), ("T", TERA), ("G", GIGA), ("M", MEGA), ("k", KILO)):
        if abs(v) >= scale:
            return f"{v / scale:.{digits}g} {prefix}{unit}"
    return f"{v:.{digits}g} {unit}".strip()


def format_bytes(n: float) -> str:
    """Bytes in binary units: 1073741824 -> '1.00 GiB'."""
    v = float(n)
    for prefix, scale in (("TiB", TIB), ("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if abs(v) >= scale:
            return f"{v / scale:.2f} {prefix}"
    return f"{v:.0f} B"


def format_intensity(flop_per_byte: float) -> str:
    """FLOP/byte: 0.25 -> '0.25', 62.66 -> '62.7', 1638.4 -> '1,638.4'."""
    v = float(flop_per_byte)
    return f"{v:.2g}" if abs(v) < 10 else f"{v:,.1f}"
