"""The one error type users see, and the validators that raise it.

Every message names the bad value and the parameter it came from, so that the CLI can print it
on one line (exit code 2) and the web API can return it as a 422 naming the field.
"""

from __future__ import annotations

from difflib import get_close_matches
from typing import Iterable


class RooflineError(ValueError):
    """Bad input. ``field`` names the parameter (CLI flag or API field) when known; ``also`` the
    other parameters when the refusal is of their combination, not of ``field``'s value alone (a
    memory fraction that leaves this model's weights no room on this machine): each value may be
    inside its own range, so the API's 422 names them all (its ``fields``)."""

    def __init__(self, message: str, field: str | None = None, also: tuple[str, ...] = ()):
        super().__init__(message)
        self.field = field
        self.also = tuple(also)


def _describe(value, bad=None) -> str:
    """The value as an error names it; of an array with a ``bad`` mask, the first bad entry and
    where it sits ("1e+12 (value 2 of 2)"), not the whole array."""
    import numpy as np  # here, not at the top: the CLI imports this module before it knows it needs numpy

    if isinstance(value, np.ndarray):
        if bad is not None and value.ndim == 1 and np.any(bad):
            i = int(np.flatnonzero(bad)[0])
            v = float(value[i])
            return f"{_bound(v)} (value {i + 1:,} of {value.size:,})"
        return f"array {np.array2string(value, threshold=6)}"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_FLOAT:
        return big_int(value)
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
        v = float(value)
        if np.isfinite(v) and v.is_integer() and abs(v) >= 1e6:  # a big count as its bound is written
            return _bound(v)
    return repr(value)


MAX_FLOAT = 1.7976931348623157e308  # the largest float: a larger integer cannot become one (OverflowError)


def big_int(value: int) -> str:
    """An integer too large for a float as an error names it, by its size (its digits can run to
    thousands, and str() refuses past 4,300): "an integer of 401 digits (about 1e+400)"."""
    digits = len(str(abs(value))) if value.bit_length() < 14_000 else int(value.bit_length() * 0.30103) + 1
    return f"{'-' if value < 0 else ''}an integer of {digits:,} digits (about {'-' if value < 0 else ''}1e+{digits - 1})"


def _bound(x: float) -> str:
    """A bound as a reader writes it: 16,777,216, 1,000,000 and 4,294,967,295 in full, 1e+12 and
    0.001 as %g (a whole number in full where %g would round it)."""
    x = float(x)
    whole = x.is_integer() and (abs(x) < 1e9 or float(f"{x:g}") != x)
    return f"{int(x):,}" if whole else f"{x:g}"


def check_number(
    name: str,
    value,
    *,
    minimum: float | None = 0.0,
    strictly: bool = True,
    maximum: float | None = None,
    integer: bool = False,
):
    """Return ``value`` if it is a finite number (or array of them) within the bounds.

    ``minimum`` with ``strictly`` means value > minimum; otherwise value >= minimum. ``maximum`` is
    inclusive. Raises RooflineError naming ``name`` and the value otherwise.
    """
    if isinstance(value, bool) or value is None:
        raise RooflineError(f"{name} must be a number, got {value!r}", field=name)
    import numpy as np  # as in _describe

    try:
        arr = np.asarray(value, dtype=float)
    except OverflowError:  # an integer past the largest float (10**400 in a file): not a finite number
        raise RooflineError(f"{name} must be a finite number, got {_describe(value)}", field=name) from None
    except (TypeError, ValueError):
        raise RooflineError(f"{name} must be a number, got {value!r}", field=name) from None
    if arr.size == 0:
        raise RooflineError(f"{name} must not be empty", field=name)
    if not np.all(np.isfinite(arr)):
        raise RooflineError(f"{name} must be a finite number, got {_describe(value, ~np.isfinite(arr))}", field=name)
    if minimum is not None:
        bad = arr <= minimum if strictly else arr < minimum
        if np.any(bad):
            relation = "greater than" if strictly else "at least"
            raise RooflineError(f"{name} must be {relation} {_bound(minimum)}, got {_describe(value, bad)}", field=name)
        if strictly and minimum == 0 and np.any(arr < TINY):  # 5e-324 passes "> 0" and overflows every ratio
            raise RooflineError(f"{name} must be at least {TINY:g} (no physical quantity in SI units is smaller), "
                                f"got {_describe(value, arr < TINY)}", field=name)
    if maximum is not None and np.any(arr > maximum):
        raise RooflineError(f"{name} must be at most {_bound(maximum)}, got {_describe(value, arr > maximum)}", field=name)
    if integer and np.any(arr != np.round(arr)):
        raise RooflineError(f"{name} must be a whole number, got {_describe(value, arr != np.round(arr))}", field=name)
    return value


