"""What a simulated serving run delivers, assembled from its final state (scheduler.simulate):
the per-request latencies, the per-step records, the run's means, and its notes: the cache's
memory line, how the engine makes a step, what the figures were validated against, and what the
run says of its own load.
"""

from __future__ import annotations

import numpy as np

from roofline.serving.engine import Engine
from roofline.serving.engines import fitted_eager_op_s, fitted_step_overhead_s, names
from roofline.serving.results import PERCENTILES, ServingResult, overload_note, step_settings, weighted_percentiles
from roofline.transformer import cache_name
from roofline.units import GIGA, format_duration, format_typed_ms


# what every serving figure carries: its validation's direction (docs/serving-validation.md)
MEASURED_VALIDATION_NOTE = ("against 3,199 measured deployments (docs/serving-validation-measured.md), an engine's "
                            "defaults (--engine) on its measured kernels predicted time per output token within a median "
                            "10% on models held out of its fitted figures (97% of rows within 1.5x), time to first "
                            "token within a median 20% (a median 0.67 of the measured on SGLang, 0.97 on vLLM, 1.13 on "
                            "TensorRT-LLM: docs/serving-validation.md)")
VALIDATION_NOTE = ("against published engine benchmarks (docs/serving-validation.md) this model is optimistic in most "
                   "rows, most where a server queues and for multi-GPU latency: read its throughput as an upper bound "
                   "and its latencies as a lower bound on what an engine delivers")


def _kernel_version_words(step, engine) -> str:
    """Where an engine's defaults (cited for the versions engines.toml names) meet its measured
    kernels of another version: said, with what is assumed."""
    tables = getattr(step.cost_model, "tables", "") if step.measured else ""
    if not tables or not engine.preset or not tables.lower().startswith(engine.preset + " "):
        return ""
    from roofline.serving.engines import versions_cover

    version = tables.split(" ")[1]
    if versions_cover(engine.preset, version):
        return ""
    return (f"; its kernels are the measured tables of {tables}, a version past those these defaults were read "
            "for: the defaults are assumed unchanged in it")


def validation_note(step, engine) -> str:
    """What the run's figures were validated against: an engine's defaults on its own measured
    kernels (the measured deployments), measured kernels alone or moved to another GPU (not
    validated as such: said), or the plate's model (the published benchmarks)."""
    if not step.measured:
        return VALIDATION_NOTE
    moved = getattr(step.cost_model, "measured_on", "")
    if moved:
        from roofline.machines import get_machine

        return (f"kernels transferred from the {get_machine(moved).name}: the measured deployments (docs/serving-validation-measured.md) "
                "ran on the GPUs their tables were measured on, so this GPU's forecast is not validated; read it as an "
                "estimate of the measured GPU's efficiency on this one's roofline")
    if not engine.preset:
        return (MEASURED_VALIDATION_NOTE + "; this run took measured kernels without an engine's defaults (--engine), "
                "which that validation did not cover")
    return MEASURED_VALIDATION_NOTE


def scheduler_words(engine: Engine) -> str:
    """How the engine makes a step, in words (the run's scheduler note)."""
    feed = "prompt chunks" if engine.chunked_prefill else "whole prompts"
    if engine.mixed_steps:
        how = f"decodes first, then {feed} within max_tokens in the same step"
        return how + (" (vLLM V1 with chunked prefill)" if engine.chunked_prefill else " (TensorRT-LLM without chunked prefill)")
    return f"a step of {feed} alone (within max_tokens) whenever one can start, the decodes waiting it out; else a decode step"




def scheduler_note(step, engine: Engine) -> str:
    """The run's scheduler line: how a step is made, what preemption does, how the cache is kept."""
    hit = engine.prefix_hit
    admission = ("; admission reserves each request's cache to its last token, none preempted (TensorRT-LLM's "
                 "GUARANTEED_NO_EVICT); " if engine.admission == "reserve_full" else "; preemption recomputes the newest sequence; ")
    return ("scheduler: " + scheduler_words(engine) + admission
            + ((f"cache in blocks of {engine.block_size} tokens" if engine.block_size > 1 else "cache a token a slot (no blocks)")
               if cache_name(step.model) != "SSM state" else "one state per sequence, its size fixed (no blocks)")
            + (f"; prefix hits skip {hit:.0%} of each prompt (its cache still held)" if hit else ""))


