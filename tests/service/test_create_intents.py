"""Web-API creates persisted before the call, exactly: an intent (``taskplug_create_intents``) per (execution,
element, attempt), fenced by the claim; the commit of the call's result is its outcome; an unknown create is
exactly an earlier owner's intent without an outcome — for single tasks, map elements and sync plugins."""

from __future__ import annotations

import asyncio
import threading
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from service.replica_helpers import (
    claim_row,
    pod_document,
    replica_row,
    rows,
    running,
    stale_epoch_writes,
    submit,
)
from support.waiting import wait_until
from taskplug.core import PhaseInfo, PluginRegistry, ResourceConstraintsSpec, TaskExecutionContext
from taskplug.executor import Event, ExecutionRecord, FencedError, NodeRecord, Platform
from taskplug.localcluster import LocalCluster
from taskplug.service import PostgresStateStore, Replica, ReplicaSettings
from taskplug.service._pgstore import Claim
from taskplug.webapi import DeleteContext, GetContext, PluginConfig, StatusContext, WebApiPluginEntry

FAST = ReplicaSettings(heartbeat=0.5, ttl=3.0, margin=1.0, poll=0.25, reap=0.5, reconcile=1.0)


def _store(dsn: str, rid: uuid.UUID, **kwargs: Any) -> PostgresStateStore:
    # A commit interval no test reaches: whatever lands was committed at once, not by the batch's timer.
    return PostgresStateStore(
        psycopg.connect(dsn, autocommit=True), replica_id=rid, commit_interval=3600, **kwargs
    )


def _intents(conn: psycopg.Connection[Any]) -> list[tuple[int, int, str, int, bool]]:
    """(element, attempt, resource name, epoch, outcome committed) of every intent, in order."""
    found = conn.execute(
        "SELECT element, attempt, resource_name, epoch, outcome_at IS NOT NULL FROM taskplug_create_intents "
        "ORDER BY element, attempt"
    ).fetchall()
    return [(int(e), int(a), str(n), int(ep), bool(o)) for e, a, n, ep, o in found]


def _created(job: str) -> dict[str, Any]:
    """An async web-API plugin's state once its create answered (``ResourcesCreated`` with the job)."""
    return {"phase": 2, "phaseVersion": 2, "resourceMeta": {"job": job}}


# -- the store ---------------------------------------------------------------------------------------------


def test_an_attempt_row_without_an_intent_is_not_an_unknown_create(
    conn: psycopg.Connection[Any], postgres_dsn: str
) -> None:
    """A quota token granted: the attempt's row is written (its Queued event), no create was decided."""
    submit(conn, "t1", pod_document("t1"))
    a, b = replica_row(conn), replica_row(conn)
    old = _store(postgres_dsn, a)
    old.claim("x", claim_row(conn, a, "t1"))
    old.save(ExecutionRecord(key="x", task_phase=1, plugin_state={"phase": 1}))
    old.append_event(
        "x", Event(attempt=0, phase="Queued", version=0, reason="Allocation token required", occurred_at=None)
    )
    old.flush()
    old.close()  # killed before the round that would have created
    assert conn.execute("SELECT attempt, resource_meta FROM taskplug_attempts").fetchall() == [(0, None)]

    new = _store(postgres_dsn, b)
    new.claim("x", claim_row(conn, b, "t1"))
    assert new.write_create_intent("x", 0, "t1-n0-0") is False
    assert _intents(conn) == [(-1, 0, "t1-n0-0", 2, False)]
    new.close()


