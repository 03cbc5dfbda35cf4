"""One replica in this process against a real PostgreSQL and the embedded cluster (simulated pods): single
and map tasks to the end, retries, abort, hand-over at stop, adoption of the ex-owner's object, and a
web-API create persisted before (the fenced intent) and after (its resource meta)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from service.replica_helpers import map_document, pod_document, rows, running, stale_epoch_writes, submit
from support.waiting import wait_until
from taskplug.core import PhaseInfo, PluginRegistry, ResourceConstraintsSpec, TaskExecutionContext
from taskplug.executor import Platform
from taskplug.k8s import POD
from taskplug.localcluster import LocalCluster
from taskplug.service import Replica, ReplicaSettings
from taskplug.webapi import DeleteContext, GetContext, PluginConfig, StatusContext, WebApiPluginEntry

FAST = ReplicaSettings(heartbeat=0.5, ttl=3.0, margin=1.0, poll=0.25, reap=0.5, reconcile=1.0)


@pytest.fixture
def platform(tmp_path: Path) -> Platform:
    return Platform.load(
        document={
            "executor": {"data-root": str(tmp_path / "data"), "resync-period": "1s"},
            "plugins": {"k8s": {"delete-resource-on-finalize": True}},
        }
    )


def _terminal(conn: psycopg.Connection[Any], *keys: str) -> bool:
    found = rows(conn)
    return all(found[k]["terminal"] for k in keys)


def _metric(conn: psycopg.Connection[Any], name: str) -> float:
    """A replica's metric as its heartbeat last reported it (the API's /metrics reads the same)."""
    row = conn.execute("SELECT metrics FROM taskplug_replicas WHERE fenced_at IS NULL").fetchone()
    samples = row[0].get(name, []) if row else []
    return float(samples[0]["value"]) if samples else -1.0


async def _pods(cluster: LocalCluster) -> list[str]:
    objects, _ = await cluster.client().list(POD, None)
    return [o["metadata"]["name"] for o in objects]


async def test_a_replica_runs_single_and_map_tasks_retries_and_aborts_to_the_end(
    conn: psycopg.Connection[Any], postgres_dsn: str, platform: Platform, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="taskplug.service._replica")  # what `taskplug executor -v` shows
    async with (
        LocalCluster(mode="simulated") as cluster,
        running(Replica(postgres_dsn, platform, cluster.client(), settings=FAST)),
    ):
        submit(conn, "ok", pod_document("ok", duration=0.2))
        submit(conn, "fails", pod_document("fails", exit_code=3, max_attempts=2))
        submit(conn, "map", map_document("map", 4, duration=0.1))
        submit(conn, "long", pod_document("long", duration=3600))
        await wait_until(lambda: rows(conn)["long"]["phase"] == "Running", what="long runs")
        conn.execute("UPDATE taskplug_executions SET abort_requested_at = now() WHERE key = 'long'")
        conn.execute("NOTIFY taskplug_abort, 'long'")
        await wait_until(lambda: _terminal(conn, "ok", "fails", "map", "long"), within=60, what="all end")
        pods = await _pods(cluster)
        await wait_until(
            lambda: _metric(conn, "taskplug_replica_finished_total") == 4, what="metrics reported"
        )
        assert _metric(conn, "taskplug_replica_claimed_total") == 4
        assert _metric(conn, "process_resident_memory_bytes") > 0

    found = rows(conn)
    assert (found["ok"]["phase"], found["ok"]["outputs"]) == ("Success", {})
    assert (found["fails"]["phase"], found["fails"]["attempt"]) == ("PermanentFailure", 1)
    assert found["fails"]["error"]["code"].startswith("RetriesExhausted")
    assert found["map"]["phase"] == "Success"
    assert (found["long"]["phase"], found["long"]["error"]["code"]) == ("Aborted", "Aborted")
    # Its verbose log says which executions it claimed and which abort requests it acted on.
    assert "claimed long (epoch 1)" in caplog.messages
    assert "aborting long as requested" in caplog.messages
    assert pods == []
    attempts = conn.execute(
        "SELECT e.key, a.attempt, a.resource_name, a.phase FROM taskplug_attempts a "
        "JOIN taskplug_executions e ON e.id = a.execution_id WHERE e.key = 'fails' ORDER BY a.attempt"
    ).fetchall()
    assert [(a, n, p) for _, a, n, p in attempts] == [
        (0, "fails-n0-0", "RetryableFailure"),
        (1, "fails-n0-1", "PermanentFailure"),
    ]
    elements = conn.execute(
        "SELECT count(*) FROM taskplug_nodes el JOIN taskplug_executions e ON e.id = el.execution_id "
        "WHERE e.key = 'map'"
    ).fetchone()
    assert elements == (4,)
    seqs = conn.execute(
        "SELECT v.phase FROM taskplug_events v JOIN taskplug_executions e ON e.id = v.execution_id "
        "WHERE e.key = 'ok' ORDER BY v.seq"
    ).fetchall()
    assert seqs[-1] == ("Success",)
    assert stale_epoch_writes(conn) == []


async def test_a_stopped_replica_hands_its_executions_over_and_the_next_one_adopts_the_object(
    conn: psycopg.Connection[Any], postgres_dsn: str, platform: Platform
) -> None:
    async with LocalCluster(mode="simulated") as cluster:
        first = Replica(postgres_dsn, platform, cluster.client(), settings=FAST)
        async with running(first):
            submit(conn, "handed", pod_document("handed", duration=3600))
            await wait_until(lambda: rows(conn)["handed"]["phase"] == "Running", what="it runs")
            first_id = first.replica_id
        row = rows(conn)["handed"]
        assert (row["owner_id"], row["terminal"], row["lease_epoch"]) == (None, False, 1)
        fenced = conn.execute(
            "SELECT fenced_at IS NOT NULL FROM taskplug_replicas WHERE id = %s", (first_id,)
        )
        assert fenced.fetchone() == (True,)

        second = Replica(postgres_dsn, platform, cluster.client(), settings=FAST)
        async with running(second):
            await wait_until(lambda: rows(conn)["handed"]["owner_id"] == second.replica_id, what="claimed")
            await wait_until(lambda: second.stats.claimed == 1)
            conn.execute("UPDATE taskplug_executions SET abort_requested_at = now() WHERE key = 'handed'")
            conn.execute("NOTIFY taskplug_abort, 'handed'")
            await wait_until(lambda: _terminal(conn, "handed"), within=30, what="aborted")
            pods = await _pods(cluster)
    assert rows(conn)["handed"]["lease_epoch"] == 2
    assert rows(conn)["handed"]["phase"] == "Aborted"
    assert pods == []
    # One attempt, one object: the second replica found the pod Running (adopted), it created none.
    phases = conn.execute("SELECT phase, epoch FROM taskplug_events ORDER BY seq").fetchall()
    assert ("Running", 1) in phases
    assert phases[-1] == ("Aborted", 2)
    assert stale_epoch_writes(conn) == []


async def test_a_row_this_replica_owns_but_does_not_drive_is_adopted_by_the_reconcile(
    conn: psycopg.Connection[Any], postgres_dsn: str, platform: Platform
) -> None:
    """A claim whose answer was lost (the UPDATE committed, the connection dropped before the rows came
    back): the row is this replica's in the database only, until the reconcile finds it."""
    async with LocalCluster(mode="simulated") as cluster:
        replica = Replica(postgres_dsn, platform, cluster.client(), settings=FAST)
        async with running(replica):
            # Inserted already claimed by this replica, as its own lost claim would leave it: its poll
            # never sees it claimable, only the reconcile can find it.
            conn.execute(
                "INSERT INTO taskplug_executions (key, task_type, spec, owner_id, lease_epoch) "
                "VALUES ('lost', 'container', %s, %s, 1)",
                (Jsonb(pod_document("lost")), replica.replica_id),
            )
            await wait_until(lambda: _terminal(conn, "lost"), within=30, what="adopted and finished")
            replica_id = replica.replica_id
    row = rows(conn)["lost"]
    assert (row["phase"], row["lease_epoch"], row["owner_id"]) == ("Success", 1, replica_id)
    assert stale_epoch_writes(conn) == []