def is_count(*values) -> bool:
    """True when every value is a plain int in 1 .. MAX_COUNT: the common case the hot paths
    accept without the general validator (check_number still names anything else)."""
    for v in values:
        if type(v) is not int or not (0 < v <= MAX_COUNT):
            return False
    return True


def check_counts(owner: str, **values):
    """Each value a whole number in 1 .. MAX_COUNT (a layer's or a model's dimensions), named
    "owner: name" when it is not."""
    if all(type(v) is int and 0 < v <= MAX_COUNT for v in values.values()):
        return
    for name, v in values.items():
        check_number(f"{owner}: {name}", v, minimum=0, maximum=MAX_COUNT, integer=True)


def check_counts_or_zero(owner: str, **values):
    """As check_counts, with 0 allowed (a dimension that 0 switches off: a window, a rank)."""
    if all(type(v) is int and 0 <= v <= MAX_COUNT for v in values.values()):
        return
    for name, v in values.items():
        check_number(f"{owner}: {name}", v, minimum=0, strictly=False, maximum=MAX_COUNT, integer=True)


def check_fraction(name: str, value):
    """An efficiency or overlap fraction: 0 < value <= 1."""
    return check_number(name, value, minimum=0.0, strictly=True, maximum=1.0)


def check_choice(name: str, value: str, choices: Iterable[str]) -> str:
    choices = list(choices)
    if value not in choices:
        raise RooflineError(f"{name} must be one of {', '.join(choices)}; got {value!r}", field=name)
    return value


def close_names(name: str, known: Iterable[str], n: int = 4) -> list[str]:
    """The known names a typed ``name`` most likely meant, best first: those it begins (h100 ->
    h100-sxm, h100-nvl), then those holding it, then the nearest by edit distance (lyer -> layer).
    By edit distance alone h100 ranked v100 first."""
    typed = str(name).strip().lower()
    known = sorted(known)
    if not typed:
        return []
    first = [k for k in known if k.lower().startswith(typed)]
    first += [k for k in known if typed in k.lower() and k not in first]
    first += [k for k in get_close_matches(typed, known, n=n, cutoff=0.5) if k not in first]
    return first[:n]


def unknown_name(kind: str, name: str, known: Iterable[str], field: str | None = None) -> RooflineError:
    """An error for an unknown preset name that lists the close matches (or all names)."""
    known = sorted(known)
    close = close_names(name, known)
    if close:
        hint = f"did you mean {', '.join(close)}?"
    else:
        hint = f"known: {', '.join(known)}"
    return RooflineError(f"unknown {kind} {name!r}; {hint}", field=field or kind)


TINY = 1e-30  # the smallest positive input taken: denormals and vanishing values are typos
MAX_COUNT = 1e12  # dimensions and token counts beyond this are typos, not workloads
MAX_FLOPS = 1e30
MAX_BYTES = 1e21
# requests one serving simulation runs: a million take about a minute and a half on a 2-core CPU
# (benchmarks/bench_serving.py's rate); its percentiles settle long before
MAX_REQUESTS = 1_000_000
# The split search's bound, in requests simulated: about a minute on a 2-core CPU (its splits ran ~5,000
# requests a second of Llama 3 8B, 1,024 + 256 tokens, 2026-12-06); `--disagg-search 64 --requests 40` was
# about 8M of them (split_search_requests), past 20 minutes, and ran with no word
DISAGG_BUDGET_REQUESTS = 300_000
MAX_CONTEXT = 2**24  # 16,777,216 tokens: published models reach 10M; a longer context or request is a typo