def test_an_earlier_owners_intent_without_outcome_is_counted_even_after_the_new_owner_wrote_the_attempt(
    conn: psycopg.Connection[Any], postgres_dsn: str
) -> None:
    submit(conn, "t2", pod_document("t2"))
    a, b = replica_row(conn), replica_row(conn)
    old = _store(postgres_dsn, a)
    old.claim("x", claim_row(conn, a, "t2"))
    assert old.write_create_intent("x", 0, "t2-n0-0") is False
    old.close()  # killed between the intent and the create's answer

    new = _store(postgres_dsn, b)
    new.claim("x", claim_row(conn, b, "t2"))
    # The new owner's first batch rewrites the attempt's row under its epoch before its round creates: the
    # intent keeps the epoch it was written under, so the takeover is still seen.
    new.append_event("x", Event(attempt=0, phase="Queued", version=0, reason="resumed", occurred_at=None))
    new.flush()
    assert conn.execute("SELECT epoch FROM taskplug_attempts").fetchall() == [(2,)]
    assert new.write_create_intent("x", 0, "t2-n0-0") is True
    assert _intents(conn) == [(-1, 0, "t2-n0-0", 2, False)]
    new.close()


def test_the_save_after_an_intent_commits_its_outcome_at_once_meta_or_not(
    conn: psycopg.Connection[Any], postgres_dsn: str
) -> None:
    submit(conn, "t3", pod_document("t3"))
    submit(conn, "t4", pod_document("t4"))
    rid = replica_row(conn)
    store = _store(postgres_dsn, rid)
    store.claim("async", claim_row(conn, rid, "t3"))
    store.claim("sync", claim_row(conn, rid, "t4"))
    store.write_create_intent("async", 0, "t3-n0-0")
    store.write_create_intent("sync", 0, "t4-n0-0")
    assert [o for *_, o in _intents(conn)] == [False, False]

    # The async create answered with a job: its meta and the outcome land without waiting for the batch.
    store.save(ExecutionRecord(key="async", task_phase=3, plugin_state=_created("j-3")))
    # A sync plugin's ``do`` answered a terminal phase and no meta: its result is the outcome just the same.
    store.save(ExecutionRecord(key="sync", task_phase=6, plugin_state={"phase": 3, "resourceMeta": None}))
    found = conn.execute(
        "SELECT e.key, i.outcome_at IS NOT NULL, a.resource_meta FROM taskplug_create_intents i "
        "JOIN taskplug_executions e ON e.id = i.execution_id "
        "JOIN taskplug_attempts a ON a.execution_id = i.execution_id AND a.attempt = i.attempt ORDER BY e.key"
    ).fetchall()
    assert found == [("t3", True, {"job": "j-3"}), ("t4", True, None)]
    assert {k: r["phase"] for k, r in rows(conn).items()} == {"t3": "Queued", "t4": "Success"}

    # Later saves carry no outcome: they wait for the batch's interval again.
    statements = store.statements
    store.save(ExecutionRecord(key="sync", task_phase=6, plugin_state={"phase": 3, "resourceMeta": None}))
    assert store.statements == statements
    store.close()


def test_a_known_outcome_is_not_an_unknown_create_for_the_next_owner(
    conn: psycopg.Connection[Any], postgres_dsn: str
) -> None:
    submit(conn, "t5", pod_document("t5"))
    a, b = replica_row(conn), replica_row(conn)
    old = _store(postgres_dsn, a)
    old.claim("x", claim_row(conn, a, "t5"))
    old.write_create_intent("x", 0, "t5-n0-0")
    # The create failed and said so: the attempt failed, an answer the next owner reads from the row.
    old.save(ExecutionRecord(key="x", task_phase=6, plugin_state={"phase": 0}))
    old.close()
    new = _store(postgres_dsn, b)
    new.claim("x", claim_row(conn, b, "t5"))
    assert new.write_create_intent("x", 0, "t5-n0-0") is False
    new.close()


def _map_claim(conn: psycopg.Connection[Any], rid: uuid.UUID, key: str) -> Claim:
    claim = claim_row(conn, rid, key)
    claim.record = ExecutionRecord(key="m", path="n0", array={"phase": 1, "size": 4, "version": 0})
    return claim


