"""PyTorchJob building: v0 and v1 custom, replica specs, elastic policy,
run policy, the worker env, errors."""

from __future__ import annotations

from typing import Any

import pytest
from kubeflow_helpers import (
    IMAGE,
    RENDERED_INPUTS,
    container_of,
    env_of,
    platform,
    replica,
    tctx_for,
    template,
)

from taskplug.core import BadTaskSpecification, PluginError
from taskplug.k8s import ErrorAggregationStrategy, K8sPluginConfig, PlatformPodConfig, PodTemplateStore
from taskplug.plugins.kubeflow import build_pytorch_job

V1_CUSTOM: dict[str, Any] = {
    "masterReplicas": {"replicas": 1, "resources": {}},
    "workerReplicas": {"replicas": 2, "resources": {}},
}


def build(
    custom: Any, *, version: int = 1, pod: PlatformPodConfig | None = None, **kw: Any
) -> dict[str, Any]:
    task = template("pytorch", custom, version=version)
    return build_pytorch_job(tctx_for(task, **kw), platform=pod or platform())


def specs_of(job: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = job["spec"]["pytorchReplicaSpecs"]
    return result


def test_a_v1_task_becomes_a_pytorchjob_with_one_master_and_the_workers() -> None:
    job = build(V1_CUSTOM)
    assert (job["apiVersion"], job["kind"]) == ("kubeflow.org/v1", "PyTorchJob")
    assert "metadata" not in job  # the plugin manager names it
    specs = specs_of(job)
    assert sorted(specs) == ["Master", "Worker"]
    assert replica(specs, "Master")["replicas"] == 1
    assert replica(specs, "Worker")["replicas"] == 2
    assert job["spec"]["runPolicy"] == {}
    assert "elasticPolicy" not in job["spec"]
    for name in ("Master", "Worker"):
        spec = replica(specs, name)
        assert spec["restartPolicy"] == "Never"
        pod = spec["template"]["spec"]
        assert [c["name"] for c in pod["containers"]] == ["pytorch"]
        assert pod["restartPolicy"] == "Never"
        main = container_of(spec, "pytorch")
        assert main["image"] == IMAGE
        # The whole pod pipeline ran: templated args, execution env.
        assert main["args"][2] == RENDERED_INPUTS
        assert env_of(main)["FOO"] == "bar"
        assert env_of(main)["FLYTE_INTERNAL_EXECUTION_ID"] == "exec1"


def test_the_master_replica_count_is_always_one() -> None:
    custom = {"masterReplicas": {"replicas": 3}, "workerReplicas": {"replicas": 1}}
    assert replica(specs_of(build(custom)), "Master")["replicas"] == 1


@pytest.mark.parametrize("workers", [0, -1])
def test_a_worker_spec_is_left_out_without_workers(workers: int) -> None:
    specs = specs_of(build({"masterReplicas": {"replicas": 1}, "workerReplicas": {"replicas": workers}}))
    assert sorted(specs) == ["Master"]


def test_v1_workers_name_themselves_for_flytekit_and_the_master_does_not() -> None:
    specs = specs_of(build(V1_CUSTOM))
    worker_env = container_of(replica(specs, "Worker"), "pytorch")["env"]
    assert worker_env[-1] == {"name": "_F_WN", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
    assert "_F_DES" not in env_of(container_of(replica(specs, "Worker"), "pytorch"))
    assert "_F_WN" not in env_of(container_of(replica(specs, "Master"), "pytorch"))


def test_v1_workers_carry_the_earliest_error_strategy_when_aggregation_is_on() -> None:
    task = template("pytorch", V1_CUSTOM)
    job = build_pytorch_job(
        tctx_for(task), platform=platform(), error_aggregation=ErrorAggregationStrategy.EARLIEST
    )
    env = container_of(replica(specs_of(job), "Worker"), "pytorch")["env"]
    assert env[-2:] == [
        {"name": "_F_WN", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "_F_DES", "value": "Earliest"},
    ]


def test_the_worker_env_goes_to_the_pytorch_container_even_when_a_sidecar_comes_first() -> None:
    # Deviation (Q6): Flyte appends it to containers[0], the sidecar here.
    pod_spec = {
        "containers": [
            {"name": "sidecar", "image": "side:1", "args": ["sleep"]},
            {"name": "primary", "image": IMAGE, "args": ["train"]},
        ]
    }
    task = template("pytorch", V1_CUSTOM, pod_spec=pod_spec)
    job = build_pytorch_job(tctx_for(task), platform=platform())
    worker = replica(specs_of(job), "Worker")
    assert [c["name"] for c in worker["template"]["spec"]["containers"]] == ["sidecar", "pytorch"]
    assert "_F_WN" in env_of(container_of(worker, "pytorch"))
    assert "_F_WN" not in env_of(container_of(worker, "sidecar"))


def test_v0_builds_a_master_and_the_worker_count_from_one_pod() -> None:
    job = build({"workers": 3}, version=0)
    specs = specs_of(job)
    assert (replica(specs, "Master")["replicas"], replica(specs, "Worker")["replicas"]) == (1, 3)
    assert replica(specs, "Master")["template"] == replica(specs, "Worker")["template"]
    assert "_F_WN" not in env_of(container_of(replica(specs, "Worker"), "pytorch"))
    assert job["spec"]["runPolicy"] == {}


def test_a_v1_payload_read_as_v0_builds_a_master_only_job() -> None:
    # Unknown keys are ignored, so nothing says the payload is of the other version.
    assert sorted(specs_of(build(V1_CUSTOM, version=0))) == ["Master"]


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (
            {"rdzvBackend": "c10d", "minReplicas": 2, "maxReplicas": 4, "nprocPerNode": 8, "maxRestarts": 3},
            {"minReplicas": 2, "maxReplicas": 4, "rdzvBackend": "c10d", "nProcPerNode": 8, "maxRestarts": 3},
        ),
        ({}, {"minReplicas": 0, "maxReplicas": 0, "rdzvBackend": "", "nProcPerNode": 0, "maxRestarts": 0}),
    ],
)
@pytest.mark.parametrize("version", [0, 1])
def test_an_elastic_config_becomes_the_elastic_policy_and_drops_the_master(
    config: dict[str, Any], expected: dict[str, Any], version: int
) -> None:
    custom: dict[str, Any] = (
        {"workers": 2, "elasticConfig": config}
        if version == 0
        else {"workerReplicas": {"replicas": 2}, "elasticConfig": config}
    )
    job = build(custom, version=version)
    assert job["spec"]["elasticPolicy"] == expected
    assert sorted(specs_of(job)) == ["Worker"]


