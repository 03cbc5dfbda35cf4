"""Flyte 2's plugin tasks on taskplug's plugins: the ``custom`` each of the SDK's plugins writes
(flyte-sdk's ``plugins/{dask,spark,ray,pytorch}``: ``MessageToDict`` of ``flyteidl2.plugins``' DaskJob,
SparkJob, RayJob and DistributedPyTorchTrainingTask, the same messages as Flyte 1's plus a few fields)
builds the operator's object, and every container that runs the task's ``a0`` gets Flyte 2's environment.
The Dask task also runs, on the embedded cluster (``tests/integration/test_flyte2_tasks.py``)."""

from __future__ import annotations

from typing import Any

import pytest

from taskplug.executor import Platform, parse_spec, render_object

DATA_ROOT = "/data"
PLATFORM = Platform.load(
    document={
        "tasks": {
            "task-plugins": {"enabled-plugins": ["container", "sidecar", "spark", "ray", "pytorch", "dask"]}
        }
    }
)
A0 = [
    "a0",
    "--inputs",
    "{{.input}}",
    "--outputs-path",
    "{{.outputPrefix}}",
    "--version",
    "v1",
    "--run-name",
    "{{.runName}}",
    "--name",
    "{{.actionName}}",
    "--resolver",
    "flyte._internal.resolvers.default.DefaultTaskResolver",
    "mod",
    "tasks",
    "instance",
    "t",
]

# What the SDK's plugins write into `custom` (MessageToDict's camelCase, empty fields left out).
DASK = {"scheduler": {}, "workers": {"numberOfWorkers": 2}}
SPARK = {
    "sparkConf": {"spark.executor.instances": "1"},
    "mainApplicationFile": "local:///opt/venv/bin/runtime.py",
    "executorPath": "/opt/venv/bin/python",
    "applicationType": "PYTHON",
}
RAY = {
    "rayCluster": {
        "headGroupSpec": {"rayStartParams": {"num-cpus": "1"}},
        "workerGroupSpec": [{"groupName": "workers", "replicas": 1, "minReplicas": 1, "maxReplicas": 1}],
        # Flyte 2 only: autoscaler options (and per-group extendedResources) — not read by taskplug's plugin.
        "enableAutoscaling": False,
    },
    "shutdownAfterJobFinishes": True,
    "ttlSecondsAfterFinished": 60,
}
PYTORCH = {
    "workerReplicas": {"replicas": 2},
    "elasticConfig": {
        "rdzvBackend": "c10d",
        "minReplicas": 2,
        "maxReplicas": 2,
        "nprocPerNode": 1,
        "maxRestarts": 3,
    },
}


def _render(task_type: str, custom: dict[str, Any], version: int = 0) -> dict[str, Any]:
    spec = parse_spec(
        {
            "template": {
                "id": {
                    "resourceType": "TASK",
                    "project": "p",
                    "domain": "d",
                    "name": "env.t",
                    "version": "v1",
                },
                "type": task_type,
                "taskTypeVersion": version,
                "metadata": {"runtime": {"type": "FLYTE_SDK", "version": "2.12.1", "flavor": "python"}},
                "custom": custom,
                "container": {"image": "ghcr.io/flyteorg/flyte:py3.11-v2.12.1", "args": A0},
            },
            "execution": {"id": {"project": "p", "domain": "d", "name": "run1", "nodeId": "n0"}},
        }
    )
    return render_object(PLATFORM, spec, data_root=DATA_ROOT)


def _a0_containers(obj: Any) -> list[dict[str, Any]]:
    """Every container (anywhere in the object) whose arguments run a0."""
    found: list[dict[str, Any]] = []
    if isinstance(obj, dict):
        if "a0" in (obj.get("args") or [])[:1] or "a0" in (obj.get("command") or [])[:1]:
            found.append(obj)
        for value in obj.values():
            found += _a0_containers(value)
    elif isinstance(obj, list):
        for value in obj:
            found += _a0_containers(value)
    return found


@pytest.mark.parametrize(
    ("task_type", "custom", "version", "kind"),
    [
        pytest.param("dask", DASK, 0, "DaskJob", id="dask"),
        pytest.param("spark", SPARK, 0, "SparkApplication", id="spark"),
        pytest.param("ray", RAY, 0, "RayJob", id="ray"),
        pytest.param("pytorch", PYTORCH, 1, "PyTorchJob", id="pytorch-elastic"),
    ],
)
def test_the_sdks_plugin_custom_builds_the_operators_object_with_flyte2s_environment(
    task_type: str, custom: dict[str, Any], version: int, kind: str
) -> None:
    obj = _render(task_type, custom, version)
    assert obj["kind"] == kind
    containers = _a0_containers(obj)
    if task_type == "spark":
        # Spark's driver runs the SDK's entry point file (mainApplicationFile), not the container's args: the
        # environment is on the driver and executor pods.
        driver = obj["spec"]["driver"]
        env = {e["name"]: e.get("value") for e in driver.get("env") or []}
        assert obj["spec"]["mainApplicationFile"] == "local:///opt/venv/bin/runtime.py"
    else:
        assert containers, f"no container of the {kind} runs a0"
        env = {e["name"]: e.get("value") for e in containers[0].get("env") or []}
    assert env["ACTION_NAME"] == "n0"
    assert env["RUN_NAME"] == "run1"
    assert env["_U_RUN_BASE"] == f"{DATA_ROOT}/metadata/p/d/run1"
    assert env["_U_ORG_NAME"] == "local"


def test_the_sdks_python_task_of_one_node_elastic_pytorch_is_a_pod() -> None:
    # flyteplugins-pytorch writes type python-task when nnodes is 1: the pod plugin runs it, with a0's env.
    pod = _render("python-task", PYTORCH, 1)
    assert pod["kind"] == "Pod"
    (container,) = pod["spec"]["containers"]
    assert {e["name"] for e in container["env"]} >= {"ACTION_NAME", "RUN_NAME", "_U_RUN_BASE", "_U_ORG_NAME"}
