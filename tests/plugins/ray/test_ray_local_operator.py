"""KubeRay for the embedded cluster: validation, the RayCluster and its pods, the
submitter Job, the RayJob's status as KubeRay writes it, TTL shutdown and deletion. The head and worker
pods run the stand-in processes and the submitter the entrypoint, as local processes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from ray_helpers import group, ray_custom, ray_template, tctx_for

from taskplug.core import FakeClock
from taskplug.k8s import POD, PlatformPodConfig, ResourceType
from taskplug.localcluster import NAMESPACE, LocalCluster
from taskplug.plugins.ray import (
    FINALIZER,
    JOB,
    RAY_CLUSTER,
    RAY_JOB,
    RayConfig,
    RayLocalOperator,
    build_ray_job,
    validate_ray_job,
)

SERVICE = ResourceType("v1", "Service", "services")
NS = "ray-ns"
PRINT_ADDRESS = """'import os, sys; print("driver at", os.environ["RAY_ADDRESS"], os.environ["GREETING"]); sys.exit(int(os.environ.get("EXIT_CODE", "0")))'"""


def ray_job(
    name: str,
    *,
    entrypoint: list[str] | None = None,
    env: dict[str, str] | None = None,
    workers: int = 2,
    **custom: Any,
) -> dict[str, Any]:
    """The RayJob the plugin builds, named and placed as the plugin manager would."""
    custom = {"shutdownAfterJobFinishes": True, "runtimeEnvYaml": "env_vars:\n  GREETING: hi\n", **custom}
    template = ray_template(
        ray_custom(
            head={"rayStartParams": {"log-color": "True"}}, groups=[group("small", workers)], **custom
        ),
        args=entrypoint or ["python", "-c", PRINT_ADDRESS],
        env=[{"key": k, "value": v} for k, v in (env or {}).items()],
    )
    job = build_ray_job(tctx_for(template), platform=PlatformPodConfig(environ={}), config=RayConfig())
    job["metadata"] = {**job.get("metadata", {}), "name": name, "namespace": NS, "labels": {"team": "ml"}}
    return job


@pytest.fixture
async def cluster() -> AsyncIterator[LocalCluster]:
    async with LocalCluster(mode="process", bookmark_interval=0) as local:
        local.register_operator(RAY_JOB, RayLocalOperator())
        await local.client().create(NAMESPACE, {"metadata": {"name": NS}})
        yield local


def pods(cluster: LocalCluster) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p for p in cluster.store.iter(POD, NS)}


def env_of(pod: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in pod["spec"]["containers"][0].get("env") or []}


async def deployment(cluster: LocalCluster, name: str, status: str, within: float = 30) -> dict[str, Any]:
    return await cluster.wait_for(
        RAY_JOB,
        NS,
        name,
        lambda j: (j.get("status") or {}).get("jobDeploymentStatus") == status,
        within=within,
    )


async def gone(cluster: LocalCluster, check: Any) -> None:
    for _ in range(500):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("not deleted within 5 s")


# -- validation -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "spec", "message"),
    [
        (
            "ok",
            {"shutdownAfterJobFinishes": True, "ttlSecondsAfterFinished": 60, "rayClusterSpec": {"x": 1}},
            "",
        ),
        ("ok", {"rayClusterSpec": {"x": 1}}, ""),
        (
            "a" * 48,
            {"rayClusterSpec": {"x": 1}},
            "The RayJob metadata is invalid: RayJob name should be no more than 47 characters",
        ),
        (
            "9lives",
            {"rayClusterSpec": {"x": 1}},
            "The RayJob metadata is invalid: RayJob name should be a valid DNS1035 label",
        ),
        (
            "ok",
            {"ttlSecondsAfterFinished": 60, "rayClusterSpec": {"x": 1}},
            "cannot have TTLSecondsAfterFinished",
        ),
        (
            "ok",
            {"shutdownAfterJobFinishes": True, "ttlSecondsAfterFinished": -1, "rayClusterSpec": {"x": 1}},
            "must be a non-negative integer",
        ),
        ("ok", {"suspend": True, "rayClusterSpec": {"x": 1}}, "is not allowed to be suspended"),
        ("ok", {"shutdownAfterJobFinishes": True}, "one of RayClusterSpec or ClusterSelector must be set"),
    ],
)
def test_kuberays_validation(name: str, spec: dict[str, Any], message: str) -> None:
    problem = validate_ray_job({"metadata": {"name": name}, "spec": spec})
    if message:
        assert message in problem
        assert problem.startswith(("The RayJob metadata is invalid: ", "The RayJob spec is invalid: "))
    else:
        assert problem == ""


async def test_an_invalid_ray_job_is_marked_validation_failed_and_never_started(
    cluster: LocalCluster,
) -> None:
    job = ray_job("bad-ttl")
    job["spec"].pop("shutdownAfterJobFinishes")
    job["spec"]["ttlSecondsAfterFinished"] = 10
    await cluster.client().create(RAY_JOB, job)
    failed = await deployment(cluster, "bad-ttl", "ValidationFailed")
    assert failed["status"]["reason"] == "ValidationFailed"
    assert failed["status"]["message"] == (
        "The RayJob spec is invalid: a RayJob with shutdownAfterJobFinishes set to false cannot have "
        "TTLSecondsAfterFinished"
    )
    assert list(cluster.store.iter(RAY_CLUSTER, NS)) == []
    assert pods(cluster) == {}


# -- a job run ---------------------------------------------------------------------------------------------


async def test_a_ray_job_gets_a_cluster_a_submitter_and_completes_as_kuberay_reports_it(
    cluster: LocalCluster,
) -> None:
    client = cluster.client()
    job_spec = ray_job("job-a", ttlSecondsAfterFinished=3600)
    created = await client.create(RAY_JOB, job_spec)
    done = await deployment(cluster, "job-a", "Complete")
    status = done["status"]
    cluster_name, job_id = status["rayClusterName"], status["jobId"]
    assert cluster_name.startswith("job-a-") and len(cluster_name) == len("job-a-") + 5
    assert job_id.startswith("job-a-") and job_id != cluster_name
    assert FINALIZER in done["metadata"]["finalizers"]
    assert (status["jobStatus"], status["message"]) == ("SUCCEEDED", "Job finished successfully.")
    assert (status["succeeded"], status["failed"]) == (1, 0)
    assert status["startTime"] and status["endTime"]
    assert status["rayJobInfo"]["startTime"] and status["rayJobInfo"]["endTime"]

    ray_cluster = await client.get(RAY_CLUSTER, NS, cluster_name)
    assert ray_cluster["metadata"]["labels"] == {
        "team": "ml",
        "ray.io/originated-from-cr-name": "job-a",
        "ray.io/originated-from-crd": "RayJob",
    }
    assert ray_cluster["metadata"]["ownerReferences"][0]["uid"] == created["metadata"]["uid"]
    assert ray_cluster["spec"] == job_spec["spec"]["rayClusterSpec"]
    assert ray_cluster["status"]["state"] == "ready"
    assert ray_cluster["status"]["desiredWorkerReplicas"] == 2

    service = await client.get(SERVICE, NS, f"{cluster_name}-head-svc")
    ports = {p["name"]: p["port"] for p in service["spec"]["ports"]}
    assert service["spec"]["clusterIP"] == "127.0.0.1"
    assert service["spec"]["type"] == "NodePort"
    assert service["spec"]["selector"] == {"ray.io/cluster": cluster_name, "ray.io/node-type": "head"}
    assert status["dashboardURL"] == f"127.0.0.1:{ports['dashboard']}"
    job_service = await client.get(SERVICE, NS, "job-a-head-svc")
    assert {p["name"]: p["port"] for p in job_service["spec"]["ports"]} == ports
    gcs = f"127.0.0.1:{ports['gcs-server']}"

    all_pods = pods(cluster)
    heads = [p for p in all_pods.values() if p["metadata"]["labels"].get("ray.io/node-type") == "head"]
    workers = [p for p in all_pods.values() if p["metadata"]["labels"].get("ray.io/node-type") == "worker"]
    [head] = heads
    assert head["metadata"]["name"].startswith(f"{cluster_name}-head-")
    assert head["status"]["phase"] == "Running"
    assert head["metadata"]["ownerReferences"][0]["uid"] == ray_cluster["metadata"]["uid"]
    labels = head["metadata"]["labels"]
    assert {k: labels[k] for k in labels if k.startswith(("ray.io/", "app.kubernetes.io/"))} == {
        "ray.io/is-ray-node": "yes",
        "ray.io/cluster": cluster_name,
        "ray.io/node-type": "head",
        "ray.io/group": "headgroup",
        "ray.io/identifier": f"{cluster_name}-head",
        "app.kubernetes.io/name": "kuberay",
        "app.kubernetes.io/created-by": "kuberay-operator",
    }
    assert labels["execution-id"] == "exec1"  # the template's labels are kept
    head_env = env_of(head)
    assert (head_env["RAY_ADDRESS"], head_env["RAY_PORT"]) == (gcs, str(ports["gcs-server"]))
    assert head_env["KUBERAY_GEN_RAY_START_CMD"].startswith("ray start --head --block ")
    assert "--log-color=True" in head_env["KUBERAY_GEN_RAY_START_CMD"]
    assert head["spec"]["containers"][0]["name"] == "ray-head"
    assert "ray head stand-in: GCS on " + gcs in cluster.logs(NS, head["metadata"]["name"])

    assert len(workers) == 2
    for worker in workers:
        assert worker["metadata"]["name"].startswith(f"{cluster_name}-small-worker-")
        assert worker["metadata"]["labels"]["ray.io/group"] == "small"
        assert env_of(worker)["RAY_ADDRESS"] == gcs
        assert env_of(worker)["FQ_RAY_IP"] == "127.0.0.1"
        assert worker["spec"]["containers"][0]["command"][-2:] == ["--address", gcs]

    submitter_job = await client.get(JOB, NS, "job-a")
    assert submitter_job["spec"]["backoffLimit"] == 2
    assert submitter_job["metadata"]["ownerReferences"][0]["uid"] == created["metadata"]["uid"]
    assert submitter_job["status"]["succeeded"] == 1
    assert submitter_job["status"]["conditions"][0]["type"] == "Complete"
    [submitter] = [
        p for p in all_pods.values() if p["metadata"]["labels"].get("batch.kubernetes.io/job-name") == "job-a"
    ]
    assert submitter["metadata"]["name"].startswith("job-a-")
    assert submitter["metadata"]["ownerReferences"][0]["uid"] == submitter_job["metadata"]["uid"]
    assert submitter["status"]["phase"] == "Succeeded"
    container = submitter["spec"]["containers"][0]
    assert container["command"] == ["/bin/bash", "-ce", "--"]
    assert container["args"] == [job_spec["spec"]["entrypoint"]]
    env = env_of(submitter)
    assert (env["PYTHONUNBUFFERED"], env["RAY_JOB_SUBMISSION_ID"], env["RAY_ADDRESS"]) == ("1", job_id, gcs)
    assert env["RAY_DASHBOARD_ADDRESS"] == status["dashboardURL"]
    assert env["GREETING"] == "hi"  # the runtime env's env_vars
    assert cluster.logs(NS, submitter["metadata"]["name"]).strip() == f"driver at {gcs} hi"


async def test_an_entrypoint_that_fails_fails_the_ray_job_as_an_app_failure(cluster: LocalCluster) -> None:
    await cluster.client().create(RAY_JOB, ray_job("job-b", env={"EXIT_CODE": "3"}, workers=1))
    failed = await deployment(cluster, "job-b", "Failed")
    status = failed["status"]
    assert (status["jobStatus"], status["reason"]) == ("FAILED", "AppFailed")
    assert status["message"].startswith("Job entrypoint command failed with exit code 3, last available logs")
    assert "driver at 127.0.0.1:" in status["message"]
    assert (status["succeeded"], status["failed"]) == (0, 1)
    submitter_job = await cluster.client().get(JOB, NS, "job-b")
    assert submitter_job["status"]["conditions"][0]["type"] == "Failed"


async def test_with_no_ttl_the_cluster_is_deleted_as_soon_as_the_job_ends(cluster: LocalCluster) -> None:
    await cluster.client().create(RAY_JOB, ray_job("job-c", workers=1))
    done = await deployment(cluster, "job-c", "Complete")
    cluster_name = done["status"]["rayClusterName"]
    await gone(cluster, lambda: not [p for p in pods(cluster) if p.startswith(cluster_name)])
    assert list(cluster.store.iter(RAY_CLUSTER, NS)) == []
    assert {s["metadata"]["name"] for s in cluster.store.iter(SERVICE, NS)} == {"job-c-head-svc"}
    # The submitter Job and the RayJob remain.
    assert [p["status"]["phase"] for p in pods(cluster).values()] == ["Succeeded"]
    assert await cluster.client().get(JOB, NS, "job-c")


async def test_the_cluster_is_deleted_ttl_seconds_after_the_job_ended() -> None:
    clock = FakeClock()
    async with LocalCluster(mode="process", bookmark_interval=0) as local:
        local.register_operator(RAY_JOB, RayLocalOperator(clock=clock))
        await local.client().create(NAMESPACE, {"metadata": {"name": NS}})
        await local.client().create(RAY_JOB, ray_job("job-d", workers=1, ttlSecondsAfterFinished=600))
        done = await deployment(local, "job-d", "Complete")
        cluster_name = done["status"]["rayClusterName"]
        assert done["status"]["endTime"] == "2026-01-01T00:00:00Z"  # the operator's clock
        await clock.advance(599)
        for _ in range(20):
            await asyncio.sleep(0.01)
        assert len([p for p in pods(local) if p.startswith(cluster_name)]) == 2
        await clock.advance(1)
        await gone(local, lambda: not [p for p in pods(local) if p.startswith(cluster_name)])
        assert list(local.store.iter(RAY_CLUSTER, NS)) == []


async def test_deleting_a_running_ray_job_stops_it_and_deletes_everything_it_owns(
    cluster: LocalCluster,
) -> None:
    client = cluster.client()
    await client.create(RAY_JOB, ray_job("job-e", entrypoint=["sleep", "30"], workers=1))
    running = await cluster.wait_for(
        RAY_JOB, NS, "job-e", lambda j: (j.get("status") or {}).get("jobStatus") == "RUNNING", within=30
    )
    assert running["status"]["message"] == "Job is currently running."
    assert len(pods(cluster)) == 3
    await client.delete(RAY_JOB, NS, "job-e")
    # KubeRay's finalizer is removed once the job is stopped; then its objects go with it.
    await gone(cluster, lambda: not list(cluster.store.iter(RAY_JOB, NS)))
    await gone(cluster, lambda: not pods(cluster))
    for rtype in (RAY_CLUSTER, JOB, SERVICE):
        assert list(cluster.store.iter(rtype, NS)) == []


async def test_a_submitter_pod_that_failed_without_running_is_a_submission_failure() -> None:
    """The status KubeRay writes when the submitter never ran the entrypoint (the pod evicted, say): here
    the pod is written as a kubelet reports an eviction, and the operator reconciles the job once."""
    operator = RayLocalOperator()
    async with LocalCluster(mode="simulated", bookmark_interval=0) as local:
        client = local.client()
        await client.create(NAMESPACE, {"metadata": {"name": NS}})
        job = await client.create(RAY_JOB, ray_job("job-f"))
        job = await client.patch(
            RAY_JOB,
            NS,
            "job-f",
            {
                "status": {
                    "jobId": "job-f-abcde",
                    "rayClusterName": "job-f-fghij",
                    "jobDeploymentStatus": "Running",
                }
            },
        )
        submitter = await client.create(
            JOB,
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": "job-f", "namespace": NS},
                "spec": {},
            },
        )
        meta = submitter["metadata"]
        await client.create(
            POD,
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": "job-f-zzzzz",
                    "namespace": NS,
                    "labels": {"batch.kubernetes.io/job-name": "job-f"},
                    "ownerReferences": [
                        {"apiVersion": "batch/v1", "kind": "Job", "name": "job-f", "uid": meta["uid"]}
                    ],
                },
                "spec": {"nodeName": "elsewhere", "containers": [{"name": "c", "image": "i"}]},
            },
        )
        await client.patch(
            POD,
            NS,
            "job-f-zzzzz",
            {
                "status": {
                    "phase": "Failed",
                    "reason": "Evicted",
                    "message": "The node was low on resource: memory.",
                }
            },
        )
        assert await operator.reconcile(client, job) is None
        status = (await client.get(RAY_JOB, NS, "job-f"))["status"]
    assert (status["jobDeploymentStatus"], status["reason"]) == ("Failed", "SubmissionFailed")
    assert (
        status["message"]
        == "Job submission has failed. Reason: Evicted. Message: The node was low on resource: memory."
    )


async def test_the_controller_stops_with_the_cluster() -> None:
    async with LocalCluster(mode="process", bookmark_interval=0) as local:
        local.register_operator(RAY_JOB, RayLocalOperator())
        await local.client().create(NAMESPACE, {"metadata": {"name": NS}})
        await local.client().create(RAY_JOB, ray_job("job-g", entrypoint=["sleep", "30"], workers=1))
        await deployment(local, "job-g", "Running")
        assert any(t.get_name() == "RayLocalOperator-controller" for t in asyncio.all_tasks())
    for _ in range(20):  # event-loop turns, not time: the cancellation runs on the next few
        await asyncio.sleep(0)
    assert not any(
        t.get_name() == "RayLocalOperator-controller" and not t.done() for t in asyncio.all_tasks()
    )
