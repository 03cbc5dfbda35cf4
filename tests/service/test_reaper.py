"""The orphan reaper deletes objects of finished attempts — and only those."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from service.replica_helpers import pod_document, submit
from taskplug.k8s import POD
from taskplug.localcluster import LocalCluster
from taskplug.service import migrate, reap_orphans


@pytest.fixture
def conn(postgres_dsn: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(postgres_dsn, autocommit=True) as c:
        migrate(c)
        c.execute("TRUNCATE taskplug_executions, taskplug_replicas CASCADE")
        yield c


def _pod(name: str, execution_id: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"execution-id": execution_id}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }


def _state(
    conn: psycopg.Connection[Any],
    key: str,
    *,
    attempt: int,
    terminal: bool,
    finished_attempts: int,
    ago: int = 5,
) -> None:
    """The row as a replica leaves it: at ``attempt``, terminal or not, ``finished_attempts`` attempts done,
    ``ago`` seconds ago."""
    conn.execute(
        "UPDATE taskplug_executions SET object_owner = %(owner)s, attempt = %(attempt)s, "
        "terminal = %(terminal)s, "
        "finished_at = CASE WHEN %(terminal)s THEN now() - make_interval(secs => %(ago)s) END, "
        "updated_at = now() - make_interval(secs => %(ago)s) WHERE key = %(key)s",
        {"owner": f"default/{key}", "attempt": attempt, "terminal": terminal, "ago": ago, "key": key},
    )
    for n in range(finished_attempts):
        conn.execute(
            "INSERT INTO taskplug_attempts (execution_id, attempt, resource_name, phase, epoch, finished_at) "
            "SELECT id, %(n)s, %(name)s, 'RetryableFailure', 1, now() - make_interval(secs => %(ago)s) "
            "FROM taskplug_executions WHERE key = %(key)s",
            {"n": n, "name": f"{key}-n0-{n}", "ago": ago, "key": key},
        )


async def test_objects_of_finished_executions_and_past_attempts_are_deleted_the_rest_kept(
    conn: psycopg.Connection[Any], postgres_dsn: str
) -> None:
    for key in ("done", "retrying", "live"):
        submit(conn, key, pod_document(key))
    _state(conn, "done", attempt=0, terminal=True, finished_attempts=1)
    _state(conn, "retrying", attempt=1, terminal=False, finished_attempts=1)
    _state(conn, "live", attempt=0, terminal=False, finished_attempts=0)
    async with (
        LocalCluster(mode="simulated") as cluster,
        await psycopg.AsyncConnection.connect(postgres_dsn, autocommit=True) as aconn,
    ):
        client = cluster.client()
        for name, owner in [
            ("done-n0-0", "done"),
            ("retrying-n0-0", "retrying"),  # the attempt it moved past: an orphan
            ("retrying-n0-1", "retrying"),  # its current attempt
            ("live-n0-0", "live"),
            ("other-n0-0", "not-ours"),  # an execution this database does not know
        ]:
            await client.create(POD, _pod(name, owner))
        deleted = await reap_orphans(aconn, client)
        again = await reap_orphans(aconn, client)
        left, _ = await client.list(POD, None)
    assert sorted(name for _, name in deleted) == ["done-n0-0", "retrying-n0-0"]
    assert again == []
    assert sorted(o["metadata"]["name"] for o in left) == ["live-n0-0", "other-n0-0", "retrying-n0-1"]


async def test_when_finished_objects_are_kept_only_one_created_after_its_attempt_ended_is_an_orphan(
    conn: psycopg.Connection[Any], postgres_dsn: str
) -> None:
    submit(conn, "kept", pod_document("kept"))
    submit(conn, "late", pod_document("late"))
    async with (
        LocalCluster(mode="simulated") as cluster,
        await psycopg.AsyncConnection.connect(postgres_dsn, autocommit=True) as aconn,
    ):
        client = cluster.client()
        await client.create(POD, _pod("kept-n0-0", "kept"))
        _state(conn, "kept", attempt=0, terminal=True, finished_attempts=1, ago=0)
        _state(conn, "late", attempt=0, terminal=True, finished_attempts=1, ago=5)
        await client.create(POD, _pod("late-n0-0", "late"))  # a create that landed after the end
        deleted = await reap_orphans(aconn, client, keep_finished=True, grace=0)
        left, _ = await client.list(POD, None)
    assert [name for _, name in deleted] == ["late-n0-0"]
    assert [o["metadata"]["name"] for o in left] == ["kept-n0-0"]
