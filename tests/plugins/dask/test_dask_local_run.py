"""A Dask task really run on the embedded cluster: the dask operator starts ``dask scheduler`` and
``dask worker`` processes, the job runner computes on them with ``distributed.Client``, and the executor
reads the outputs it wrote. Through the executor (``open_executor`` + ``LocalCluster(mode="process")``) and
through ``taskplug run`` on the example, as a user runs it."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "distributed",
    reason='the Dask run needs dask.distributed (a test extra: pip install "dask[distributed]")',
)

from taskplug.core import PluginRegistry
from taskplug.executor import Platform, load_spec, parse_spec
from taskplug.executor._executor import ExecutorSettings
from taskplug.executor._runtime import open_executor
from taskplug.executor._store import MemoryStateStore
from taskplug.k8s import POD, ResourceType
from taskplug.localcluster import NAMESPACE, LocalCluster
from taskplug.plugins.dask import DASK_CLUSTER, plugin_entries
from taskplug.plugins.pod import plugin_entries as pod_entries

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "dask" / "dask.yaml"
EXAMPLE_CONFIG = ROOT / "examples" / "dask" / "config.yaml"
TASKPLUG = str(Path(sys.executable).parent / "taskplug")
SERVICE = ResourceType("v1", "Service", "services")
DEADLINE = 60.0


class WorkerNames:
    """The DASK_WORKER_NAME of every worker pod the API server stored."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.names: set[str] = set()
        cluster.store.observers.append(self._observe)

    def _observe(self, rtype: ResourceType, event: Any) -> None:
        labels = event.obj["metadata"].get("labels") or {}
        if (
            rtype.plural == POD.plural
            and event.type == "ADDED"
            and labels.get("dask.org/component") == "worker"
        ):
            env = event.obj["spec"]["containers"][0].get("env") or []
            self.names.update(e["value"] for e in env if e["name"] == "DASK_WORKER_NAME")


async def run(spec: Any, tmp_path: Path) -> tuple[Any, LocalCluster, WorkerNames]:
    registry = PluginRegistry()
    for entry in [*pod_entries(), *plugin_entries()]:
        registry.register(entry)
    platform = Platform.load(
        registry=registry,
        document={
            "tasks": {"task-plugins": {"enabled-plugins": ["container", "sidecar", "dask"]}},
            "executor": {"data-root": str(tmp_path / "data")},
        },
    )
    settings = ExecutorSettings(data_root=str(tmp_path / "data"), resync_period=0.5)
    async with LocalCluster(mode="process", bookmark_interval=0) as cluster:
        workers = WorkerNames(cluster)
        for entry in platform.enabled_entries():
            make = getattr(entry, "local_operator", None)
            if make is not None:
                cluster.register_operator(entry.resource_to_watch, make())
        await cluster.client().create(NAMESPACE, {"metadata": {"name": spec.metadata.namespace}})
        async with open_executor(
            platform, kube_client=cluster.client(), store=MemoryStateStore(), settings=settings
        ) as ex:
            result = await asyncio.wait_for(ex.run(spec), DEADLINE)
        return result, cluster, workers


async def test_a_dask_task_computes_on_the_workers_the_operator_started(tmp_path: Path) -> None:
    result, cluster, workers = await run(load_spec(EXAMPLE), tmp_path)
    assert result.phase == "Success", result.error
    assert result.outputs["total"] == sum(i * i for i in range(20))
    # The squares were computed on the workers the operator started (named by DASK_WORKER_NAME).
    assert len(workers.names) == 2
    used = set(result.outputs["workers"].split(","))
    assert used and used <= workers.names
    assert [e["phase"] for e in result.events][-2:] == ["Running", "Success"]
    # The runner is done; the cluster (scheduler, workers, service) was deleted when it finished.
    namespace = "demo-development"
    remaining = {p["metadata"]["name"]: p["status"]["phase"] for p in cluster.store.iter(POD, namespace)}
    assert remaining == {"dask-1-n0-0-runner": "Succeeded"}
    assert list(cluster.store.iter(DASK_CLUSTER, namespace)) == []
    assert list(cluster.store.iter(SERVICE, namespace)) == []


async def test_a_failing_job_runner_fails_the_task_as_a_failed_dask_job(tmp_path: Path) -> None:
    document = {
        "template": {
            "id": {
                "resourceType": "TASK",
                "project": "demo",
                "domain": "development",
                "name": "t",
                "version": "v1",
            },
            "type": "dask",
            "container": {
                "image": "ghcr.io/dask/dask:2024.8.0",
                "args": ["python", "-c", "import sys; print('giving up'); sys.exit(3)"],
                "resources": {"limits": [{"name": "CPU", "value": "1"}, {"name": "MEMORY", "value": "1Gi"}]},
            },
            "custom": {"scheduler": {"resources": {}}, "workers": {"numberOfWorkers": 1, "resources": {}}},
        },
        "execution": {
            "id": {"project": "demo", "domain": "development", "name": "dask-fail", "nodeId": "n0"}
        },
    }
    result, cluster, _ = await run(parse_spec(document), tmp_path)
    # The budget is spent: Flyte fails the node with RetriesExhausted|<the last code>, the last error after "::".
    assert result.phase == "PermanentFailure"
    assert result.attempts == 1
    assert (result.error["code"], result.error["message"].split("::", 1)[1], result.error["kind"]) == (
        "RetriesExhausted|DownstreamSystemError",
        "Dask Job failed",
        "USER",
    )
    pods = {p["metadata"]["name"]: p["status"]["phase"] for p in cluster.store.iter(POD, "demo-development")}
    assert pods == {"dask-fail-n0-0-runner": "Failed"}


@pytest.mark.integration
async def test_taskplug_run_runs_the_dask_example(tmp_path: Path) -> None:
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
    assert all(
        name.startswith("dask-1-n0-0-default-worker-") for name in document["outputs"]["workers"].split(",")
    )
