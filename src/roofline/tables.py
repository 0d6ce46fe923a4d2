"""Plain-text tables for the CLI, rendered from result objects (never from hand-built dicts)."""

from __future__ import annotations

import csv
import io
import math
import numbers
from typing import Sequence

from roofline.units import format_intensity, format_magnitude, format_time, format_us_cell


def grid(headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool] | None = None) -> str:
    """Columns padded to their widest cell; ``right`` marks right-aligned columns."""
    right = list(right) if right is not None else [i > 0 for i in range(len(headers))]
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) if rows else len(str(h)) for i, h in enumerate(headers)]

    def line(cells):
        return "  ".join(str(c).rjust(w) if r else str(c).ljust(w) for c, w, r in zip(cells, widths, right)).rstrip()

    out = [line(headers), line(["-" * w for w in widths])]
    out += [line(r) for r in rows]
    return "\n".join(out)


def workload_table(pred) -> str:
    """A WorkloadPrediction as the per-op table plus the seed's readouts."""
    headers = ["op", "FLOPs", "bytes", "FLOP/B", "compute us", "memory us", "launch us", "time us", "share", "bound"]
    # ops priced from measured kernels (measured.model) show their speed of light and what they rest on
    measured = bool(pred.ops) and all(hasattr(op, "roofline_s") for op in pred.ops)
    if measured:
        headers += ["roofline us", "of roofline", "basis"]
    rows = []
    for op in pred.ops:
        rows.append([op.name, format_magnitude(op.flops), format_magnitude(op.bytes), format_intensity(op.intensity),
                     *map(format_us_cell, (op.compute_s, op.memory_s, op.launch_s, op.time_s)),
                     f"{op.time_s / pred.total_s:.1%}", op.bound]
                    + ([format_us_cell(op.roofline_s), f"{op.speed_of_light:.0%}" if op.speed_of_light else "-", op.basis]
                       if measured else []))
    rows.append(["total", format_magnitude(sum(o.flops for o in pred.ops)), format_magnitude(sum(o.bytes for o in pred.ops)),
                 "", *map(format_us_cell, (pred.flops_only_s, pred.bytes_only_s, pred.launch_s, pred.total_s)), "100%", ""]
                + ([format_us_cell(sum(o.roofline_s for o in pred.ops)), "", ""] if measured else []))
    n = len(pred.ops)
    lines = [
        grid(headers, rows, [False] + [True] * 8 + [False] + ([True, True, False] if measured else [])),
        "",
        f"total {format_us_cell(pred.total_s)} us ({format_time(pred.total_s)})",
        f"FLOPs-only {format_us_cell(pred.flops_only_s)} us: total is {pred.total_s / pred.flops_only_s:.2f}x"
        if pred.flops_only_s > 0 else "FLOPs-only 0 us",
        f"bytes-only {format_us_cell(pred.bytes_only_s)} us: total is {pred.total_s / pred.bytes_only_s:.2f}x",
        f"memory-bound: {pred.memory_bound_ops} of {n} ops, {pred.memory_bound_share:.0%} of the time",
        f"launch overhead: {pred.launch_share:.1%} of the time",
    ]
    return "\n".join(lines)


