"""``taskplug serve`` while its database goes away and comes back: every request is answered 503 — the API's
error body, a page for people, ``/healthz`` for probes — instead of hanging or a 500 with a traceback, and once
the database answers again everything works without a restart: the pool reconnects and the live feed
listens again (a submission shows on an open list stream).

The database "goes away" through a TCP relay on 127.0.0.1 between the server and the test session's
PostgreSQL: cutting it closes every connection and refuses new ones, as a database that crashed or a network
that partitioned does, without stopping the server other tests share.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from service.test_api_replica_double import pod_spec, serve_app
from support.tcp_relay import Relay, relay_to_postgres

httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn", reason="uvicorn is not installed (extra `web`)")

from taskplug.service._api_app import create_app  # noqa: E402

pytestmark = pytest.mark.integration

DEADLINE = 30.0  # seconds any answer may take here: a bound against hanging, not a timing


@pytest.fixture
def relayed_dsn(postgres_dsn: str) -> Iterator[tuple[str, Relay]]:
    relay, relayed = relay_to_postgres(postgres_dsn)
    try:
        yield relayed, relay
    finally:
        relay.cut()


def test_a_database_that_goes_away_is_503_everywhere_and_back_without_a_restart(
    relayed_dsn: tuple[str, Relay],
) -> None:
    dsn, relay = relayed_dsn
    app = create_app(dsn, replica_ttl=3.0, poll_interval=0.25, db_timeout=2.0)
    with serve_app(app) as url, httpx.Client(base_url=url, timeout=DEADLINE) as client:
        assert client.get("/api/v1/healthz").status_code == 200
        assert client.post("/api/v1/executions", json={"spec": pod_spec("before-cut")}).status_code == 201

        relay.cut()

        health = client.get("/api/v1/healthz")
        assert health.status_code == 503
        assert health.json()["error"]["message"].startswith("the database does not answer")
        for path in ("/api/v1/executions", "/api/v1/executions/p/d/before-cut/n0", "/api/v1/replicas"):
            answer = client.get(path)
            assert answer.status_code == 503, (path, answer.text)
            assert answer.json()["error"]["message"].startswith("the database does not answer"), path
        refused = client.post("/api/v1/executions", json={"spec": pod_spec("during-cut")})
        assert refused.status_code == 503
        page = client.get("/executions")
        assert page.status_code == 503
        assert 'id="unavailable"' in page.text and "<html" in page.text

        relay.restore()

        # Back without a restart: the pool opens new connections, the feed listens again.
        _eventually_ok(client, "/api/v1/healthz")
        assert client.get("/api/v1/executions/p/d/before-cut/n0").json()["phase"] == "Queued"
        with client.stream("GET", "/executions/stream", params={"q": "after-cut"}) as stream:
            lines = stream.iter_lines()
            assert _next_event(lines) == "rows"  # the first render: no such execution yet
            created = client.post("/api/v1/executions", json={"spec": pod_spec("after-cut")})
            assert created.status_code == 201
            assert _next_event(lines) == "rows"
            assert "after-cut" in _data_of_event(lines)


def _eventually_ok(client: Any, path: str) -> None:
    import time

    deadline = time.monotonic() + DEADLINE
    while (status := client.get(path).status_code) != 200:
        assert time.monotonic() < deadline, f"{path} still answers {status} after the database came back"
        time.sleep(0.2)  # waiting for the pool to reconnect, not a timing


def _next_event(lines: Iterator[str]) -> str:
    for line in lines:
        if line.startswith("event:"):
            return line.removeprefix("event:").strip()
    raise AssertionError("the stream ended")


def _data_of_event(lines: Iterator[str]) -> str:
    data = []
    for line in lines:
        if not line.strip():
            return "\n".join(data)
        if line.startswith("data:"):
            data.append(line.removeprefix("data:"))
    raise AssertionError("the stream ended")
