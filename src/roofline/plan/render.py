"""Plain-text tables for the planning results (decode, train, sweep), rendered from the result
objects. Units are converted here, at the edge: ms, GB (decimal, as machine memory is labelled),
TFLOP/s, days.
"""

from __future__ import annotations

from roofline.plan.limits import MAX_CONTEXT, SEARCH_MAX_BATCH
from roofline.tables import grid
from roofline.units import DTYPE_BYTES, GIGA, MS, TERA, format_cell, format_si, indefinite_article
from roofline.plan.precision import KEPT_DTYPE


def note_line(n: str) -> str:
    """A plan's note as printed: 'left out: ...' as it is, anything else after 'note: '."""
    return n if n.startswith(("left out:", "note:")) else f"note: {n}"


def _limit_line(plan, label: str, key: str, value: int) -> str:
    """A memory limit, said for what it is: none when even the weights do not fit, unbounded when
    the cache stops growing, capped by the model's trained context."""
    if value == 0 and plan.parts and plan.capacity_bytes is not None and plan.parts[0].bytes > plan.capacity_bytes:
        return f"{label}: none (the weights alone exceed the memory)"
    if key == "max_context_at_batch" and value >= MAX_CONTEXT:
        return f"{label}: unbounded (the cache stops growing: windowed or state-space layers; searched to {MAX_CONTEXT:,})"
    return f"{label}: {value:,}"


def count_text(n) -> str:
    """15e12 -> '15T', 3e11 -> '300B', 4194304 -> '4.19M' (decimal, as token counts are quoted)."""
    v = float(n)
    for suffix, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= scale:
            return f"{v / scale:.3g}{suffix}"
    return f"{v:,.0f}"


def _ms(seconds) -> str:
    return format_cell(float(seconds) / MS, 2)


def _pct(x) -> str:
    return f"{float(x):.0%}"


def _cost_line(cm) -> str:
    return cm.describe()


def _config(step):
    """The Model a prediction is of (a config file's has no preset key to look up)."""
    from roofline.transformer import get_model

    return step.config or get_model(step.model)


def _cache_name(step) -> str:
    from roofline.transformer import cache_name

    return cache_name(_config(step))


def _attention_text(step) -> str:
    """'flash attention', or what a model without (standard) attention layers is costed with."""
    kinds = _config(step).kinds
    if not any(k.attends for k in kinds):
        return "no attention (state-space layers)"
    return f"{step.attention} attention"


LAUNCH_SHOWN = 0.10  # a decode table shows its launch share once some batch spends this much of its step launching


def decode_table(plan) -> str:
    """The decode-versus-batch table with its header and the planner's readouts."""
    s = plan.step
    mem = plan.memory
    cap = mem.capacity_bytes
    S = int(s.context)
    rows = plan.rows()
    tp = f", tensor parallel {s.tensor_parallel} over {plan.link or _tp_link(s)}" if s.tensor_parallel > 1 else ""
    head = [
        f"{model_name(s.model)} decode on {s.machine_spec.name}: context {S:,}, {_attention_text(s)}, "
        f"{s.precision.label()}{tp}",
        _cost_line(s.cost_model),
        f"weights {format_si(mem.parts[0].bytes, 'B')} per GPU ({_weights_read(plan, rows)}); "
        f"{_cache_name(s)} {format_si(plan.kv_per_sequence_bytes, 'B')} per sequence"
        f"{' per GPU' if s.tensor_parallel > 1 else ''}; "
        f"memory {format_si(cap, 'B') if cap else 'unknown'}",
    ]
    if plan.prefill is not None:
        head.append(f"time to first token for {indefinite_article(S)} {S:,}-token prompt at batch 1: {_ms(plan.prefill.time_s)} ms")
    show_link = any(r["link_share"] > 0 for r in rows)
    show_launch = any(r["launch_share"] >= LAUNCH_SHOWN for r in rows)  # a reviewer saw a 69% launch share unshown
    cache = {"KV cache": "KV read GB", "SSM state": "state r+w GB", "KV cache + SSM state": "KV+state GB"}[_cache_name(s)]
    headers = ["batch", "step ms", "tokens/s", "FLOP/B", "weights read GB", cache, "matmuls", "step", "mem-bound"]
    headers += ["link-bound"] if show_link else []
    headers += ["launch"] if show_launch else []
    headers += ["fits"]
    table = []
    for r in rows:
        row = [f"{r['batch']:,}", _ms(r["step_s"]), f"{r['tokens_per_s']:,.0f}", f"{r['intensity']:,.1f}",
               f"{r['weight_bytes'] / GIGA:,.2f}", f"{r['kv_bytes'] / GIGA:,.2f}", r["gemm_bound"], r["bound"],
               _pct(r["memory_bound_share"])]
        row += [_pct(r["link_share"])] if show_link else []
        row += [_pct(r["launch_share"])] if show_launch else []
        row += ["-" if r["fits"] is None else ("yes" if r["fits"] else "no")]
        table.append(row)
    right = ([True, True, True, True, True, True, False, False, True] + ([True] if show_link else [])
             + ([True] if show_launch else []) + [False])
    lines = head + ["", grid(headers, table, right), ""] + _decode_readouts(plan, rows)
    lines += [note_line(n) for n in mem.notes if n != s.precision.replaces]  # the header said that one
    return "\n".join(lines)