def memory_bound_head(step) -> str:
    """How the memory-bound note begins: a pipelined replica's stage engines (step.pipeline_stages
    of them, each this scheduler over its share) say that each of them is bound."""
    p = step.pipeline_stages
    return "memory-bound batch" + (f", each of the {p} virtual engines" if p > 1 else "")


def _setup_notes(step, engine: Engine, cap: float, parts: dict) -> tuple:
    """The run's setting in words: the cache's memory line, the engine's defaults, how a step is
    made, and how its kernels launch."""
    per_gpu = cap / step._dp  # what each GPU keeps for its cache (the draft's weights out): the engine line's
    gpus = step.tensor_parallel * step.pipeline_stages  # the replica's GPUs
    what = cache_name(step.model)
    return (f"{what} {per_gpu / GIGA:,.1f} GB per GPU"
            + (f" ({gpus} GPUs in the replica: {per_gpu * gpus / GIGA:,.1f} GB)" if gpus > 1 else "")
            + (f": {engine.memory_fraction:g} of what {step.machine.capacity_text} leaves after " if engine.memory_of_free
               else f": {engine.memory_fraction:g} of {step.machine.capacity_text} less ")
            + f"weights {parts['weights_bytes'] / GIGA:,.1f} GB"
            + (f", the draft's {parts['draft_weights_bytes'] / GIGA:,.1f} GB" if "draft_weights_bytes" in parts else "")
            + f" and a full step's activations {parts['activations_bytes'] / GIGA:,.2f} GB (an estimate: "
            + "{:,} rows of the widest op and fp32 logits for {:,} sequences) per GPU".format(*step.rank_budget())
            + "; not counted: the CUDA context, NCCL buffers and "
            "CUDA graph pools" + (" (vLLM logs 0.1 GiB of non-torch memory at tensor-parallel 1, up to ~2 GiB at 8)"
                                  if engine.preset in ("", "vllm") else ""),
            *((engine.label + _kernel_version_words(step, engine),) if engine.label else ()),
            scheduler_note(step, engine),
            "each replica simulated alone; a decode-only step replays a CUDA graph (one launch); a step with a "
            f"prompt chunk launches each kernel ({step.cost_model.launch_overhead_s / 1e-6:g} us each), as engines "
            "capture decode batches only"
            if step.cost_model.cuda_graph else "each replica simulated alone; every op of a step pays a launch (no CUDA graph)")


def _borrowed_notes(engine) -> tuple:
    """What the run says of a setting one engine has, given to another or half given: TensorRT-LLM's batch
    waiting (it holds prompts only where both its steps and its ratio are above 0) and SGLang's receive interval."""
    notes, who = (), (f"the {engine.preset} engine's defaults" if engine.preset else "the simulated engine (no --engine)")
    if (engine.batch_wait_steps > 0) != (engine.batch_wait_ratio > 0):
        notes += ("batch waiting holds prompts only where both --batch-wait-steps and --batch-wait-ratio are above 0 "
                  "(TensorRT-LLM's batch_wait_timeout_iters and batch_wait_max_tokens_ratio): one is given, so none is "
                  "held",)
    elif engine.batch_waiting and engine.preset != "trtllm":
        notes += (f"batch waiting is TensorRT-LLM's (batch_wait_timeout_iters, batch_wait_max_tokens_ratio): applied "
                  f"as given to {who}",)
    if engine.adp_balance and engine.preset != "trtllm":
        notes += (f"attention-DP balance is TensorRT-LLM's (attention_dp_config enable_balance): applied as given to "
                  f"{who}",)
    if engine.recv_interval > 1 and engine.preset != "sglang":
        notes += (f"the receive interval is SGLang's (--scheduler-recv-interval): applied as given to {who}",)
    return notes


