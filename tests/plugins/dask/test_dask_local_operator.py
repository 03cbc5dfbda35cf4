"""The dask operator for the embedded cluster: what it creates, with which names,
labels, environment and owners, and how the runner pod drives the DaskJob. Pods are simulated here (no
processes); test_dask_local_run.py runs real Dask processes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from dask_helpers import dask_custom, dask_template, tctx_for

from taskplug.k8s import POD, KubeClient, PlatformPodConfig, ResourceType
from taskplug.localcluster import ANNOTATION_DURATION, ANNOTATION_EXIT_CODE, NAMESPACE, LocalCluster
from taskplug.plugins.dask import DASK_CLUSTER, DASK_JOB, DaskLocalOperator, build_dask_job, runner_pod_name

SERVICE = ResourceType("v1", "Service", "services")
NS = "dask-ns"


def dask_job(name: str, *, workers: int = 2, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """The DaskJob the plugin builds, named and placed as the plugin manager would."""
    job = build_dask_job(
        tctx_for(dask_template(dask_custom(workers=workers))), platform=PlatformPodConfig(environ={})
    )
    job["metadata"].update(
        name=name,
        namespace=NS,
        annotations={**job["metadata"].get("annotations", {}), **(annotations or {})},
        labels={**job["metadata"].get("labels", {}), "team": name},
    )
    return job


@pytest.fixture
async def cluster() -> AsyncIterator[LocalCluster]:
    async with LocalCluster(mode="simulated", bookmark_interval=0) as local:
        local.register_operator(DASK_JOB, DaskLocalOperator())
        await local.client().create(NAMESPACE, {"metadata": {"name": NS}})
        yield local


def pods(cluster: LocalCluster) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p for p in cluster.store.iter(POD, NS)}


def by_component(cluster: LocalCluster, component: str) -> list[dict[str, Any]]:
    return [
        p for p in pods(cluster).values() if p["metadata"]["labels"].get("dask.org/component") == component
    ]


async def job_status(cluster: LocalCluster, name: str, status: str) -> dict[str, Any]:
    return await cluster.wait_for(
        DASK_JOB, NS, name, lambda j: (j.get("status") or {}).get("jobStatus") == status, within=20
    )


def env_of(pod: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in pod["spec"]["containers"][0].get("env") or []}


async def test_a_job_gets_a_cluster_a_scheduler_workers_and_a_runner_named_as_the_operator_names_them(
    cluster: LocalCluster,
) -> None:
    client = cluster.client()
    created = await client.create(DASK_JOB, dask_job("job-a", annotations={ANNOTATION_DURATION: "30"}))
    job = await job_status(cluster, "job-a", "Running")
    assert job["status"]["clusterName"] == "job-a"
    assert job["status"]["jobRunnerPodName"] == "job-a-runner"
    assert job["status"]["startTime"]

    dask_cluster = await client.get(DASK_CLUSTER, NS, "job-a")
    assert dask_cluster["metadata"]["labels"]["dask.org/cluster-name"] == "job-a"
    assert dask_cluster["metadata"]["labels"]["team"] == "job-a"  # the job's labels carry over
    assert dask_cluster["metadata"]["labels"]["execution-id"] == "exec1"  # spec.cluster.metadata wins
    assert dask_cluster["metadata"]["ownerReferences"][0]["uid"] == created["metadata"]["uid"]
    assert dask_cluster["spec"] == created["spec"]["cluster"]["spec"]
    assert dask_cluster["status"]["phase"] == "Running"

    service = await client.get(SERVICE, NS, "job-a-scheduler")
    assert service["spec"]["clusterIP"] == "127.0.0.1"
    assert service["spec"]["selector"] == {
        "dask.org/cluster-name": "exec1-n0-0",
        "dask.org/component": "scheduler",
    }
    ports = {p["name"]: p["port"] for p in service["spec"]["ports"]}
    assert set(ports) == {"tcp-comm", "dashboard"}
    assert all(isinstance(p, int) and p > 1024 for p in ports.values())
    address = f"tcp://127.0.0.1:{ports['tcp-comm']}"

    [scheduler] = by_component(cluster, "scheduler")
    assert scheduler["metadata"]["name"].startswith("job-a-scheduler-")
    assert scheduler["metadata"]["labels"]["sidecar.istio.io/inject"] == "false"
    assert scheduler["metadata"]["ownerReferences"][0]["uid"] == dask_cluster["metadata"]["uid"]
    # The legacy console script runs as the dask CLI, on loopback, on the Service's ports.
    assert scheduler["spec"]["containers"][0]["command"] == [
        "dask",
        "scheduler",
        "--host",
        "127.0.0.1",
        "--port",
        str(ports["tcp-comm"]),
        "--dashboard-address",
        f"127.0.0.1:{ports['dashboard']}",
    ]

    workers = by_component(cluster, "worker")
    assert len(workers) == 2
    for worker in workers:
        labels = worker["metadata"]["labels"]
        assert labels["dask.org/workergroup-name"] == "job-a-default"
        env = env_of(worker)
        assert env["DASK_SCHEDULER_ADDRESS"] == address
        assert env["DASK_WORKER_NAME"].startswith("job-a-default-worker-")
        assert worker["metadata"]["name"].startswith(env["DASK_WORKER_NAME"] + "-")
        command = worker["spec"]["containers"][0]["command"]
        assert command[:5] == ["dask", "worker", "--name", "$(DASK_WORKER_NAME)", "--nthreads"]
        assert command[-4:] == ["--host", "127.0.0.1", "--dashboard-address", "127.0.0.1:0"]
    assert len({env_of(w)["DASK_WORKER_NAME"] for w in workers}) == 2

    runner = pods(cluster)["job-a-runner"]
    assert runner["metadata"]["labels"]["dask.org/component"] == "job-runner"
    assert runner["metadata"]["labels"]["dask.org/cluster-name"] == "job-a"
    assert runner["metadata"]["ownerReferences"][0]["uid"] == created["metadata"]["uid"]
    assert env_of(runner)["DASK_SCHEDULER_ADDRESS"] == address
    assert runner["spec"]["containers"][0]["args"][0] == "pyflyte-execute"  # the task's own command


async def test_a_runner_that_succeeds_makes_the_job_successful_and_deletes_the_cluster(
    cluster: LocalCluster,
) -> None:
    client = cluster.client()
    await client.create(DASK_JOB, dask_job("job-b"))
    job = await job_status(cluster, "job-b", "Successful")
    assert job["status"]["endTime"]
    assert set(pods(cluster)) == {"job-b-runner"}
    assert [s for s in cluster.store.iter(SERVICE, NS)] == []
    assert [c for c in cluster.store.iter(DASK_CLUSTER, NS)] == []


async def test_a_runner_that_fails_makes_the_job_failed_and_deletes_the_cluster(
    cluster: LocalCluster,
) -> None:
    client = cluster.client()
    await client.create(DASK_JOB, dask_job("job-c", annotations={ANNOTATION_EXIT_CODE: "3"}))
    job = await job_status(cluster, "job-c", "Failed")
    assert job["status"]["endTime"]
    assert pods(cluster)["job-c-runner"]["status"]["phase"] == "Failed"
    assert set(pods(cluster)) == {"job-c-runner"}
    assert [c for c in cluster.store.iter(DASK_CLUSTER, NS)] == []


async def test_deleting_the_job_deletes_everything_it_owns(cluster: LocalCluster) -> None:
    client = cluster.client()
    await client.create(DASK_JOB, dask_job("job-d", annotations={ANNOTATION_DURATION: "60"}))
    await job_status(cluster, "job-d", "Running")
    assert len(pods(cluster)) == 4
    await client.delete(DASK_JOB, NS, "job-d")
    for _ in range(200):
        if not pods(cluster) and not list(cluster.store.iter(DASK_CLUSTER, NS)):
            break
        await asyncio.sleep(0.01)
    assert pods(cluster) == {}
    assert list(cluster.store.iter(SERVICE, NS)) == []
    assert list(cluster.store.iter(DASK_CLUSTER, NS)) == []


async def test_two_jobs_get_separate_clusters_and_addresses(cluster: LocalCluster) -> None:
    client = cluster.client()
    await client.create(DASK_JOB, dask_job("job-e", workers=1, annotations={ANNOTATION_DURATION: "30"}))
    await client.create(DASK_JOB, dask_job("job-f", workers=3, annotations={ANNOTATION_DURATION: "30"}))
    await job_status(cluster, "job-e", "Running")
    await job_status(cluster, "job-f", "Running")
    addresses = {
        name: env_of(pods(cluster)[runner_pod_name(name)])["DASK_SCHEDULER_ADDRESS"]
        for name in ("job-e", "job-f")
    }
    assert addresses["job-e"] != addresses["job-f"]
    workers = by_component(cluster, "worker")
    per_cluster = {
        c: sum(1 for w in workers if w["metadata"]["labels"]["dask.org/cluster-name"] == c)
        for c in ("job-e", "job-f")
    }
    assert per_cluster == {"job-e": 1, "job-f": 3}


async def test_the_controller_stops_with_the_cluster() -> None:
    operator = DaskLocalOperator()
    async with LocalCluster(mode="simulated", bookmark_interval=0) as local:
        local.register_operator(DASK_JOB, operator)
        await local.client().create(NAMESPACE, {"metadata": {"name": NS}})
        await local.client().create(DASK_JOB, dask_job("job-g", annotations={ANNOTATION_DURATION: "60"}))
        await local.wait_for(
            DASK_JOB, NS, "job-g", lambda j: (j.get("status") or {}).get("jobStatus") == "Running"
        )
        assert any(t.get_name() == "DaskLocalOperator-controller" for t in asyncio.all_tasks())
    for _ in range(20):  # event-loop turns, not time: the cancellation runs on the next few
        await asyncio.sleep(0)
    assert not any(
        t.get_name() == "DaskLocalOperator-controller" and not t.done() for t in asyncio.all_tasks()
    )


async def test_an_operator_called_directly_is_closed_by_aclose() -> None:
    from taskplug.k8s import WatchEvent

    def controllers() -> set[asyncio.Task[Any]]:
        return {
            t for t in asyncio.all_tasks() if t.get_name() == "DaskLocalOperator-controller" and not t.done()
        }

    operator = DaskLocalOperator()
    async with LocalCluster(mode="simulated", bookmark_interval=0) as local:
        client: KubeClient = local.client()
        await client.create(NAMESPACE, {"metadata": {"name": NS}})
        created = await client.create(DASK_JOB, dask_job("job-h"))
        await operator(WatchEvent("ADDED", created), client)
        assert len(controllers()) == 1
        # Only the event it was given: the job moves one step.
        await local.wait_for(
            DASK_JOB, NS, "job-h", lambda j: (j.get("status") or {}).get("jobStatus") == "JobCreated"
        )
        await operator.aclose()
        assert controllers() == set()
