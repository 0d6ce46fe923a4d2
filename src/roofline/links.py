"""Collective latency by link technology (data/links.toml): the fixed cost of one collective over
a link, which the bytes-over-bandwidth term misses for the small all-reduces of a decode step
(docs/serving.md). Each figure is {value, source, note}; a link without one costs bandwidth alone, and
``latency_note`` says so."""

from __future__ import annotations

import functools

from roofline.units import US

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib


@functools.lru_cache(maxsize=1)
def _table() -> tuple[dict, dict]:
    from importlib import resources

    doc = tomllib.loads(resources.files("roofline").joinpath("data/links.toml").read_text(encoding="utf-8"))
    sources = doc.get("sources", {})
    out = {}
    for name, e in doc.get("latency", {}).items():
        if e.get("source") not in sources:
            raise ValueError(f"data/links.toml: latency.{name} cites {e.get('source')!r}, not in [sources]")
        out[name] = (float(e["value"]), e["source"], str(e.get("note", "")))
    return out, sources


def collective_latency_s(link: str | None) -> float:
    """Seconds of one small collective over ``link`` (0 for no link, or one without a figure)."""
    if not link:
        return 0.0
    got = _table()[0].get(link)
    return got[0] if got else 0.0


def latency_note(link: str) -> str:
    """What the latency of ``link`` is and where it comes from, or that it is not modelled."""
    got = _table()[0].get(link)
    if got is None:
        return f"collectives over {link}: no measured latency in data/links.toml, costed by bandwidth alone"
    value, source, note = got
    return f"collectives over {link}: {value / US:g} us latency each ({note}; {_table()[1][source].split(',')[0]})"