def _run_notes(st, requests, over: str | None) -> tuple:
    """The notes of RunState ``st`` at its end: its setting, then what its load and lengths say."""
    step, engine, inp, out, draft = st.step, st.engine, st.inp, st.out, st.draft
    cap, parts, what = st.pool.cap, st.parts, cache_name(step.model)
    notes = _setup_notes(step, engine, cap, parts)
    if not engine.chunked_prefill and int(inp.max()) > engine.max_tokens // 2:
        notes += (f"without chunked prefill a prompt of up to {int(inp.max()):,} tokens starts only in a step whose decodes "
                  f"leave it room in max_tokens {engine.max_tokens:,}: under load it waits for decodes to end (a "
                  "TensorRT-LLM deployment of such lengths raises max_num_tokens or enables chunked prefill: "
                  "--max-tokens)",)
    notes += (validation_note(step, engine),)
    if engine.step_overhead_s:
        notes += (f"each step adds {format_typed_ms(engine.step_overhead_s)} of the engine's own time (scheduling, inputs, "
                  "sampling, detokenising), not overlapped with the GPU's work"
                  + (f" ({engine.since_note})" if engine.since_note else ""),)
    elif engine.since_note:  # a default the engine changed at a version (vLLM's async scheduling: engines.toml)
        notes += (f"{engine.since_note} (the CLI's --step-overhead sets one)",)
    elif engine.preset and fitted_step_overhead_s(engine.preset) == 0:  # TensorRT-LLM's: data/engines.toml says why
        notes += ("a step is the GPU's work alone: this engine's time per step, fitted on measured deployments, is 0 "
                  "(its host work overlaps the GPU's; the CLI's --step-overhead sets one)",)
    else:
        notes += ("a step is the GPU's work alone: the engine's own time between steps (scheduling, sampling, "
                  "detokenising) is not counted (the CLI's --step-overhead adds it; --engine adds the engine's figure "
                  "fitted on measured deployments, "
                  f"{format_typed_ms(max(fitted_step_overhead_s(e) for e in names()))} at most: docs/serving.md)",)
    notes += _borrowed_notes(engine)
    if st.adp:
        notes += (f"attention-DP balance: each request runs on one of the {st.adp_ranks} ranks, the one with the fewest "
                  "requests as it arrives (TensorRT-LLM gives a new request to a rank under the mean count, the fewest "
                  "tokens first: the tokens not weighed here); a rank's prompts wait for the others' as the engine "
                  "holds them",)
    if engine.preset and not engine.eager_op_s:
        notes += (f"no host time per op outside a CUDA graph (given 0; the engine's fitted figure is "
                  f"{format_duration(fitted_eager_op_s(engine.preset))}: --eager-op)",)
    if engine.eager_op_s:
        ops = step.eager_ops(0, True)
        notes += (f"each op the host dispatches outside a CUDA graph adds {format_duration(engine.eager_op_s)} of the "
                  f"engine's host time (Python and the framework), not overlapped with the GPU: a step with prompt "
                  f"chunks runs {ops:,} ops, {format_typed_ms(engine.eager_op_s * ops)}"
                  + (f"; one of at most {engine.graph_tokens:,} tokens replays a piecewise CUDA graph: "
                     f"{step.piecewise_ops:,} ops (each layer's attention and graph piece; "
                     "--graph-tokens)" if engine.graph_tokens and step.cost_model.cuda_graph else "")
                  + ("" if step.cost_model.cuda_graph else
                     f"; without CUDA graphs a decode step too ({step.eager_ops(1, False):,} ops: the figure an engine "
                     "fitted was fitted on prompt steps, its decodes in CUDA graphs)"),)
    if engine.request_overhead_s:
        notes += (f"each request adds {format_typed_ms(engine.request_overhead_s)} of the server's own time before the "
                  "scheduler sees it (HTTP, tokenising, routing), counted in its TTFT",)
    if st.closed and st.n > 1 and np.ptp(inp) == 0 and np.ptp(out) == 0:
        notes += ("a closed loop of identical requests: several users start together and resubmit as they finish, so "
                  "they move in step, one prompt wave after another: the percentiles are a few waves repeated, not a spread "
                  "(the first wave, every user's prompt at once, is the slowest); lengths drawn from a range or a dataset "
                  "give the spread a real workload has (the CLI's --input-len LO-HI or --lengths FILE)",)
    past = step.model.context_note(inp + out)
    if past:
        notes = (past,) + notes
    mean_seq = float(np.mean(inp + out))
    holds = cap / max(float(st.pool.table[-(-int(mean_seq) // st.pool.bs)]), 1.0)
    demand = min(engine.max_seqs, requests.concurrency if st.closed else st.n)
    if holds < demand / 2 and (st.preemptions > 0 or max(st.kv_peak, st.pool.committed_peak) >= 0.9 * cap):  # ... the cache filled (or its reservations)
        # the pool's bytes are one GPU's of each data-parallel attention group: the tensor-parallel GPUs' cache (a
        # pipelined virtual engine's: one stage GPU's worth, its sequences' layers spread over the stages)
        held = cap / step._dp * step.tensor_parallel
        notes = (f"{memory_bound_head(step)}: the {held / GIGA:,.2f} GB {what} holds {int(holds):,} sequence(s) of the mean "
                 f"length ({mean_seq:,.0f} tokens), under half of the {demand:,} that could run at once: more GPUs or a narrower "
                 "cache would batch more",) + notes
    if over:
        notes = (over,) + notes
    if draft is not None:
        notes += (f"speculative decoding: {draft.model.name} drafts {st.T - 1} tokens per step, each accepted with probability "
                  f"{engine.acceptance_words()}: {st.E:.2f} tokens per sequence and step on average (the expected value, carried "
                  "from step to step; acceptance is not drawn at random); inter-token latency is the gap between a "
                  "sequence's deliveries, several tokens each; the draft's weights "
                  f"({parts['draft_weights_bytes'] / GIGA:,.1f} GB) and KV cache share the memory",)
    notes += step.notes() + step.model.header_lines()
    if draft is not None:  # the draft's loader notes too, named as the draft's
        notes += tuple(f"draft {draft.model.name}: {line}" for line in draft.model.header_lines())
    return notes


def assemble(st, requests, price_per_gpu_hour: float | None):
    """The ServingResult of the finished RunState ``st``."""
    step, out, inp, cap = st.step, st.out, st.inp, st.pool.cap
    t_start = st.t0 or 0.0
    end = float(np.nanmax(st.finish_t))
    duration = end - t_start
    ttft = st.first_t - st.arrival
    e2e = st.finish_t - st.arrival
    tpot = np.where(out > 1, (st.finish_t - st.first_t) / np.maximum(out - 1, 1), np.nan)
    dts, nds, step_ck, step_pf, step_nc = st.records.arrays()
    gaps, counts = st.records.inter_token(dts, nds)
    busy = float(dts.sum())
    computed = int(step_ck.sum())  # prompt tokens computed (preempted ones again), integers summed exactly
    tokens = st.T * int(nds.sum()) + computed  # tokens fed, every step's
    over = overload_note(st.arrival, e2e, duration, ttft) if not st.closed and duration > 0 else None
    return ServingResult(
        step.describe(), requests.label, st.engine, step.tensor_parallel, ttft, tpot, e2e,
        weighted_percentiles(gaps, counts, PERCENTILES), duration, int(out.sum()), int(inp.sum()), computed,
        st.steps, float((dts * nds).sum() / busy) if busy else 0.0, tokens / max(st.steps, 1),
        st.kv_integral / busy / cap if busy else 0.0, st.kv_peak / cap, st.preemptions,
        st.in_system_integral / max(end - t_start, 1e-300), cap, _run_notes(st, requests, over), price_per_gpu_hour,
        dts, nds, st.arrival.copy(), inp, out, {**step_settings(step), **requests.settings},
        step_ck, step_pf, step_nc, overload=over or "", scheduler=scheduler_note(step, st.engine),
        itl_gaps_s=gaps, itl_counts=counts, held_steps=st.held_steps)
