"""Building the DaskJob: the custom, the workers, the scheduler, the job runner."""

from __future__ import annotations

from typing import Any

import pytest
from dask_helpers import (
    ARGS,
    GENERATED_NAME,
    IMAGE,
    build,
    dask_custom,
    dask_template,
    platform,
    tctx_for,
)

from taskplug.core import BadTaskSpecification
from taskplug.k8s import K8sPluginConfig, build_object
from taskplug.plugins.dask import DASK_JOB, DaskPlugin, worker_args


def worker(job: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = job["spec"]["cluster"]["spec"]["worker"]
    return spec


def scheduler(job: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = job["spec"]["cluster"]["spec"]["scheduler"]
    return spec


def runner(job: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = job["spec"]["job"]["spec"]
    return spec


# -- the custom ------------------------------------------------------------------------------------


def test_a_task_without_custom_fails_to_unmarshal_a_nil_struct() -> None:
    with pytest.raises(BadTaskSpecification) as info:
        build(template=dask_template(None))
    assert info.value.message == "invalid TaskSpecification [<nil>], failed to unmarshal"
    assert str(info.value).endswith("caused by: nil Struct object passed")


@pytest.mark.parametrize(
    "custom",
    [
        {"workers": {"numberOfWorkers": "many"}},
        {"workers": {"numberOfWorkers": -1.0}},
        {"workers": {"numberOfWorkers": 1.5}},
        {"scheduler": {"image": 5}},
        {"workers": {"resources": {"limits": "2"}}},
    ],
)
def test_a_custom_that_is_not_a_dask_job_fails_to_unmarshal(custom: dict[str, Any]) -> None:
    with pytest.raises(BadTaskSpecification) as info:
        build(custom)
    assert info.value.message.startswith("invalid TaskSpecification [{")
    assert info.value.message.endswith("], failed to unmarshal")
    assert "caused by: Failed to unmarshal json obj into proto: " in str(info.value)


@pytest.mark.parametrize(
    ("custom", "replicas"),
    [
        ({"workers": {"numberOfWorkers": 3.0}}, 3),  # a Struct's number
        ({"workers": {"numberOfWorkers": "4"}}, 4),  # a numeric string
        ({"workers": {"number_of_workers": 5}}, 5),  # the proto's own field name
        ({"workers": {"numberOfWorkers": 2, "gpus": 1}, "futureField": True}, 2),  # unknown fields ignored
        ({"scheduler": {}}, 0),  # no worker group: zero workers
        ({}, 0),
    ],
)
def test_the_custom_is_decoded_leniently_as_jsonpb_does(custom: dict[str, Any], replicas: int) -> None:
    assert worker(build(custom))["replicas"] == replicas


def test_the_task_type_version_is_not_checked() -> None:
    template = {**dask_template(dask_custom(workers=2)), "taskTypeVersion": 7}
    assert worker(build(template=template))["replicas"] == 2


# -- workers --------------------------------------------------------------------------------


def test_workers_rename_the_primary_container_and_take_the_workers_args() -> None:
    spec = worker(build(dask_custom(workers=3)))
    assert spec["replicas"] == 3
    pod = spec["spec"]
    assert pod["restartPolicy"] == "Always"
    [container] = pod["containers"]
    assert container["name"] == "dask-worker"
    assert container["image"] == IMAGE
    # 1500m rounds up to two threads; the memory limit as Kubernetes prints it.
    assert container["args"] == [
        "dask-worker",
        "--name",
        "$(DASK_WORKER_NAME)",
        "--nthreads",
        "2",
        "--memory-limit",
        "1Gi",
    ]
    assert {"name": "FOO", "value": "bar"} in container["env"]
    assert container["resources"] == {
        "requests": {"cpu": "500m", "memory": "512Mi"},
        "limits": {"cpu": "1500m", "memory": "1Gi"},
    }


def test_a_worker_image_replaces_the_tasks_image_for_workers_only() -> None:
    job = build(dask_custom(worker_image="ghcr.io/org/worker:v2"))
    assert worker(job)["spec"]["containers"][0]["image"] == "ghcr.io/org/worker:v2"
    assert scheduler(job)["spec"]["containers"][0]["image"] == IMAGE
    assert runner(job)["containers"][0]["image"] == IMAGE


@pytest.mark.parametrize(
    ("worker_resources", "execution", "resources", "threads", "memory"),
    [
        (
            {"limits": [{"name": "CPU", "value": "2"}, {"name": "MEMORY", "value": "4Gi"}]},
            {},
            {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"cpu": "2", "memory": "4Gi"}},
            "2",
            "4Gi",
        ),
        # Only a request: the limit copies it; memory comes from the platform default (plugins.k8s).
        (
            {"requests": [{"name": "CPU", "value": "3"}]},
            {},
            {"requests": {"cpu": "3", "memory": "1Gi"}, "limits": {"cpu": "3", "memory": "1Gi"}},
            "3",
            "1Gi",
        ),
        # The execution's platform limits cap the replica's resources.
        (
            {"limits": [{"name": "CPU", "value": "8"}, {"name": "MEMORY", "value": "16Gi"}]},
            {"platformResources": {"limits": {"cpu": "2", "memory": "2Gi"}}},
            {"requests": {"cpu": "2", "memory": "2Gi"}, "limits": {"cpu": "2", "memory": "2Gi"}},
            "2",
            "2Gi",
        ),
        # A fractional CPU limit rounds up.
        (
            {"limits": [{"name": "CPU", "value": "250m"}, {"name": "MEMORY", "value": "300M"}]},
            {},
            {"requests": {"cpu": "250m", "memory": "300M"}, "limits": {"cpu": "250m", "memory": "300M"}},
            "1",
            "300M",
        ),
    ],
)
def test_worker_resources_replace_the_containers_and_set_threads_and_memory(
    worker_resources: dict[str, Any],
    execution: dict[str, Any],
    resources: dict[str, Any],
    threads: str,
    memory: str,
) -> None:
    job = build(dask_custom(worker_resources=worker_resources), execution=execution)
    container = worker(job)["spec"]["containers"][0]
    assert container["resources"] == resources
    assert container["args"][3:] == ["--nthreads", threads, "--memory-limit", memory]


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        ({"limits": {"cpu": "1500m", "memory": "1Gi"}}, ["2", "1Gi"]),
        ({"limits": {"cpu": "4"}}, ["4", "0"]),
        ({"limits": {}}, ["0", "0"]),
        ({}, ["0", "0"]),
    ],
)
def test_worker_args_read_a_missing_limit_as_zero(resources: dict[str, Any], expected: list[str]) -> None:
    args = worker_args(resources)
    assert args[:3] == ["dask-worker", "--name", "$(DASK_WORKER_NAME)"]
    assert [args[4], args[6]] == expected


