"""The silicon sample's own spread: one deployment measured under more than one engine build.

The sample (aiconfigurator-core's systems/silicon_sample.csv) states each row's engine, its build
(`backend_version`), GPU, checkpoint, precision, lengths, layout, batch and concurrency. Rows equal in every
stated setting but the build are the same deployment measured again; where their TPOTs differ by a factor,
no prediction from the stated settings can be within that factor's square root of both, so the spread is a
floor on the error that the sample itself sets, and the setting that moved it is one the sample does not
state (speculative decoding, a kernel or scheduler change between builds). This module finds those groups
and writes a section of the validation report (benchmarks/silicon_validation.py).
"""

from __future__ import annotations

import re
import statistics
from collections import defaultdict

# Every stated setting of an aggregated row but its build and the run's identity.
SETTINGS = ("backend", "system", "model_path", "precision", "gemm_quant_mode", "moe_quant_mode", "isl", "osl",
            "tp_size", "pp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size", "batch_size")


def _concurrency(r: dict) -> str:
    m = re.search(r"silicon_concurrency=(\d+)", r["silicon_data_source"]) or re.search(r"_c(\d+)_", r["id"])
    return m.group(1) if m else ""


def _measured_on(r: dict) -> str:
    m = re.search(r"measured=(\d{4}-\d\d-\d\d)", r["silicon_data_source"])
    return m.group(1) if m else "?"


def groups(rows: list[dict]) -> list[list[dict]]:
    """Groups of rows equal in every stated setting (and concurrency) that ran under two or more builds,
    one row per (build, measured TPOT) kept."""
    by = defaultdict(dict)
    for r in rows:
        key = tuple(r[k] for k in SETTINGS) + (_concurrency(r),)
        by[key].setdefault((r["backend_version"], round(float(r["silicon_tpot_ms"]), 6)), r)
    return [list(g.values()) for g in by.values() if len({r["backend_version"] for r in g.values()}) > 1]


def spread(g: list[dict], field: str) -> float:
    """Largest over smallest measured value of `field` in a group (1.0: the builds agree)."""
    v = [float(r[field]) for r in g]
    return max(v) / min(v)


def section(rows: list[dict], done: list[dict]) -> list[str]:
    """The report's section: how many deployments ran under several builds, how far their measurements
    part, the widest ones with each build's TPOT and ours."""
    gs = groups(rows)
    if not gs:
        return []
    pred = {d["id"]: d for d in done}
    wide = sorted((g for g in gs if spread(g, "silicon_tpot_ms") > 1.2), key=lambda g: -spread(g, "silicon_tpot_ms"))
    n15 = sum(1 for g in gs if spread(g, "silicon_tpot_ms") > 1.5)
    f15 = sum(1 for g in gs if spread(g, "silicon_ttft_ms") > 1.5)
    lines = ["## The sample's own spread: one deployment, two builds", "",
             f"{len(gs):,} deployments (every stated setting and the concurrency equal) were measured under more than one "
             f"engine build; their TPOTs part by more than 1.2x in {len(wide)} and by more than 1.5x in {n15} (TTFT "
             f"beyond 1.5x: {f15}). Where a deployment's builds measure TPOTs a factor s apart, a forecast from the "
             "stated settings is at best sqrt(s) from each: a floor the sample sets, from a setting it does not state "
             "(speculative decoding, a kernel or scheduler change between builds). The widest (kernels+engine's TPOT "
             "beside each build's):", "",
             "| deployment | build (measured) | TPOT ms | ours ms |", "| --- | --- | --- | --- |"]
    for g in wide[:8]:
        r0 = g[0]
        label = (f"{r0['backend']} {r0['system']} {r0['model_path'].split('/')[-1]} {r0['gemm_quant_mode'] or 'bf16'} "
                 f"{r0['isl']}/{r0['osl']} tp{r0['tp_size']} dp{r0['attention_dp_size']} ep{r0['moe_ep_size']} "
                 f"c{_concurrency(r0)}")
        for r in sorted(g, key=lambda r: float(r["silicon_tpot_ms"])):
            d = pred.get(r["id"], {}).get("kernels+engine")
            ours = f"{d['tpot_s'] * 1e3:.1f}" if d else "-"
            lines.append(f"| {label} | {r['backend_version']} ({_measured_on(r)}) | {float(r['silicon_tpot_ms']):.1f} | {ours} |")
            label = ""
    errs = _build_errors(rows, done)
    if errs:
        lines += ["", "Our TPOT by build where an engine, GPU and model ran under several (kernels+engine, median ratio "
                  "predicted / measured; one build's ratio far from the others' is that build's change, not the "
                  "model's):", "", "| engine, GPU, model | build: rows, TPOT ratio |", "| --- | --- |"]
        lines += [f"| {k} | {v} |" for k, v in errs]
    return lines + [""]


def _build_errors(rows: list[dict], done: list[dict]) -> list[tuple[str, str]]:
    """Per (engine, GPU, model) whose median TPOT ratio differs by more than 1.3x between two of its builds
    (20 rows or more each): each build's rows and median ratio."""
    src = {r["id"]: r for r in rows}
    by = defaultdict(lambda: defaultdict(list))
    for d in done:
        r = src.get(d["id"])
        if r is None or "kernels+engine" not in d:
            continue
        by[(d["engine"], d["machine"], d["model"])][r["backend_version"] or "unstated"].append(
            d["kernels+engine"]["tpot_s"] / d["tpot_s"])
    out = []
    for k in sorted(by):
        med = {b: statistics.median(v) for b, v in by[k].items() if len(v) >= 20}
        if len(med) > 1 and max(med.values()) / min(med.values()) > 1.3:
            out.append((" ".join(k), "; ".join(f"{b}: {len(by[k][b])}, {m:.2f}" for b, m in sorted(med.items()))))
    return out