async def test_a_replica_forgets_finished_executions_so_its_memory_stays_bounded(
    conn: psycopg.Connection[Any], postgres_dsn: str, platform: Platform
) -> None:
    async with LocalCluster(mode="simulated") as cluster:
        replica = Replica(postgres_dsn, platform, cluster.client(), settings=FAST)
        async with running(replica):
            held: list[int] = []
            for batch in range(3):
                keys = [f"b{batch}-{i}" for i in range(20)]
                for key in keys:
                    submit(conn, key, pod_document(key))
                await wait_until(lambda k=keys: _terminal(conn, *k), within=60, what="the batch ends")
                current = replica._current
                assert current is not None and current.executor is not None
                executor = current.executor
                await wait_until(lambda e=executor: not list(e.keys), what="finished executions forgotten")
                held.append(
                    len(current.rows)
                    + len(current.by_row_key)
                    + len(current.row_keys)
                    + len(current.store.keys)
                )
            await wait_until(lambda: replica.stats.finished == 60, what="all counted finished")
    assert held == [0, 0, 0]
    assert all(r["phase"] == "Success" for r in rows(conn).values())


async def test_a_replica_publishes_its_plugin_machinerys_metrics_in_its_row(
    conn: psycopg.Connection[Any], postgres_dsn: str, platform: Platform
) -> None:
    async with LocalCluster(mode="simulated") as cluster:
        replica = Replica(postgres_dsn, platform, cluster.client(), settings=FAST)
        async with running(replica):
            submit(conn, "pod", pod_document("pod", duration=0.2))
            await wait_until(lambda: _terminal(conn, "pod"), within=30, what="the pod task ends")

            def updates() -> list[dict[str, Any]]:
                row = conn.execute(
                    "SELECT metrics FROM taskplug_replicas WHERE id = %s", (replica.replica_id,)
                ).fetchone()
                return list(row[0].get("k8s_informer_updates_total", [])) if row and row[0] else []

            await wait_until(lambda: any(s["value"] > 0 for s in updates()), what="plugin metrics published")
    samples = updates()
    assert {s["labels"]["outcome"] for s in samples} <= {"enqueued", "dropped"}
    assert all(s["labels"]["plugin"] for s in samples)


