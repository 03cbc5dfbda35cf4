"""The training operator on the embedded cluster (simulated kubelet, fake clock): it follows a job's pods,
makes its services with loopback ports, keeps the status, honours deadlines and cleans up on deletion."""

from __future__ import annotations

import asyncio
import copy
from datetime import UTC, datetime
from typing import Any

from kubeflow_helpers import platform, tctx_for, template

from taskplug.core import FakeClock
from taskplug.k8s import POD, WatchEvent
from taskplug.localcluster import ANNOTATION_DURATION, ANNOTATION_EXIT_CODE, LocalCluster
from taskplug.plugins.kubeflow import (
    CONFIG_MAP,
    MPI_JOB,
    PYTORCH_JOB,
    SERVICE,
    MPIJobOperator,
    PyTorchJobOperator,
    build_mpi_job,
    build_pytorch_job,
)

NS = "train"


def job_named(name: str, built: dict[str, Any], **annotations_by_type: dict[str, str]) -> dict[str, Any]:
    """A built job with a name, and per replica type pod annotations scripting the simulated kubelet."""
    job = copy.deepcopy(built)
    job["metadata"] = {"name": name, "namespace": NS}
    for replica_type, extra in annotations_by_type.items():
        spec = job["spec"][next(k for k in job["spec"] if k.endswith("ReplicaSpecs"))][replica_type]
        spec["template"]["metadata"].setdefault("annotations", {}).update(extra)
    return job


def pytorch(workers: int = 1, **run_policy: Any) -> dict[str, Any]:
    custom: dict[str, Any] = {"masterReplicas": {"replicas": 1}, "workerReplicas": {"replicas": workers}}
    job = build_pytorch_job(tctx_for(template("pytorch", custom)), platform=platform())
    job["spec"]["runPolicy"] = dict(run_policy)
    return job


def has_condition(type_: str) -> Any:
    return lambda obj: any(
        c["type"] == type_ and c["status"] == "True"
        for c in (obj.get("status") or {}).get("conditions") or []
    )


async def advance_until(
    clock: FakeClock, cluster: LocalCluster, name: str, type_: str, *, limit: int = 120
) -> dict[str, Any]:
    """Move fake time a second at a time (letting the cluster and the operator react in between) until the
    job has the condition; the job then."""
    for _ in range(limit):
        job = cluster.store.try_get(PYTORCH_JOB, NS, name)
        if job is not None and has_condition(type_)(job):
            return copy.deepcopy(job)
        await clock.advance(1)
        await asyncio.sleep(0.01)
    raise AssertionError(f"{name} never got {type_} within {limit} fake seconds")


def names(cluster: LocalCluster, rtype: Any) -> list[str]:
    return sorted(o["metadata"]["name"] for o in cluster.store.iter(rtype, NS))


async def test_a_pytorchjob_runs_its_pods_to_success_with_services_on_loopback_ports() -> None:
    clock = FakeClock(datetime(2026, 3, 1, 12, 0, tzinfo=UTC))
    async with LocalCluster(mode="simulated", clock=clock, bookmark_interval=0) as cluster:
        operator = PyTorchJobOperator(clock=clock)
        cluster.register_operator(PYTORCH_JOB, operator)
        client = cluster.client()
        work = {ANNOTATION_DURATION: "5"}
        await client.create(PYTORCH_JOB, job_named("pt", pytorch(workers=2), Master=work, Worker=work))
        running = await cluster.wait_for(PYTORCH_JOB, NS, "pt", has_condition("Running"), within=10)
        assert names(cluster, POD) == ["pt-master-0", "pt-worker-0", "pt-worker-1"]
        services = {s["metadata"]["name"]: s for s in cluster.store.iter(SERVICE, NS)}
        assert sorted(services) == ["pt-master-0", "pt-worker-0", "pt-worker-1"]
        ports = {s["spec"]["ports"][0]["port"] for s in services.values()}
        assert len(ports) == 3 and all(1024 < p < 65536 for p in ports)
        assert all(s["spec"]["clusterIP"] == "None" for s in services.values())
        master = cluster.store.get(POD, NS, "pt-master-0")
        env = {e["name"]: e.get("value") for e in master["spec"]["containers"][0]["env"]}
        assert env["MASTER_PORT"] == str(services["pt-master-0"]["spec"]["ports"][0]["port"])
        assert master["metadata"]["ownerReferences"][0]["uid"] == running["metadata"]["uid"]
        done = await advance_until(clock, cluster, "pt", "Succeeded")
        await operator.aclose()
    status = done["status"]
    assert [c["type"] for c in status["conditions"]] == ["Created", "Running", "Succeeded"]
    assert status["startTime"] == "2026-03-01T12:00:00Z"
    # The pods ran their 5 fake seconds; the job completed as they did.
    assert "2026-03-01T12:00:05Z" <= status["completionTime"] <= "2026-03-01T12:00:07Z"
    assert {k: v.get("succeeded") for k, v in status["replicaStatuses"].items()} == {"Master": 1, "Worker": 2}