def _decode_readouts(plan, rows) -> list[str]:
    """decode_table's lines below the table: where the matmuls and the whole step turn compute-bound,
    launches, the largest batch in memory, where KV-cache reads overtake weight reads."""
    s, mem = plan.step, plan.memory
    cap, S = mem.capacity_bytes, int(s.context)
    ridge = s.machine_spec.ridge(s.precision.compute)
    cm = s.cost_model
    lines: list[str] = []
    cb = plan.compute_bound_batch
    lines.append(
        f"matmuls turn compute-bound at batch {cb:,}" if cb else f"matmuls stay memory-bound up to batch {SEARCH_MAX_BATCH:,}"
    )
    per_batch = 2.0 / DTYPE_BYTES[s.precision.weights]  # 2 FLOPs per weight per sequence over w bytes
    view = "batch" if per_batch == 1 else f"{per_batch:g} x batch"
    if plan.experts:  # a dense weight is used by every sequence, an expert's by those routed to it
        k = plan.experts[1]
        view = f"{view} (dense weights) or {view} x {k} / experts touched (experts)"
    at_fractions = (f", {ridge * cm.compute_efficiency / cm.memory_efficiency:,.0f} at e_c/e_m"
                    if cm.compute_efficiency is not None else "")
    if s.precision.stored is not None:
        lines[-1] += (f" (weights-only intensity: 2 x batch / bytes per weight, each part at its stored width; "
                      f"{s.precision.compute} ridge {ridge:,.0f} FLOP/B{at_fractions})")
    else:
        lines[-1] += (f" (weights-only intensity = {view} with {s.precision.weights} weights; {s.precision.compute} ridge "
                      f"{ridge:,.0f} FLOP/B{at_fractions})")
    if plan.experts and cb:  # the verdict is the step's matmuls summed: the dense ones cross first, the experts' later
        lines[-1] += ("; summed over every matmul of the step (the dense projections cross first, the routed experts' "
                      "at their own intensity, later: --breakdown B shows each)")
    scb = plan.step_compute_bound_batch
    lines.append(f"the whole step turns compute-bound at batch {scb:,}" if scb else _step_limit_text(plan))
    worst = max(rows, key=lambda r: r["launch_share"])
    if worst["launch_share"] >= 0.2 and not s.cost_model.cuda_graph:
        lines.append(f"launches are {_pct(worst['launch_share'])} of the step at batch {worst['batch']:,} (a "
                     f"{s.cost_model.launch_overhead_s * 1e6:g} us launch per kernel): engines capture decode steps as "
                     "CUDA graphs, one launch a step; --cuda-graph prices that")
    if plan.max_batch_in_memory is None:
        lines.append("largest batch in memory: unknown (the machine gives no capacity)")
    elif plan.max_batch_in_memory == 0:
        lines.append(f"largest batch in memory: 0. {mem.verdict}")
    else:
        share = dict(mem.settings).get("memory_fraction")
        of = f" ({share:g} of {format_si(cap / share, 'B')})" if share is not None else ""
        lines.append(f"largest batch whose weights, KV cache and a step's activations fit in {format_si(cap, 'B')}{of} "
                     f"at context {S:,}: {plan.max_batch_in_memory:,}")
    cross = plan.kv_crossover_context
    if cross is None:
        lines.append("KV-cache reads never overtake weight reads at batch 1: the cache stops growing (windowed or "
                     "state-space layers) before it reaches the weights")
    else:
        at_b = (f"at batch B the tokens touch more experts, so later than {cross:,} / B" if plan.experts
                else f"at batch B: {cross:,} / B for a dense model")
        lines.append(f"KV-cache reads overtake weight reads at context {cross:,} at batch 1 ({at_b})")
    return lines


