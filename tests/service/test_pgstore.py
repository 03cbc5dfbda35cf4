"""The replica's state store: every write is fenced by (owner, epoch) in the statement that makes it."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest

from service.replica_helpers import claim_row, pod_document, replica_row, rows, stale_epoch_writes, submit
from taskplug.executor import (
    Event,
    ExecutionRecord,
    FencedError,
    FencedStateStore,
    Lease,
    NodeRecord,
    StateStoreError,
)
from taskplug.service import PostgresStateStore


def _event(attempt: int, phase: str) -> Event:
    return Event(attempt=attempt, phase=phase, version=0, reason="r", occurred_at="2026-01-01T00:00:00Z")


def test_the_owner_s_writes_land_with_their_events_attempt_and_elements(
    conn: psycopg.Connection[Any], postgres_dsn: str
) -> None:
    submit(conn, "k1", pod_document("k1"))
    rid = replica_row(conn)
    store = PostgresStateStore(psycopg.connect(postgres_dsn, autocommit=True), replica_id=rid)
    store.claim("p/d/k1/n0", claim_row(conn, rid, "k1"))
    record = ExecutionRecord(key="p/d/k1/n0", task_phase=5)
    store.save(record)
    running = _event(0, "Running")
    running.logs = [{"name": "log", "uri": "http://logs/k1"}]
    store.append_event("p/d/k1/n0", running)
    store.save_nodes("p/d/k1/n0", [NodeRecord(path="n0/3", node_phase=2)])
    record.terminal, record.outcome, record.outputs = True, "Success", {"o": 1}
    store.save(record)
    store.append_event("p/d/k1/n0", _event(0, "Success"))
    store.flush()
    store.close()

    row = rows(conn)["k1"]
    assert (row["phase"], row["terminal"], row["outputs"], row["owner_id"]) == (
        "Success",
        True,
        {"o": 1},
        rid,
    )
    events = conn.execute("SELECT phase, epoch FROM taskplug_events ORDER BY seq").fetchall()
    assert events == [("Running", 1), ("Success", 1)]
    attempt = conn.execute(
        "SELECT resource_name, phase, finished_at IS NOT NULL, logs FROM taskplug_attempts"
    ).fetchone()
    assert attempt == ("k1-n0-0", "Success", True, [{"name": "log", "uri": "http://logs/k1"}])
    assert conn.execute("SELECT path, record->>'node_phase' FROM taskplug_nodes").fetchall() == [
        ("n0/3", "2")
    ]
    owner = conn.execute("SELECT object_owner, finished_at IS NOT NULL FROM taskplug_executions").fetchone()
    assert owner == ("default/k1", True)


def test_an_ex_owner_s_writes_are_refused_and_reported_lost(
    conn: psycopg.Connection[Any], postgres_dsn: str
) -> None:
    submit(conn, "k2", pod_document("k2"))
    a, b = replica_row(conn), replica_row(conn)
    lost: list[set[str]] = []
    old = PostgresStateStore(
        psycopg.connect(postgres_dsn, autocommit=True), replica_id=a, on_lost=lost.append
    )
    old.claim("x", claim_row(conn, a, "k2"))
    old.save(ExecutionRecord(key="x", task_phase=5))
    old.flush()
    new = PostgresStateStore(psycopg.connect(postgres_dsn, autocommit=True), replica_id=b)
    new.claim("x", claim_row(conn, b, "k2"))  # b took it over: epoch 2
    new.save(ExecutionRecord(key="x", task_phase=3, attempt=1))
    new.append_event("x", _event(1, "Queued"))
    new.flush()

    old.save(ExecutionRecord(key="x", task_phase=8, terminal=True, outcome="PermanentFailure"))
    old.append_event("x", _event(0, "PermanentFailure"))
    old.flush()

    assert lost == [{"x"}]
    assert old.keys == []
    # The executor's seam, as the SQLite store has it (tests/executor/test_coordination.py).
    assert isinstance(old, FencedStateStore) and isinstance(new, FencedStateStore)
    assert "x" in old.lost and old.lease_of("x") is None
    assert new.lease_of("x") == Lease(str(b), 2)
    row = rows(conn)["k2"]
    assert (row["phase"], row["attempt"], row["terminal"], row["lease_epoch"]) == ("Queued", 1, False, 2)
    assert conn.execute("SELECT phase FROM taskplug_events").fetchall() == [("Queued",)]
    assert stale_epoch_writes(conn) == []
    old.close()
    new.close()


def test_without_fencing_the_stale_write_lands_and_the_check_catches_it(
    conn: psycopg.Connection[Any], postgres_dsn: str
) -> None:
    """The negative control: the same history with fencing switched off fails the stale-write check."""
    submit(conn, "k3", pod_document("k3"))
    a, b = replica_row(conn), replica_row(conn)
    old = PostgresStateStore(psycopg.connect(postgres_dsn, autocommit=True), replica_id=a, fencing=False)
    old.claim("x", claim_row(conn, a, "k3"))
    new = PostgresStateStore(psycopg.connect(postgres_dsn, autocommit=True), replica_id=b, fencing=False)
    new.claim("x", claim_row(conn, b, "k3"))
    new.append_event("x", _event(0, "Running"))
    new.flush()
    old.append_event("x", _event(0, "PermanentFailure"))
    old.flush()

    stale = stale_epoch_writes(conn)
    assert [(key, epoch) for key, _, epoch in stale] == [("k3", 1)]
    old.close()
    new.close()


def test_a_fenced_store_writes_nothing(conn: psycopg.Connection[Any], postgres_dsn: str) -> None:
    submit(conn, "k4", pod_document("k4"))
    rid = replica_row(conn)
    store = PostgresStateStore(psycopg.connect(postgres_dsn, autocommit=True), replica_id=rid)
    store.claim("x", claim_row(conn, rid, "k4"))
    store.save(ExecutionRecord(key="x", task_phase=5))
    store.fence()
    store.save(ExecutionRecord(key="x", task_phase=6))
    store.close()
    assert rows(conn)["k4"]["phase"] == "Queued"
    assert conn.execute("SELECT count(*) FROM taskplug_events").fetchone() == (0,)


def test_a_web_api_resource_meta_is_committed_at_once_outside_the_batch(
    conn: psycopg.Connection[Any], postgres_dsn: str
) -> None:
    submit(conn, "k5", pod_document("k5"))
    rid = replica_row(conn)
    store = PostgresStateStore(
        psycopg.connect(postgres_dsn, autocommit=True), replica_id=rid, commit_interval=3600
    )
    store.claim("x", claim_row(conn, rid, "k5"))
    store.save(ExecutionRecord(key="x", task_phase=3, plugin_state={"phase": 1, "resourceMeta": None}))
    assert conn.execute("SELECT count(*) FROM taskplug_attempts").fetchone() == (0,)  # batched, not yet
    store.append_event("x", _event(0, "Queued"))
    store.save(
        ExecutionRecord(key="x", task_phase=3, plugin_state={"phase": 2, "resourceMeta": {"job": "j-1"}})
    )
    # No flush called: the create's answer is in the database already.
    meta = conn.execute("SELECT attempt, resource_meta FROM taskplug_attempts").fetchall()
    assert meta == [(0, {"job": "j-1"})]
    assert rows(conn)["k5"]["phase"] == "Queued"
    store.close()


async def test_concurrent_async_flushes_share_one_batch_statement_and_each_returns_once_committed(
    conn: psycopg.Connection[Any], postgres_dsn: str
) -> None:
    keys = [f"g{i}" for i in range(5)]
    for key in keys:
        submit(conn, key, pod_document(key))
    rid = replica_row(conn)
    store = PostgresStateStore(
        psycopg.connect(postgres_dsn, autocommit=True), replica_id=rid, commit_interval=3600
    )
    for key in keys:
        store.claim(f"p/d/{key}/n0", claim_row(conn, rid, key))

    async def round_that_ends(key: str) -> str:
        await asyncio.sleep(0)  # rounds reach their flush at different steps
        record = ExecutionRecord(key=f"p/d/{key}/n0", task_phase=5, terminal=True, outcome="Success")
        store.save(record)
        store.append_event(record.key, _event(0, "Success"))
        await store.aflush()
        # Returned only once its own end is committed.
        return str(rows(conn)[key]["phase"])

    before = store.statements
    phases = await asyncio.gather(*(round_that_ends(k) for k in keys))
    assert phases == ["Success"] * 5
    assert store.statements - before == 1  # one batch for the five
    await store.aflush()  # nothing pending: no statement
    assert store.statements - before == 1
    store.close()
    assert stale_epoch_writes(conn) == []


async def test_a_failed_group_flush_is_raised_to_every_caller_and_the_batch_is_kept(
    conn: psycopg.Connection[Any], postgres_dsn: str
) -> None:
    submit(conn, "f1", pod_document("f1"))
    rid = replica_row(conn)
    db = psycopg.connect(postgres_dsn, autocommit=True)
    store = PostgresStateStore(db, replica_id=rid, commit_interval=3600)
    store.claim("p/d/f1/n0", claim_row(conn, rid, "f1"))
    store.save(ExecutionRecord(key="p/d/f1/n0", task_phase=5, terminal=True, outcome="Success"))
    db.close()  # the database cannot be reached
    outcomes = await asyncio.gather(store.aflush(), store.aflush(), return_exceptions=True)
    assert all(isinstance(o, StateStoreError) for o in outcomes)
    store._conn = psycopg.connect(postgres_dsn, autocommit=True)  # reachable again
    await store.aflush()
    store.close()
    assert rows(conn)["f1"]["terminal"] is True


def test_the_intent_to_create_is_an_attempt_row_without_meta_written_at_once(
    conn: psycopg.Connection[Any], postgres_dsn: str
) -> None:
    submit(conn, "i1", pod_document("i1"))
    rid = replica_row(conn)
    store = PostgresStateStore(
        psycopg.connect(postgres_dsn, autocommit=True), replica_id=rid, commit_interval=3600
    )
    store.claim("x", claim_row(conn, rid, "i1"))
    assert store.write_create_intent("x", 0, "i1-n0-0") is False  # nobody tried before
    # Committed without any flush: a replica killed now leaves the intent behind.
    intent = conn.execute(
        "SELECT attempt, resource_name, resource_meta, epoch FROM taskplug_attempts"
    ).fetchall()
    assert intent == [(0, "i1-n0-0", None, 1)]
    # The create answered: its meta fills the same row, the intent stays one row.
    store.save(
        ExecutionRecord(key="x", task_phase=3, plugin_state={"phase": 2, "resourceMeta": {"job": "j-1"}})
    )
    after = conn.execute("SELECT attempt, resource_meta FROM taskplug_attempts").fetchall()
    assert after == [(0, {"job": "j-1"})]
    store.close()


def test_a_stale_epoch_s_intent_is_refused_writes_no_row_and_reports_the_execution_lost(
    conn: psycopg.Connection[Any], postgres_dsn: str
) -> None:
    submit(conn, "i2", pod_document("i2"))
    a, b = replica_row(conn), replica_row(conn)
    lost: list[set[str]] = []
    old = PostgresStateStore(
        psycopg.connect(postgres_dsn, autocommit=True), replica_id=a, on_lost=lost.append
    )
    old.claim("x", claim_row(conn, a, "i2"))
    claim_row(conn, b, "i2")  # b took it over: epoch 2, and old still believes it holds epoch 1
    with pytest.raises(FencedError, match="no longer this replica's"):
        old.write_create_intent("x", 0, "i2-n0-0")
    assert conn.execute("SELECT count(*) FROM taskplug_attempts").fetchone() == (0,)
    assert lost == [{"x"}]
    assert old.keys == []
    with pytest.raises(FencedError):  # released: a second try is refused without a statement
        old.write_create_intent("x", 0, "i2-n0-0")
    old.close()


def test_a_new_owner_finding_an_earlier_intent_without_meta_is_told_the_create_outcome_is_unknown(
    conn: psycopg.Connection[Any], postgres_dsn: str
) -> None:
    submit(conn, "i3", pod_document("i3"))
    a, b = replica_row(conn), replica_row(conn)
    old = PostgresStateStore(psycopg.connect(postgres_dsn, autocommit=True), replica_id=a)
    old.claim("x", claim_row(conn, a, "i3"))
    assert old.write_create_intent("x", 0, "i3-n0-0") is False
    old.close()  # killed between the intent and the create's answer
    new = PostgresStateStore(psycopg.connect(postgres_dsn, autocommit=True), replica_id=b)
    new.claim("x", claim_row(conn, b, "i3"))
    assert new.write_create_intent("x", 0, "i3-n0-0") is True
    assert conn.execute("SELECT resource_meta, epoch FROM taskplug_attempts").fetchall() == [(None, 2)]
    # The same owner asking again (a round that errored after its intent) is not a takeover.
    assert new.write_create_intent("x", 0, "i3-n0-0") is False
    # An earlier intent whose create answered is known: the next attempt's intent is a fresh row.
    new.save(ExecutionRecord(key="x", task_phase=3, plugin_state={"phase": 2, "resourceMeta": {"job": "j"}}))
    assert new.write_create_intent("x", 1, "i3-n0-1") is False
    new.close()


def test_a_cacheable_tasks_events_keep_their_cache_status(
    conn: psycopg.Connection[Any], postgres_dsn: str
) -> None:
    submit(conn, "k9", pod_document("k9"))
    rid = replica_row(conn)
    store = PostgresStateStore(psycopg.connect(postgres_dsn, autocommit=True), replica_id=rid)
    key = "p/d/k9/n0"
    store.claim(key, claim_row(conn, rid, "k9"))
    store.save(ExecutionRecord(key=key, task_phase=6, cache={"status": "CACHE_HIT"}))
    hit = _event(0, "Success")
    hit.cache = {"status": "CACHE_HIT", "key": {"tag": "flyte_cached-x"}}
    store.append_event(key, hit)
    store.append_event(key, _event(0, "Other"))
    store.flush()
    try:
        assert [e.cache for e in store.events(key)] == [hit.cache, None]
        assert store.events(key)[0].to_json()["cacheStatus"] == "CACHE_HIT"
    finally:
        store.close()


def test_a_kept_log_rides_its_execution_s_batch_and_an_ex_owner_s_is_refused(
    conn: psycopg.Connection[Any], postgres_dsn: str
) -> None:
    submit(conn, "k9", pod_document("k9"))
    a, b = replica_row(conn), replica_row(conn)
    old = PostgresStateStore(psycopg.connect(postgres_dsn, autocommit=True), replica_id=a)
    old.claim("p/d/k9/n0", claim_row(conn, a, "k9"))
    assert old.key_of_object("default/k9", "p/d/k9/") == "p/d/k9/n0"
    assert old.key_of_object("default/k9", "p/d/other/") is None
    assert old.keep_log("p/d/k9/n0", ("n0", 0, "k9-n0-0", "main"), b"end\n", 40, ended=True)
    assert old.keep_log("p/d/k9/n0", ("n0", 0, "k9-n0-0", "main"), b"shorter", 7, ended=False)  # kept: 40
    assert old.logs_pending("p/d/k9/n0") and not old.keep_log(
        "p/d/none/n0", ("n0", 0, "x", "c"), b"", 0, ended=True
    )
    old.flush()
    assert not old.logs_pending("p/d/k9/n0")
    kept = "SELECT node, attempt, pod, container, log, size, ended FROM taskplug_logs ORDER BY attempt"
    assert conn.execute(kept).fetchall() == [("n0", 0, "k9-n0-0", "main", b"end\n", 40, True)]

    new = PostgresStateStore(psycopg.connect(postgres_dsn, autocommit=True), replica_id=b)
    new.claim("p/d/k9/n0", claim_row(conn, b, "k9"))  # taken over: the ex-owner's next log is refused
    old.keep_log("p/d/k9/n0", ("n0", 1, "k9-n0-1", "main"), b"late", 4, ended=True)
    old.flush()
    assert old.keys == [] and old.key_of_object("default/k9", "p/d/k9/") is None
    assert conn.execute(kept).fetchall() == [("n0", 0, "k9-n0-0", "main", b"end\n", 40, True)]
    old.close()
    new.close()


def test_the_batch_statement_stays_one_psycopg_converts_once() -> None:
    """psycopg caches a statement's conversion only up to 4,096 bytes and 50 parameters
    (``psycopg._queries``): past either, the batch would be parsed again at every write."""
    from taskplug.service._pgstore import _BATCH_SQL

    for sql, names in _BATCH_SQL.values():
        assert len(sql.encode()) <= 4096 and len(names) <= 50
        assert "  " not in sql and sql.count("%b") == len(names)