class _IntentProbe:
    """A web-API plugin whose create looks in the database for the intent row of the attempt it is asked to
    create (as the connector would be reached only after it), then answers a finished job at once."""

    def __init__(self, dsn: str) -> None:
        self._dsn = dsn
        self.seen: dict[str, list[tuple[int, Any, int]]] = {}

    def get_config(self) -> PluginConfig:
        return PluginConfig()

    async def resource_requirements(self, tctx: TaskExecutionContext) -> tuple[str, ResourceConstraintsSpec]:
        return "default", ResourceConstraintsSpec()

    async def create(self, tctx: TaskExecutionContext) -> tuple[Any, Any]:
        task = tctx.metadata.task_execution_id
        key = task.id.node_execution_id.execution_id.name
        with psycopg.connect(self._dsn, autocommit=True) as c:
            found = c.execute(
                "SELECT a.attempt, a.resource_meta, a.epoch FROM taskplug_attempts a "
                "JOIN taskplug_executions e ON e.id = a.execution_id WHERE e.key = %s ORDER BY a.attempt",
                (key,),
            ).fetchall()
        self.seen.setdefault(key, []).extend(found)
        return {"job": task.generated_name}, "done"

    async def get(self, ctx: GetContext) -> Any:
        return "done"

    async def delete(self, ctx: DeleteContext) -> None:
        return None

    async def status(self, ctx: StatusContext) -> PhaseInfo:
        return PhaseInfo.success()


def _probe_document(name: str) -> dict[str, Any]:
    return {
        "template": {
            "id": {"resourceType": "TASK", "project": "p", "domain": "d", "name": "probe", "version": "v1"},
            "type": "intent_probe",
        },
        "execution": {"id": {"project": "p", "domain": "d", "name": name, "nodeId": "n0"}},
    }


