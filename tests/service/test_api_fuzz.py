"""The API under generated requests (schemathesis, from its own OpenAPI document): whatever a client sends —
valid or not — the server answers without a server error, in the documented shape, with the documented
status codes. uvicorn on 127.0.0.1 and a real PostgreSQL, as in production.

Schemathesis draws both requests that fit the schema and ones that break it (wrong types, missing fields,
hostile strings in the path and the query); derandomized, a bounded number per operation, so that a run is
reproducible and its time bounded.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from service.test_api_replica_double import ReplicaDouble, pod_spec, serve_app

schemathesis = pytest.importorskip("schemathesis", reason="schemathesis is not installed (extra `test`)")
pytest.importorskip("uvicorn", reason="uvicorn is not installed (extra `web`)")

from hypothesis import HealthCheck, given, settings  # noqa: E402 (after the skips)
from hypothesis.errors import Unsatisfiable  # noqa: E402

from taskplug.service._api_app import create_app  # noqa: E402

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def api_url(postgres_dsn: str) -> Iterator[str]:
    with serve_app(create_app(postgres_dsn, replica_ttl=3.0, max_body_bytes=64 * 1024)) as url:
        # Something to find: an execution driven to Success with outputs, one failed, one queued.
        import httpx

        keys = []
        for name in ("fuzz-ok", "fuzz-failed", "fuzz-queued"):
            response = httpx.post(f"{url}/api/v1/executions", json={"spec": pod_spec(name)})
            assert response.status_code == 201, response.text
            keys.append(response.json()["key"])
        double = ReplicaDouble(postgres_dsn, host="fuzz-host")
        try:
            double.heartbeat()
            double.claim(keys[0])
            double.phase(keys[0], "Success", outputs={"greeting": "hi"})
            double.claim(keys[1])
            double.phase(keys[1], "PermanentFailure", error={"kind": "USER", "code": "x", "message": "boom"})
        finally:
            double.close()
        yield url


# Not checked: that every body the schema allows is accepted. The submitted spec is documented as an object (a
# Flyte TaskTemplate and its execution section, far richer than JSON Schema says here); an invalid one is a
# 422 naming the field, which test_api.py asserts case by case.
from schemathesis.checks import positive_data_acceptance  # noqa: E402
from schemathesis.generation import GenerationMode  # noqa: E402


def operations(api_url: str) -> list[Any]:
    loaded = schemathesis.openapi.from_url(f"{api_url}/api/v1/openapi.json")
    found = [result.ok() for result in loaded.get_all_operations()]
    assert len(found) >= 10, found  # every route the API documents, not an empty schema passing vacuously
    return found


def test_every_operation_answers_any_request_without_a_server_error_and_as_documented(api_url: str) -> None:
    """For each operation: requests that fit the schema and requests that break it; each answer must be no
    5xx, a documented status, a body of the documented shape and content type. (Schemathesis's own pytest
    plugin is switched off in pyproject.toml; its strategies are driven by Hypothesis here.)"""
    modes = [GenerationMode.POSITIVE, GenerationMode.NEGATIVE]
    nothing_to_break = set()
    for operation, mode in [(op, mode) for op in operations(api_url) for mode in modes]:

        @given(case=operation.as_strategy(mode))
        @settings(
            max_examples=40,
            derandomize=True,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def answers(case: Any) -> None:
            case.call_and_validate(excluded_checks=[positive_data_acceptance])

        try:
            answers()
        except Unsatisfiable:
            # No request breaks the schema: no parameter or body, or only a key (any string is a key).
            assert mode is GenerationMode.NEGATIVE, operation.label
            nothing_to_break.add(operation.label)
    assert not nothing_to_break & {"POST /api/v1/executions", "GET /api/v1/executions"}