def rows_to_csv(rows: Sequence[dict], fieldnames: Sequence[str] | None = None) -> str:
    """Same-keyed row dicts (a result's ``rows()``) as CSV text with a header. ``fieldnames`` picks
    and orders the columns (default: the first row's keys) and gives the header when there are no rows."""
    buf = io.StringIO()
    names = list(fieldnames) if fieldnames is not None else (list(rows[0]) if rows else [])
    if names:
        writer = csv.DictWriter(buf, fieldnames=names, lineterminator="\n", extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return buf.getvalue()


def jsonable(x):
    """A numpy array or scalar as a Python list or number (what json writes); anything else as is.
    Reads numpy only where it is loaded: without it no value can be one of its types."""
    import sys

    np = sys.modules.get("numpy")
    if np is not None:
        if isinstance(x, np.ndarray):
            return x.tolist()
        if isinstance(x, np.generic):
            return x.item()
    return x


def dump_json(obj) -> str:
    """JSON with indent 2, refusing NaN and infinity (which json.dumps would write as the invalid
    tokens NaN and Infinity): a result that is not finite is one line naming it, never printed."""
    import json

    from roofline.errors import RooflineError

    try:
        return json.dumps(obj, indent=2, allow_nan=False)
    except ValueError:
        bad = _non_finite_key(obj)
        raise RooflineError(f"the result is not finite ({bad or 'a value'} is NaN or infinite): an input is out of "
                            "any physical range", field=None) from None


class Tabular:
    """The result protocol, mixed into the frozen result types: each writes ``to_dict()`` (its
    figures and rows, SI units) and ``to_table()`` (its text), and gets from them ``to_json()``
    (dump_json of to_dict), ``to_csv()`` (rows_to_csv of its ``rows()``), ``_repr_html_`` (Jupyter
    shows the result as tables) and ``to_pandas()`` (a DataFrame of its rows); a type overrides
    to_json or to_csv only where it writes more (a CSV of other columns is CSV_FIELDS, data, not
    an override). For the notebook half the rows are
    ``to_dict()[ROWS_KEY]``, else the type's ``rows()``; a type with neither is one row of its
    figures. Nested dicts become dotted columns ("precision.weights"); other lists of row dicts are
    extra tables in the HTML."""

    ROWS_KEY = "ops"
    CSV_FIELDS = None  # the CSV's columns in order (a tuple of names); None: its first row's keys

    def to_json(self) -> str:
        return dump_json(self.to_dict())

    def to_csv(self) -> str:
        """The result's ``rows()`` as CSV, CSV_FIELDS (default its first row's keys) the header; a
        type without rows() writes the rows to_pandas() frames (ROWS_KEY's, else one row of its figures)."""
        if callable(getattr(self, "rows", None)):
            return rows_to_csv(self.rows(), self.CSV_FIELDS)
        figures, rows, _ = self._tables()
        return rows_to_csv(rows if rows is not None else [figures], self.CSV_FIELDS)

    def _tables(self) -> tuple[dict, list[dict] | None, list[tuple[str, list[dict]]]]:
        """(figures, rows or None, [(name, rows)] of the other lists of row dicts)."""
        d = self.to_dict()
        key = self.ROWS_KEY
        rows = d.pop(key) if key in d else (self.rows() if callable(getattr(self, "rows", None)) else None)
        others = [(k, [_flatten(r) for r in d.pop(k)]) for k in [k for k, v in d.items() if _is_rows(v)]]
        return _flatten(d), None if rows is None else [_flatten(r) for r in rows], others

    def to_pandas(self):
        """A pandas DataFrame of the result's rows (column names as in to_dict and to_csv, values in
        SI units); its ``attrs`` hold the result's other figures."""
        try:
            import pandas as pd
        except ImportError:
            raise ImportError(f"{type(self).__name__}.to_pandas() needs pandas, which is not installed: "
                              "pip install pandas") from None
        figures, rows, _ = self._tables()
        frame = pd.DataFrame(rows if rows is not None else [figures])
        frame.attrs.update(figures)
        return frame

    def _repr_html_(self) -> str:
        """The result as HTML tables for a notebook: its figures, then its rows (escaped, inline
        styles only; at most HTML_ROWS rows a table)."""
        import html

        figures, rows, others = self._tables()
        parts = [f'<div class="roofline-result"><p><b>{html.escape(type(self).__name__)}</b></p>']
        if figures:
            parts.append(_html_table(["figure", "value"], [[(None, k), (k, v)] for k, v in figures.items()]))
        for name, table in ([("", rows)] if rows is not None else []) + [(f"{k}:", v) for k, v in others]:
            if name:
                parts.append(f"<p>{html.escape(name)}</p>")
            names = list(dict.fromkeys(k for r in table for k in r))
            parts.append(_html_table(names, [[(k, r.get(k)) for k in names] for r in table]))
        return "\n".join(parts) + "</div>"


HTML_ROWS = 200  # rows a notebook table shows; to_pandas() has them all
_CELL = 'style="text-align:{}"'


def _is_rows(value) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(r, dict) for r in value)


def _flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        elif not _is_rows(v):
            out[f"{prefix}{k}"] = v
    return out