def test_each_map_element_has_its_own_intent_and_outcome_per_retry_attempt(
    conn: psycopg.Connection[Any], postgres_dsn: str
) -> None:
    submit(conn, "m1", pod_document("m1"))
    a, b = replica_row(conn), replica_row(conn)
    old = _store(postgres_dsn, a)
    old.claim("m", _map_claim(conn, a, "m1"))
    assert old.write_create_intent("m", 0, "m1-e0", element=0) is False
    assert old.write_create_intent("m", 0, "m1-e1", element=1) is False
    assert old.write_create_intent("m", 2, "m1-e2-2", element=2) is False
    # An element's intent is not an attempt of the execution: no attempt row is written for it.
    assert conn.execute("SELECT count(*) FROM taskplug_attempts").fetchone() == (0,)
    # Element 0's create answered: the round saves it, and its result and outcome are committed at once.
    done = NodeRecord(path="n0/0", node_phase=2, task_phase=3, plugin_state=_created("e0"))
    old.save_nodes("m", [done])
    assert _intents(conn) == [
        (0, 0, "m1-e0", 1, True),
        (1, 0, "m1-e1", 1, False),
        (2, 2, "m1-e2-2", 1, False),
    ]
    stored = conn.execute(
        "SELECT path, record->'plugin_state'->'resourceMeta' FROM taskplug_nodes"
    ).fetchall()
    assert stored == [("n0/0", {"job": "e0"})]
    old.close()  # killed before elements 1 and 2 were answered

    new = _store(postgres_dsn, b)
    new.claim("m", _map_claim(conn, b, "m1"))
    assert new.write_create_intent("m", 0, "m1-e0", element=0) is False  # its outcome is known
    assert new.write_create_intent("m", 0, "m1-e1", element=1) is True  # unknown: created again, counted
    assert new.write_create_intent("m", 1, "m1-e2-1", element=2) is False  # another retry attempt
    assert new.write_create_intent("m", 2, "m1-e2-2", element=2) is True
    assert new.write_create_intent("m", 0, "m1-e3", element=3) is False  # never tried
    new.close()


def test_a_stale_epochs_element_intent_is_refused_and_writes_nothing(
    conn: psycopg.Connection[Any], postgres_dsn: str
) -> None:
    submit(conn, "m2", pod_document("m2"))
    a, b = replica_row(conn), replica_row(conn)
    lost: list[set[str]] = []
    old = _store(postgres_dsn, a, on_lost=lost.append)
    old.claim("m", _map_claim(conn, a, "m2"))
    claim_row(conn, b, "m2")  # b took it over: old still believes it holds epoch 1
    with pytest.raises(FencedError, match="no longer this replica's"):
        old.write_create_intent("m", 0, "m2-e1", element=1)
    assert _intents(conn) == []
    assert lost == [{"m"}] and old.keys == []
    old.close()


def test_an_intent_waits_for_a_concurrent_claim_and_is_refused_when_it_commits(
    conn: psycopg.Connection[Any], postgres_dsn: str
) -> None:
    """The intent locks the execution row: a takeover committing while it runs makes it write nothing,
    rather than leave an intent under the old epoch that the new owner could miss."""
    submit(conn, "t6", pod_document("t6"))
    a, b = replica_row(conn), replica_row(conn)
    old = _store(postgres_dsn, a)
    old.claim("x", claim_row(conn, a, "t6"))
    outcome: list[BaseException | bool] = []
    with psycopg.connect(postgres_dsn) as taker:  # a transaction: its claim holds the row until it commits
        taker.execute(
            "UPDATE taskplug_executions SET owner_id = %s, lease_epoch = lease_epoch + 1 WHERE key = 't6'",
            (b,),
        )

        def intend() -> None:
            try:
                outcome.append(old.write_create_intent("x", 0, "t6-n0-0"))
            except BaseException as e:
                outcome.append(e)

        thread = threading.Thread(target=intend)
        thread.start()
        asyncio.run(
            wait_until(
                lambda: (
                    not thread.is_alive()
                    or conn.execute(
                        "SELECT count(*) FROM pg_stat_activity "
                        "WHERE wait_event_type = 'Lock' AND datname = current_database()"
                    ).fetchone()
                    == (1,)
                ),
                what="the intent waits for the claim's lock (or ends)",
            )
        )
        taker.commit()
        thread.join()
    assert len(outcome) == 1 and isinstance(outcome[0], FencedError)
    assert _intents(conn) == []
    old.close()


