"""Adversarial requests to the workshop API (issue 11), in-process through the ASGI app:

- schemathesis from the server's own OpenAPI schema, valid and invalid data, every check it has
  (no 5xx, documented statuses, content types, headers and bodies matching their schemas, invalid
  data rejected, valid data accepted);
- hostile query values on every endpoint (the CLI fuzz's pools: denormals, 1e308, NaN, unicode
  digits, empty strings, huge integers, unknown names and parameters), where every answer must be
  a 200 with finite strict JSON, or a 422 whose body names the field, or a deliberate 503.

``run(n, seed)`` sends about ``n`` requests and returns (requests sent, failures); the tests send a
bounded sample (tests/test_web_fuzz.py), benchmarks/fuzz.py >= 10,000.
"""

from __future__ import annotations

import json
import math

from hypothesis import HealthCheck, given, seed as hseed, settings
from hypothesis.errors import Unsatisfiable
from hypothesis import strategies as st

from fuzz_harness import NAME_VALUES, NAN_INF, SPECIAL_VALUES

ENDPOINTS = ("/api/layer", "/api/layer.csv", "/api/layer.json", "/api/model", "/api/decode", "/api/serving",
             "/api/machines", "/api/models", "/api/options")
PARAMS = ("machine", "model", "phase", "tokens", "batch", "context", "attention", "dtype", "compute_efficiency",
          "memory_efficiency", "launch_overhead_us", "overlap", "layer", "kernels",
          # /api/serving's own (each endpoint refuses the others')
          "tp", "input_len", "output_len", "max_users", "max_seqs", "max_tokens", "memory_fraction", "prefix_hit",
          "slo_ttft_ms", "slo_tpot_ms", "percentile", "price_per_gpu_hour", "step_overhead_ms", "engine")


def all_checks():
    import schemathesis.checks as checks

    checks.load_all_checks()
    return list(checks.CHECKS.get_all())


def app_and_schema():
    import schemathesis

    from roofline.web.app import create_app

    app = create_app()
    return app, schemathesis.openapi.from_asgi("/openapi.json", app)


def strict_json(text: str):
    return json.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(f"{c} in JSON")))


def _finite_everywhere(x) -> bool:
    if isinstance(x, float):
        return math.isfinite(x)
    if isinstance(x, dict):
        return all(_finite_everywhere(v) for v in x.values())
    if isinstance(x, list):
        return all(_finite_everywhere(v) for v in x)
    return True


def _header(response, name: str) -> str:
    """One header's value, from an httpx response (a string) or a schemathesis one (a list of strings)."""
    value = response.headers.get(name, "")
    return ", ".join(value) if isinstance(value, (list, tuple)) else value


def response_problem(response) -> str | None:
    """What is wrong with one answer of the API (None: nothing)."""
    code = response.status_code
    if code >= 500 and not (code == 503 and _header(response, "retry-after")):
        return f"{code}: {response.text[:300]}"
    if code not in (200, 400, 404, 422, 503):
        return f"unexpected status {code}: {response.text[:300]}"
    kind = _header(response, "content-type")
    if "json" in kind:
        try:
            body = strict_json(response.text)
        except ValueError as exc:
            return f"{code} body is not strict JSON ({exc}): {response.text[:200]}"
        if not _finite_everywhere(body):
            return f"{code} body holds a non-finite number"
        if code == 422 and not (isinstance(body, dict) and body.get("field")):
            return f"422 without a field: {response.text[:300]}"
    elif code == 200 and NAN_INF.search(response.text):
        return f"{kind} body holds NaN/inf: {response.text[:200]}"
    return None


def hostile_queries():
    value = st.one_of(st.sampled_from(SPECIAL_VALUES), st.sampled_from(NAME_VALUES), st.text(max_size=8),
                      st.integers(-(10**30), 10**30).map(str), st.floats().map(repr))
    name = st.one_of(st.sampled_from(PARAMS), st.sampled_from(PARAMS), st.text(max_size=6))
    return st.tuples(st.sampled_from(ENDPOINTS), st.lists(st.tuples(name, value), max_size=5))