def test_flytekits_elastic_payload_builds_workers_and_a_rendezvous_policy() -> None:
    # As flytekit 1.16 sends Elastic(nnodes=2, nproc_per_node=4).
    custom = {
        "elasticConfig": {"maxReplicas": 2.0, "minReplicas": 2.0, "nprocPerNode": 4.0, "rdzvBackend": "c10d"},
        "workerReplicas": {"replicas": 2.0},
    }
    job = build(custom)
    assert job["spec"]["elasticPolicy"] == {
        "minReplicas": 2,
        "maxReplicas": 2,
        "rdzvBackend": "c10d",
        "nProcPerNode": 4,
        "maxRestarts": 0,
    }
    assert replica(specs_of(job), "Worker")["replicas"] == 2


def test_an_elastic_job_without_workers_is_refused() -> None:
    # Deviation (Q7): Flyte builds a job with no replica specs, which the operator rejects.
    with pytest.raises(BadTaskSpecification, match="number of workers must be greater than 0"):
        build({"workerReplicas": {"replicas": 0}, "elasticConfig": {"minReplicas": 1}})


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ({}, {"cleanPodPolicy": "None"}),
        (
            {"cleanPodPolicy": "CLEANPOD_POLICY_ALL", "backoffLimit": 3},
            {"backoffLimit": 3, "cleanPodPolicy": "All"},
        ),
        (
            {
                "cleanPodPolicy": "CLEANPOD_POLICY_RUNNING",
                "ttlSecondsAfterFinished": 60,
                "activeDeadlineSeconds": 600,
            },
            {"cleanPodPolicy": "Running", "activeDeadlineSeconds": 600, "ttlSecondsAfterFinished": 60},
        ),
        (
            {"backoffLimit": 0, "activeDeadlineSeconds": 0, "ttlSecondsAfterFinished": 0},
            {"cleanPodPolicy": "None"},
        ),
    ],
)
def test_the_run_policy_keeps_clean_pod_policy_always_and_the_rest_when_set(
    policy: dict[str, Any], expected: dict[str, Any]
) -> None:
    assert build({**V1_CUSTOM, "runPolicy": policy})["spec"]["runPolicy"] == expected


