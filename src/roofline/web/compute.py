"""The library runs behind the API's endpoints: a validated query (web.params) in, the library's
results out (a LayerReport; a ModelPrediction with its memory plan; a DecodePlan; the serving
view's bounded sweep), with the library's errors named as the API spells its fields. No web stack.
"""

from __future__ import annotations

import contextlib
import dataclasses

import numpy as np

from roofline.blocks import layer_report
from roofline.cost import CostModel
from roofline.errors import RooflineError, unknown_name
from roofline.machines import Machine
from roofline.plan.decode import DEFAULT_BATCHES, decode_plan
from roofline.plan.inference import decode_step, predict_model
from roofline.plan.memory import inference_memory, kv_overtakes_weights_context
from roofline.plan.parallel import tp_link
from roofline.plan.precision import Precision
from roofline.units import MS, US
from roofline.web.catalog import CUSTOM_PREFIX, custom_machine
from roofline.web.params import VIEW_ATTENTION, LayerQuery, ServingQuery
from roofline.web.decode_view import curve_batches


def concurrencies(max_users: int) -> list[int]:
    """The users a sweep runs: 1, 2, 4, ... below ``max_users``, and ``max_users``."""
    out, c = [], 1
    while c < max_users:
        out.append(c)
        c *= 2
    return out + [max_users]


# The serving view's bound: one /api/serving request simulates at most about SWEEP_BUDGET_S of this
# machine's CPU time (the whole sweep), so a request stays well under a second. Each point runs
# requests_per_point(users) requests; the points past the budget are left out and the answer says so
# (`roofline serving --sweep` has no bound).
SWEEP_BUDGET_S = 0.4
REQUESTS_PER_USER, MAX_REQUESTS_PER_POINT = 8, 2000
_REFERENCE_OPS = 27  # ops of a decode step and of a prompt chunk's step of Llama 3 8B, on which the costs were timed


def requests_per_point(users: int) -> int:
    """8 requests per user, at most 2,000, but at least one per user (past 2,000 users)."""
    return min(REQUESTS_PER_USER * users, max(MAX_REQUESTS_PER_POINT, users))


def simulation_cost_s(users: int, requests: int, input_len: int, output_len: int, engine, fit: int, ops: int) -> float:
    """An estimate (from the workload, not a clock) of the CPU seconds the simulator takes for one
    closed-loop point, timed on this project's machine across models and lengths (within 0.4 to 2.4
    times): decode steps at about 0.6 us each (they run in vectorised stretches), a step that feeds
    prompt chunks about 60 us, a preemption its recompute, 10 us per request; scaled by the ops of
    a step. ``fit`` is how many whole requests the KV cache holds at once."""
    running = max(1, min(users, engine.max_seqs, requests))
    batch = max(1, min(running, fit))
    decode_steps = requests * output_len / batch
    chunk_steps = requests * input_len / engine.max_tokens + requests / batch
    grow = output_len / (input_len + output_len)
    preemptions = 2.0 * grow**3 * min(max(0.0, running / max(fit, 1) - 1.0), 4.0) * requests
    weight = ops / _REFERENCE_OPS
    us = weight * (0.6 * decode_steps + 60.0 * chunk_steps
                   + preemptions * (150.0 + 60.0 * (input_len + output_len / 2) / engine.max_tokens))
    return us * US + 10.0 * US * requests + 0.003


def _finite(x) -> bool:
    return bool(np.all(np.isfinite(np.asarray(x, dtype=float))))


def _check_finite(p) -> None:
    """A positive but vanishing efficiency (5e-324 passes "greater than 0") overflows the times to
    infinity: reject it as the field that caused it rather than answer with nulls. ``p`` is a
    WorkloadPrediction (its sizes may be arrays)."""
    if _finite(p.total_s) and _finite(p.flops_only_s) and _finite(p.bytes_only_s):
        return
    field = "compute_efficiency" if not _finite(p.flops_only_s) else "memory_efficiency"
    raise RooflineError(f"{field} {getattr(p.model, field)!r} is too small: the predicted time overflows", field=field)