SIZE_FIELDS = ("tokens", "batch", "context", "layer", "tp", "input_len", "output_len", "max_seqs", "max_tokens")


def combination_refusal(exc: BaseException, response, query=None, resend=None) -> bool:
    """Schemathesis's positive_data_acceptance failing on a 422 that the library (not the schema)
    raised: each value is inside its schema range (tests/test_web_api.py checks that the schema's
    ranges are the server's), but the combination is refused, which OpenAPI cannot state: a
    prefill context shorter than its tokens, batch x tokens past the limit, a layer index past the
    model's layers; in /api/serving a tensor-parallel size the model's heads do not divide or whose
    shards leave no KV cache, max_seqs past max_tokens, a request whose cache does not fit, lengths
    past the view's simulation bound; a memory fraction that leaves the model's weights no room (its
    422 names every parameter of the combination: RooflineError.also). Anything else schemathesis
    finds is a failure."""
    from schemathesis.openapi.checks import RejectedPositiveData

    found = list(exc.exceptions) if isinstance(exc, BaseExceptionGroup) else [exc]
    if response.status_code != 422 or not found or not all(isinstance(e, RejectedPositiveData) for e in found):
        return False
    body = response.json()
    detail = body.get("detail", [])
    if not detail or not all(d.get("type") == "roofline_error" for d in detail):
        return False
    field = body.get("field")
    if field == "machine" and str((query or {}).get("machine", "")).startswith("custom:"):
        return True  # a custom machine's figures: their physical ranges and the ones it needs are not OpenAPI's to state
    if len(body.get("fields", ())) > 1:  # the server names the parameters whose combination it refuses
        return True
    if field in SIZE_FIELDS or resend is None:  # sizes are refused against each other and the model
        return True
    # any other field: refused alone (the defaults for the rest) means the schema is looser than the server
    alone = resend({field: query[field]}) if field in (query or {}) else None
    return alone is None or alone.status_code == 200


def run(n: int, seed: int = 0, progress=None, stats: dict | None = None) -> tuple[int, list[str]]:
    """About ``n`` requests: a third from schemathesis (valid, then invalid data), the rest hostile
    queries. Returns (requests sent, failures); ``stats`` gets the count of schema-valid requests
    refused for their combination of values."""
    from fastapi.testclient import TestClient
    from schemathesis.generation import GenerationMode

    app, schema = app_and_schema()
    checks = all_checks()
    client = TestClient(app)
    failures: list[str] = []
    sent, combinations = [0], [0]
    operations = [r.ok() for r in schema.get_all_operations()]
    per_operation = max(1, (n // 3) // (2 * len(operations)))

    def tick():
        sent[0] += 1
        if progress and sent[0] % 1000 == 0:
            progress(sent[0], len(failures))

    for op in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            @hseed(seed)
            @settings(max_examples=per_operation, deadline=None, database=None,
                      suppress_health_check=list(HealthCheck))
            @given(op.as_strategy(generation_mode=mode))
            def prop(case):
                tick()
                response = case.call()
                try:
                    case.validate_response(response, checks=checks)
                except (Exception, BaseExceptionGroup) as exc:  # noqa: BLE001 - schemathesis raises failure groups
                    if combination_refusal(exc, response, case.query,
                                           lambda q: client.get(op.path, params=q)):
                        combinations[0] += 1
                    else:
                        failures.append(f"schemathesis {op.method.upper()} {op.path} {mode.name} {case.query}: "
                                        f"{str(exc).strip()[:400]}")
                why = response_problem(response)
                if why:
                    failures.append(f"{op.path} {case.query}: {why}")

            try:
                prop()
            except Unsatisfiable:  # no invalid data for an endpoint without parameters
                pass

    rest = max(0, n - sent[0])

    @hseed(seed)
    @settings(max_examples=max(1, rest), deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(hostile_queries())
    def hostile(query):
        path, params = query
        tick()
        response = client.get(path, params=params)
        why = response_problem(response)
        if why:
            failures.append(f"{path} {params}: {why}")

    if rest:
        hostile()
    if stats is not None:
        stats["refused_in_combination"] = combinations[0]
    return sent[0], failures