@pytest.mark.parametrize(
    ("field", "expected"),
    [
        ("RESTART_POLICY_NEVER", "Never"),
        ("RESTART_POLICY_ON_FAILURE", "OnFailure"),
        ("RESTART_POLICY_ALWAYS", "Always"),
        (2, "Always"),
    ],
)
def test_replica_restart_policies_map_to_the_operators(field: Any, expected: str) -> None:
    custom = {"masterReplicas": {"replicas": 1}, "workerReplicas": {"replicas": 1, "restartPolicy": field}}
    specs = specs_of(build(custom))
    assert replica(specs, "Worker")["restartPolicy"] == expected
    assert replica(specs, "Master")["restartPolicy"] == "Never"


def test_a_replica_image_replaces_the_task_image_and_the_node_image_override() -> None:
    custom = {"masterReplicas": {"image": "master:2"}, "workerReplicas": {"replicas": 1}}
    job = build(custom, overrides={"containerImage": "node:3"})
    specs = specs_of(job)
    assert container_of(replica(specs, "Master"), "pytorch")["image"] == "master:2"
    assert container_of(replica(specs, "Worker"), "pytorch")["image"] == "node:3"


def test_the_common_replica_spec_wins_over_the_deprecated_fields() -> None:
    custom = {
        "masterReplicas": {"replicas": 1},
        "workerReplicas": {
            "replicas": 5,
            "image": "old:1",
            "common": {"replicas": 2, "image": "new:1", "restartPolicy": "RESTART_POLICY_ALWAYS"},
        },
    }
    worker = replica(specs_of(build(custom)), "Worker")
    assert worker["replicas"] == 2
    assert worker["restartPolicy"] == "Always"
    assert container_of(worker, "pytorch")["image"] == "new:1"


def test_an_empty_common_spec_still_wins_over_the_deprecated_fields() -> None:
    custom = {"masterReplicas": {"replicas": 1}, "workerReplicas": {"replicas": 4, "common": {}}}
    assert sorted(specs_of(build(custom))) == ["Master"]


def test_replica_resources_replace_the_nodes_resource_overrides_for_that_replica() -> None:
    # Q1: the worker's own resources are completed from the platform, not from the node's overrides.
    custom = {
        "masterReplicas": {"replicas": 1},
        "workerReplicas": {"replicas": 1, "resources": {"requests": [{"name": "CPU", "value": "2"}]}},
    }
    job = build(
        custom,
        overrides={"resources": {"requests": {"cpu": "3", "memory": "3Gi"}}},
        platformResources={"requests": {"memory": "500Mi"}, "limits": {"cpu": "8", "memory": "16Gi"}},
    )
    specs = specs_of(job)
    master = container_of(replica(specs, "Master"), "pytorch")["resources"]
    worker = container_of(replica(specs, "Worker"), "pytorch")["resources"]
    assert master == {"requests": {"cpu": "3", "memory": "3Gi"}, "limits": {"cpu": "3", "memory": "3Gi"}}
    assert worker == {"requests": {"cpu": "2", "memory": "500Mi"}, "limits": {"cpu": "2", "memory": "500Mi"}}


def _containers_and_lists(value: Any) -> list[Any]:
    found: list[Any] = []
    if isinstance(value, dict):
        found.append(value)
        for item in value.values():
            found += _containers_and_lists(item)
    elif isinstance(value, list):
        found.append(value)
        for item in value:
            found += _containers_and_lists(item)
    return found


def test_replicas_built_from_one_pod_share_no_part_of_it() -> None:
    # Master and worker ask for the same resources, so one pod is built for both: each gets its own copy.
    specs = specs_of(build(V1_CUSTOM))
    master, worker = replica(specs, "Master"), replica(specs, "Worker")
    assert master["template"]["metadata"] == worker["template"]["metadata"]
    shared = {id(v) for v in _containers_and_lists(master)} & {id(v) for v in _containers_and_lists(worker)}
    assert not shared


