"""The one create Kubernetes cannot fence, made to happen: a replica's create, sent while it owned the
attempt, is held by the API server while the replica is paused past its lease; another replica takes the
execution over, runs the attempt to Success and deletes its pod (``delete-resource-on-finalize``); then the
held create lands and the pod is back — resurrected. The orphan reaper must find and delete it, and the paused
replica, resumed, must write nothing.

The embedded cluster runs in this test's event loop, served over HTTP on 127.0.0.1, so that the test holds
that one create (a ``Faults.check`` hook: the API server has received the request and not yet applied it);
the replicas are ``taskplug executor`` processes on a real PostgreSQL.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from service.replica_helpers import (
    live_replica_id,
    pod_document,
    rows,
    stale_epoch_writes,
    start_replica,
    stop_replica,
    submit,
)
from support.waiting import wait_until
from taskplug.k8s import POD
from taskplug.localcluster import LocalCluster
from taskplug.localcluster._store import StoredEvent

pytestmark = pytest.mark.integration

TTL = 3.0  # the replicas' lease (replica_helpers' timings); deadlines below are bounds, not timings


async def test_a_create_landing_after_its_attempt_was_finished_elsewhere_is_reaped(
    postgres_dsn: str, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    config = tmp_path / "platform.yaml"
    config.write_text(
        f"executor:\n  data-root: {tmp_path / 'data'}\n  resync-period: 1s\n"
        "plugins:\n  k8s:\n    delete-resource-on-finalize: true\n"
    )
    async with LocalCluster(mode="simulated") as cluster:
        kubeconfig = (await cluster.serve_http(), cluster.kubeconfig(tmp_path / "cluster.kubeconfig"))[1]

        # The first create of a pod is held at the API server until the test lets it through.
        arrived, release = asyncio.Event(), asyncio.Event()
        check: Callable[[str, str], Awaitable[None]] = cluster.faults.check

        async def holding_the_first_pod_create(verb: str, plural: str) -> None:
            if verb == "create" and plural == "pods" and not arrived.is_set():
                arrived.set()
                await release.wait()
            await check(verb, plural)

        cluster.faults.check = holding_the_first_pod_create  # type: ignore[method-assign]
        pod_events: list[tuple[str, float]] = []

        def record(rtype: Any, event: StoredEvent) -> None:
            if (
                rtype.plural == "pods"
                and event.type != "MODIFIED"
                and event.obj["metadata"]["name"] == "late-n0-0"
            ):
                pod_events.append((event.type, time.monotonic()))

        cluster.store.observers.append(record)
        paused = start_replica(postgres_dsn, kubeconfig, tmp_path / "paused.log", config=config)
        other = None
        try:
            await wait_until(
                lambda: live_replica_id(conn, paused.pid) is not None, within=60, what="registered"
            )
            submit(conn, "late", pod_document("late"))
            await asyncio.wait_for(arrived.wait(), 60)  # its create is in the API server, not applied
            first_owner = rows(conn)["late"]["owner_id"]
            assert first_owner == live_replica_id(conn, paused.pid)
            os.kill(paused.pid, signal.SIGSTOP)

            # Past the lease the other replica sweeps it, claims the execution, creates the pod (its create
            # is not held), sees it succeed, and deletes it at finalize.
            other = start_replica(postgres_dsn, kubeconfig, tmp_path / "other.log", config=config)
            await wait_until(
                lambda: rows(conn)["late"]["phase"] == "Success", within=60, what="finished by the other"
            )
            assert rows(conn)["late"]["owner_id"] != first_owner
            await wait_until(
                lambda: [t for t, _ in pod_events] == ["ADDED", "DELETED"] or len(pod_events) > 2,
                within=30,
                what="the other replica's pod deleted at finalize",
            )
            assert [t for t, _ in pod_events][:2] == ["ADDED", "DELETED"]

            # The held create lands: the pod is back, with nobody owning its attempt.
            release.set()
            await wait_until(lambda: len(pod_events) >= 3, within=30, what="the late create applied")
            assert pod_events[2][0] == "ADDED"
            resurrected_at = pod_events[2][1]
            await wait_until(
                lambda: pod_events[-1][0] == "DELETED" and len(pod_events) >= 4,
                within=TTL + 30,
                what="the orphan reaper deleting the resurrected pod",
            )
            print(
                f"resurrected pod reaped {pod_events[-1][1] - resurrected_at:.2f} s after it landed (ttl {TTL} s)"
            )
            # The replica logs the deletion after the API answered it: the line may trail the event seen here.
            await wait_until(
                lambda: "orphan reaper deleted default/late-n0-0" in other.text(),
                within=30,
                what="the other replica's reaper saying it deleted the resurrected pod",
            )
            assert cluster.store.try_get(POD, "default", "late-n0-0") is None

            # The paused replica resumes: it was fenced, so it writes nothing and deletes nothing.
            os.kill(paused.pid, signal.SIGCONT)
            await wait_until(
                lambda: "fences itself" in paused.text(), within=30, what="the resumed replica fencing itself"
            )
            final = rows(conn)["late"]
            assert (final["phase"], final["attempt"]) == ("Success", 0)
            assert stale_epoch_writes(conn) == []
            assert [t for t, _ in pod_events].count("ADDED") == 2  # the other's pod, and the one resurrection
        finally:
            release.set()
            for replica in (paused, other):
                if replica is not None:
                    stop_replica(replica)
