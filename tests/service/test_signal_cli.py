"""``taskplug signal … --server URL`` against a ``taskplug serve`` (uvicorn on 127.0.0.1) over a real
PostgreSQL: list, set (read by the signal's type), approve; refusals are exit 2 naming what is wrong."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import psycopg
import pytest
from click.testing import CliRunner
from flyteidl.core import types_pb2

from service.replica_helpers import claim_row, replica_row
from service.test_api_replica_double import pod_spec, serve_app
from taskplug.cli._main import cli
from taskplug.service import PostgresStateStore
from taskplug.service._api_app import create_app

BOOL = types_pb2.LiteralType(simple=types_pb2.SimpleType.BOOLEAN)
INT = types_pb2.LiteralType(simple=types_pb2.SimpleType.INTEGER)


@pytest.fixture(scope="module")
def server(postgres_dsn: str) -> Iterator[str]:
    with serve_app(create_app(postgres_dsn, poll_interval=0.25)) as url:
        yield url


def invoke(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args), prog_name="taskplug", catch_exceptions=False)


def gated(server: str, postgres_dsn: str, name: str) -> str:
    """An execution submitted through the server whose owner's gates created ``approve-y`` and ``count``."""
    import urllib.request

    request = urllib.request.Request(
        f"{server}/api/v1/executions",
        data=orjson.dumps({"spec": pod_spec(name)}),
        headers={"content-type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        key = str(orjson.loads(response.read())["key"])
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        rid = replica_row(conn)
        store = PostgresStateStore(psycopg.connect(postgres_dsn, autocommit=True), replica_id=rid)
        try:
            store.claim(key, claim_row(conn, rid, key))
            store.get_or_create_signal(key, "approve-y", BOOL)
            store.get_or_create_signal(key, "count", INT)
        finally:
            store.close()
    return key


def test_a_person_lists_sets_and_approves_through_the_server(server: str, postgres_dsn: str) -> None:
    key = gated(server, postgres_dsn, "cli-signals")
    listed = invoke("signal", "list", key, "--server", server)
    assert listed.exit_code == 0, listed.stderr
    assert listed.stdout.splitlines() == [
        "approve-y  BOOLEAN     (waiting)",
        "count      INTEGER     (waiting)",
    ]

    assert invoke("signal", "set", key, "count", "41", "--server", server).exit_code == 0
    overwritten = invoke("signal", "set", key, "count", "42", "--server", server)
    assert overwritten.stdout == f"signal count of {key} set to 42\n"
    approved = invoke("signal", "approve", key, "--server", server)
    assert approved.exit_code == 0, approved.stderr

    views = orjson.loads(invoke("signal", "list", key, "--server", server, "-o", "json").stdout)
    assert [(v["signal_id"], v["value"], v["set_by"]) for v in views] == [
        ("approve-y", True, "local"),
        ("count", 42, "local"),
    ]


def test_refusals_are_exit_2_naming_what_is_wrong(server: str, postgres_dsn: str) -> None:
    key = gated(server, postgres_dsn, "cli-refusals")
    bad = invoke("signal", "set", key, "count", "many", "--server", server)
    assert bad.exit_code == 2 and "signal 'count''s type INTEGER: expected an integer" in bad.stderr
    unknown = invoke("signal", "set", key, "later", "1", "--server", server)
    assert unknown.exit_code == 2
    assert (
        "has no signal 'later': its gate has not started yet (known: 'approve-y', 'count')" in unknown.stderr
    )
    missing = invoke("signal", "list", "p/d/nobody/n0", "--server", server)
    assert missing.exit_code == 2 and "no execution 'p/d/nobody/n0'" in missing.stderr