def test_replicas_asking_for_different_resources_get_pods_of_their_own() -> None:
    custom = {
        "masterReplicas": {"replicas": 1, "resources": {"requests": [{"name": "CPU", "value": "1"}]}},
        "workerReplicas": {"replicas": 2, "resources": {"requests": [{"name": "CPU", "value": "2"}]}},
    }
    specs = specs_of(build(custom))
    assert container_of(replica(specs, "Master"), "pytorch")["resources"]["requests"]["cpu"] == "1"
    assert container_of(replica(specs, "Worker"), "pytorch")["resources"]["requests"]["cpu"] == "2"


def test_replica_resources_are_capped_at_the_platform_limits() -> None:
    custom = {
        "masterReplicas": {
            "resources": {"limits": [{"name": "CPU", "value": "16"}, {"name": "MEMORY", "value": "1Gi"}]}
        },
        "workerReplicas": {"replicas": 1},
    }
    job = build(custom, platformResources={"limits": {"cpu": "4", "memory": "8Gi"}})
    master = container_of(replica(specs_of(job), "Master"), "pytorch")["resources"]
    assert master == {"requests": {"cpu": "4", "memory": "1Gi"}, "limits": {"cpu": "4", "memory": "1Gi"}}


def test_replica_gpus_get_the_gpu_tolerations_of_that_replica_only() -> None:
    custom = {
        "masterReplicas": {"replicas": 1},
        "workerReplicas": {"replicas": 1, "resources": {"limits": [{"name": "GPU", "value": "1"}]}},
    }
    toleration = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    job = build(custom, pod=platform(**{"resource-tolerations": {"nvidia.com/gpu": [toleration]}}))
    specs = specs_of(job)
    worker = replica(specs, "Worker")
    assert container_of(worker, "pytorch")["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert worker["template"]["spec"]["tolerations"] == [toleration]
    assert "tolerations" not in replica(specs, "Master")["template"]["spec"]


def test_every_replica_is_interruptible_when_the_task_is() -> None:
    pod = platform(
        **{
            "interruptible-tolerations": [{"key": "spot", "operator": "Exists"}],
            "interruptible-node-selector": {"spot": "true"},
        }
    )
    job = build(V1_CUSTOM, pod=pod, interruptible=True)
    for name in ("Master", "Worker"):
        spec = replica(specs_of(job), name)["template"]["spec"]
        assert spec["nodeSelector"] == {"spot": "true"}
        assert spec["tolerations"] == [{"key": "spot", "operator": "Exists"}]


def test_replica_pods_carry_config_and_execution_labels_and_annotations() -> None:
    pod = platform(**{"default-labels": {"team": "ml"}, "default-annotations": {"a": "config"}})
    job = build(V1_CUSTOM, pod=pod, labels={"run": "7"}, annotations={"a": "execution", "b": "2"})
    meta = replica(specs_of(job), "Worker")["template"]["metadata"]
    assert meta["labels"]["team"] == "ml"
    assert meta["labels"]["run"] == "7"
    assert meta["annotations"] == {"a": "execution", "b": "2"}


def test_the_primary_container_is_renamed_to_pytorch_and_sidecars_keep_their_names() -> None:
    pod_spec = {
        "containers": [
            {"name": "primary", "image": IMAGE, "args": ["train"]},
            {"name": "logger", "image": "log:1", "args": ["tail"]},
        ]
    }
    task = template("pytorch", V1_CUSTOM, pod_spec=pod_spec)
    job = build_pytorch_job(tctx_for(task), platform=platform())
    names = [c["name"] for c in replica(specs_of(job), "Master")["template"]["spec"]["containers"]]
    assert names == ["pytorch", "logger"]


def test_a_custom_of_the_wrong_shape_is_a_bad_task_specification_naming_it() -> None:
    with pytest.raises(BadTaskSpecification) as info:
        build({"workerReplicas": {"replicas": "many"}})
    assert info.value.message.startswith(
        'invalid TaskSpecification [{"workerReplicas": {"replicas": "many"}}], Err: ['
    )


def test_a_task_without_custom_is_refused_as_flyte_does() -> None:
    with pytest.raises(BadTaskSpecification, match=r"nil Struct Object passed"):
        build(None)


@pytest.mark.parametrize("version", [2, 7])
def test_an_unknown_task_type_version_is_refused(version: int) -> None:
    with pytest.raises(BadTaskSpecification) as info:
        build(V1_CUSTOM, version=version)
    assert (
        info.value.message == f"Invalid TaskSpecification, unsupported task template version [{version}] key"
    )


def test_a_replica_that_cannot_be_built_is_named_in_the_error() -> None:
    custom = {
        "masterReplicas": {"replicas": 1},
        "workerReplicas": {"replicas": 1, "resources": {"requests": [{"name": "CPU", "value": "lots"}]}},
    }
    with pytest.raises(PluginError) as info:
        build(custom)
    assert info.value.message.startswith(
        "Unable to create worker replica spec: [[BadTaskSpecification] invalid TaskSpecification on Resources"
    )


def test_a_pod_that_cannot_be_built_fails_the_master_first() -> None:
    task = template("pytorch", V1_CUSTOM)
    del task["container"]
    with pytest.raises(BadTaskSpecification) as info:
        build_pytorch_job(tctx_for(task), platform=platform())
    assert info.value.message.startswith(
        "Unable to create master replica spec: [[BadTaskSpecification] Unable to create pod spec: "
    )


def test_the_base_pod_template_is_merged_into_every_replica() -> None:
    templates = PodTemplateStore()
    templates.store(
        {
            "metadata": {"name": "train-base", "namespace": "flyte"},
            "template": {
                "metadata": {"labels": {"from-template": "yes"}},
                "spec": {
                    "priorityClassName": "training",
                    "containers": [
                        {"name": "primary", "image": "ignored", "env": [{"name": "T", "value": "1"}]}
                    ],
                },
            },
        }
    )
    pod = PlatformPodConfig(
        k8s=K8sPluginConfig.model_validate({"default-pod-template-name": "train-base"}),
        pod_templates=templates,
        environ={},
    )
    job = build(V1_CUSTOM, pod=pod)
    for name in ("Master", "Worker"):
        spec = replica(specs_of(job), name)
        assert spec["template"]["spec"]["priorityClassName"] == "training"
        assert spec["template"]["metadata"]["labels"]["from-template"] == "yes"
        main = container_of(spec, "pytorch")
        assert env_of(main)["T"] == "1"
        assert main["image"] == IMAGE  # the task's image wins over the template's


def test_an_executions_pod_template_override_replaces_the_pod_of_every_replica() -> None:
    override = {
        "podSpec": {"containers": [{"name": "main", "image": "override:1", "args": ["go"]}]},
        "primaryContainerName": "main",
        "metadata": {"labels": {"overridden": "true"}},
    }
    job = build(V1_CUSTOM, overrides={"podTemplate": override})
    for name in ("Master", "Worker"):
        spec = replica(specs_of(job), name)
        assert [c["name"] for c in spec["template"]["spec"]["containers"]] == ["pytorch"]
        assert container_of(spec, "pytorch")["args"] == ["go"]
        assert spec["template"]["metadata"]["labels"]["overridden"] == "true"


@pytest.mark.parametrize(
    "custom",
    [
        {"worker_replicas": {"replicas": 2}, "run_policy": {"clean_pod_policy": 2}},
        {"workerReplicas": {"replicas": "2"}, "runPolicy": {"cleanPodPolicy": "CLEANPOD_POLICY_ALL"}},
        {"workerReplicas": {"replicas": 2.0}, "runPolicy": {"cleanPodPolicy": 2.0}, "unknown": {"x": 1}},
    ],
)
def test_custom_decodes_as_flytes_jsonpb_does(custom: dict[str, Any]) -> None:
    # Original or lowerCamel names, integral numbers or numeric strings, enum names or numbers, unknown keys.
    job = build(custom)
    assert replica(specs_of(job), "Worker")["replicas"] == 2
    assert job["spec"]["runPolicy"] == {"cleanPodPolicy": "All"}


def test_a_fractional_replica_count_does_not_decode() -> None:
    with pytest.raises(BadTaskSpecification, match=r"^\[BadTaskSpecification\] invalid TaskSpecification \["):
        build({"workerReplicas": {"replicas": 2.5}})
