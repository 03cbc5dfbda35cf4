"""The orphan reaper deletes objects of finished attempts — and only those."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest

from service.replica_helpers import pod_document, submit
from taskplug.engine.k8s import connect
from taskplug.executor import Platform
from taskplug.k8s import FINALIZER, POD, KubeApiError, ResourceType
from taskplug.localcluster import LocalCluster
from taskplug.service import reap_orphans
from taskplug.service._reaper import reaped_resource_types

SPARK = ResourceType("sparkoperator.k8s.io/v1beta2", "SparkApplication", "sparkapplications")
PYTORCH = ResourceType("kubeflow.org/v1", "PyTorchJob", "pytorchjobs")
RAY = ResourceType("ray.io/v1", "RayJob", "rayjobs")


def _platform(*enabled: str) -> Platform:
    return Platform.load(document={"tasks": {"task-plugins": {"enabled-plugins": list(enabled)}}})


def _pod(name: str, execution_id: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"execution-id": execution_id}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }


def _custom(rtype: ResourceType, name: str, execution_id: str) -> dict[str, Any]:
    return {
        "apiVersion": rtype.api_version,
        "kind": rtype.kind,
        "metadata": {"name": name, "namespace": "default", "labels": {"execution-id": execution_id}},
        "spec": {},
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


def test_reaped_types_are_pods_and_each_kind_an_enabled_k8s_plugin_creates_once() -> None:
    every = _platform("container", "sidecar", "spark", "pytorch", "ray", "k8s-array", "echo")
    only_spark = _platform("spark")
    defaults = Platform.load()

    found = reaped_resource_types(every)

    # Pods first; container and sidecar both watch Pods (one list); the core plugins create nothing.
    assert found[0] == POD
    assert sorted((t.api_version, t.kind, t.plural) for t in found[1:]) == sorted(
        (t.api_version, t.kind, t.plural) for t in (SPARK, PYTORCH, RAY)
    )
    # Pods even when no enabled plugin watches them (map tasks, and the objects of a plugin since disabled).
    assert [t.kind for t in reaped_resource_types(only_spark)] == ["Pod", "SparkApplication"]
    assert "RayJob" not in {t.kind for t in reaped_resource_types(defaults)}


async def test_resurrected_custom_resources_are_deleted_live_ones_kept_and_an_unserved_kind_skipped(
    conn: psycopg.Connection[Any], postgres_dsn: str, tmp_path: Path
) -> None:
    for key in ("done", "retrying", "live"):
        submit(conn, key, pod_document(key))
    _state(conn, "done", attempt=0, terminal=True, finished_attempts=1)
    _state(conn, "retrying", attempt=1, terminal=False, finished_attempts=1)
    _state(conn, "live", attempt=0, terminal=False, finished_attempts=0)
    rtypes = reaped_resource_types(_platform("container", "spark", "pytorch", "ray"))
    async with (
        LocalCluster(mode="simulated") as cluster,
        await psycopg.AsyncConnection.connect(postgres_dsn, autocommit=True) as aconn,
    ):
        # The cluster serves the Spark and PyTorch CRDs, not Ray's (no Ray operator installed): the real
        # API server's 404 for an unknown resource, through the lightkube adapter a replica uses.
        cluster.register_resource(SPARK)
        cluster.register_resource(PYTORCH)
        await cluster.serve_http()
        client = connect(cluster.kubeconfig(tmp_path / "kubeconfig"))
        try:
            for rtype, name, owner in [
                (SPARK, "done-n0-0", "done"),  # a resurrected SparkApplication of a finished execution
                (PYTORCH, "retrying-n0-0", "retrying"),  # the attempt it moved past
                (PYTORCH, "retrying-n0-1", "retrying"),  # its current attempt
                (SPARK, "live-n0-0", "live"),  # an execution still running
                (SPARK, "other-n0-0", "not-ours"),  # an execution this database does not know
            ]:
                await client.create(rtype, _custom(rtype, name, owner))
            await client.create(POD, _pod("done-n0-0", "done"))
            with pytest.raises(KubeApiError) as unserved:
                await client.list(RAY, None)

            deleted = await reap_orphans(aconn, client, rtypes=rtypes)
            again = await reap_orphans(aconn, client, rtypes=rtypes)
            left = {
                rtype.kind: sorted(o["metadata"]["name"] for o in (await client.list(rtype, None))[0])
                for rtype in (POD, SPARK, PYTORCH)
            }
        finally:
            await client.close()
    assert unserved.value.status == 404
    assert sorted(deleted) == [
        ("default", "done-n0-0"),
        ("default", "done-n0-0"),
        ("default", "retrying-n0-0"),
    ]
    assert again == []
    assert left == {
        "Pod": [],
        "SparkApplication": ["live-n0-0", "other-n0-0"],
        "PyTorchJob": ["retrying-n0-1"],
    }


async def test_a_list_error_other_than_not_served_fails_the_pass(
    conn: psycopg.Connection[Any], postgres_dsn: str
) -> None:
    submit(conn, "done", pod_document("done"))
    _state(conn, "done", attempt=0, terminal=True, finished_attempts=1)
    async with (
        LocalCluster(mode="simulated") as cluster,
        await psycopg.AsyncConnection.connect(postgres_dsn, autocommit=True) as aconn,
    ):
        client = cluster.client()
        await client.create(SPARK, _custom(SPARK, "done-n0-0", "done"))
        cluster.faults.fail("list", 500, plural=SPARK.plural)
        # A server error is "could not decide", not "nothing there": the replica logs the pass as failed.
        with pytest.raises(KubeApiError) as failed:
            await reap_orphans(aconn, client, rtypes=(POD, SPARK))
        deleted = await reap_orphans(aconn, client, rtypes=(POD, SPARK))
    assert failed.value.status == 500
    assert deleted == [("default", "done-n0-0")]


async def test_an_orphan_holding_taskplugs_finalizer_is_let_go_and_deleted(
    conn: psycopg.Connection[Any], postgres_dsn: str
) -> None:
    for key in ("done", "stuck", "live"):
        submit(conn, key, pod_document(key))
    _state(conn, "done", attempt=0, terminal=True, finished_attempts=1)
    _state(conn, "stuck", attempt=0, terminal=True, finished_attempts=1)
    _state(conn, "live", attempt=0, terminal=False, finished_attempts=0)
    async with (
        LocalCluster(mode="simulated") as cluster,
        await psycopg.AsyncConnection.connect(postgres_dsn, autocommit=True) as aconn,
    ):
        client = cluster.client()
        for name, owner in [("done-n0-0", "done"), ("stuck-n0-0", "stuck"), ("live-n0-0", "live")]:
            obj = _custom(SPARK, name, owner)
            obj["metadata"]["finalizers"] = [FINALIZER, "example.com/other"]
            await client.create(SPARK, obj)
        # An owner deleted this one and stopped before dropping its finalizer: it waits on it for ever.
        await client.delete(SPARK, "default", "stuck-n0-0")
        await client.delete(SPARK, "default", "live-n0-0")

        deleted = await reap_orphans(aconn, client, rtypes=(SPARK,))
        left = {o["metadata"]["name"]: o["metadata"] for o in (await client.list(SPARK, None))[0]}
    assert sorted(name for _, name in deleted) == ["done-n0-0", "stuck-n0-0"]
    # Only taskplug's own finalizer is dropped: another controller's still holds the objects, deleting.
    assert {name: meta["finalizers"] for name, meta in left.items()} == {
        "done-n0-0": ["example.com/other"],
        "stuck-n0-0": ["example.com/other"],
        "live-n0-0": [FINALIZER, "example.com/other"],
    }
    assert all(meta.get("deletionTimestamp") for meta in left.values())
