"""Two ``taskplug executor`` processes against one PostgreSQL and ``taskplug cluster serve`` over HTTP: a
SIGKILLed replica's executions are taken over, SIGTERM hands them over at once, a replica paused past its
ttl is swept and fences itself when it resumes; nothing runs twice and no stale write lands."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from service.replica_helpers import (
    ClusterProcess,
    ReplicaProcess,
    live_replica_id,
    map_document,
    pod_document,
    rows,
    serve_cluster,
    stale_epoch_writes,
    start_replica,
    stop_replica,
    submit,
)
from support.waiting import wait_until

pytestmark = pytest.mark.integration


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterProcess]:
    with serve_cluster(tmp_path) as served:
        yield served


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "platform.yaml"
    path.write_text(
        f"executor:\n  data-root: {tmp_path / 'data'}\n  resync-period: 1s\n"
        "plugins:\n  k8s:\n    delete-resource-on-finalize: true\n"
    )
    return path


@pytest.fixture
def replicas(
    postgres_dsn: str, cluster: ClusterProcess, config: Path, tmp_path: Path
) -> Iterator[list[ReplicaProcess]]:
    """The first replica (capacity 6) at once; the test starts the second (capacity 20) with :func:`_start_split`."""
    started = [
        start_replica(postgres_dsn, cluster.kubeconfig, tmp_path / "r0.log", "--capacity", "6", config=config)
    ]
    try:
        yield started
    finally:
        for replica in started:
            stop_replica(replica)


def _live_replicas(conn: psycopg.Connection[Any]) -> list[Any]:
    return [r[0] for r in conn.execute("SELECT id FROM taskplug_replicas WHERE fenced_at IS NULL").fetchall()]


async def _start_split(
    conn: psycopg.Connection[Any],
    replicas: list[ReplicaProcess],
    dsn: str,
    cluster: ClusterProcess,
    config: Path,
    tmp_path: Path,
) -> dict[str, Any]:
    """6 executions on the first replica, then a second replica with room for all and 4 more on it; all
    Running (or done). The first six last longer: they run while the second replica starts."""
    await wait_until(lambda: len(_live_replicas(conn)) == 1, within=60, what="the first replica registered")
    for i in range(6):
        submit(conn, f"e{i}", pod_document(f"e{i}", duration=8))
    await wait_until(lambda: all(r["owner_id"] for r in rows(conn).values()), within=30, what="claimed")
    replicas.append(
        start_replica(dsn, cluster.kubeconfig, tmp_path / "r1.log", "--capacity", "20", config=config)
    )
    await wait_until(lambda: len(_live_replicas(conn)) == 2, within=60, what="the second replica registered")
    for i in range(6, 10):
        submit(conn, f"e{i}", pod_document(f"e{i}", duration=4))
    # Every pod created: each execution Running, or already done (on a loaded machine the first ones' 4 s may
    # pass before the second replica has started).
    await wait_until(
        lambda: all(r["phase"] in ("Running", "Success") for r in rows(conn).values()),
        within=60,
        what="all running",
    )
    owners = {r["owner_id"] for r in rows(conn).values()}
    assert len(owners) == 2, owners
    return rows(conn)


def _check_safety(conn: psycopg.Connection[Any]) -> None:
    found = rows(conn)
    assert {r["phase"] for r in found.values()} == {"Success"}, found
    assert {r["attempt"] for r in found.values()} == {0}  # nobody charged a failure for the kill
    assert stale_epoch_writes(conn) == []


async def test_a_sigkilled_replica_s_executions_are_taken_over_and_finish_once(
    conn: psycopg.Connection[Any],
    replicas: list[ReplicaProcess],
    postgres_dsn: str,
    cluster: ClusterProcess,
    config: Path,
    tmp_path: Path,
) -> None:
    before = await _start_split(conn, replicas, postgres_dsn, cluster, config, tmp_path)
    victim = replicas[0]
    victim_id = live_replica_id(conn, victim.pid)
    # What it still ran when it was killed (on a loaded machine one may have ended before).
    theirs = [k for k, r in before.items() if r["owner_id"] == victim_id and not r["terminal"]]
    assert theirs, before
    killed = time.monotonic()
    os.kill(victim.pid, signal.SIGKILL)
    survivor_id = live_replica_id(conn, replicas[1].pid)
    await wait_until(
        lambda: all(rows(conn)[k]["owner_id"] == survivor_id or rows(conn)[k]["terminal"] for k in theirs),
        within=30,
        what="the survivor took the victim's executions",
    )
    print(f"takeover after SIGKILL: {time.monotonic() - killed:.2f} s for {len(theirs)} execution(s)")
    await wait_until(lambda: all(r["terminal"] for r in rows(conn).values()), within=60, what="all end")
    _check_safety(conn)
    assert all(rows(conn)[k]["lease_epoch"] == 2 for k in theirs)


async def test_sigterm_hands_the_executions_over_at_once(
    conn: psycopg.Connection[Any],
    replicas: list[ReplicaProcess],
    postgres_dsn: str,
    cluster: ClusterProcess,
    config: Path,
    tmp_path: Path,
) -> None:
    before = await _start_split(conn, replicas, postgres_dsn, cluster, config, tmp_path)
    leaving = replicas[0]
    leaving_id = live_replica_id(conn, leaving.pid)
    theirs = [k for k, r in before.items() if r["owner_id"] == leaving_id]
    stopped = time.monotonic()
    os.kill(leaving.pid, signal.SIGTERM)
    await wait_until(
        lambda: all(
            rows(conn)[k]["owner_id"] not in (None, leaving_id) or rows(conn)[k]["terminal"] for k in theirs
        ),
        within=30,
        what="the other replica took them",
    )
    print(f"hand-over after SIGTERM: {time.monotonic() - stopped:.2f} s for {len(theirs)} execution(s)")
    assert leaving.process.wait(timeout=30) == 0
    fenced = conn.execute("SELECT fenced_at IS NOT NULL FROM taskplug_replicas WHERE id = %s", (leaving_id,))
    assert fenced.fetchone() == (True,)
    await wait_until(lambda: all(r["terminal"] for r in rows(conn).values()), within=60, what="all end")
    _check_safety(conn)


async def test_a_replica_paused_past_its_ttl_is_swept_and_fences_itself_when_it_resumes(
    conn: psycopg.Connection[Any],
    replicas: list[ReplicaProcess],
    postgres_dsn: str,
    cluster: ClusterProcess,
    config: Path,
    tmp_path: Path,
) -> None:
    before = await _start_split(conn, replicas, postgres_dsn, cluster, config, tmp_path)
    paused = replicas[0]
    paused_id = live_replica_id(conn, paused.pid)
    theirs = [k for k, r in before.items() if r["owner_id"] == paused_id]
    os.kill(paused.pid, signal.SIGSTOP)
    try:
        await wait_until(
            lambda: all(
                rows(conn)[k]["owner_id"] not in (None, paused_id) or rows(conn)[k]["terminal"]
                for k in theirs
            ),
            within=30,
            what="the paused replica's executions taken over",
        )
    finally:
        os.kill(paused.pid, signal.SIGCONT)
    await wait_until(
        lambda: "fences itself" in paused.text(), within=30, what="the resumed replica fenced itself"
    )
    await wait_until(lambda: len(_live_replicas(conn)) == 2, within=30, what="its new incarnation registered")
    await wait_until(lambda: all(r["terminal"] for r in rows(conn).values()), within=60, what="all end")
    _check_safety(conn)


async def test_a_map_task_whose_replica_is_killed_is_finished_by_the_other_element_by_element(
    conn: psycopg.Connection[Any],
    replicas: list[ReplicaProcess],
    postgres_dsn: str,
    cluster: ClusterProcess,
    config: Path,
    tmp_path: Path,
) -> None:
    await wait_until(lambda: len(_live_replicas(conn)) == 1, within=60, what="the first replica registered")
    submit(conn, "map", map_document("map", 6, duration=8))
    await wait_until(
        lambda: (
            conn.execute(
                "SELECT count(*) FROM taskplug_nodes el JOIN taskplug_executions e ON e.id = el.execution_id "
                "WHERE e.key = 'map'"
            ).fetchone()
            == (6,)
        ),
        within=60,
        what="every element started",
    )
    await wait_until(lambda: rows(conn)["map"]["phase"] == "Running", within=30, what="the map runs")
    first = replicas[0]
    replicas.append(start_replica(postgres_dsn, cluster.kubeconfig, tmp_path / "r1.log", config=config))
    await wait_until(lambda: len(_live_replicas(conn)) == 2, within=60, what="the second replica registered")
    assert not rows(conn)["map"]["terminal"]  # killed mid-map
    os.kill(first.pid, signal.SIGKILL)
    await wait_until(lambda: rows(conn)["map"]["terminal"], within=60, what="the map finished")
    row = rows(conn)["map"]
    assert (row["phase"], row["attempt"], row["lease_epoch"]) == ("Success", 0, 2)
    elements = conn.execute(
        "SELECT el.record->>'attempt', el.record->>'system_failures', el.epoch FROM taskplug_nodes el "
        "JOIN taskplug_executions e ON e.id = el.execution_id WHERE e.key = 'map' ORDER BY el.path"
    ).fetchall()
    # Every element ran once: the new owner adopted the running pods (no retry, no failure charged).
    assert [(a, f) for a, f, _ in elements] == [("0", "0")] * 6
    assert {epoch for _, _, epoch in elements} == {2}
    assert stale_epoch_writes(conn) == []


async def test_a_replica_rides_out_a_database_outage_and_finishes_what_it_ran(
    conn: psycopg.Connection[Any], postgres_dsn: str, cluster: ClusterProcess, config: Path, tmp_path: Path
) -> None:
    """The database goes away under a replica (every connection cut, new ones refused, through a TCP relay)
    while its executions run: it fences itself once its heartbeat is no longer confirmed and waits for the
    database — it does not exit — then starts a new incarnation, takes its executions back once the sweeper
    released them, adopts the pods it had created, and finishes them: once each, no stale write."""
    from support.tcp_relay import relay_to_postgres

    relay, relayed = relay_to_postgres(postgres_dsn)
    replica = start_replica(relayed, cluster.kubeconfig, tmp_path / "r.log", config=config)
    try:
        await wait_until(lambda: len(_live_replicas(conn)) == 1, within=60, what="the replica registered")
        first = live_replica_id(conn, replica.pid)
        for i in range(3):
            submit(conn, f"out{i}", pod_document(f"out{i}", duration=6))
        await wait_until(
            lambda: all(r["phase"] == "Running" for r in rows(conn).values()), within=60, what="all running"
        )
        relay.cut()
        await wait_until(
            lambda: "fences itself" in replica.text(), within=30, what="the replica fenced itself"
        )
        await wait_until(
            lambda: "the database does not answer" in replica.text(),
            within=30,
            what="waiting for the database",
        )
        assert replica.process.poll() is None, replica.text()
        relay.restore()
        await wait_until(lambda: all(r["terminal"] for r in rows(conn).values()), within=90, what="all end")
        assert replica.process.poll() is None, replica.text()
        found = rows(conn)
        assert {r["phase"] for r in found.values()} == {"Success"}, found
        assert {r["attempt"] for r in found.values()} == {0}  # the outage charged no failure
        assert all(r["lease_epoch"] == 2 for r in found.values())  # claimed again by the new incarnation
        assert live_replica_id(conn, replica.pid) not in (None, first)
        assert stale_epoch_writes(conn) == []
    finally:
        stop_replica(replica)
        relay.cut()