def test_replica_resources_are_applied_after_the_pod_pipeline_so_tolerations_follow_the_task() -> None:
    # Quirk Q9, as Flyte: the GPU toleration comes from the task's resources, not the workers'.
    template = dask_template(
        dask_custom(
            worker_resources={"limits": [{"name": "CPU", "value": "1"}, {"name": "MEMORY", "value": "1Gi"}]}
        ),
        resources={"limits": [{"name": "GPU", "value": "1"}]},
    )
    pod = platform(**{"resource-tolerations": {"nvidia.com/gpu": [{"key": "gpu", "operator": "Exists"}]}})
    spec = worker(build(template=template, pod=pod))["spec"]
    assert spec["tolerations"] == [{"key": "gpu", "operator": "Exists"}]
    assert "nvidia.com/gpu" not in spec["containers"][0]["resources"]["limits"]


# -- interruptibility ------------------------------------------------------------------------

SPOT = {
    "interruptible-tolerations": [{"key": "spot", "operator": "Exists"}],
    "interruptible-node-selector": {"spot": "true"},
}


def test_only_the_workers_follow_an_interruptible_task() -> None:
    job = build(pod=platform(**SPOT), interruptible=True)
    assert worker(job)["spec"]["tolerations"] == [{"key": "spot", "operator": "Exists"}]
    assert worker(job)["spec"]["nodeSelector"] == {"spot": "true"}
    for spec in (scheduler(job)["spec"], runner(job)):
        assert "tolerations" not in spec
        assert "nodeSelector" not in spec


def test_a_task_that_is_not_interruptible_puts_no_pod_on_spot_nodes() -> None:
    job = build(pod=platform(**SPOT), interruptible=False)
    for spec in (worker(job)["spec"], scheduler(job)["spec"], runner(job)):
        assert "tolerations" not in spec


# -- scheduler ------------------------------------------------------------------------------


def test_the_scheduler_runs_dask_scheduler_with_its_ports_and_a_node_port_service() -> None:
    spec = scheduler(build())
    pod = spec["spec"]
    assert pod["restartPolicy"] == "Always"
    [container] = pod["containers"]
    assert container["name"] == "scheduler"
    assert container["args"] == ["dask-scheduler"]
    assert container["ports"] == [
        {"name": "tcp-comm", "containerPort": 8786, "protocol": "TCP"},
        {"name": "dashboard", "containerPort": 8787, "protocol": "TCP"},
    ]
    assert container["resources"]["limits"] == {"cpu": "1500m", "memory": "1Gi"}
    assert spec["service"] == {
        "type": "NodePort",
        "selector": {"dask.org/cluster-name": GENERATED_NAME, "dask.org/component": "scheduler"},
        "ports": [
            {"name": "tcp-comm", "protocol": "TCP", "port": 8786, "targetPort": "tcp-comm"},
            {"name": "dashboard", "protocol": "TCP", "port": 8787, "targetPort": "dashboard"},
        ],
    }


