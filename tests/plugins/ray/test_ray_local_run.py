"""A Ray task really run on the embedded cluster: the local KubeRay starts the head and worker processes,
the submitter runs the entrypoint once the head accepts connections, and the executor reads the outputs
the entrypoint wrote; a failing entrypoint fails the task as KubeRay reports it. Through the executor
(``open_executor`` + ``LocalCluster(mode="process")``) and through ``taskplug run`` on the example."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from taskplug.core import PluginRegistry
from taskplug.executor import Platform, load_spec, parse_spec
from taskplug.executor._executor import ExecutorSettings
from taskplug.executor._runtime import open_executor
from taskplug.executor._store import MemoryStateStore
from taskplug.k8s import POD, ResourceType
from taskplug.localcluster import NAMESPACE, LocalCluster
from taskplug.plugins.pod import plugin_entries as pod_entries
from taskplug.plugins.ray import JOB, RAY_CLUSTER, RAY_JOB, plugin_entries

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "ray" / "ray.yaml"
EXAMPLE_CONFIG = ROOT / "examples" / "ray" / "config.yaml"
TASKPLUG = str(Path(sys.executable).parent / "taskplug")
DEADLINE = 60.0


class LastRayJob:
    """The RayJob as the API server last stored it (a failed one is deleted by the plugin manager's
    cleanup, so it is gone by the end)."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.job: dict[str, Any] = {}
        self.deleted = False
        cluster.store.observers.append(self._observe)

    def _observe(self, rtype: ResourceType, event: Any) -> None:
        if rtype.plural == RAY_JOB.plural:
            self.job = event.obj
            self.deleted = event.type == "DELETED"


async def run(spec: Any, tmp_path: Path) -> tuple[Any, LastRayJob, LocalCluster]:
    """Run ``spec``; its result, the RayJob as last seen, and the cluster (stopped)."""
    registry = PluginRegistry()
    for entry in [*pod_entries(), *plugin_entries()]:
        registry.register(entry)
    platform = Platform.load(
        registry=registry,
        document={
            "tasks": {"task-plugins": {"enabled-plugins": ["container", "sidecar", "ray"]}},
            # A failed Ray job is a system failure in Flyte: no system retries, so one attempt shows it.
            "executor": {"data-root": str(tmp_path / "data"), "max-system-failures": 0},
        },
    )
    settings = ExecutorSettings(data_root=str(tmp_path / "data"), resync_period=0.5, max_system_failures=0)
    async with LocalCluster(mode="process", bookmark_interval=0) as cluster:
        last = LastRayJob(cluster)
        for entry in platform.enabled_entries():
            make = getattr(entry, "local_operator", None)
            if make is not None:
                cluster.register_operator(entry.resource_to_watch, make())
        namespace = spec.metadata.namespace
        await cluster.client().create(NAMESPACE, {"metadata": {"name": namespace}})
        async with open_executor(
            platform, kube_client=cluster.client(), store=MemoryStateStore(), settings=settings
        ) as ex:
            result = await asyncio.wait_for(ex.run(spec), DEADLINE)
        # Whatever the plugin manager deleted, the operator has cleaned up after (a bounded wait).
        for _ in range(200):
            if not last.deleted or not list(cluster.store.iter(POD, namespace)):
                break
            await asyncio.sleep(0.01)
        return result, last, cluster


async def test_a_ray_task_runs_its_entrypoint_on_the_cluster_and_returns_its_outputs(tmp_path: Path) -> None:
    result, last, _ = await run(load_spec(EXAMPLE), tmp_path)
    ray_job = last.job
    assert result.phase == "Success", result.error
    assert result.outputs == {"total": sum(i * i for i in range(20)), "job_id": ray_job["status"]["jobId"]}
    assert [e["phase"] for e in result.events][-2:] == ["Running", "Success"]
    assert ray_job["status"]["jobDeploymentStatus"] == "Complete"
    assert ray_job["metadata"]["name"] == "ray-1-n0-0"


async def test_a_failing_entrypoint_fails_the_task_as_kuberay_reports_the_failed_ray_job(
    tmp_path: Path,
) -> None:
    document = {
        "template": {
            "id": {
                "resourceType": "TASK",
                "project": "demo",
                "domain": "development",
                "name": "t",
                "version": "v1",
            },
            "type": "ray",
            "container": {
                "image": "rayproject/ray:2.40.0",
                "args": ["python", "-c", "'import sys; print(\"no luck\"); sys.exit(3)'"],
                "resources": {
                    "limits": [{"name": "CPU", "value": "1"}, {"name": "MEMORY", "value": "512Mi"}]
                },
            },
            "custom": {"rayCluster": {"headGroupSpec": {}}, "shutdownAfterJobFinishes": True},
        },
        "execution": {"id": {"project": "demo", "domain": "development", "name": "ray-fail", "nodeId": "n0"}},
    }
    result, last, cluster = await run(parse_spec(document), tmp_path)
    # The budget is spent: Flyte fails the node with RetriesExhausted|<the last code>, the last error after "::".
    assert result.phase == "PermanentFailure"
    assert result.attempts == 1
    assert result.error["code"] == "RetriesExhausted|TaskFailedWithError"
    assert "Last Error: SYSTEM::" in result.error["message"]
    assert (
        result.error["message"]
        .split("::", 1)[1]
        .startswith(
            "Failed to run Ray job ray-fail-n0-0 with error: [AppFailed] Job entrypoint command failed with exit code 3"
        )
    )
    assert "no luck" in result.error["message"]
    assert last.job["status"]["jobStatus"] == "FAILED"
    # A failure "with cleanup": the plugin manager deleted the RayJob, and with it went everything it owned.
    assert last.deleted
    for rtype in (POD, RAY_CLUSTER, JOB):
        assert list(cluster.store.iter(rtype, "demo-development")) == []


@pytest.mark.integration
async def test_taskplug_run_runs_the_ray_example(tmp_path: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        TASKPLUG,
        "run",
        str(EXAMPLE),
        "--config",
        str(EXAMPLE_CONFIG),
        "-o",
        "json",
        cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), DEADLINE)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, err.decode()
    document = json.loads(out)
    assert document["phase"] == "Success"
    assert document["outputs"]["total"] == 2470
    assert document["outputs"]["job_id"].startswith("ray-1-n0-0-")


async def test_a_long_execution_name_gives_a_ray_job_name_kuberay_accepts(tmp_path: Path) -> None:
    # GeneratedNameMaxLength=47: KubeRay refuses longer RayJob names (ValidationFailed).
    document = {
        "template": {
            "id": {
                "resourceType": "TASK",
                "project": "demo",
                "domain": "development",
                "name": "t",
                "version": "v1",
            },
            "type": "ray",
            "container": {
                "image": "rayproject/ray:2.40.0",
                "args": ["true"],
                "resources": {
                    "limits": [{"name": "CPU", "value": "1"}, {"name": "MEMORY", "value": "256Mi"}]
                },
            },
            "custom": {"rayCluster": {"headGroupSpec": {}}},
        },
        "execution": {
            "id": {
                "project": "demo",
                "domain": "development",
                "name": "a" * 40,
                "nodeId": "n-with-a-long-name",
            },
        },
    }
    result, last, _ = await run(parse_spec(document), tmp_path)
    assert result.phase == "Success", result.error
    name = last.job["metadata"]["name"]
    assert len(name) <= 47
    assert last.job["status"]["jobDeploymentStatus"] == "Complete"
