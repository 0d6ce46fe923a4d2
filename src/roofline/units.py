"""SI constants, and the only place that parses or formats quantities.

Inside the library every quantity is a plain number in an SI base unit: FLOPs, bytes, seconds,
FLOP/s, bytes/s. Text like "3us", "3.35 TB/s", "80GB" or "50 GiB" is turned into numbers here,
and numbers are turned back into text here, for the CLI, the web page and plots.
"""

from __future__ import annotations

import math
import re
import sys

from roofline.errors import RooflineError

KILO, MEGA, GIGA, TERA, PETA = 1e3, 1e6, 1e9, 1e12, 1e15
KIB, MIB, GIB, TIB = 2.0**10, 2.0**20, 2.0**30, 2.0**40
US, MS, NS = 1e-6, 1e-3, 1e-9

# Bytes per element of each dtype the library knows (the roofline chapter, section 2.3).
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
    if str(text).strip().lower().lstrip("+-") in ("nan", "inf", "infinity"):  # a number, but not a finite one
        return RooflineError(f"{field}: {str(text).strip()!r} is not a finite number", field=field)
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


def format_cell(value: float, decimals: int = 1) -> str:
    """A number for a table column whose header names the unit: ``decimals`` places below 100,
    whole with thousands separators from 100: 12.345 -> '12.3', 8756.1 -> '8,756'."""
    return f"{value:,.{decimals}f}" if value < 100 else f"{value:,.0f}"


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


def format_us_cell(seconds: float) -> str:
    """A time for a table column headed in us: format_cell of its microseconds (2.5e-5 -> '25.0')."""
    return format_cell(seconds / US)


def format_magnitude(x: float) -> str:
    """A count for a table column that names its unit: two decimals and k, M, G or T
    (1.7e11 -> '170.00G'); whole below a thousand (950 -> '950')."""
    for unit, scale in (("T", TERA), ("G", GIGA), ("M", MEGA), ("k", KILO)):
        if abs(x) >= scale:
            return f"{x / scale:,.2f}{unit}"
    return f"{x:,.0f}"


def format_latency(seconds) -> str:
    """A latency for the serving tables: ms below 10 s, else s; '-' where there is none (None, NaN).
    A target of microseconds keeps its figure: 1 us is '0.001 ms', not '0.0 ms'."""
    if seconds is None or not math.isfinite(float(seconds)):
        return "-"
    v = float(seconds)
    if 0 < v < 0.1 * MS:
        return f"{v / MS:,.2g} ms"
    return f"{v / MS:,.1f} ms" if v < 10 else f"{v:,.1f} s"


# -- text for the page: about three significant figures, auto-scaled --------------------------------
# The web workshop's readouts, labels, hover text and axes. The CLI's tables keep format_time and
# format_intensity above (their outputs are documented in README); both sides share format_si.

DASH = "—"  # a quantity that does not exist (no TPOT for one-token answers, a ratio over zero)
# (symbol, seconds per unit, below how many seconds it is used): the seed's whole microseconds up to
# 9,999 µs (the 'Predicting a Kernel's Time' plate writes 8,756 µs, 5,965 µs and 205 µs), then three figures in each larger unit.
TIME_UNITS = (("ns", NS, US), ("µs", US, 10 * MS), ("ms", MS, 1.0), ("s", 1.0, 100.0), ("min", 60.0, 6000.0),
              ("h", 3600.0, 48 * 3600.0), ("days", 86400.0, math.inf))


EXPONENT_FROM = 1e15  # format_number writes a number this large with an exponent


def format_number(value: float, digits: int = 3) -> str:
    """About three (``digits``) significant figures, no exponent below a million billion: three below
    100 (trailing zeros dropped, as format_si), whole numbers with thousands separators from 100:
    0.194 -> '0.194', 1.4667 -> '1.47', 24.43 -> '24.4', 244.33 -> '244', 1638.4 -> '1,638'. From
    EXPONENT_FROM an exponent, as an out-of-bound count is echoed: 1e300 -> '1e+300' (not 301 digits).
    With digits 4: 12.345 -> '12.35', 12,345.6 -> '12,346' (where :.4g writes '1.235e+04')."""
    v = float(value)
    if not math.isfinite(v):
        return DASH
    if abs(v) >= EXPONENT_FROM:
        return f"{v:.{digits}g}"
    r = float(f"{v:.{digits}g}")
    if r == 0:
        return "0"
    if abs(r) >= 10 ** (digits - 1):
        return f"{v:,.0f}"
    decimals = digits - 1 - math.floor(math.log10(abs(r)))
    return f"{r:.{decimals}f}".rstrip("0").rstrip(".")


