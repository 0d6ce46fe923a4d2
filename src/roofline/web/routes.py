"""The workshop's API routes by view, each added to the app by one function (web.app.create_app
calls them): the catalogue (machines, models, options), the layer view and its downloads, the plan
views (whole model, decode, serving: run in the worker pool, web.jobs) and teaching mode.

No ``from __future__ import annotations``: FastAPI reads the endpoint annotations, which name
types built here at run time (the exercise kinds' Literal).
"""

from typing import Literal

from fastapi import Depends, FastAPI, Query
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from roofline.web import jobs
from roofline.web.catalog import machine_dict, model_dict
from roofline.web.exercises import KINDS as EXERCISE_KINDS, MAX_ANSWER_CHARS, MAX_SEED, check_answer, make_exercise
from roofline.web.explain import fix_first, fix_lists, op_rows
from roofline.web.params import LayerQuery, ServingQuery, options_payload
from roofline.web.payload import json_safe, layer_csv, layer_payload


def add_catalog_routes(app: FastAPI, machines, origins, models, endpoint_names: dict, light_slot) -> None:
    """/api/machines, /api/models and /api/options: what the controls offer."""

    @app.get("/api/machines", summary="Machines the page offers: every preset and each machine file's")
    def api_machines(_slot: None = Depends(light_slot)) -> list[dict]:
        return [machine_dict(m, origins[k]) for k, m in machines.items()]

    @app.get("/api/models", summary="Model presets")
    def api_models(_slot: None = Depends(light_slot)) -> list[dict]:
        return [model_dict(c) for c in models.values()]

    @app.get("/api/options", summary="Seed defaults, limits, the token slider's stops and each view's parameters")
    def api_options(_slot: None = Depends(light_slot)) -> dict:
        return options_payload(endpoint_names)


def _filename(q: LayerQuery, ext: str) -> str:
    """The download's name: a preset's key as it is; a custom machine (custom:bf16=989TFLOP/s,...) as "custom",
    its figures being in the file, not in a name a file system may refuse (':', '/', ',')."""
    size = f"{q.tokens}" if q.phase == "prefill" else f"ctx{q.context or q.tokens}"
    machine = "custom" if q.machine.startswith("custom:") else q.machine
    return f"layer-{q.model}-{machine}-{q.phase}-{size}-b{q.batch}-{q.attention}.{ext}"


def _layer_notes(body: dict, model, report, cost_model) -> None:
    """The model's header lines, a quantised checkpoint priced at the page's dtype and measured
    kernels' tables, under the charts and in the caption."""
    from roofline.blocks import storage_note

    stored = storage_note(model, report.dtype, True)
    body["notes"] = list(model.header_lines()) + ([stored] if stored else [])
    if cost_model.priced_by():  # measured kernels: which tables, and what they left to the cost model
        from roofline.measured.model import measured_notes

        body["notes"] += [cost_model.priced_by(), *measured_notes(report.prediction.ops)]
    if body["notes"]:
        body["caption"] += " " + " ".join(n[0].upper() + n[1:] + "." for n in body["notes"])


def add_layer_routes(app: FastAPI, workshop, layer_query, light_slot) -> None:
    """/api/layer and its downloads, computed in the answering process (a few milliseconds each)."""
    models = workshop.models

    @app.get("/api/layer", summary="One layer op by op: LayerReport.to_dict() plus readouts, sentence, chart and roofline")
    def api_layer(q: LayerQuery = Depends(layer_query), _slot: None = Depends(light_slot)) -> dict:
        q = workshop.settle(q, "layer")
        report, machine, cost_model = workshop.compute(q)
        body = layer_payload(report, machine, cost_model, q.launch_overhead_us, models[q.model].name)
        body["ops_table"] = op_rows(report, machine, cost_model)
        body["fixes"] = fix_lists(report, machine, cost_model)
        body["fix_first"] = fix_first(report, workshop.layer_alternatives(q, machine, report.dtype))
        _layer_notes(body, models[q.model], report, cost_model)
        return body

    @app.get("/api/layer.csv", response_class=PlainTextResponse, summary="The op table as CSV: a row per op and a totals row, "
             "each column's unit in its name (time_us, flops, bytes, intensity_flop_per_byte)",
             responses={200: {"content": {"text/csv": {}}}})
    def api_layer_csv(q: LayerQuery = Depends(layer_query), _slot: None = Depends(light_slot)) -> Response:
        q = workshop.settle(q, "layer")
        report, _, _ = workshop.compute(q)
        return Response(layer_csv(report), media_type="text/csv; charset=utf-8",
                        headers={"Content-Disposition": f'attachment; filename="{_filename(q, "csv")}"'})

    @app.get("/api/layer.json", summary="LayerReport.to_dict() as a download")
    def api_layer_json(q: LayerQuery = Depends(layer_query), _slot: None = Depends(light_slot)) -> JSONResponse:
        q = workshop.settle(q, "layer")
        report, _, _ = workshop.compute(q)
        return JSONResponse(json_safe(report.to_dict()),
                            headers={"Content-Disposition": f'attachment; filename="{_filename(q, "json")}"'})