async def test_a_failing_worker_fails_the_job() -> None:
    async with LocalCluster(mode="simulated", bookmark_interval=0) as cluster:
        operator = PyTorchJobOperator()
        cluster.register_operator(PYTORCH_JOB, operator)
        job = job_named(
            "bad", pytorch(), Master={ANNOTATION_DURATION: "600"}, Worker={ANNOTATION_EXIT_CODE: "3"}
        )
        await cluster.client().create(PYTORCH_JOB, job)
        done = await cluster.wait_for(PYTORCH_JOB, NS, "bad", has_condition("Failed"), within=10)
        await operator.aclose()
    assert (
        done["status"]["conditions"][-1]["message"]
        == "PyTorchJob bad is failed because 1 Worker replica(s) failed."
    )


async def test_the_active_deadline_fails_a_job_on_the_operators_clock() -> None:
    clock = FakeClock(datetime(2026, 3, 1, 12, 0, tzinfo=UTC))
    async with LocalCluster(mode="simulated", clock=clock, bookmark_interval=0) as cluster:
        operator = PyTorchJobOperator(clock=clock)
        cluster.register_operator(PYTORCH_JOB, operator)
        slow = {ANNOTATION_DURATION: "3600"}
        await cluster.client().create(
            PYTORCH_JOB, job_named("slow", pytorch(activeDeadlineSeconds=30), Master=slow, Worker=slow)
        )
        await cluster.wait_for(PYTORCH_JOB, NS, "slow", has_condition("Running"), within=10)
        done = await advance_until(clock, cluster, "slow", "Failed")
        pods_left = [p for p in cluster.store.iter(POD, NS) if not p["metadata"].get("deletionTimestamp")]
        await operator.aclose()
    assert done["status"]["conditions"][-1]["message"] == (
        "Job slow has failed because it was active longer than specified deadline"
    )
    assert pods_left == []


async def test_deleting_a_job_deletes_its_pods_services_and_config_map() -> None:
    async with LocalCluster(mode="simulated", bookmark_interval=0) as cluster:
        pt, mpi = PyTorchJobOperator(), MPIJobOperator()
        cluster.register_operator(PYTORCH_JOB, pt)
        cluster.register_operator(MPI_JOB, mpi)
        client = cluster.client()
        wait = {ANNOTATION_DURATION: "600"}
        await client.create(PYTORCH_JOB, job_named("a", pytorch(), Master=wait, Worker=wait))
        built = build_mpi_job(
            tctx_for(template("mpi", {"workerReplicas": {"replicas": 2}})), platform=platform()
        )
        await client.create(MPI_JOB, job_named("m", built, Launcher=wait, Worker=wait))
        await cluster.wait_for(PYTORCH_JOB, NS, "a", has_condition("Running"), within=10)
        await cluster.wait_for(MPI_JOB, NS, "m", has_condition("Running"), within=10)
        config = cluster.store.get(CONFIG_MAP, NS, "m-config")
        assert config["data"]["hostfile"] == "m-worker-0 slots=1\nm-worker-1 slots=1\n"
        assert names(cluster, SERVICE) == ["a-master-0", "a-worker-0"]
        await client.delete(PYTORCH_JOB, NS, "a")
        await client.delete(MPI_JOB, NS, "m")
        for _ in range(200):
            if (
                not list(cluster.store.iter(SERVICE, NS))
                and cluster.store.try_get(CONFIG_MAP, NS, "m-config") is None
            ):
                live = [p for p in cluster.store.iter(POD, NS) if not p["metadata"].get("deletionTimestamp")]
                if not live:
                    break
            await asyncio.sleep(0.01)
        assert names(cluster, SERVICE) == []
        assert cluster.store.try_get(CONFIG_MAP, NS, "m-config") is None
        assert [p for p in cluster.store.iter(POD, NS) if not p["metadata"].get("deletionTimestamp")] == []
        await pt.aclose()
        await mpi.aclose()


async def test_the_operator_runner_ends_with_the_task_that_calls_it() -> None:
    before = set(asyncio.all_tasks())
    async with LocalCluster(mode="simulated", bookmark_interval=0) as cluster:
        cluster.register_operator(PYTORCH_JOB, PyTorchJobOperator())
        await cluster.client().create(PYTORCH_JOB, job_named("t", pytorch()))
        await cluster.wait_for(PYTORCH_JOB, NS, "t", has_condition("Succeeded"), within=10)
        assert any(t.get_name() == "pytorchjob-controller" for t in asyncio.all_tasks())
    for _ in range(20):
        await asyncio.sleep(0)
    assert [t.get_name() for t in asyncio.all_tasks() - before if not t.done()] == []


async def test_events_for_a_job_already_gone_do_nothing() -> None:
    async with LocalCluster(mode="simulated", bookmark_interval=0) as cluster:
        operator = PyTorchJobOperator()
        cluster.register_resource(PYTORCH_JOB)
        client = cluster.client()
        created = await client.create(PYTORCH_JOB, job_named("gone", pytorch()))
        await client.delete(PYTORCH_JOB, NS, "gone")
        assert await operator.reconcile(client, NS, "gone") is None
        await operator(WatchEvent("DELETED", created), client)
        await operator(WatchEvent("BOOKMARK", created), client)
        assert list(cluster.store.iter(POD, NS)) == []
        await operator.aclose()