def _html_table(headers: Sequence[str], rows: Sequence[Sequence[tuple]]) -> str:
    """Rows of (key, value) cells; a key of None marks a header cell holding the value as text."""
    import html

    head = "".join(f"<th {_CELL.format('left')}>{html.escape(str(h))}</th>" for h in headers)
    body = []
    for row in rows[:HTML_ROWS]:
        cells = []
        for key, value in row:
            if key is None:
                cells.append(f"<th {_CELL.format('left')}>{html.escape(str(value))}</th>")
                continue
            number = isinstance(value, numbers.Real) and not isinstance(value, bool)
            title = f' title="{html.escape(repr(value))}"' if number else ""
            lines = value if isinstance(value, list) and all(isinstance(v, str) for v in value) else [value]
            text = "<br>".join(html.escape(_cell_text(key, v)) for v in lines)  # notes: one a line
            cells.append(f"<td {_CELL.format('right' if number else 'left')}{title}>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    if len(rows) > HTML_ROWS:
        body.append(f'<tr><td colspan="{len(headers)}">... {len(rows) - HTML_ROWS:,} more rows: to_pandas() has them all'
                    "</td></tr>")
    return f'<table style="border-collapse:collapse"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def _cell_text(key: str, value) -> str:
    """One figure for a person, its unit read from its name (units' formatters): a name with
    "bytes" or "flops" in it an SI quantity (per second for ``*_per_s``), other ``*_per_s`` a rate,
    ``*_s`` a time ('8,756 µs'), ``*share`` and ``*fraction`` a percentage; other numbers to about
    three figures; None and NaN as a dash."""
    from roofline.units import DASH, format_duration, format_number, format_share, format_si

    if value is None:
        return DASH
    if isinstance(value, (list, tuple)):
        return ", ".join(_cell_text(key, v) for v in value)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return str(value)
    name = key.rsplit(".", 1)[-1]
    v = float(value)
    if not math.isfinite(v):
        return DASH
    per_s = name.endswith("_per_s")
    if not per_s and (name.endswith("_s") or name == "seconds"):
        return format_duration(v)
    for word, unit in (("flops", "FLOP"), ("bytes", "B")):
        if word in name:
            unit += "/s" if per_s else ""
            return format_si(v, unit) if abs(v) < 1e21 else f"{v:.3g} {unit}"  # format_si stops at E
    if per_s:
        return format_number(v)
    if name.endswith(("share", "fraction")):
        return format_share(v)
    if isinstance(value, numbers.Integral):
        return f"{int(value):,}"
    return format_number(v) if abs(v) < 1e6 else format_si(v)


# How Python and numpy print a value that is not finite: 'nan', 'inf', '-inf', also glued to a unit
# or a multiplier ('nanx', 'inf%', 'inf us'); not inside words ('info', 'inference', 'nanoseconds').
_NON_FINITE_TEXT = None


def check_finite_text(text: str) -> str:
    """``text`` (a command's whole output) if it prints no NaN or infinity, else a RooflineError
    quoting the line: a result that is not finite is said, never printed as a number."""
    global _NON_FINITE_TEXT
    if not any(word in text for word in ("nan", "inf", "NaN", "Infinity")):  # 20 ms on 8 MB; the regex takes 0.5 s
        return text
    if _NON_FINITE_TEXT is None:
        import re

        # a bare nan/inf/NaN/Infinity, not part of a word or of a file name ("nan.json", "inf/config.json")
        _NON_FINITE_TEXT = re.compile(r"(?<![A-Za-z_/.])(?:nan|inf)(?![a-wyzA-Z_/-])(?!\.[A-Za-z0-9])"
                                      r"|(?<![A-Za-z_/.])(?:NaN|Infinity)(?![A-Za-z_/-])(?!\.[A-Za-z0-9])")
    hit = _NON_FINITE_TEXT.search(text)
    if hit is None:
        return text
    from roofline.errors import RooflineError

    start, end = text.rfind("\n", 0, hit.start()) + 1, text.find("\n", hit.end())
    line = text[start:end if end >= 0 else len(text)].strip()
    raise RooflineError(f"the result is not finite ({line[:120]!r}): an input is out of any physical range", field=None)


def _non_finite_key(obj, path: str = "") -> str | None:
    import math

    if isinstance(obj, float) and not math.isfinite(obj):
        return path or "value"
    if isinstance(obj, dict):
        items = obj.items()
    elif isinstance(obj, (list, tuple)):
        items = enumerate(obj)
    else:
        return None
    for k, v in items:
        found = _non_finite_key(v, f"{path}.{k}" if path else str(k))
        if found:
            return found
    return None
