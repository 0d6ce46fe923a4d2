"""Fuzz the workshop's API from its own OpenAPI schema with schemathesis: valid and invalid
parameters alike must never get a 5xx, every status must be one the schema documents, and JSON
bodies must match their schemas. Bounded to a few seconds per endpoint."""

from __future__ import annotations

import pytest

schemathesis = pytest.importorskip("schemathesis", reason="schemathesis is not installed: pip install schemathesis")
pytest.importorskip("fastapi", reason="the web extra is not installed: pip install 'roofline[web]'")

from hypothesis import HealthCheck, settings  # noqa: E402
from schemathesis.checks import (  # noqa: E402
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from roofline.web.app import create_app  # noqa: E402

schema = schemathesis.openapi.from_asgi("/openapi.json", create_app())

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@schema.parametrize()
@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck), database=None)
def test_api_never_fails_with_a_server_error(case):
    response = case.call()
    case.validate_response(response, checks=CHECKS)
    if response.status_code == 422:
        assert response.json()["field"], response.text  # every rejection names its field
