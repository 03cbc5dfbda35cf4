"""The simulated BatchJob operator: its state machine, and a batchjob task run end to end on the embedded
local cluster through the executor (as `taskplug run` wires it)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from taskplug_batchjob import ANNOTATION_SIMULATE_FAILURE, FAILED_ERROR_CODE, next_status, plugin_entries

from taskplug.core import PluginRegistry
from taskplug.executor import ExecutorSettings, MemoryStateStore, Platform, open_executor, parse_spec
from taskplug.localcluster import NAMESPACE, LocalCluster
from taskplug.plugins.pod import plugin_entries as pod_entries

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def job(status: dict[str, Any] | None = None, **annotations: str) -> dict[str, Any]:
    out: dict[str, Any] = {
        "metadata": {"name": "j", "namespace": "ns", "annotations": annotations},
        "spec": {"parallelism": 3},
    }
    if status is not None:
        out["status"] = status
    return out


def test_the_operator_walks_a_job_from_new_to_succeeded() -> None:
    seen = []
    current = job()
    while (status := next_status(current, NOW)) is not None:
        seen.append(status["phase"])
        current = {**current, "status": status}
    assert seen == ["Pending", "Running", "Succeeded"]
    assert current["status"]["succeeded"] == 3
    assert current["status"]["completionTime"] == "2026-03-01T12:00:00Z"


def test_the_failure_annotation_fails_a_running_job_with_its_message() -> None:
    status = next_status(job({"phase": "Running"}, **{ANNOTATION_SIMULATE_FAILURE: "shard 2 crashed"}), NOW)
    assert status is not None
    assert (status["phase"], status["message"]) == ("Failed", "shard 2 crashed")


def test_terminal_and_deleted_jobs_stay_where_they_are() -> None:
    assert next_status(job({"phase": "Succeeded"}), NOW) is None
    deleted = job()
    deleted["metadata"]["deletionTimestamp"] = "2026-03-01T12:00:00Z"
    assert next_status(deleted, NOW) is None


SPEC: dict[str, Any] = {
    "template": {
        "id": {"resourceType": "TASK", "project": "p", "domain": "d", "name": "shards", "version": "v1"},
        "type": "batchjob",
        "container": {"image": "python:3.11-slim", "args": ["python", "-m", "shards"]},
        "custom": {"parallelism": 2},
    },
    "execution": {
        "id": {"project": "p", "domain": "d", "name": "shards-1", "nodeId": "n0"},
        "maxAttempts": 2,
    },
}

CONFIG = {"tasks": {"task-plugins": {"enabled-plugins": ["container", "batchjob"]}}}


async def run_on_local_cluster(tmp_path: Path, annotations: dict[str, str] | None = None) -> Any:
    registry = PluginRegistry()
    for entry in [*pod_entries(), *plugin_entries()]:
        registry.register(entry)
    platform = Platform.load(registry=registry, document=CONFIG)
    spec = parse_spec({**SPEC, "execution": {**SPEC["execution"], "annotations": annotations or {}}})
    settings = ExecutorSettings(data_root=str(tmp_path / "data"), resync_period=0.05)
    async with LocalCluster(mode="simulated", bookmark_interval=0) as cluster:
        for entry in platform.enabled_entries():
            factory = getattr(entry, "local_operator", None)
            if factory is not None:
                cluster.register_operator(entry.resource_to_watch, factory())
        await cluster.client().create(NAMESPACE, {"metadata": {"name": "p-d"}})
        async with open_executor(
            platform, kube_client=cluster.client(), store=MemoryStateStore(), settings=settings
        ) as executor:
            return await executor.run(spec)


async def test_a_batchjob_task_runs_to_success_on_the_local_cluster(tmp_path: Path) -> None:
    result = await run_on_local_cluster(tmp_path)
    assert result.phase == "Success", result.error
    assert result.attempts == 1


async def test_a_simulated_failure_is_retried_then_reported(tmp_path: Path) -> None:
    result = await run_on_local_cluster(tmp_path, {ANNOTATION_SIMULATE_FAILURE: "shard 2 crashed"})
    # The budget is spent: Flyte fails the node with RetriesExhausted|<the last code>, the last error after "::".
    assert result.phase == "PermanentFailure"
    assert result.attempts == 2
    assert result.error["code"] == f"RetriesExhausted|{FAILED_ERROR_CODE}"
    assert result.error["message"].split("::", 1)[1] == "shard 2 crashed"