def _weights_read(plan, rows) -> str:
    """What a decode step reads of the weights: all but the embedding table (dense), or the
    experts its tokens touch (MoE: E(1 - (1 - k/E)^B) of E per layer, on average)."""
    if not plan.experts:
        if _config(plan.step).tied_embeddings:  # the LM head is the embedding: a step reads it whole
            return "a step reads all of them: the LM head is the tied embedding table"
        return "a step reads all but the embedding table"
    E, k = plan.experts
    lo, hi = rows[0], rows[-1]
    text = (f"all {E} experts; a step reads the {E}(1 - (1 - {k}/{E})^B) per layer that its tokens touch: "
            f"{lo['weight_bytes'] / GIGA:,.2f} GB at batch {lo['batch']:,}")
    return text + (f", {hi['weight_bytes'] / GIGA:,.2f} GB at {hi['batch']:,}" if len(rows) > 1 else "")


def _step_limit_text(plan) -> str:
    """Why the step as a whole never turns compute-bound up to SEARCH_MAX_BATCH."""
    limit, n = plan.step_limit, SEARCH_MAX_BATCH
    if limit == "link":
        return (f"the step as a whole never turns compute-bound up to batch {n:,}: its tensor-parallel all-reduces over "
                f"{plan.link or _tp_link(plan.step)} take longer than its FLOPs (link-bound)")
    read = plan.kv_read_per_sequence_bytes  # DSA reads less than it keeps
    kv = format_si(plan.kv_per_sequence_bytes if read is None else read, "B")
    why = {"kv_cache": f"each sequence's KV-cache reads ({kv}) take longer than its FLOPs",
           "weights": "its weight reads take longer than its FLOPs",
           "activations": "its activation reads and writes (norms, element-wise ops) take longer than its FLOPs"}
    text = (f"the step as a whole never turns compute-bound up to batch {n:,}: there, "
            f"{why.get(limit, why['kv_cache'])} (memory-bound)")
    linked = [r["batch"] for r in plan.rows() if r["bound"] == "link"]
    if linked:  # the batches shown can be held by another limit than the largest batch's
        text += (f"; at batch {linked[0]:,}{' to ' + format(linked[-1], ',') if len(linked) > 1 else ''} the tensor-parallel "
                 f"all-reduces over {plan.link or _tp_link(plan.step)} hold it (link-bound)")
    return text


def _used_text(ratio: float) -> str:
    """A memory's use: '84% used'; past 10x, as a multiple ('2,000x the memory', not '200000% used')."""
    return f"{ratio:.0%} used" if ratio < 10 else f"{ratio:,.0f}x the memory"


def model_name(key: str) -> str:
    from roofline.errors import RooflineError
    from roofline.transformer import get_model

    try:
        return get_model(key).name
    except RooflineError:  # a config.json's name, not a preset key
        return key


