"""A flytekitplugins-dask task, serialized by flytekit (fixtures/make_dask_fixture.py), rendered through
``templateFile:`` as the DaskJob Flyte would create."""

from __future__ import annotations

from typing import Any

from dask_helpers import FIXTURES, platform

from taskplug.executor import parse_spec, task_context_for
from taskplug.plugins.dask import build_dask_job

DATA_ROOT = "s3://bucket/data"


def render() -> dict[str, Any]:
    spec = parse_spec(
        {
            "templateFile": "dask_task.pb",
            "execution": {
                "id": {"project": "p", "domain": "d", "name": "exec1", "nodeId": "n0", "retryAttempt": 0},
                "namespace": "p-d",
                "interruptible": True,
            },
            "inputs": {"n": 10},
        },
        base_dir=FIXTURES,
    )
    assert (spec.template.type, spec.template.task_type_version) == ("dask", 0)
    pod = platform(**{"interruptible-tolerations": [{"key": "spot", "operator": "Exists"}]})
    return build_dask_job(task_context_for(spec, DATA_ROOT), platform=pod)


def test_flytekit_dask_workers_take_their_group_image_count_and_limits() -> None:
    worker = render()["spec"]["cluster"]["spec"]["worker"]
    assert worker["replicas"] == 3
    [container] = worker["spec"]["containers"]
    assert container["name"] == "dask-worker"
    assert container["image"] == "ghcr.io/org/dask-img:v1"
    assert container["resources"] == {
        "limits": {"cpu": "2", "memory": "4Gi"},
        "requests": {"cpu": "2", "memory": "4Gi"},
    }
    assert container["args"] == [
        "dask-worker",
        "--name",
        "$(DASK_WORKER_NAME)",
        "--nthreads",
        "2",
        "--memory-limit",
        "4Gi",
    ]
    # The task is interruptible: workers may go to spot nodes.
    assert worker["spec"]["tolerations"] == [{"key": "spot", "operator": "Exists"}]


def test_flytekit_dask_scheduler_takes_its_image_and_requests_and_stays_off_spot_nodes() -> None:
    scheduler = render()["spec"]["cluster"]["spec"]["scheduler"]
    [container] = scheduler["spec"]["containers"]
    assert container["image"] == "ghcr.io/org/dask-scheduler:v1"
    assert container["args"] == ["dask-scheduler"]
    assert container["resources"] == {
        "limits": {"cpu": "1", "memory": "2Gi"},
        "requests": {"cpu": "1", "memory": "2Gi"},
    }
    assert "tolerations" not in scheduler["spec"]


def test_flytekit_dask_job_runner_runs_pyflyte_execute_with_the_tasks_resources() -> None:
    runner = render()["spec"]["job"]["spec"]
    [container] = runner["containers"]
    assert container["name"] == "job-runner"
    args = container["args"]
    assert args[:3] == ["pyflyte-execute", "--inputs", f"{DATA_ROOT}/metadata/p/d/exec1/n0/inputs.pb"]
    assert args[-4:] == ["task-module", "make_dask_fixture", "task-name", "sum_of_squares"]
    assert not any("{{" in arg for arg in args)
    assert container["resources"] == {
        "limits": {"cpu": "1", "memory": "2Gi"},
        "requests": {"cpu": "500m", "memory": "1Gi"},
    }
    assert {"name": "FOO", "value": "bar"} in container["env"]
    assert "tolerations" not in runner
