"""A flytekitplugins-ray task, serialized by flytekit (fixtures/make_ray_fixture.py), rendered through
``templateFile:`` as the RayJob Flyte would create."""

from __future__ import annotations

from typing import Any

from ray_helpers import FIXTURES, platform

from taskplug.executor import parse_spec, task_context_for
from taskplug.plugins.ray import RayConfig, build_ray_job

DATA_ROOT = "s3://bucket/data"


def render() -> dict[str, Any]:
    spec = parse_spec(
        {
            "templateFile": "ray_task.pb",
            "execution": {
                "id": {"project": "p", "domain": "d", "name": "exec1", "nodeId": "n0", "retryAttempt": 0},
                "namespace": "p-d",
                "serviceAccount": "default",
            },
            "inputs": {"n": 10},
        },
        base_dir=FIXTURES,
    )
    assert (spec.template.type, spec.template.task_type_version) == ("ray", 0)
    return build_ray_job(task_context_for(spec, DATA_ROOT), platform=platform(), config=RayConfig())


def test_flytekit_ray_job_settings() -> None:
    spec = render()["spec"]
    assert spec["entrypoint"].startswith(
        f"pyflyte-execute --inputs {DATA_ROOT}/metadata/p/d/exec1/n0/inputs.pb "
    )
    assert spec["entrypoint"].endswith(" -- task-module make_ray_fixture task-name ray_sum")
    assert "{{" not in spec["entrypoint"]
    # runtime_env_yaml wins over the deprecated base64 runtime_env flytekit also sends.
    assert spec["runtimeEnvYAML"] == "pip:\n- numpy\n"
    assert (spec["shutdownAfterJobFinishes"], spec["ttlSecondsAfterFinished"]) == (True, 60)
    assert spec["rayClusterSpec"]["enableInTreeAutoscaling"] is True


def test_flytekit_ray_head_takes_its_start_params_and_resources() -> None:
    head = render()["spec"]["rayClusterSpec"]["headGroupSpec"]
    assert head["rayStartParams"] == {
        "log-color": "True",
        "include-dashboard": "true",
        "node-ip-address": "$MY_POD_IP",
        "dashboard-host": "0.0.0.0",
        "disable-usage-stats": "true",
    }
    [container] = head["template"]["spec"]["containers"]
    assert container["name"] == "ray-head"
    assert container["image"] == "ghcr.io/org/ray-img:v1"
    # flytekit's resource-only ray-head pod spec is merged over the task's resources.
    assert container["resources"] == {
        "limits": {"cpu": "1", "memory": "2Gi"},
        "requests": {"cpu": "1", "memory": "2Gi"},
    }
    assert head["template"]["spec"]["serviceAccountName"] == "default"


def test_flytekit_ray_worker_group() -> None:
    [group] = render()["spec"]["rayClusterSpec"]["workerGroupSpecs"]
    assert (group["groupName"], group["replicas"], group["minReplicas"], group["maxReplicas"]) == (
        "g",
        2,
        2,
        2,
    )
    assert group["rayStartParams"] == {"disable-usage-stats": "true", "node-ip-address": "$MY_POD_IP"}
    [container] = group["template"]["spec"]["containers"]
    assert container["name"] == "ray-worker"
    assert container["resources"] == {
        "limits": {"cpu": "2", "memory": "4Gi"},
        "requests": {"cpu": "2", "memory": "4Gi"},
    }


def test_flytekit_ray_submitter_is_the_tasks_own_pod() -> None:
    submitter = render()["spec"]["submitterPodTemplate"]
    [container] = submitter["spec"]["containers"]
    assert container["args"][0] == "pyflyte-execute"
    assert container["resources"] == {
        "limits": {"cpu": "500m", "memory": "1Gi"},
        "requests": {"cpu": "500m", "memory": "1Gi"},
    }
    assert {"name": "FOO", "value": "bar"} in container["env"]
    assert submitter["metadata"]["labels"]["task-name"] == "make-ray-fixture-ray-sum"