def _tp_link(s) -> str:
    for op in s.ops:
        if op.kernel.link:
            return op.kernel.link
    return "?"


def train_table(plan) -> str:
    lay = plan.layout
    if plan.convention == "6nd":
        conv = f"6ND, N = {plan.params / GIGA:.3g}B parameters per token (the roofline chapter, section 2.3)"
        other = f"6N + {plan.context_terms} at s = {plan.seq_len:,} (matmul N, attention in full)"
    else:
        conv = f"6N + {plan.context_terms} at s = {plan.seq_len:,}, N = {plan.params / GIGA:.3g}B matmul parameters"
        other = "6ND"
    diff = plan.other_convention_flops / plan.training_flops - 1
    lines = [
        f"{model_name(plan.model)} training on {plan.gpus:,} x {plan.memory.machine_name or plan.machine} ({plan.peak_flops_per_s / TERA:,.0f} TFLOP/s dense "
        f"{plan.dtype} each)",
        f"{count_text(plan.tokens)} tokens, sequence {plan.seq_len:,}, {'no' if plan.recompute == 'none' else plan.recompute} "
        f"recompute; {lay.label()}",
        "",
    ]
    rows = [
        ["model FLOPs", f"{plan.training_flops:.3g}", conv],
        ["  other convention", f"{plan.other_convention_flops:.3g}", f"{other}: {diff:+.0%}"],
        ["hardware FLOPs", f"{plan.hardware_flops:.3g}", "executed, recomputation included"],
        ["MFU", _pct1(plan.mfu), "model FLOPs / (GPUs x peak x time)"],
        ["HFU", _pct1(plan.hfu), "hardware FLOPs / (GPUs x peak x time)"],
        ["time", f"{plan.days:,.1f} days" if plan.days >= 0.1 else f"{plan.seconds / 3600:,.3g} hours"
         if plan.seconds >= 360 else f"{plan.seconds:,.3g} s",
         f"{plan.seconds:,.0f} s" if plan.seconds >= 360 else ""],  # the value is in seconds below 360 s
        ["GPU-hours", f"{plan.gpu_hours:,.0f}" if plan.gpu_hours >= 100 else f"{plan.gpu_hours:,.3g}", ""],
    ]
    if plan.cost is not None:
        rows.append(["cost", f"${plan.cost:,.0f}", f"at ${plan.price_per_gpu_hour:,.2f} per GPU-hour"])
    lines.append(grid(["", "value", "how"], rows, [False, True, False]))
    lines += _train_limits(plan)
    lines += ["", plan.memory.to_table(), ""]
    steps = f"{plan.steps:,.0f} steps" if plan.steps >= 1 else f"the run is {plan.steps:.2g} of a step"
    lines.append(f"one optimizer step: {lay.global_batch_tokens:,.0f} tokens, {steps}; compute "
                 f"{plan.step_compute_s:,.3f} s per step at this utilisation")
    if plan.step is not None:
        rows = []
        for op in plan.step.ops:
            rows.append([op.name, format_si(op.bytes, "B"), f"{op.time_s:,.3f}", _pct(op.time_s / plan.step_compute_s), op.bound])
        lines.append(grid(["collective per GPU per step", "bytes sent", "seconds", "of compute", "bound"], rows,
                          [False, True, True, True, False]))
        share = plan.step_communication_s / plan.step_compute_s
        tp_s = plan.step_tensor_parallel_s
        verdict = ("the links would take longer than the compute: link-bound even with perfect overlap"
                   if share > 1 else "it must overlap with the backward pass to stay hidden" if share > 0.3
                   else "small enough to hide behind the backward pass")
        if tp_s and share <= 1:  # Megatron-LM's TP all-reduces sit between a layer's matmuls: nothing to hide them
            verdict = (f"the TP all-reduces ({tp_s:,.3f} s, {tp_s / plan.step_compute_s:.0%}) sit on the critical path "
                       "between a layer's matmuls; " + verdict.replace("it must overlap", "the rest must overlap")
                       .replace("small enough", "the rest small enough"))
        lines.append(f"communication {plan.step_communication_s:,.3f} s per step = {share:.0%} of compute: {verdict} "
                     "(links at full per-direction bandwidth; ring algorithms)")
    else:
        lines.append("no collectives costed" if plan.notes else "no collectives (one GPU)")
    lines += [note_line(n) for n in plan.notes]
    return "\n".join(lines)


