"""The framework probe of `roofline calibrate` (docs/measuring.md): what eager PyTorch spends between
its top-level ops, per gap, on this machine.

A model's forward in eager mode is its ops plus the Python between them (module calls, the
forward's own statements, the dispatcher outside any op). The calibrated model costs the ops; this
probe measures the rest on small models of roofline.trace.models (tiny_llama, tiny_gpt2: two layers
of width 64, a decode step of one token against 16 cached ones, so that every op is a small one
whose cost the class probes measured): their forward's wall clock, less the calibrated prediction
of every op torch.profiler recorded in it (the wall-clock model, not the profiled one), divided
by the gaps between its top-level ops (chrome_trace.between_ops). A forward's framework line is
then its own count of gaps times that figure (CalibratedModel.framework_s).

On a CPU only: on a GPU the Python runs while the kernels queue, and adds to a step's time only
where the CPU falls behind, which this probe cannot tell.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

import torch

FRAMEWORK_MODELS = ("tiny_llama", "tiny_gpt2")
FRAMEWORK_CONTEXT = 16  # cached tokens of the probe's decode step


def _decode_step(name: str):
    """A decode step of one of roofline.trace.models' tiny models: one token against FRAMEWORK_CONTEXT."""
    from roofline.trace import models

    model = getattr(models, name)().eval()
    cfg = model.cfg
    gen = torch.Generator().manual_seed(0)
    kv = cfg.n_kv_heads or cfg.n_heads
    head_dim = cfg.head_dim or cfg.d_model // cfg.n_heads
    cache = [torch.randn(1, kv, FRAMEWORK_CONTEXT, head_dim, generator=gen) for _ in range(2 * cfg.n_layers)]
    ids = torch.randint(0, cfg.vocab, (1, 1), generator=gen)
    return lambda: model(ids, *cache)


def _walls_s(fns, budget_s: float) -> list[float]:
    """Each forward's median wall time, the forwards timed in interleaved passes (one sample of each
    per pass, timing.bench_round_robin: samples of at least 1 ms, within ``budget_s`` in all), so
    that a slow spell of a shared machine lands in every model's samples, not in one model's figure
    (two calibrations minutes apart had put tiny_gpt2's step at 605 and 345 us when timed one after
    the other)."""
    from roofline.measure.timing import bench_round_robin

    return [t.median_s for t in bench_round_robin(fns, budget_s=budget_s, max_repeats=200)]


def framework_gap(cal, budget_s: float = 1.0) -> tuple[float | None, str]:
    """(seconds per gap between top-level ops, how it was measured) on the CPU of calibration ``cal``
    (a Calibration with its class probes); (None, why) where it cannot be measured."""
    from torch.profiler import ProfilerActivity, profile

    from roofline.measure.calibrated import CalibratedModel
    from roofline.measure.device import quiet_profiler
    from roofline.measure.machine_file import parse_profile, render_profile
    from roofline.trace.profiler import profile_report

    quiet_profiler()
    if cal.device != "cpu":
        return None, "measured on a CPU only"
    machine, _ = parse_profile(render_profile(cal), "calibration")
    model = CalibratedModel(cal)
    gaps, parts = [], []
    steps = {name: _decode_step(name) for name in FRAMEWORK_MODELS}
    with tempfile.TemporaryDirectory(prefix="roofline-framework-") as tmp, torch.no_grad():
        walls = dict(zip(steps, _walls_s(list(steps.values()), budget_s * len(steps))))
        for name, fn in steps.items():
            wall = walls[name]
            path = Path(tmp) / f"{name}.json"
            with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
                fn()
            prof.export_chrome_trace(str(path))
            rep = profile_report(path, machine, model)
            if rep.between_ops_gaps < 1:
                continue
            ops_s = rep.unprofiled_s - rep.framework_s  # the costed ops at the wall-clock probes' times
            gaps.append(max(wall - ops_s, 0.0) / rep.between_ops_gaps)
            parts.append(f"{name} {wall * 1e6:,.0f} us, its ops {ops_s * 1e6:,.0f} us predicted, {rep.between_ops_gaps} gaps")
    if not gaps:
        return None, "no gaps between ops were recorded"
    return float(statistics.mean(gaps)), f"a decode step against {FRAMEWORK_CONTEXT} tokens: " + "; ".join(parts)