@contextlib.contextmanager
def library_call(q: LayerQuery):
    """Overflow is checked afterwards and named as a field; decode's context came from tokens
    when the query gave none, so the error names tokens."""
    try:
        with np.errstate(over="ignore", invalid="ignore"):
            yield
    except RooflineError as exc:
        if exc.field == "context" and q.context is None:
            exc.field = "tokens"
        part = {"weights dtype": "weights", "kv_cache dtype": "kv_cache"}.get(exc.field)
        if part and getattr(q, part):  # the part the query gave, else the dtype it came from
            exc.field = part
        _refuse_as_tp(exc)
        raise


def _refuse_as_tp(exc: RooflineError) -> None:
    """A refusal of the library's tensor_parallel raised again as the API spells it ("tp 3 must
    divide ..."), the combination's other parameters kept; any other error is left to its caller."""
    if exc.field == "tensor_parallel":
        raise RooflineError(str(exc).replace("tensor_parallel", "tp"), field="tp", also=exc.also) from None


# The library's field names that /api/serving spells differently.
_SERVING_FIELD = {"tensor_parallel": "tp", "concurrency": "max_users", "requests": "max_users", "slo_ttft": "slo_ttft_ms",
                  "slo_tpot": "slo_tpot_ms", "link": "tp", "gpus_per_node": "tp", "block_size": "max_tokens"}


@contextlib.contextmanager
def serving_call():
    """The library's errors named as /api/serving spells its fields."""
    try:
        with np.errstate(over="ignore", invalid="ignore"):
            yield
    except RooflineError as exc:
        _refuse_as_tp(exc)
        exc.field = _SERVING_FIELD.get(exc.field or "", exc.field)
        raise