def _train_limits(plan) -> list[str]:
    """What the utilisation asked for cannot be: a step whose links outlast its compute (the time
    and MFU above assume they hide), and a pipeline's 1F1B bubble, (p - 1) / (m + p - 1) of a step
    idle with m micro-batches in flight per step."""
    out = []
    if plan.tokens < plan.layout.global_batch_tokens:
        out.append(f"!! {count_text(plan.tokens)} tokens are {plan.tokens / plan.layout.global_batch_tokens:.2g} of one global "
                   f"batch ({plan.layout.global_batch_tokens:,.0f} tokens): the run is a fraction of one optimizer step "
                   "(--global-batch sets it)")
    if plan.step is not None and plan.step_communication_s > plan.step_compute_s:
        slow = plan.step_communication_s / plan.step_compute_s
        out.append(f"!! link-bound: {plan.step_communication_s:,.3f} s of communication per step outlasts its "
                   f"{plan.step_compute_s:,.3f} s of compute: the time and MFU above assume the links hide; a step takes "
                   f"at least {plan.step_communication_s:,.3f} s, the run at least {plan.days * slow:,.1f} days, MFU at most "
                   f"{plan.mfu / slow:.1%}")
    lay = plan.layout
    if lay.pipeline_parallel > 1:
        p, m = lay.pipeline_parallel, lay.micro_batches(plan.seq_len)
        bubble = (p - 1) / (m + p - 1)
        line = (f"pipeline: {m:,} micro-batch(es) per step through {p} stages leave each stage idle {bubble:.0%} of a "
                f"step under 1F1B ((p - 1) / (m + p - 1)): MFU can be at most {1 - bubble:.0%}")
        if plan.mfu > 1 - bubble:
            line = "!! " + line + f": the MFU asked, {plan.mfu:.1%}, is past it (more micro-batches per step, --global-batch, shrink the bubble)"
        out.append(line)
    return out


def _pct1(x) -> str:
    return f"{float(x):.1%}"


def sweep_table(result) -> str:
    over = result.over
    fixed = ", ".join(f"{k} {v:,}" for k, v in result.fixed)
    precision = result.precision.label()
    if result.precisions:
        precision = "; ".join(f"{m}: {p.label(scales=False)}" for m, p in result.precisions) + next(
            (p.scales_left_out(parts=False) for _, p in result.precisions if p.scales_left_out()), "")
    if result.tensor_parallel > 1:
        links = {s.link for s in result.series}
        over_link = links.pop() if len(links) == 1 else ", ".join(f"{s.machine} {s.link}" for s in result.series)
        precision += f"; tensor parallel {result.tensor_parallel} over {over_link}"
    lines = [f"{model_name(result.model)} {result.phase} sweep over {over} ({fixed}; {result.attention} attention, "
             f"{precision})", ""]
    key = {"tokens": "tokens", "batch": "batch", "context": "context"}.get(over)
    time_label = "TTFT ms" if result.phase == "prefill" else "step ms"
    headers = (["machine"] if over == "machines" or len(result.series) > 1 else []) + ([key] if key else [])
    headers += [time_label, "tokens/s", "FLOP/B", "mem-bound", "bound", "memory GB", "fits"]
    rows, records = [], result.rows()
    for r in records:
        row = ([r["machine"]] if over == "machines" or len(result.series) > 1 else []) + ([f"{r[key]:,}"] if key else [])
        row += [_ms(r["time_s"]), f"{r['tokens_per_s']:,.0f}", f"{r['intensity']:,.1f}", _pct(r["memory_bound_share"]), r["bound"],
                f"{r['memory_bytes'] / GIGA:,.1f}", "-" if r["fits"] is None else ("yes" if r["fits"] else "no")]
        rows.append(row)
    n_lead = len(headers) - 7
    right = [h != "machine" for h in headers[:n_lead]] + [True, True, True, True, False, True, False]
    lines.append(grid(headers, rows, right))
    lines += [note_line(n) for n in result.notes]
    if any(r["fits"] is False for r in records):
        lines.append("note: rows marked 'no' need more memory than one GPU has (weights + every sequence's cache): "
                     "their times assume a machine that holds it")
    return "\n".join(lines)


