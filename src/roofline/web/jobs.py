"""The heavy views, as the pool's workers (web.pool) run them: a validated query in, the view's JSON
body out as bytes, encoded here as FastAPI encodes a ``dict`` answer (pydantic's JSON serializer),
so the process answering requests only passes them on. The library's RooflineError comes back to
that process as it was raised and is answered there as a 422.

Each worker holds its own Workshop (the app's machine table, sent once when the worker starts,
and the model presets): ``start`` is the pool's initializer.
"""

from __future__ import annotations

from types import MappingProxyType

from pydantic import TypeAdapter

from roofline.plan.decode import step_bound_runs
from roofline.transformer import list_models
from roofline.web.compute import Workshop, library_call, serving_call
from roofline.web.decode_view import decode_payload
from roofline.web.model_view import model_payload
from roofline.web.params import LayerQuery, ServingQuery
from roofline.web.payload import json_safe
from roofline.web.serving_view import serving_payload

_BODY = TypeAdapter(dict)
_workshop: list[Workshop] = []  # this worker's, set by start()


def start(machines: dict) -> None:
    """A worker's Workshop over ``machines`` ({key: Machine}, the app's table) and the model presets."""
    _workshop[:] = [Workshop(MappingProxyType(machines), MappingProxyType({c.key: c for c in list_models()}))]


def _encoded(body: dict) -> bytes:
    return _BODY.dump_json(json_safe(body))


def _priced(body: dict, cost_model, ops) -> dict:
    """A view's body with what priced it beyond the cost model said in its caption (measured kernels:
    CostModel.priced_by) and, for the ops given, what the tables left to the cost model."""
    said = cost_model.priced_by() if hasattr(cost_model, "priced_by") else ""
    if said:
        from roofline.measured.model import measured_notes

        body["caption"] = " ".join([body["caption"], *(n[0].upper() + n[1:] + "." for n in (said, *measured_notes(ops)))])
    return body


def model_view(q: LayerQuery) -> bytes:
    """/api/model: the whole model's time to first token or one decode step, and its memory."""
    workshop = _workshop[0]
    q = workshop.settle(q, "model")
    model = workshop.models[q.model]
    pred, memory, crossover = workshop.compute_model(q)
    return _encoded(_priced(model_payload(pred, memory, crossover, model.name, model.n_layers, q.launch_overhead_us),
                            pred.cost_model, pred.prediction.ops))


def decode_view(q: LayerQuery) -> bytes:
    """/api/decode: decode latency and throughput versus batch."""
    workshop = _workshop[0]
    q = workshop.settle(q, "decode")
    model = workshop.models[q.model]
    plan, crossover = workshop.compute_decode(q)
    with library_call(q):
        runs = step_bound_runs(model, plan)  # where the whole step is compute-bound, and where not
    return _encoded(_priced(decode_payload(plan, q.batch, crossover, model.name, q.launch_overhead_us, runs),
                            plan.step.cost_model, ()))


def serving_view(q: ServingQuery) -> bytes:
    """/api/serving: the bounded concurrency sweep of a deployment under load."""
    workshop = _workshop[0]
    q = workshop.settle(q, "serving")
    sweep, step, engine, bound = workshop.compute_serving(q)
    with serving_call():
        return _encoded(serving_payload(sweep, step, engine, q, bound, workshop.models[q.model].name))
