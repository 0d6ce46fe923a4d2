"""Collective latency by link technology (data/links.toml): the fixed cost of one collective over
a link, which the bytes-over-bandwidth term misses for the small all-reduces of a decode step
(docs/serving.md). Each figure is {value, source, note}; a link without one costs bandwidth alone, and
``latency_note`` says so. Where an engine's all-reduce was measured by GPU count and size
([all_reduce.LINK]), an all-reduce over that link takes the measured time (``all_reduce_s``)."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from roofline.sourced import check_cited
from roofline.units import US

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib


@functools.lru_cache(maxsize=1)
def _doc() -> dict:
    from importlib import resources

    return tomllib.loads(resources.files("roofline").joinpath("data/links.toml").read_text(encoding="utf-8"))


def _cited(section: str) -> dict:
    """data/links.toml's ``section`` (latency, all_reduce), every entry's source checked against [sources]."""
    doc = _doc()
    sources = doc.get("sources", {})
    for name, e in doc.get(section, {}).items():
        check_cited(f"data/links.toml: {section}.{name}", e.get("source", ""), sources, "link")
    return doc.get(section, {})


@functools.lru_cache(maxsize=1)
def _table() -> tuple[dict, dict]:
    out = {name: (float(e["value"]), e["source"], str(e.get("note", ""))) for name, e in _cited("latency").items()}
    return out, _doc().get("sources", {})


def collective_latency_s(link: str | None) -> float:
    """Seconds of one small collective over ``link`` (0 for no link, or one without a figure)."""
    if not link:
        return 0.0
    got = _table()[0].get(link)
    return got[0] if got else 0.0


@dataclass(frozen=True)
class AllReduceTable:
    """Measured all-reduce times over one link (data/links.toml [all_reduce.LINK])."""

    link: str
    gpus: np.ndarray
    message_bytes: np.ndarray
    seconds: np.ndarray  # (gpus, sizes), each row made non-decreasing in size
    link_bytes_per_s: float
    source: str
    note: str


@functools.lru_cache(maxsize=1)
def _all_reduce_tables() -> dict[str, AllReduceTable]:
    out = {}
    for link, e in _cited("all_reduce").items():
        gpus, sizes = np.asarray(e["gpus"], dtype=float), np.asarray(e["message_bytes"], dtype=float)
        secs = np.asarray(e["seconds"], dtype=float)
        if secs.shape != (len(gpus), len(sizes)) or np.any(np.diff(gpus) <= 0) or np.any(np.diff(sizes) <= 0) \
                or np.any(secs <= 0) or gpus[0] < 2:
            raise ValueError(f"data/links.toml: all_reduce.{link}: seconds must be gpus x message_bytes, both increasing")
        # a larger message is never cheaper (the measured 4-GPU row dips by 1 us at 16 KiB: noise)
        out[link] = AllReduceTable(link, gpus, sizes, np.maximum.accumulate(secs, axis=1), float(e["link_bytes_per_s"]),
                                   e["source"], str(e.get("note", "")))
    return out


def all_reduce_s(link: str | None, gpus, message_bytes, link_bytes_per_s: float, memory_efficiency: float,
                 launch_s: float = 0.0):
    """Seconds of one all-reduce of ``message_bytes`` (the tensor each GPU holds) across ``gpus``
    GPUs over ``link``, from its measured table, without the call's launch: interpolated in log
    size and log GPU count, the smallest measured size's time below it, and past the largest the
    largest's time plus the extra ring bytes, 2 (g-1)/g x the extra size, at ``memory_efficiency``
    x ``link_bytes_per_s``; more GPUs than measured take the largest count's row. The table was
    measured on one link bandwidth (NVLink 4, 450 GB/s): on another, the part of each time above
    the smallest message's scales by that bandwidth over this link's. Its times include each call's
    launch (measured without CUDA graphs): ``launch_s``, the cost model's own launch, which it
    counts apart, is taken off. None where no table applies (no table for the link, fewer than 2
    GPUs)."""
    tab = _all_reduce_tables().get(link) if link else None
    if tab is None or gpus < 2:
        return None
    lg = np.log(np.clip(float(gpus), tab.gpus[0], tab.gpus[-1]))
    row = np.array([np.interp(lg, np.log(tab.gpus), tab.seconds[:, j]) for j in range(len(tab.message_bytes))])
    size = np.asarray(message_bytes, dtype=float)
    inside = np.interp(np.log(np.maximum(size, 1.0)), np.log(tab.message_bytes), row)
    g = float(gpus)
    scaled = row[0] + (inside - row[0]) * (tab.link_bytes_per_s / link_bytes_per_s)
    extra = 2.0 * (g - 1.0) / g * np.maximum(size - tab.message_bytes[-1], 0.0) / (memory_efficiency * link_bytes_per_s)
    out = np.maximum(scaled + extra - launch_s, 0.0)
    return float(out) if np.ndim(out) == 0 else out


def all_reduce_note(link: str) -> str | None:
    """What the measured all-reduce table of ``link`` is, or None without one."""
    tab = _all_reduce_tables().get(link)
    if tab is None:
        return None
    return (f"all-reduces over {link}: measured times by GPU count ({', '.join(f'{g:g}' for g in tab.gpus)}) and size "
            f"({tab.message_bytes[0] / 1024:g} KiB to {tab.message_bytes[-1] / 2**20:g} MiB), interpolated, less the "
            f"launch counted apart; past {tab.message_bytes[-1] / 2**20:g} MiB the ring's extra bytes at e_m of the link, "
            f"past {tab.gpus[-1]:g} GPUs the {tab.gpus[-1]:g}-GPU row; measured on {tab.link_bytes_per_s / 1e9:g} GB/s per "
            f"direction (another link scales the size-dependent part by its bandwidth) ({tab.note}; "
            f"{_table()[1][tab.source].split(',')[0]})")


def latency_note(link: str) -> str:
    """What the latency of ``link`` is and where it comes from, or that it is not modelled."""
    got = _table()[0].get(link)
    if got is None:
        return (f"collectives over {link}: no measured latency in data/links.toml, costed by bandwidth alone: a small "
                "all-reduce then costs next to nothing (one over NVLink costs 3-6 us), so at small batch these "
                "collectives are optimistic against a link with a measured figure")
    value, source, note = got
    return f"collectives over {link}: {value / US:g} us latency each ({note}; {_table()[1][source].split(',')[0]})"