def _recompute_text(recompute) -> str:
    return "no recompute" if recompute in (None, "none") else f"{recompute} recompute"


def memory_table(plan) -> str:
    """A MemoryPlan: what it assumes, its parts against the capacity, the verdict and the limits."""
    given = dict(plan.settings)
    if plan.mode == "inference":
        prec = given.get("precision", {})
        weights = prec.get("weights")
        if prec.get("weights_stored"):
            formats: dict = {}
            for p in prec["weights_stored"]:
                formats.setdefault(p["format"], []).append(p["part"].replace("_", " "))
            rest = weights.rsplit("the rest ", 1)[-1]
            weights = "as stored (" + "; ".join(f"{', '.join(v)} {k}" for k, v in formats.items()) + f"; the rest {rest})"
        kept = (f" (LM head, embeddings, norms and any MoE router {KEPT_DTYPE})"
                if not prec.get("weights_stored") and DTYPE_BYTES.get(str(weights), 2.0) < DTYPE_BYTES[KEPT_DTYPE] else "")
        what = (f"batch {given.get('batch', 0):,} x context {given.get('context', 0):,}, weights {weights}{kept}, "
                f"KV cache {prec.get('kv_cache')}")
        tp = given.get("tensor_parallel", 1)
        what += f", tensor parallel {tp}" if tp > 1 else ""
    else:
        what = (f"data {given.get('data_parallel')} x tensor {given.get('tensor_parallel')} x pipeline "
                f"{given.get('pipeline_parallel')}, ZeRO {given.get('zero')}, micro-batch {given.get('micro_batch')} x "
                f"sequence {given.get('seq_len', 0):,}, {_recompute_text(given.get('recompute'))}, "
                f"{given.get('attention')} attention")
    head = f"memory per GPU, {model_name(plan.model)} {plan.mode}: {what}"
    rows = [[p.name.replace("_", " "), format_si(p.bytes, "B"), _pct(p.bytes / plan.total_bytes)] for p in plan.parts]
    rows.append(["total", format_si(plan.total_bytes, "B"), "100%"])
    if plan.capacity_bytes is not None:
        share = dict(plan.settings).get("memory_fraction")
        rows.append([f"{plan.machine_name or plan.machine} memory" + (f" x {share:g}" if share is not None else ""),
                     format_si(plan.capacity_bytes, "B"),
                     _used_text(plan.total_bytes / plan.capacity_bytes)])
    lines = [head, "", grid(["part", "bytes", "share"], rows), "", plan.verdict]
    labels = {"max_batch_at_context": f"largest batch at context {given.get('context', 0):,}",
              "max_context_at_batch": f"longest context at batch {given.get('batch', 0):,} (tokens)"}
    lines += [_limit_line(plan, labels.get(k, k.replace('_', ' ')), k, v) for k, v in plan.limits]
    if plan.mode == "inference" and given.get("kv_bytes_per_token") is not None:  # was in --json alone
        per_seq = given.get("kv_bytes_per_sequence")
        lines.append(f"kv cache per token (each further one, per GPU): {format_si(given['kv_bytes_per_token'], 'B')}"
                     + (f"; a sequence of {given.get('context', 0):,}: {format_si(per_seq, 'B')}" if per_seq else ""))
    lines += [note_line(n) for n in plan.notes]
    return "\n".join(lines)
