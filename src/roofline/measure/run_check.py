"""`roofline check`: one block's ops as real PyTorch ops, timed, against three predictions."""

from __future__ import annotations

import datetime as _dt

import torch

from roofline.measure.calibrated import CalibratedModel
from roofline.diagnose.check_report import CheckReport, OpRun, build_report
from roofline.errors import RooflineError, check_number
from roofline.measure.drift import ReferenceCheck
from roofline.measure.reference import check_now
from roofline.measure.blockops import block_ops, planned_bytes, scale_config
from roofline.measure.device import (available_memory_bytes, check_threads, default_dtype, device_info, flush_bytes, make_flush,
                                     require_device, synchronizer)
from roofline.measure.timing import bench_round_robin
from roofline.measure.machine_file import load_profile, parse_profile, render_profile
from roofline.units import GIB

DEFAULTS = {"cpu": {"d_model": 1024, "tokens": 512, "budget_s": 20.0},
            "cuda": {"d_model": None, "tokens": 4096, "budget_s": 30.0}}
QUICK_CALIBRATION_S = {"cpu": 20.0, "cuda": 30.0}


def run_check(device: str = "cpu", model: str = "llama3-8b", d_model: int | None = None, tokens: int | None = None,
              batch: int = 1, phase: str = "prefill", context: int | None = None, attention: str = "naive",
              dtype: str | None = None, profile=None, budget_s: float | None = None, cold: bool = False,
              threads: int | None = None, progress=None) -> CheckReport:
    """Time one block of ``model`` (scaled to ``d_model``) on ``device`` and predict each op from
    ``profile`` (a path from `roofline calibrate`; None: a quick calibration, kept in memory)."""
    require_device(device)
    dflt = DEFAULTS[device]
    d_model = dflt["d_model"] if d_model is None else d_model
    if phase == "decode" and context is None:  # --tokens alone in decode is the cache (its help: default --tokens)
        context = dflt["tokens"] if tokens is None else tokens
        tokens = 1
    elif phase == "decode" and tokens is None:
        tokens = 1
    tokens = dflt["tokens"] if tokens is None else tokens
    budget_s = dflt["budget_s"] if budget_s is None else budget_s
    check_number("budget", budget_s)
    if threads is not None:
        threads = check_threads(threads)
    notes = []
    cfg = scale_config(model, d_model)
    from roofline.transformer import get_model

    own = get_model(model).d_model
    if cfg.d_model != own:  # the block is the model's shape at another width: said, so no one reads it as the model's
        notes.append(f"the block is {get_key(model)} scaled from its d_model {own:,} to {cfg.d_model:,} (heads and d_ff in "
                     f"proportion, head dim kept); --d-model {own} checks it at its own width")
    if profile is not None:  # read first: its dtype sizes the block, and a bad file fails before any timing
        machine, cal = load_profile(profile)
        if cal.device != device:
            raise RooflineError(f"profile {profile} was measured on {cal.device}, not {device}", field="profile")
    dtype = dtype or (cal.default_dtype if profile is not None else default_dtype(device))
    require_memory(device, cfg, phase, tokens, batch, context, attention, dtype, cold)
    if profile is None:
        from roofline.measure.calibration import calibrate

        cal = calibrate(device, dtype, QUICK_CALIBRATION_S[device], progress, threads=threads, allow_drift=True)
        machine, cal = parse_profile(render_profile(cal), "quick calibration")
        profile_label = f"none given: a {QUICK_CALIBRATION_S[device]:.0f} s calibration in memory (run `roofline calibrate` for a better one)"
    else:
        profile_label = f"{profile} (measured {cal.date})"
    from roofline.measure.measurements import disagreement_text

    noisy = disagreement_text(cal)
    if noisy:
        notes.append(f"the profile's {noisy}")
    if threads is None and device == "cpu" and torch.get_num_threads() != cal.threads:
        torch.set_num_threads(cal.threads)
        notes.append(f"running with the profile's {cal.threads} thread(s)")
    elif threads is not None:
        torch.set_num_threads(int(threads))
        if threads != cal.threads:
            notes.append(f"{threads} thread(s), but the profile was measured with {cal.threads}: predictions may be off")
    info = device_info(device)
    sync = synchronizer(device)
    moved = reference_check(cal, device, sync, quick=profile is None, notes=notes)
    specs = block_ops(cfg, phase, tokens, batch, context, attention, dtype, device)
    flush = make_flush(device, info.caches) if cold else None
    if progress is not None:
        progress(0.0, f"timing {len(specs)} ops")
    times = bench_round_robin([s.fn for s in specs], sync=sync, flush=flush, budget_s=budget_s, max_repeats=100,
                              progress=(lambda f, label: progress(f, f"timing ops, {label}")) if progress else None)
    runs = [OpRun(s.kernel, t, s.shape, s.dims, s.causal_counted) for s, t in zip(specs, times)]
    if cold:
        notes.append("cold caches: flushed before every run; the calibrated model reads main memory "
                     "(its per-op residuals, fitted on warm probes, applied to the main-memory time)")
    if any(s.causal_counted for s in specs):
        notes.append("QK^T, softmax and PV are counted causal (half the scores) but eager PyTorch computes them all")
    return build_report(
        runs, machine, CalibratedModel(cal, cold),
        device=device, device_name=info.name, profile=profile_label, model=get_key(model), config=_describe(cfg),
        phase=phase, tokens=tokens, context=context, batch=batch, attention=attention, dtype=dtype, threads=info.threads,
        date=_dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z").strip(), notes=tuple(notes),
        reference_then_s=moved.then_s if moved else None, reference_now_s=moved.now_s if moved else None,
        machine_moved=moved.moved if moved else None,
    )