# -- end to end: a replica against the embedded cluster ------------------------------------------------------


class _CountingConnector:
    """An async web-API plugin counting its creates by generated name; at each create it reads, as the
    connector would be reached only after it, whether the intent of that name is already committed."""

    def __init__(self, dsn: str) -> None:
        self._dsn = dsn
        self.creates: dict[str, int] = {}
        self.intent_committed: dict[str, bool] = {}

    def get_config(self) -> PluginConfig:
        return PluginConfig()

    async def resource_requirements(self, tctx: TaskExecutionContext) -> tuple[str, ResourceConstraintsSpec]:
        return "default", ResourceConstraintsSpec()

    async def create(self, tctx: TaskExecutionContext) -> tuple[Any, Any]:
        task = tctx.metadata.task_execution_id
        name = task.generated_name
        self.creates[name] = self.creates.get(name, 0) + 1
        self.intent_committed[name] = _intent_open(self._dsn, name)
        element = (task.id.node_execution_id.execution_id.name, task.id.node_execution_id.node_id)
        if element == ("mapped", "n3") and task.id.retry_attempt == 0:
            raise ConnectionError("the connector refused the job")  # the element's attempt fails, retried
        return {"job": name}, None  # created: the status cache follows it

    async def get(self, ctx: GetContext) -> Any:
        return "done"

    async def delete(self, ctx: DeleteContext) -> None:
        return None

    async def status(self, ctx: StatusContext) -> PhaseInfo:
        return PhaseInfo.success()


class _CountingSync:
    """A sync web-API plugin counting its ``do`` calls; each reads whether its intent is committed first."""

    def __init__(self, dsn: str) -> None:
        self._dsn = dsn
        self.calls: dict[str, int] = {}
        self.intent_committed: dict[str, bool] = {}

    def get_config(self) -> PluginConfig:
        return PluginConfig()

    async def do(self, tctx: TaskExecutionContext) -> PhaseInfo:
        name = tctx.metadata.task_execution_id.generated_name
        self.calls[name] = self.calls.get(name, 0) + 1
        self.intent_committed[name] = _intent_open(self._dsn, name)
        return PhaseInfo.success()


def _intent_open(dsn: str, name: str) -> bool:
    """Whether an intent of ``name`` without an outcome is committed (what a create finds while it runs)."""
    with psycopg.connect(dsn, autocommit=True) as c:
        row = c.execute(
            "SELECT count(*) FROM taskplug_create_intents WHERE resource_name = %s AND outcome_at IS NULL",
            (name,),
        ).fetchone()
    return row == (1,)


def _document(name: str, task_type: str, *, size: int | None = None, retries: int = 0) -> dict[str, Any]:
    document: dict[str, Any] = {
        "template": {
            "id": {"resourceType": "TASK", "project": "p", "domain": "d", "name": task_type, "version": "v1"},
            "type": task_type,
        },
        "execution": {"id": {"project": "p", "domain": "d", "name": name, "nodeId": "n0"}},
    }
    if size is not None:
        document["template"]["interface"] = {
            "inputs": {"variables": {"x": {"type": {"collectionType": {"simple": "INTEGER"}}}}}
        }
        document["arrayNode"] = {"parallelism": 0, "retries": retries}
        document["inputs"] = {"x": list(range(size))}
    return document


def _metric(conn: psycopg.Connection[Any], name: str) -> float:
    row = conn.execute("SELECT metrics FROM taskplug_replicas WHERE fenced_at IS NULL").fetchone()
    samples = row[0].get(name, []) if row else []
    return float(samples[0]["value"]) if samples else -1.0


def _terminal(conn: psycopg.Connection[Any], *keys: str) -> bool:
    found = rows(conn)
    return all(k in found and found[k]["terminal"] for k in keys)