class Workshop:
    """One app's machine table ({key: Machine}) and model table ({key: Model}), and the library
    run each view's endpoint makes over them for a query."""

    def __init__(self, machines, models):
        self.machines, self.models = machines, models

    def settle(self, q, view: str):
        """The query with what it left out filled as the CLI fills it (VIEW_ATTENTION, the machine's launch)."""
        launch = q.launch_overhead_us
        if launch is None:
            launch = self.machine_of(q).launch_overhead_s / US
        return dataclasses.replace(q, attention=q.attention or VIEW_ATTENTION[view], launch_overhead_us=launch)

    def machine_of(self, q) -> Machine:
        """The query's machine: a key of the table, or one given by its figures (web.catalog.custom_machine)."""
        if q.machine.startswith(CUSTOM_PREFIX):
            return custom_machine(q.machine)
        machine = self.machines.get(q.machine)
        if machine is None:  # unreachable through the schema; kept for direct callers
            raise unknown_name("machine", q.machine, self.machines)
        return machine

    def cost_model_of(self, q) -> CostModel:
        model = CostModel(q.compute_efficiency, q.memory_efficiency, q.launch_overhead_us * US, q.overlap,
                          getattr(q, "cuda_graph", False))
        if getattr(q, "kernels", None):  # an engine's measured kernels, as `--kernels` (measured.model)
            from roofline.measured.model import MeasuredKernels

            return MeasuredKernels.for_machine(self.machine_of(q), q.kernels, **dataclasses.asdict(model))
        return model

    def compute(self, q: LayerQuery):
        machine, cost_model = self.machine_of(q), self.cost_model_of(q)
        n_layers = self.models[q.model].n_layers
        if q.layer is not None and q.layer >= n_layers:  # refused as the CLI refuses it, for every model
            raise RooflineError(f"layer {q.layer}: {self.models[q.model].name} has layers 0 to {n_layers - 1}", field="layer")
        with library_call(q):
            report = layer_report(
                model=self.models[q.model], machine=machine, phase=q.phase,
                tokens=None if (q.phase == "decode" and q.context is not None) else q.tokens, batch=q.batch,
                context=q.context, attention=q.attention, dtype=q.dtype or machine.default_dtype,
                cost_model=cost_model, layer=None if self.models[q.model].is_uniform else (q.layer or 0),
            )
        _check_finite(report.prediction)
        return report, machine, cost_model

    def layer_alternatives(self, q: LayerQuery, machine: Machine, dtype: str) -> list:
        """The single changes the layer view tries for its "fix this first" line: fused attention,
        fp8 where the machine has an fp8 peak, and a graph of the layer's kernels (launches at no
        cost: the most a CUDA/HIP graph can save)."""
        def layer(**change):
            return lambda: self.compute(dataclasses.replace(q, **change))[0]

        out = []
        if q.attention == "naive":
            out.append(("fused (flash) attention", layer(attention="flash")))
        if dtype in ("bf16", "fp16") and "fp8" in dict(machine.peaks):
            out.append(("fp8 weights and activations (check the accuracy)", layer(dtype="fp8")))
        graph = {"NVIDIA": "a CUDA graph", "AMD": "a HIP graph"}.get(machine.vendor)
        if graph and q.launch_overhead_us > 0 and not q.cuda_graph:
            out.append((f"{graph} for the layer, at most (launch overhead to zero)", layer(launch_overhead_us=0.0)))
        return out

    def precision_of(self, q, machine: Machine) -> Precision:
        """One dtype for weights, activations and KV cache (default: the machine's), with the
        query's weights and kv_cache over it (the plan views); a quantised checkpoint's weights as
        stored when the query names neither dtype nor weights, as the CLI (Precision.resolve)."""
        return Precision.resolve(self.models[q.model], machine, q.dtype, getattr(q, "weights", None), None,
                                 getattr(q, "kv_cache", None))

    def plan_inputs(self, q: LayerQuery) -> dict:
        """The planner's arguments shared by /api/model and /api/decode: with tp > 1, the link the
        all-reduces cross (tp_link: the machine's scale-up link, its network past a node)."""
        machine = self.machine_of(q)
        with library_call(q):
            precision = self.precision_of(q, machine)
            link = tp_link(machine, None, q.tp) if q.tp > 1 else None
        return {"machine": machine, "attention": q.attention, "precision": precision, "cost_model": self.cost_model_of(q),
                "tensor_parallel": q.tp, "link": link}

    def context_of(self, q: LayerQuery) -> int:
        """Tokens in each sequence's KV cache: the prompt in prefill; in decode the context, or
        tokens when none is given (as /api/layer)."""
        return q.context or q.tokens

    def compute_model(self, q: LayerQuery):
        common = self.plan_inputs(q)
        cfg, S = self.models[q.model], self.context_of(q)
        with library_call(q):
            if q.phase == "prefill":
                pred = predict_model(cfg, phase="prefill", tokens=q.tokens, batch=q.batch, context=q.context, **common)
            else:
                pred = predict_model(cfg, phase="decode", tokens=1, batch=q.batch, context=S, **common)
            memory = inference_memory(cfg, common["machine"], q.batch, S, common["precision"], q.tp)
            crossover = kv_overtakes_weights_context(cfg, q.batch, common["precision"], q.tp)
        _check_finite(pred.prediction)
        return pred, memory, crossover

    def compute_decode(self, q: LayerQuery):
        common = self.plan_inputs(q)
        cfg = self.models[q.model]
        S = q.context or q.tokens  # this view is decode whatever the phase: tokens is the context
        with library_call(q):
            plan = decode_plan(cfg, batches=(*DEFAULT_BATCHES, q.batch), context=S, curve="none", **common)
            # the curves at the ~250 batches the chart draws, not at every batch up to the largest
            top = int(max(*DEFAULT_BATCHES, q.batch))
            shown = curve_batches(top, (plan.compute_bound_batch, plan.max_batch_in_memory, q.batch))
            plan = dataclasses.replace(plan, curve=decode_step(cfg, batch=shown, context=S, **common))
            crossover = kv_overtakes_weights_context(cfg, q.batch, common["precision"], q.tp)
        _check_finite(plan.step.prediction)
        return plan, crossover

    def compute_serving(self, q: ServingQuery):
        """`roofline serving --sweep 1,2,4,...,U --json` for the query, point by point (each with
        requests_per_point(users) requests, as `--sweep C --requests N`), the points past
        SWEEP_BUDGET_S left out. Returns the sweep, the StepCost, the engine and the bound's account."""
        from roofline.serving.search import ServingSweep, meets_slo, sweep_concurrency
        from roofline.plan.step import StepCost, kv_cache_budget, sequence_cache_bytes

        machine = self.machine_of(q)
        with serving_call():
            from roofline.serving.engines import engine_precision

            precision = engine_precision(self.precision_of(q, machine), q.engine, machine)  # as the CLI's
            cost_model = dataclasses.replace(self.cost_model_of(q), cuda_graph=True)  # `roofline serving` without --eager
            engine = q.engine_of(machine)  # the engine's settings (serving.parameters.engine_of), as the CLI's
            kernels, kernels_note = None, ""
            if q.engine:  # the engine's measured kernels (its own or transferred) or the cost model said, as the CLI's
                from roofline.measured.engine import engine_kernels
                from roofline.measured.model import MeasuredKernels
                from roofline.serving.engines import preset

                kernels, kernels_note = engine_kernels(preset(q.engine, machine).kernels, machine)
            if kernels:  # the fp8 rows as the checkpoint scales its weights, as the CLI's (cli/serving.py)
                cost_model = MeasuredKernels.for_machine(machine, kernels, **dataclasses.asdict(cost_model)).scaled_for(
                    precision)
            step = StepCost(self.models[q.model], machine, precision, tensor_parallel=q.tp, cost_model=cost_model,
                            attention=q.attention, max_tokens=engine.max_tokens, max_seqs=engine.max_seqs)
            cap, _ = kv_cache_budget(step, engine.memory_fraction)
            per_request = sequence_cache_bytes(step, engine.block_size, -(-(q.input_len + q.output_len) // engine.block_size))[-1]
            fit = int(cap // per_request) if per_request > 0 else engine.max_seqs
            ops = len(step.ops([1])) + len(step.ops([], [(1, 0)]))  # a decode step's ops and a prompt chunk's
            wanted = concurrencies(q.max_users)
            swept, counts, spent = [], [], 0.0
            for users in wanted:
                n = requests_per_point(users)
                cost = simulation_cost_s(users, n, q.input_len, q.output_len, engine, fit, ops)
                if not swept and cost > SWEEP_BUDGET_S and fit >= 1:  # not even one user fits the bound
                    chunks = q.input_len / engine.max_tokens
                    field = "max_tokens" if chunks * 60 > q.output_len / max(1, min(fit, engine.max_seqs)) else "output_len"
                    raise RooflineError(
                        f"one user sending {n:,} requests of {q.input_len:,} + {q.output_len:,} tokens "
                        f"({engine.max_tokens:,} token{'s' if engine.max_tokens != 1 else ''} a step) would take about {cost:,.1f} s to simulate, past this "
                        f"view's bound of {SWEEP_BUDGET_S:g} s a request: "
                        + ("raise max_tokens or shorten input_len" if field == "max_tokens" else "shorten output_len")
                        + " (`roofline serving` has no bound)", field=field)
                if swept and spent + cost > SWEEP_BUDGET_S:
                    break
                swept.append(users)
                counts.append(n)
                spent += cost
            ttft_s = None if q.slo_ttft_ms is None else q.slo_ttft_ms * MS
            tpot_s = None if q.slo_tpot_ms is None else q.slo_tpot_ms * MS
            points = [sweep_concurrency(step, [users], q.input_len, q.output_len, engine, requests=n, seed=0,
                                        price_per_gpu_hour=q.price_per_gpu_hour, ttft_s=ttft_s, tpot_s=tpot_s,
                                        percentile=q.percentile)
                      for users, n in zip(swept, counts)]
        slo = None
        if points[0].slo is not None:  # the targets as the library states them; best over every point
            slo = {k: v for k, v in points[0].slo.items() if k != "best"}
            ok = [users for users, p in zip(swept, points) if meets_slo(p.results[0], slo)]
            slo["best"] = max(ok) if ok else None
        results = tuple(p.results[0] for p in points)
        if kernels_note:  # the first run's notes are the sweep's (ServingSweep.to_dict)
            results = (dataclasses.replace(results[0], notes=tuple(results[0].notes) + (kernels_note,)), *results[1:])
        sweep = ServingSweep("concurrency", tuple(swept), results, slo)
        bound = {"requests": counts, "left_out": wanted[len(swept):], "estimated_cpu_s": spent, "budget_s": SWEEP_BUDGET_S,
                 "requests_in_kv_cache": fit}
        return sweep, step, engine, bound
