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

from taskplug.service import AuthSettings  # noqa: E402
from taskplug.service._api_app import create_app  # noqa: E402

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module", params=["local", "token"])
def credentials(request: pytest.FixtureRequest, postgres_server: Any) -> tuple[str, str | None]:
    """A database, and the admin token the API is called with: none for a loopback server its one user
    uses without; with one, the server wants it (schemathesis also checks that a request without it is 401)."""
    dsn = postgres_server.create_database()
    if request.param == "local":
        return dsn, None
    import psycopg

    from taskplug.service import create_token, migrate

    with psycopg.connect(dsn, autocommit=True) as conn:
        migrate(conn)
        return dsn, create_token(conn, name="fuzz", role="admin")


@pytest.fixture(scope="module")
def api_url(credentials: tuple[str, str | None]) -> Iterator[str]:
    postgres_dsn, token = credentials
    headers = {"authorization": f"Bearer {token}"} if token else {}
    auth = AuthSettings(anonymous=None) if token else None
    with serve_app(create_app(postgres_dsn, replica_ttl=3.0, max_body_bytes=64 * 1024, auth=auth)) as url:
        # Something to find: an execution driven to Success with outputs, one failed, one queued.
        import httpx

        keys = []
        for name in ("fuzz-ok", "fuzz-failed", "fuzz-queued"):
            response = httpx.post(f"{url}/api/v1/executions", json={"spec": pod_spec(name)}, headers=headers)
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


def operations(api_url: str, token: str | None) -> list[Any]:
    loaded = schemathesis.openapi.from_url(f"{api_url}/api/v1/openapi.json")
    if token is not None:

        @loaded.auth()
        class Bearer:
            def get(self, case: Any, context: Any) -> str:
                return token

            def set(self, case: Any, data: str, context: Any) -> None:
                case.headers = {**(case.headers or {}), "Authorization": f"Bearer {data}"}

    found = [result.ok() for result in loaded.get_all_operations()]
    assert len(found) >= 10, found  # every route the API documents, not an empty schema passing vacuously
    return found


def test_every_operation_answers_any_request_without_a_server_error_and_as_documented(
    api_url: str, credentials: tuple[str, str | None]
) -> None:
    """For each operation: requests that fit the schema and requests that break it; each answer must be no
    5xx, a documented status, a body of the documented shape and content type. (Schemathesis's own pytest
    plugin is switched off in pyproject.toml; its strategies are driven by Hypothesis here.)"""
    modes = [GenerationMode.POSITIVE, GenerationMode.NEGATIVE]
    nothing_to_break = set()
    for operation, mode in [(op, mode) for op in operations(api_url, credentials[1]) for mode in modes]:

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