def test_scheduler_image_and_resources_replace_the_tasks() -> None:
    job = build(
        dask_custom(
            scheduler_image="ghcr.io/org/scheduler:v3",
            scheduler_resources={"requests": [{"name": "MEMORY", "value": "2Gi"}]},
        )
    )
    container = scheduler(job)["spec"]["containers"][0]
    assert container["image"] == "ghcr.io/org/scheduler:v3"
    # The memory request is copied to the limit; cpu takes the platform default.
    assert container["resources"] == {
        "requests": {"cpu": "1", "memory": "2Gi"},
        "limits": {"cpu": "1", "memory": "2Gi"},
    }
    assert worker(job)["spec"]["containers"][0]["image"] == IMAGE


def test_the_service_selector_names_the_generated_name() -> None:
    job = build(execution={"generatedName": "custom-generated-name"})
    assert scheduler(job)["service"]["selector"]["dask.org/cluster-name"] == "custom-generated-name"


# -- job runner -----------------------------------------------------------------------------


def test_the_job_runner_is_the_tasks_own_container_renamed_and_never_restarted() -> None:
    spec = runner(build())
    assert spec["restartPolicy"] == "Never"
    [container] = spec["containers"]
    assert container["name"] == "job-runner"
    assert container["image"] == IMAGE
    assert container["args"][:2] == ARGS[:2]
    assert not any("{{" in arg for arg in container["args"])
    assert {"name": "FOO", "value": "bar"} in container["env"]
    assert container["resources"]["limits"] == {"cpu": "1500m", "memory": "1Gi"}


def test_a_k8s_pod_task_keeps_its_sidecars_and_replaces_the_primary_in_place() -> None:
    template = {
        "id": {"resourceType": "TASK", "project": "p", "domain": "d", "name": "t", "version": "v1"},
        "type": "dask",
        "k8sPod": {
            "podSpec": {
                "containers": [
                    {"name": "sidecar", "image": "busybox", "args": ["sleep", "60"]},
                    {"name": "main", "image": IMAGE, "args": ["run"]},
                ]
            },
            "metadata": {"labels": {"from-pod": "yes"}},
        },
        "config": {"primary_container_name": "main"},
        "custom": dask_custom(),
    }
    job = build(template=template)
    assert [c["name"] for c in worker(job)["spec"]["containers"]] == ["sidecar", "dask-worker"]
    assert [c["name"] for c in scheduler(job)["spec"]["containers"]] == ["sidecar", "scheduler"]
    assert [c["name"] for c in runner(job)["containers"]] == ["sidecar", "job-runner"]
    assert job["metadata"]["labels"]["from-pod"] == "yes"
    assert job["spec"]["cluster"]["metadata"]["labels"]["from-pod"] == "yes"


def test_a_k8s_pod_task_without_its_primary_container_is_a_bad_task() -> None:
    template = {
        "id": {"resourceType": "TASK", "project": "p", "domain": "d", "name": "t", "version": "v1"},
        "type": "dask",
        "k8sPod": {"podSpec": {"containers": [{"name": "main", "image": IMAGE}]}},
        "config": {"primary_container_name": "missing"},
        "custom": dask_custom(),
    }
    with pytest.raises(BadTaskSpecification, match=r"container \[missing\] not defined"):
        build(template=template)


# -- metadata ------------------------------------------------------------------------


def test_execution_labels_and_annotations_go_on_the_job_and_the_cluster() -> None:
    job = build(labels={"team": "ml"}, annotations={"note": "x"})
    for meta in (job["metadata"], job["spec"]["cluster"]["metadata"]):
        assert meta["labels"]["team"] == "ml"
        assert meta["annotations"] == {"note": "x"}
    assert job["apiVersion"] == "kubernetes.dask.org/v1"
    assert job["kind"] == "DaskJob"


def test_config_default_labels_reach_the_dask_job_only_through_the_plugin_manager() -> None:
    k8s = {"default-labels": {"platform": "flyte"}, "default-annotations": {"cost": "1"}}
    plugin = DaskPlugin(platform(**k8s))
    created = build_object(plugin, tctx_for(), K8sPluginConfig.model_validate(k8s), watched=DASK_JOB)
    assert created["metadata"]["labels"]["platform"] == "flyte"
    assert created["metadata"]["annotations"]["cost"] == "1"
    assert created["metadata"]["name"] == GENERATED_NAME
    cluster_meta = created["spec"]["cluster"]["metadata"]
    assert "platform" not in cluster_meta["labels"]
    assert "cost" not in cluster_meta.get("annotations", {})