def time_unit(seconds: float) -> tuple[str, float]:
    """The unit a time is shown in, as (symbol, seconds per unit), chosen by its size (TIME_UNITS):
    ns below 1 µs, µs below 10 ms, ms below 1 s, s below 100 s, then min, h and days. A chart's
    time axis takes the unit of its largest value, so its ticks read as its labels do."""
    a = abs(float(seconds))
    if a == 0 or not math.isfinite(a):
        return "µs", US
    a = min(float(f"{a:.3g}"), sys.float_info.max)  # 9,999.6 µs is '10 ms', not '10,000 µs'; 1.796e308 stays finite
    return next((symbol, scale) for symbol, scale, below in TIME_UNITS if a < below)


def format_duration(seconds, unit_of=None) -> str:
    """A time auto-scaled (time_unit): '194 ns', '3.4 µs', '205 µs', '8,756 µs' (whole microseconds
    from 10 µs, as the 'Predicting a Kernel's Time' plate writes them), '35.7 ms', '357 ms', '2.01 s', '35.7 s', '5.95 min',
    '2.5 h', '20.6 days'; '—' for None or a time that is not finite. ``unit_of``: another time whose
    unit this one takes, so that a before and an after read alike ('18.6 ms to 9.32 ms')."""
    if seconds is None or not math.isfinite(float(seconds)):
        return DASH
    symbol, scale = time_unit(seconds if unit_of is None or not math.isfinite(float(unit_of)) else unit_of)
    v = float(seconds) / scale
    text = f"{v:,.0f}" if symbol == "µs" and abs(v) >= 10 else format_number(v)
    return f"{text} {symbol}"


def format_ratio(ratio) -> str:
    """'1.47×', '24.4×', '244×'; '—' when there is none (a denominator of zero)."""
    return DASH if ratio is None or not math.isfinite(float(ratio)) else f"{format_number(ratio)}×"


def format_share(fraction: float) -> str:
    """A share of a total: 0.409 -> '41%'; 0.0041 -> '0.4%'; 0.0002 -> '<0.1%'; 0 -> '0%'."""
    pct = 100.0 * fraction
    if pct == 0:
        return "0%"
    if pct < 0.05:
        return "<0.1%"
    return f"{pct:.1f}%" if pct < 1 else f"{pct:.0f}%"


def format_rate(per_s, unit: str = "tokens/s") -> str:
    """A count per second: '0.523 tokens/s', '55.3 tokens/s', '4,616 tokens/s'; '—' when none."""
    return DASH if per_s is None or not math.isfinite(float(per_s)) else f"{format_number(per_s)} {unit}"


def format_typed_ms(seconds: float) -> str:
    """A target the page takes in ms, written back as typed: '500 ms', '8 ms', '0.001 ms'; a
    second or more in seconds ('2.5 s', '100 s', '1e+300 s'), as a flag's time is typed."""
    ms = seconds / MS
    return f"{ms:.4g} ms" if ms < 1000 else f"{seconds:.4g} s"


def format_plain(value: float, digits: int = 6) -> str:
    """A number for a CSV cell: a whole number exactly ('34359738368'), others to ``digits``
    significant figures without an exponent ('8756.12', '0.194301'); '' when not finite."""
    v = float(value)
    if not math.isfinite(v):
        return ""
    if v == int(v) and abs(v) < 1e18:
        return str(int(v))
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(v))))
    text = f"{v:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def indefinite_article(value: float) -> str:
    """'a' or 'an' before a number as it is read aloud: 'an' when that starts with a vowel sound,
    which is when the leading group of three digits reads eight, eleven, eighteen, eighty-something
    or eight hundred-something: 8,192 -> 'an' (eight thousand ...), 11 and 18 -> 'an', 80 -> 'an',
    1,024 -> 'a', 100 -> 'a'. Only the whole part counts (8.5 -> 'an', 0.8 -> 'a')."""
    n = int(abs(float(value))) if math.isfinite(float(value)) else 0
    while n >= 1000:
        n //= 1000
    return "an" if n in (8, 11, 18) or 80 <= n <= 89 or 800 <= n <= 899 else "a"