async def test_a_replica_creates_each_mapped_web_api_element_once_after_its_intent_and_counts_exactly(
    conn: psycopg.Connection[Any], postgres_dsn: str, tmp_path: Path
) -> None:
    connector, sync = _CountingConnector(postgres_dsn), _CountingSync(postgres_dsn)
    registry = PluginRegistry.discover()
    registry.register(WebApiPluginEntry("counting", ("counting",), lambda setup: connector))
    registry.register(WebApiPluginEntry("counting-sync", ("counting_sync",), lambda setup: sync))
    platform = Platform.load(
        document={
            "executor": {"data-root": str(tmp_path / "data"), "resync-period": "1s"},
            "tasks": {"task-plugins": {"enabled-plugins": ["container", "counting", "counting-sync"]}},
        },
        registry=registry,
    )
    # Left behind by an earlier owner (epoch 1, gone): "orphan" had its element 1's intent written and no
    # outcome (counted once: element 1 is created again); "granted" had only its attempt's row, written when
    # a quota token was granted (no intent: not counted).
    for key, document in (
        ("orphan", _document("orphan", "counting", size=3)),
        ("granted", _document("granted", "counting")),
    ):
        conn.execute(
            "INSERT INTO taskplug_executions (key, task_type, spec, lease_epoch) VALUES (%s, %s, %s, 1)",
            (key, document["template"]["type"], Jsonb(document)),
        )
    conn.execute(
        "INSERT INTO taskplug_create_intents (execution_id, node, element, attempt, resource_name, epoch) "
        "SELECT id, 'n0', 1, 0, 'from-the-old-owner', 1 FROM taskplug_executions WHERE key = 'orphan'"
    )
    conn.execute(
        "INSERT INTO taskplug_attempts (execution_id, attempt, resource_name, phase, epoch) "
        "SELECT id, 0, 'granted-n0-0', 'Queued', 1 FROM taskplug_executions WHERE key = 'granted'"
    )
    async with LocalCluster(mode="simulated") as cluster:
        replica = Replica(postgres_dsn, platform, cluster.client(), settings=FAST)
        async with running(replica):
            submit(conn, "mapped", _document("mapped", "counting", size=5, retries=1))
            submit(conn, "single", _document("single", "counting"))
            submit(conn, "sync", _document("sync", "counting_sync"))
            keys = ("mapped", "single", "sync", "orphan", "granted")
            await wait_until(lambda: _terminal(conn, *keys), within=60, what="every execution ends")
            # Every create was made before its execution ended: the count published next is the final one.
            await wait_until(
                lambda: _metric(conn, "taskplug_executor_unknown_creates_total") == 1,
                what="exactly one unknown create counted",
            )
    assert {k: r["phase"] for k, r in rows(conn).items()} == dict.fromkeys(keys, "Success")
    # Every element attempt of both map tasks (element 3 of "mapped" twice: its first create failed) and
    # both single tasks created exactly once, each with its intent already committed (and still without
    # outcome) while the call ran; the sync plugin's ``do`` likewise.
    assert len(connector.creates) == 6 + 3 + 2
    assert set(connector.creates.values()) == {1}
    assert all(connector.intent_committed.values())
    assert list(sync.calls.values()) == [1] and all(sync.intent_committed.values())
    intents = conn.execute(
        "SELECT e.key, i.element, i.attempt, i.epoch, i.outcome_at IS NOT NULL, i.resource_name "
        "FROM taskplug_create_intents i JOIN taskplug_executions e ON e.id = i.execution_id "
        "ORDER BY e.key, i.element, i.attempt"
    ).fetchall()
    by_key: dict[str, list[tuple[int, int, int, bool]]] = {}
    for key, element, attempt, epoch, outcome, name in intents:
        by_key.setdefault(key, []).append((element, attempt, epoch, outcome))
        assert name in connector.creates or name in sync.calls
    assert by_key == {
        "mapped": sorted([(i, 0, 1, True) for i in range(5)] + [(3, 1, 1, True)]),
        "orphan": [(i, 0, 2, True) for i in range(3)],
        "granted": [(-1, 0, 2, True)],
        "single": [(-1, 0, 1, True)],
        "sync": [(-1, 0, 1, True)],
    }
    assert stale_epoch_writes(conn) == []
