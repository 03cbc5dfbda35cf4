"""The simulated spark-operator: its state machine (pure), on the in-process local cluster, and a spark task
run end to end by the executor on the local cluster."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from spark_helpers import NOW, app_object, execution, plugin_context, spark_job, spark_template

from taskplug.core import FakeClock, Phase, PluginRegistry
from taskplug.executor import Platform, parse_spec
from taskplug.executor._executor import ExecutorSettings
from taskplug.executor._runtime import open_executor
from taskplug.executor._store import MemoryStateStore
from taskplug.k8s import WatchEvent
from taskplug.localcluster import NAMESPACE, LocalCluster
from taskplug.plugins.pod import plugin_entries as pod_entries
from taskplug.plugins.spark import (
    ANNOTATION_SIMULATE_FAILURE,
    ANNOTATION_SIMULATE_SUBMISSION_FAILURE,
    SPARK_APPLICATION,
    SparkConfig,
    SparkLocalOperator,
    next_status,
    plugin_entries,
    spark_task_phase,
)

AT = "2026-03-01T12:00:00Z"


def merged(app: dict[str, Any], patch: dict[str, Any] | None) -> dict[str, Any]:
    assert patch is not None
    status = dict(app.get("status") or {})
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(status.get(key), dict):
            status[key] = {**status[key], **value}
        else:
            status[key] = value
    return {**app, "status": status}


def walk(app: dict[str, Any]) -> list[dict[str, Any]]:
    """Every status the operator moves ``app`` through, until it stops."""
    seen = []
    for _ in range(10):
        patch = next_status(app, NOW)
        if patch is None:
            return seen
        app = merged(app, patch)
        seen.append(app["status"])
    raise AssertionError("the operator never stopped")


def with_uid(app: dict[str, Any], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    app["metadata"]["uid"] = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
    if annotations:
        app["metadata"]["annotations"] = annotations
    return app


def test_an_application_goes_submitted_running_completed() -> None:
    statuses = walk(with_uid(app_object(name="app", namespace="ns")))
    assert [s["applicationState"]["state"] for s in statuses] == ["SUBMITTED", "RUNNING", "COMPLETED"]
    submitted, running, completed = statuses
    assert submitted["driverInfo"] == {"podName": "app-driver"}
    assert submitted["submissionTime"] == AT
    assert "terminationTime" not in running
    assert running["sparkApplicationId"] == "spark-0f1e2d3c4b5a69788796a5b4c3d2e1f0"
    assert running["driverInfo"] == {"podName": "app-driver", "webUIIngressAddress": "app-ui.ns.spark.local"}
    assert completed["terminationTime"] == AT
    assert "errorMessage" not in completed["applicationState"]


def test_the_failure_annotation_fails_the_application_after_it_ran_with_its_message() -> None:
    app = with_uid(app_object(), {ANNOTATION_SIMULATE_FAILURE: "java.lang.OutOfMemoryError"})
    statuses = walk(app)
    assert [s["applicationState"]["state"] for s in statuses] == ["SUBMITTED", "RUNNING", "FAILED"]
    assert statuses[-1]["applicationState"]["errorMessage"] == "java.lang.OutOfMemoryError"
    assert statuses[-1]["terminationTime"] == AT


def test_the_submission_failure_annotation_fails_the_submission() -> None:
    statuses = walk(with_uid(app_object(), {ANNOTATION_SIMULATE_SUBMISSION_FAILURE: "no quota"}))
    assert [s["applicationState"] for s in statuses] == [
        {"state": "SUBMISSION_FAILED", "errorMessage": "no quota"}
    ]


@pytest.mark.parametrize("state", ["COMPLETED", "FAILED", "SUBMISSION_FAILED"])
def test_a_terminal_application_is_left_alone(state: str) -> None:
    assert next_status(app_object(state), NOW) is None


def test_an_application_being_deleted_is_left_alone() -> None:
    app = app_object("RUNNING")
    app["metadata"]["deletionTimestamp"] = AT
    assert next_status(app, NOW) is None


def test_each_state_the_operator_reports_maps_to_the_plugin_phase_it_should() -> None:
    phases = [
        spark_task_phase(plugin_context(), {**app_object(), "status": s}, SparkConfig()).phase
        for s in walk(with_uid(app_object()))
    ]
    assert phases == [Phase.INITIALIZING, Phase.RUNNING, Phase.SUCCESS]


# -- on the local cluster ---------------------------------------------------------------------------------


def application(name: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": SPARK_APPLICATION.api_version,
        "kind": SPARK_APPLICATION.kind,
        "metadata": {"name": name, "namespace": "default", "annotations": annotations or {}},
        "spec": {"type": "Python", "mode": "cluster", "mainApplicationFile": "local:///app.py"},
    }


def state_is(*states: str) -> Any:
    return lambda obj: ((obj.get("status") or {}).get("applicationState") or {}).get("state") in states


async def test_the_operator_completes_an_application_on_the_local_cluster() -> None:
    clock = FakeClock(datetime(2026, 3, 1, 12, 0, tzinfo=UTC))
    async with LocalCluster(mode="simulated", clock=clock, bookmark_interval=0) as cluster:
        cluster.register_operator(SPARK_APPLICATION, SparkLocalOperator(clock))
        client = cluster.client()
        created = await client.create(SPARK_APPLICATION, application("app"))
        done = await cluster.wait_for(SPARK_APPLICATION, "default", "app", state_is("COMPLETED"), within=10)
    status = done["status"]
    assert status["driverInfo"]["podName"] == "app-driver"
    assert status["sparkApplicationId"] == "spark-" + created["metadata"]["uid"].replace("-", "")[:32]
    assert status["driverInfo"]["webUIIngressAddress"] == "app-ui.default.spark.local"
    assert status["terminationTime"] == AT
    assert done["spec"] == created["spec"]


async def test_the_operator_fails_an_annotated_application_on_the_local_cluster() -> None:
    async with LocalCluster(mode="simulated", bookmark_interval=0) as cluster:
        cluster.register_operator(SPARK_APPLICATION, SparkLocalOperator())
        await cluster.client().create(
            SPARK_APPLICATION, application("bad", {ANNOTATION_SIMULATE_FAILURE: "boom"})
        )
        done = await cluster.wait_for(SPARK_APPLICATION, "default", "bad", state_is("FAILED"), within=10)
    assert done["status"]["applicationState"] == {"state": "FAILED", "errorMessage": "boom"}


async def test_the_operator_ignores_deletions_and_applications_deleted_meanwhile() -> None:
    async with LocalCluster(mode="simulated", bookmark_interval=0) as cluster:
        operator = SparkLocalOperator()
        client = cluster.client()
        cluster.register_resource(SPARK_APPLICATION)
        created = await client.create(SPARK_APPLICATION, application("gone"))
        await client.delete(SPARK_APPLICATION, "default", "gone")
        await operator(WatchEvent("ADDED", created), client)  # 404 on the read: nothing to do
        await operator(WatchEvent("DELETED", created), client)


# -- end to end -------------------------------------------------------------------------------------------


def run_spec(annotations: dict[str, str] | None = None) -> Any:
    template = spark_template(spark_job(conf={"spark.executor.instances": "2"}))
    return parse_spec(
        {
            "template": template,
            "execution": execution(maxAttempts=2, annotations=annotations or {}),
        }
    )


async def run_on_local_cluster(tmp_path: Path, annotations: dict[str, str] | None = None) -> Any:
    # As `taskplug run` wires it: every enabled entry's local operator registered on the cluster.
    registry = PluginRegistry()
    for entry in [*pod_entries(), *plugin_entries()]:
        registry.register(entry)
    platform = Platform.load(registry=registry)
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
            return await executor.run(run_spec(annotations))


async def test_a_spark_task_runs_to_success_on_the_local_cluster(tmp_path: Path) -> None:
    result = await run_on_local_cluster(tmp_path)
    assert result.phase == "Success", result.error
    assert result.attempts == 1
    # The simulated operator moves one state per change it sees, so the executor may not see every one.
    assert [e["phase"] for e in result.events][:: len(result.events) - 1] == ["Queued", "Success"]


async def test_a_simulated_spark_failure_is_retried_then_fails(tmp_path: Path) -> None:
    result = await run_on_local_cluster(tmp_path, {ANNOTATION_SIMULATE_FAILURE: "driver OOM"})
    # The budget is spent: Flyte fails the node with RetriesExhausted|<the last code>, the last error after "::".
    assert result.phase == "PermanentFailure"
    assert result.attempts == 2
    assert result.error["code"] == "RetriesExhausted|DownstreamSystemError"
    assert result.error["message"].split("::", 1)[1] == "Spark Job Failed with Error: driver OOM"
