"""Comma-separated lists of counts on the command line (decode's --batch, sweep's --values, serving's --sweep and
--tp-search): each item a whole number in range, a START:STOP:lin|log:COUNT range, or @FILE; an error names the item."""

from __future__ import annotations

import argparse

from roofline.cli.numbers import number_arg
from roofline.parameters import COUNT_MAX

RANGE_MAX_COUNT = 10_000_000  # values one START:STOP:lin|log:COUNT range may ask for


def count_list(flag, maximum=COUNT_MAX, ranges=False):
    """'1,2,4,1024' -> [1, 2, 4, 1024], each a whole number > 0 and at most ``maximum`` (named in the
    error). With ``ranges`` (sweep --values) an item may also be a range START:STOP:lin|log:COUNT (see
    count_range), and the whole value @FILE: the items of a file, one a line or comma-separated, a #
    starting a comment; an error names the range, or the file and line, it is in."""
    one = number_arg(flag, integer=True, maximum=maximum)

    def item(t):
        # the common case, a plain whole number (20,000 from a script), skips parse_number and numpy
        if len(t) < 16 and t.isascii() and t.isdigit() and 0 < int(t) <= maximum:
            return [int(t)]
        if ranges and ":" in t:
            return count_range(t, one)
        return [one(t)]

    def convert(text):
        text = str(text)
        if ranges and text.startswith("@"):
            return _values_file(text[1:], item)
        items = text.replace(" ", "").split(",")
        if items and items[-1] == "":
            items.pop()  # a trailing comma ("1,2,") is harmless; an empty item inside is a typo
        if not items or "" in items:
            raise argparse.ArgumentTypeError(
                ("empty item in " + repr(text) + ": " if items else "") + "expected a comma-separated list like 1,2,4"
                + (", a range like 1:1024:log:11 or @FILE" if ranges else ""))
        try:
            return [v for t in items for v in item(t)]
        except argparse.ArgumentTypeError:
            if ranges and _names_machines(items):  # `sweep --over machines --values h100-sxm,mi300x`
                raise argparse.ArgumentTypeError(f"{text!r} names machines, not sizes: a sweep over machines takes them "
                                                 f"as --machine {','.join(items)} (--values lists sizes: tokens, batch "
                                                 "or context)") from None
            raise

    convert.__name__ = flag
    return convert


def _names_machines(items) -> bool:
    """Whether every item is a machine preset's key (or a .toml file)."""
    from roofline.machines import list_machines

    keys = {m.key for m in list_machines()}
    return all(t.strip().lower() in keys or t.strip().endswith(".toml") for t in items)


def count_range(text: str, one) -> list[int]:
    """'START:STOP:lin|log:COUNT' -> COUNT values from START to STOP, both included, evenly spaced
    (lin) or in a geometric progression (log), each rounded half up to a whole number (the swept
    sizes are counts), the ends exactly START and STOP. Values that rounding makes equal (a log range
    over small numbers: 1:1024:log:100 starts 1.00, 1.07, ..., 2.16, six 1s and six 2s) are kept once, so
    a range can yield fewer than COUNT values (75 there). ``one`` checks START and STOP as the flag's single values."""
    import numpy as np

    parts = text.split(":")
    if len(parts) != 4:
        raise argparse.ArgumentTypeError(f"range {text!r} must be START:STOP:lin|log:COUNT, e.g. 1:131072:log:18")
    ends = []
    for name, part in zip(("start", "stop"), parts[:2]):
        try:
            ends.append(one(part))
        except argparse.ArgumentTypeError as exc:
            why = str(exc)
            raise argparse.ArgumentTypeError(f"range {text!r}: {name} {why}" if why.startswith("must ")
                                             else f"range {text!r}: {name}: {why}") from None
    spacing, count = parts[2], parts[3]
    if spacing not in ("lin", "log"):
        raise argparse.ArgumentTypeError(f"range {text!r}: spacing {spacing!r} must be lin or log")
    if not (count.isascii() and count.isdigit() and len(count) < 9 and 2 <= int(count) <= RANGE_MAX_COUNT):
        raise argparse.ArgumentTypeError(f"range {text!r}: count {count!r} must be a whole number from 2 to "
                                         f"{RANGE_MAX_COUNT:,}")
    start, stop = ends
    grid = (np.linspace if spacing == "lin" else np.geomspace)(start, stop, int(count))
    values = np.floor(grid + 0.5).astype(np.int64)
    values[0], values[-1] = start, stop
    keep = np.ones(values.size, dtype=bool)
    keep[1:] = values[1:] != values[:-1]  # the values are monotonic: equal ones are neighbours
    return values[keep].tolist()


def _values_file(path: str, item) -> list[int]:
    """The values of ``path`` (``@path`` on the command line), each item as on the command line."""
    from pathlib import Path

    if not path:
        raise argparse.ArgumentTypeError("@ needs a file name, e.g. @values.txt")
    if not Path(path).is_file():
        why = "is not a file" if Path(path).exists() else "does not exist"
        raise argparse.ArgumentTypeError(f"@{path}: {path!r} {why}")
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise argparse.ArgumentTypeError(f"@{path}: cannot read {path!r} ({getattr(exc, 'strerror', None) or exc})") from None
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        for t in line.split("#", 1)[0].replace(",", " ").split():
            try:
                out.extend(item(t))
            except argparse.ArgumentTypeError as exc:
                raise argparse.ArgumentTypeError(f"@{path} line {number}: {exc}") from None
    if not out:
        raise argparse.ArgumentTypeError(f"@{path} holds no values (one a line or comma-separated; # starts a comment)")
    return out