PLAN_PATHS = frozenset({"/api/model", "/api/decode", "/api/serving"})


def add_plan_routes(app: FastAPI, pool, plan_query, serving_query) -> None:
    """/api/model, /api/decode and /api/serving: each computed by a worker of ``pool`` (web.pool,
    web.jobs), its JSON passed on as the worker encoded it; a full queue or a job past its limit is
    the pool's Busy, answered 503 (web.app)."""

    async def answer(job, q) -> Response:
        return Response(await pool.run(job, q), media_type="application/json")

    @app.get("/api/model", response_model=dict, summary="The whole model (L blocks, embedding, final norm, LM head): "
             "time to first token or one decode step, tokens/s, time by part and weights + KV cache against the "
             "machine's memory")
    async def api_model(q: LayerQuery = Depends(plan_query)) -> Response:
        return await answer(jobs.model_view, q)

    @app.get("/api/decode", response_model=dict, summary="Decode latency and throughput versus batch (1 to 1,024 and "
             "the query's batch) at a context (context, else tokens): compute-bound batch, largest batch in memory, "
             "KV-overtakes-weights context")
    async def api_decode(q: LayerQuery = Depends(plan_query)) -> Response:
        return await answer(jobs.decode_view, q)

    @app.get("/api/serving", response_model=dict, summary="A deployment under load, as `roofline serving --sweep "
             "1,2,4,...,max_users`: output tokens/s per GPU against tokens/s per user, TTFT and TPOT percentiles "
             "against concurrent users, the highest concurrency within the targets and one decode step of it op by op "
             "(a bounded sweep: 8 requests per user, at most 2,000 a point, about 0.4 s of simulation a request)")
    async def api_serving(q: ServingQuery = Depends(serving_query)) -> Response:
        return await answer(jobs.serving_view, q)


def add_exercise_routes(app: FastAPI, light_slot) -> None:
    """Teaching mode (roofline.web.exercises, docs/workshop.md): an exercise from its kind and seed,
    then the learner's answer checked, with the derivation."""
    ExerciseKind = Literal[tuple(EXERCISE_KINDS)]
    exercise_kind = Query("ridge", description="ridge, bound, layer, compute_2x or decode")
    exercise_seed = Query(0, ge=0, le=MAX_SEED, description="which exercise of the kind (the same seed, the same exercise)")

    @app.get("/api/exercise", summary="An exercise: the question, its givens and what is asked, without the answer")
    def api_exercise(kind: ExerciseKind = exercise_kind, seed: int = exercise_seed,
                     _slot: None = Depends(light_slot)) -> dict:
        return json_safe(make_exercise(kind, seed).public_dict())

    @app.get("/api/exercise/check", summary="The learner's answer to an exercise checked: correct, incorrect (with the "
             "answer and the derivation) or unreadable (what to write instead)")
    def api_exercise_check(kind: ExerciseKind = exercise_kind, seed: int = exercise_seed,
                           answer: str = Query(..., max_length=MAX_ANSWER_CHARS, description="the answer as typed: "
                                               "'295', '295 FLOP/byte', '8.7 ms', '8756 us', 'memory'"),
                           _slot: None = Depends(light_slot)) -> dict:
        return json_safe(check_answer(kind, seed, answer).to_dict())