async def test_a_web_api_create_is_preceded_by_its_fenced_intent_and_followed_by_its_meta(
    conn: psycopg.Connection[Any], postgres_dsn: str, tmp_path: Path
) -> None:
    probe = _IntentProbe(postgres_dsn)
    registry = PluginRegistry.discover()
    registry.register(WebApiPluginEntry("intent-probe", ("intent_probe",), lambda setup: probe))
    platform = Platform.load(
        document={
            "executor": {"data-root": str(tmp_path / "data"), "resync-period": "1s"},
            "tasks": {"task-plugins": {"enabled-plugins": ["container", "intent-probe"]}},
        },
        registry=registry,
    )
    # "orphan": an earlier owner (epoch 1, now gone) wrote its intent and died before the create's answer
    # was committed: whether the job exists is unknown, so it is created again, and counted.
    conn.execute(
        "INSERT INTO taskplug_executions (key, task_type, spec, lease_epoch) VALUES ('orphan', 'intent_probe', "
        "%s, 1)",
        (Jsonb(_probe_document("orphan")),),
    )
    conn.execute(
        "INSERT INTO taskplug_attempts (execution_id, attempt, resource_name, phase, epoch) "
        "SELECT id, 0, 'orphan-n0-0', 'Queued', 1 FROM taskplug_executions WHERE key = 'orphan'"
    )
    conn.execute(
        "INSERT INTO taskplug_create_intents (execution_id, element, attempt, resource_name, epoch) "
        "SELECT id, -1, 0, 'orphan-n0-0', 1 FROM taskplug_executions WHERE key = 'orphan'"
    )
    async with LocalCluster(mode="simulated") as cluster:
        replica = Replica(postgres_dsn, platform, cluster.client(), settings=FAST)
        async with running(replica):
            submit(conn, "web", _probe_document("web"))
            await wait_until(lambda: _terminal(conn, "web", "orphan"), within=30, what="both end")
            await wait_until(
                lambda: _metric(conn, "taskplug_executor_unknown_creates_total") == 1,
                what="the unknown create counted",
            )
    found = rows(conn)
    assert (found["web"]["phase"], found["orphan"]["phase"]) == ("Success", "Success")
    # Inside create, the intent was already committed: the attempt's row, no meta yet, this owner's epoch.
    assert probe.seen["web"] == [(0, None, 1)]
    assert probe.seen["orphan"] == [(0, None, 2)]
    attempts = conn.execute(
        "SELECT e.key, a.attempt, a.resource_meta, a.phase, a.epoch FROM taskplug_attempts a "
        "JOIN taskplug_executions e ON e.id = a.execution_id ORDER BY e.key"
    ).fetchall()
    assert attempts == [
        ("orphan", 0, {"job": "orphan-n0-0"}, "Success", 2),
        ("web", 0, {"job": "web-n0-0"}, "Success", 1),
    ]
    assert stale_epoch_writes(conn) == []


async def test_a_signal_set_for_an_execution_this_replica_drives_wakes_it_at_once(
    conn: psycopg.Connection[Any], postgres_dsn: str, platform: Platform
) -> None:
    """``NOTIFY taskplug_signal, '<row key>'`` (what a signal's set sends) makes the owner evaluate that
    execution now (the executor's ``wake``): its gate reads the value without waiting for the resync."""
    from flyteidl.core import types_pb2

    from taskplug.core import plain_to_literal

    boolean = types_pb2.LiteralType(simple=types_pb2.SimpleType.BOOLEAN)
    async with LocalCluster(mode="simulated") as cluster:
        replica = Replica(postgres_dsn, platform, cluster.client(), settings=FAST)
        async with running(replica):
            submit(conn, "gate-wake", pod_document("gate-wake", duration=60))
            await wait_until(
                lambda: replica._current is not None and "p/d/gate-wake/n0" in replica._current.rows,
                within=30,
                what="the replica drives the execution",
            )
            # A NOTIFY sent before the replica's LISTEN is lost (the reconcile and resync cover that): wait
            # until it listens (its last LISTEN, the launch-plan children's, comes after the signals').
            await wait_until(
                lambda: (
                    conn.execute(
                        "SELECT 1 FROM pg_stat_activity WHERE query = 'LISTEN taskplug_child'"
                    ).fetchone()
                    is not None
                ),
                what="the replica listens",
            )
            current = replica._current
            assert current is not None and current.executor is not None
            woken: list[tuple[str, str]] = []
            replica_wake, executor_wake = replica._wake, current.executor.wake

            # Observers around the real methods, which still run: the LISTEN handler's dispatch, and the
            # executor wake it makes (the executor also wakes itself, on its resync and object events).
            def on_notify(inc: Any, row_key: str) -> None:
                woken.append(("notified", row_key))
                replica_wake(inc, row_key)

            def on_wake(key: str) -> None:
                if woken and woken[-1][0] == "notified":
                    woken.append(("woken", key))
                executor_wake(key)

            replica._wake = on_notify  # type: ignore[method-assign]
            current.executor.wake = on_wake  # type: ignore[method-assign]
            current.store.get_or_create_signal("p/d/gate-wake/n0", "approve-y", boolean)
            conn.execute("NOTIFY taskplug_signal, 'not-driven-here'")  # no execution of this replica's
            current.store.set_signal("p/d/gate-wake/n0", "approve-y", plain_to_literal(True, boolean, "v"))
            await wait_until(
                lambda: ("woken", "p/d/gate-wake/n0") in woken, within=10, what="the owner woken"
            )
    assert woken == [
        ("notified", "not-driven-here"),
        ("notified", "gate-wake"),
        ("woken", "p/d/gate-wake/n0"),
    ]
