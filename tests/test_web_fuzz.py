"""Fuzz the workshop's API (issue 11): schemathesis from its own OpenAPI schema with every check
schemathesis has, valid and invalid data, and hostile query values on every endpoint
(tests/fuzz_api_harness.py): never a 5xx (but a deliberate 503 with Retry-After), every status
documented, bodies matching their schemas and strict finite JSON, every 422 naming its field.
A bounded sample here; benchmarks/fuzz.py sends >= 10,000."""

from __future__ import annotations

import pytest

pytest.importorskip("schemathesis", reason="schemathesis is not installed: pip install schemathesis")
pytest.importorskip("fastapi", reason="the web extra is not installed: pip install 'roofline[web]'")

import fuzz_api_harness as fa  # noqa: E402


@pytest.mark.parametrize("shard", range(3))
def test_api_keeps_the_contract_under_fuzzing(shard):
    """1,500 requests in three seeded shards of 500, which pytest-xdist spreads over its workers."""
    stats = {}
    sent, failures = fa.run(500, seed=shard, stats=stats)
    assert sent >= 500 and failures == [], "\n".join(failures[:10])


def test_all_of_schemathesis_checks_are_on():
    names = {c.__name__ for c in fa.all_checks()}
    assert {"not_a_server_error", "status_code_conformance", "response_schema_conformance",
            "negative_data_rejection", "positive_data_acceptance", "content_type_conformance"} <= names


def test_the_api_harness_catches_what_it_looks_for():
    class R:
        def __init__(self, code, text, kind="application/json", headers=None):
            self.status_code, self.text = code, text
            self.headers = {"content-type": kind, **(headers or {})}

    assert fa.response_problem(R(500, "boom"))
    assert fa.response_problem(R(503, "busy")) and not fa.response_problem(R(503, "{}", headers={"retry-after": "1"}))
    assert fa.response_problem(R(200, '{"mfu": NaN}'))
    assert fa.response_problem(R(422, '{"detail": []}'))  # no field named
    assert fa.response_problem(R(200, "op,time_s\nqkv,nan\n", "text/csv"))  # a CSV cell that is NaN
    assert fa.response_problem(R(200, "op,time_s\nqkv,inf\n", "text/csv"))
    assert fa.response_problem(R(200, "op,time_s\ninfo,1e-3\n", "text/csv")) is None
    assert fa.response_problem(R(200, '{"ok": 1}')) is None
    # schemathesis's responses carry each header as a list: JSON is still parsed as JSON, so a citation that names
    # AMD's "Infinity Cache" is not taken for an infinite number
    assert fa.response_problem(R(200, '{"source": "Infinity Cache"}', headers={"content-type": ["application/json"]})) is None
    assert fa.response_problem(R(200, '{"mfu": NaN}', headers={"content-type": ["application/json"]}))
