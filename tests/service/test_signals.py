"""Gate nodes' signals on PostgreSQL, against a real server: the replica's store creates and reads them, a
person sets them through the API (``GET/POST /api/v1/executions/{key}/signals``) — not fenced by the owner's
claim, typed by the signal's type, overwriting, with a ``taskplug_signal`` NOTIFY that wakes the owner — and
every refusal says why (404 execution or signal, 409 ended, 415/422 body or value, 403 another site)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient
from flyteidl.core import literals_pb2, types_pb2

from service.replica_helpers import claim_row, pod_document, replica_row, submit
from service.test_api_replica_double import ReplicaDouble, pod_spec
from taskplug.core import plain_to_literal
from taskplug.executor import SIGNAL_NOT_CASTABLE, SIGNAL_NOT_FOUND, KeepsSignals, Signal, SignalError
from taskplug.service import PostgresStateStore
from taskplug.service._api_app import create_app

BOOL = types_pb2.LiteralType(simple=types_pb2.SimpleType.BOOLEAN)
INT = types_pb2.LiteralType(simple=types_pb2.SimpleType.INTEGER)


def _lit(value: object, literal_type: types_pb2.LiteralType) -> literals_pb2.Literal:
    return plain_to_literal(value, literal_type, "v")


# -- the replica's store ------------------------------------------------------------------------------------


@pytest.fixture
def owned(conn: psycopg.Connection[Any], postgres_dsn: str) -> Iterator[PostgresStateStore]:
    """The store of a replica that claimed execution ``s1`` (as ``p/d/s1/n0``)."""
    submit(conn, "s1", pod_document("s1"))
    rid = replica_row(conn)
    store = PostgresStateStore(psycopg.connect(postgres_dsn, autocommit=True), replica_id=rid)
    store.claim("p/d/s1/n0", claim_row(conn, rid, "s1"))
    yield store
    store.close()


def test_the_replica_store_creates_lists_and_reads_signals(owned: PostgresStateStore) -> None:
    assert isinstance(owned, KeepsSignals)
    assert owned.get_or_create_signal("p/d/s1/n0", "approve-y", BOOL) is None
    assert owned.get_or_create_signal("p/d/s1/n0", "approve-y", BOOL) is None
    assert owned.list_signals("p/d/s1/n0") == [Signal("approve-y", BOOL, None)]


def test_a_set_overwrites_and_notifies_the_execution_key(
    owned: PostgresStateStore, postgres_dsn: str
) -> None:
    owned.get_or_create_signal("p/d/s1/n0", "count", INT)
    with psycopg.connect(postgres_dsn, autocommit=True) as listener:
        listener.execute("LISTEN taskplug_signal")
        owned.set_signal("p/d/s1/n0", "count", _lit(1, INT))
        owned.set_signal("p/d/s1/n0", "count", _lit(2, INT))
        notified = [n.payload for n in listener.notifies(timeout=5, stop_after=2)]
    assert notified == ["s1", "s1"]  # the row's key: what the replica maps to the execution it drives
    assert owned.get_or_create_signal("p/d/s1/n0", "count", INT) == _lit(2, INT)


def test_the_store_refuses_a_signal_that_does_not_exist_or_a_value_of_another_type(
    owned: PostgresStateStore,
) -> None:
    with pytest.raises(SignalError) as missing:
        owned.set_signal("p/d/s1/n0", "approve-y", _lit(True, BOOL))
    assert missing.value.code == SIGNAL_NOT_FOUND
    assert "failed to validate that signal [execution 'p/d/s1/n0', signal 'approve-y'] exists" in str(
        missing.value
    )
    owned.get_or_create_signal("p/d/s1/n0", "approve-y", BOOL)
    with pytest.raises(SignalError) as wrong:
        owned.set_signal("p/d/s1/n0", "approve-y", _lit(3, INT))
    assert wrong.value.code == SIGNAL_NOT_CASTABLE
    assert "is not castable to existing signal type [simple: BOOLEAN]" in str(wrong.value)
    assert owned.list_signals("p/d/s1/n0") == [Signal("approve-y", BOOL, None)]


def test_setting_is_not_fenced_by_the_claim(
    owned: PostgresStateStore, conn: psycopg.Connection[Any], postgres_dsn: str
) -> None:
    owned.get_or_create_signal("p/d/s1/n0", "approve-y", BOOL)
    other = replica_row(conn)
    claim_row(conn, other, "s1")  # another replica took the execution over: the old claim's epoch is stale
    owned.set_signal("p/d/s1/n0", "approve-y", _lit(True, BOOL))
    value = conn.execute("SELECT value FROM taskplug_signals").fetchone()
    assert value is not None and literals_pb2.Literal.FromString(value[0]) == _lit(True, BOOL)


# -- the API --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def client(postgres_dsn: str) -> Iterator[TestClient]:
    with TestClient(create_app(postgres_dsn, replica_ttl=3.0, max_body_bytes=64 * 1024)) as c:
        yield c


@pytest.fixture
def replica(postgres_dsn: str, client: TestClient) -> Iterator[ReplicaDouble]:
    double = ReplicaDouble(postgres_dsn)
    yield double
    double.close()


def _gated(
    client: TestClient, postgres_dsn: str, name: str, *signals: tuple[str, types_pb2.LiteralType]
) -> str:
    """Submit an execution and create its gates' signals as its owner's store does; its key."""
    key = str(client.post("/api/v1/executions", json={"spec": pod_spec(name)}).json()["key"])
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        rid = replica_row(conn)
        store = PostgresStateStore(psycopg.connect(postgres_dsn, autocommit=True), replica_id=rid)
        try:
            store.claim(key, claim_row(conn, rid, key))
            for signal_id, literal_type in signals:
                store.get_or_create_signal(key, signal_id, literal_type)
        finally:
            store.close()
    return key


def _set(client: TestClient, key: str, signal_id: str, body: Any, **kw: Any) -> Any:
    return client.post(f"/api/v1/executions/{key}/signals/{signal_id}", json=body, **kw)


def test_the_signals_of_an_execution_are_listed_with_their_types(
    client: TestClient, postgres_dsn: str
) -> None:
    key = _gated(client, postgres_dsn, "listed", ("approve-y", BOOL), ("count", INT))
    response = client.get(f"/api/v1/executions/{key}/signals")
    assert response.status_code == 200, response.text
    assert [
        (s["signal_id"], s["type_name"], s["type"], s["is_set"], s["value"]) for s in response.json()
    ] == [
        ("approve-y", "BOOLEAN", {"simple": "BOOLEAN"}, False, None),
        ("count", "INTEGER", {"simple": "INTEGER"}, False, None),
    ]
    missing = client.get("/api/v1/executions/p/d/nobody/n0/signals")
    assert missing.status_code == 404 and missing.json()["error"]["field"] == "key"


def test_a_person_approves_through_the_api_and_the_owner_is_woken(
    client: TestClient, postgres_dsn: str
) -> None:
    key = _gated(client, postgres_dsn, "approved", ("approve-y", BOOL))
    with psycopg.connect(postgres_dsn, autocommit=True) as listener:
        listener.execute("LISTEN taskplug_signal")
        response = _set(client, key, "approve-y", {"value": True})
        notified = [n.payload for n in listener.notifies(timeout=5, stop_after=1)]
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["signal_id"], body["is_set"], body["value"], body["set_by"]) == (
        "approve-y",
        True,
        True,
        "local",
    )
    assert notified == [key]
    # A later answer overwrites the first.
    assert _set(client, key, "approve-y", {"value": False}).json()["value"] is False
    assert client.get(f"/api/v1/executions/{key}/signals").json()[0]["value"] is False


def test_a_value_is_read_by_the_signal_type_and_a_wrong_one_is_422_naming_the_type(
    client: TestClient, postgres_dsn: str
) -> None:
    key = _gated(client, postgres_dsn, "typed-signal", ("count", INT), ("approve-y", BOOL))
    assert _set(client, key, "count", {"value": 3}).json()["value"] == 3
    for signal_id, value, words in (
        ("count", "three", "type INTEGER: expected an integer, got 'three'"),
        ("count", None, "type INTEGER: got null"),
        ("approve-y", "yes", "type BOOLEAN: expected true or false"),
    ):
        refused = _set(client, key, signal_id, {"value": value})
        assert refused.status_code == 422, refused.text
        assert refused.json()["error"]["field"] == "value"
        assert words in refused.json()["error"]["message"]
    assert [s["value"] for s in client.get(f"/api/v1/executions/{key}/signals").json()] == [None, 3]


def test_a_signal_whose_gate_has_not_started_is_404_naming_the_known_ones(
    client: TestClient, postgres_dsn: str
) -> None:
    key = _gated(client, postgres_dsn, "early", ("approve-y", BOOL))
    refused = _set(client, key, "count", {"value": 1})
    assert refused.status_code == 404
    assert refused.json()["error"] == {
        "message": f"execution {key!r} has no signal 'count': its gate has not started yet "
        "(its signals: 'approve-y')",
        "field": "signal_id",
    }
    assert _set(client, "p/d/nobody/n0", "count", {"value": 1}).status_code == 404


def test_an_ended_execution_takes_no_answer(
    client: TestClient, postgres_dsn: str, replica: ReplicaDouble
) -> None:
    key = _gated(client, postgres_dsn, "ended", ("approve-y", BOOL))
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("UPDATE taskplug_executions SET owner_id = NULL WHERE key = %s", (key,))
    replica.claim(key)
    replica.phase(key, "Aborted", reason="aborted on request")
    refused = _set(client, key, "approve-y", {"value": True})
    assert refused.status_code == 409
    assert "has already ended Aborted" in refused.json()["error"]["message"]


@pytest.mark.parametrize(
    ("content", "headers", "status"),
    [
        (b'{"value": true}', {"content-type": "text/plain"}, 415),
        (b"{not json", {"content-type": "application/json"}, 400),
        (b'{"val": true}', {"content-type": "application/json"}, 422),
        (b'{"value": true, "extra": 1}', {"content-type": "application/json"}, 422),
        (b"[true]", {"content-type": "application/json"}, 422),
        (b'{"value": true}', {"content-type": "application/json", "origin": "https://evil.example"}, 403),
        (b'{"value": true}', {"content-type": "application/json", "sec-fetch-site": "cross-site"}, 403),
    ],
    ids=[
        "not-json-typed",
        "not-json",
        "no-value",
        "extra-field",
        "not-an-object",
        "other-origin",
        "cross-site",
    ],
)
def test_a_bad_or_cross_site_request_sets_nothing(
    client: TestClient, postgres_dsn: str, content: bytes, headers: dict[str, str], status: int
) -> None:
    key = _gated(client, postgres_dsn, f"refused-{status}-{len(content)}-{len(headers)}", ("approve-y", BOOL))
    response = client.post(f"/api/v1/executions/{key}/signals/approve-y", content=content, headers=headers)
    assert response.status_code == status, response.text
    assert set(response.json()) == {"error"}
    assert client.get(f"/api/v1/executions/{key}/signals").json()[0]["is_set"] is False


def test_the_openapi_document_describes_the_signal_routes(client: TestClient) -> None:
    paths = client.get("/api/v1/openapi.json").json()["paths"]
    listed = paths["/api/v1/executions/{key}/signals"]["get"]
    setter = paths["/api/v1/executions/{key}/signals/{signal_id}"]["post"]
    assert {"200", "404"} <= set(listed["responses"])
    assert {"200", "404", "409", "415", "422"} <= set(setter["responses"])
    schema = setter["requestBody"]["content"]["application/json"]["schema"]
    assert set(schema["properties"]) == {"value"}


def test_a_key_cannot_end_with_signals(client: TestClient) -> None:
    response = client.post("/api/v1/executions", json={"spec": pod_spec(None), "key": "team/signals"})
    assert response.status_code == 422, response.text