def reference_check(cal, device: str, sync, quick: bool, notes: list) -> ReferenceCheck | None:
    """The profile's reference kernel timed again now (reference.check_now), with a note when the machine
    moved beyond the bound since calibrating, when the profile predates the reference, or when a
    quick calibration (kept despite its drift: check has no --allow-drift) drifted."""
    if quick:
        if cal.reference is not None and cal.reference.beyond:
            notes.append(f"the quick calibration drifted beyond its bound (kept all the same): {cal.reference.text()}")
        return None
    if cal.reference is None:
        notes.append("the profile has no reference timing (written before calibrate timed one): whether this machine "
                     "moved since is not known; calibrate again to have it said")
        return None
    moved = check_now(cal.reference, device, sync)
    if moved.moved:
        notes.append(moved.text())
    return moved


MEMORY_SHARE = 0.8  # of the available memory, at most, for the block's buffers (the rest: torch, the OS)


def require_memory(device: str, cfg, phase: str, tokens: int, batch: int, context: int | None, attention: str,
                   dtype: str, cold: bool = False) -> float:
    """Bytes the block's buffers (and the cold-cache flush buffer) need; a RooflineError naming
    --tokens and --d-model when that is more than MEMORY_SHARE of the memory available on the
    device (MemAvailable from /proc/meminfo on a CPU, cudaMemGetInfo's free on CUDA)."""
    need = planned_bytes(cfg, phase, tokens, batch, context, attention, dtype)
    if cold:
        need += flush_bytes(device_info(device).caches)  # make_flush's buffer
    available = available_memory_bytes(device)
    if need > MEMORY_SHARE * available:
        flags = (f"--tokens {tokens}, --d-model {cfg.d_model}" + (f", --batch {batch}" if batch > 1 else "")
                 + (f", --context {context}" if context else ""))
        raise RooflineError(f"{flags}: the block's buffers need {need / GIB:,.1f} GiB, more than "
                            f"{MEMORY_SHARE:.0%} of the {available / GIB:,.1f} GiB available on {device}; "
                            "give a smaller --tokens or --d-model", field="tokens")
    return need


def get_key(model) -> str:
    from roofline.transformer import get_model

    cfg = get_model(model)
    return cfg.key or cfg.name


def _describe(cfg) -> str:
    from roofline.transformer import TransformerConfig, uniform_config

    cfg = cfg if isinstance(cfg, TransformerConfig) else uniform_config(cfg, "check")
    return (f"d_model {cfg.d_model}, {cfg.n_heads} heads / {cfg.n_kv_heads} kv, head dim {cfg.head_dim}, "
            f"d_ff {cfg.d_ff}")
