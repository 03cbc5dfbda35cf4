"""Building the RayJob: the custom, start parameters, head and worker templates, the
submitter, runtime env, shutdown and TTL."""

from __future__ import annotations

from typing import Any

import pytest
from ray_helpers import (
    IMAGE,
    build,
    group,
    platform,
    ray_config,
    ray_custom,
    ray_template,
)

from taskplug.core import BadTaskSpecification
from taskplug.plugins.ray import RayConfig


def head(job: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = job["spec"]["rayClusterSpec"]["headGroupSpec"]
    return spec


def workers(job: dict[str, Any]) -> list[dict[str, Any]]:
    specs: list[dict[str, Any]] = job["spec"]["rayClusterSpec"].get("workerGroupSpecs", [])
    return specs


def env_names(container: dict[str, Any]) -> list[str]:
    return [e["name"] for e in container.get("env") or []]


# -- the custom ----------------------------------------------------------------------------


def test_a_task_without_custom_is_a_bad_task_naming_the_nil_struct() -> None:
    with pytest.raises(BadTaskSpecification) as info:
        build(template=ray_template(None))
    assert info.value.message == "invalid TaskSpecification [<nil>], Err: [nil Struct object passed]"


@pytest.mark.parametrize(
    "custom",
    [
        {"rayCluster": {"workerGroupSpec": [{"replicas": "many"}]}},
        {"rayCluster": {"enableAutoscaling": "yes"}},
        {"shutdownAfterJobFinishes": 3, "rayCluster": {}},
    ],
)
def test_a_custom_that_is_not_a_ray_job_fails_to_unmarshal(custom: dict[str, Any]) -> None:
    with pytest.raises(BadTaskSpecification) as info:
        build(custom)
    assert info.value.message.startswith("invalid TaskSpecification [{")
    assert "], Err: [Failed to unmarshal json obj into proto: " in info.value.message


def test_a_ray_job_without_a_cluster_is_a_bad_task_where_flyte_panics() -> None:
    with pytest.raises(BadTaskSpecification, match=r"Err: \[ray_cluster is not set\]"):
        build({"runtimeEnvYaml": "pip: []"})


@pytest.mark.parametrize(
    ("custom", "replicas"),
    [
        (ray_custom(groups=[group(replicas=3)]), 3),
        ({"ray_cluster": {"worker_group_spec": [{"group_name": "g", "replicas": 4, "max_replicas": 4}]}}, 4),
        ({"rayCluster": {"workerGroupSpec": [{"groupName": "g", "replicas": "5", "maxReplicas": "5"}]}}, 5),
        ({"rayCluster": {"workerGroupSpec": [{**group(replicas=2), "gpus": 1}]}, "futureField": {}}, 2),
    ],
)
def test_the_custom_is_decoded_leniently_as_jsonpb_does(custom: dict[str, Any], replicas: int) -> None:
    assert workers(build(custom))[0]["replicas"] == replicas


def test_the_task_type_version_is_not_checked() -> None:
    template = {**ray_template(ray_custom(groups=[group(replicas=2)])), "taskTypeVersion": 3}
    assert workers(build(template=template))[0]["replicas"] == 2


def test_a_pod_that_cannot_be_built_is_reported_as_such() -> None:
    template = {
        "id": {"resourceType": "TASK", "project": "p", "domain": "d", "name": "t", "version": "v1"},
        "type": "ray",
        "k8sPod": {"podSpec": {"containers": [{"name": "main", "image": IMAGE}]}},
        "config": {"primary_container_name": "missing"},
        "custom": ray_custom(),
    }
    with pytest.raises(BadTaskSpecification) as info:
        build(template=template)
    assert info.value.message.startswith("Unable to create pod spec: [[BadTaskSpecification] ")
    assert "[missing] not defined" in info.value.message


# -- start parameters ----------------------------------------------------------------------------

ADDED_HEAD = {
    "include-dashboard": "true",
    "node-ip-address": "$MY_POD_IP",
    "dashboard-host": "0.0.0.0",
    "disable-usage-stats": "true",
}


@pytest.mark.parametrize(
    ("head_params", "config", "expected"),
    [
        ({"log-color": "True"}, {}, {"log-color": "True", **ADDED_HEAD}),
        # No parameters in the task: the configured defaults (which disable usage stats).
        ({}, {}, ADDED_HEAD),
        (
            {},
            {"defaults": {"headNode": {"startParameters": {"num-cpus": "0"}}}},
            {"num-cpus": "0", **ADDED_HEAD},
        ),
        # What the task sets is never replaced.
        (
            {"include-dashboard": "false", "dashboard-host": "127.0.0.1", "node-ip-address": "10.0.0.1"},
            {"includeDashboard": True, "dashboardHost": "0.0.0.0"},
            {
                "include-dashboard": "false",
                "dashboard-host": "127.0.0.1",
                "node-ip-address": "10.0.0.1",
                "disable-usage-stats": "true",
            },
        ),
        (
            {"a": "b"},
            {"includeDashboard": False, "dashboardHost": "localhost", "enableUsageStats": True},
            {
                "a": "b",
                "include-dashboard": "false",
                "node-ip-address": "$MY_POD_IP",
                "dashboard-host": "localhost",
            },
        ),
        # The deprecated nodeIPAddress fills an empty defaults ipAddress.
        (
            {"a": "b"},
            {"nodeIPAddress": "1.2.3.4", "defaults": {"headNode": {"ipAddress": ""}}},
            {"a": "b", **ADDED_HEAD, "node-ip-address": "1.2.3.4"},
        ),
        ({"a": "b"}, {"nodeIPAddress": "1.2.3.4"}, {"a": "b", **ADDED_HEAD}),
    ],
)
def test_head_start_parameters(
    head_params: dict[str, str], config: dict[str, Any], expected: dict[str, str]
) -> None:
    custom = ray_custom(head={"rayStartParams": head_params} if head_params else {})
    assert head(build(custom, config=ray_config(**config)))["rayStartParams"] == expected


@pytest.mark.parametrize(
    ("group_params", "config", "expected"),
    [
        (
            {"num-gpus": "1"},
            {},
            {"num-gpus": "1", "node-ip-address": "$MY_POD_IP", "disable-usage-stats": "true"},
        ),
        ({}, {}, {"disable-usage-stats": "true", "node-ip-address": "$MY_POD_IP"}),
        (
            {},
            {"defaults": {"workerNode": {"startParameters": {"block": "true"}, "ipAddress": "$POD_IP"}}},
            {"block": "true", "node-ip-address": "$POD_IP", "disable-usage-stats": "true"},
        ),
        ({"x": "y"}, {"enableUsageStats": True}, {"x": "y", "node-ip-address": "$MY_POD_IP"}),
        (
            {"x": "y"},
            {"nodeIPAddress": "5.6.7.8", "defaults": {"workerNode": {"ipAddress": ""}}},
            {"x": "y", "node-ip-address": "5.6.7.8", "disable-usage-stats": "true"},
        ),
    ],
)
def test_worker_start_parameters(
    group_params: dict[str, str], config: dict[str, Any], expected: dict[str, str]
) -> None:
    custom = ray_custom(groups=[group(rayStartParams=group_params) if group_params else group()])
    # Head parameters are not worker parameters.
    assert "include-dashboard" not in expected
    assert workers(build(custom, config=ray_config(**config)))[0]["rayStartParams"] == expected


def test_the_configured_defaults_are_never_changed_by_a_build() -> None:
    config = RayConfig()
    before = config.model_dump()
    build(ray_custom(groups=[group()]), config=config)
    build(ray_custom(groups=[group()]), config=config)
    assert config.model_dump() == before
    assert config.defaults.head_node.start_parameters == {"disable-usage-stats": "true"}


# -- service account ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("execution", "config", "expected"),
    [
        ({}, {}, None),
        ({"serviceAccount": "exec-sa"}, {}, "exec-sa"),
        (
            {"serviceAccount": "exec-sa", "securityContext": {"runAs": {"k8sServiceAccount": "ctx-sa"}}},
            {},
            "ctx-sa",
        ),
        ({"serviceAccount": "exec-sa"}, {"serviceAccount": "ray-sa"}, "ray-sa"),
        ({}, {"serviceAccount": "ray-sa"}, "ray-sa"),
    ],
)
def test_every_ray_pod_gets_the_service_account(
    execution: dict[str, Any], config: dict[str, Any], expected: str | None
) -> None:
    job = build(config=ray_config(**config), execution=execution)
    specs = [
        head(job)["template"]["spec"],
        workers(job)[0]["template"]["spec"],
        job["spec"]["submitterPodTemplate"]["spec"],
    ]
    for spec in specs:
        assert spec.get("serviceAccountName") == expected


# -- head and workers ---------------------------------------------------------------------


def test_the_head_is_the_tasks_pod_with_the_primary_container_renamed_and_args_cleared() -> None:
    job = build(labels={"team": "ml"}, annotations={"note": "x"})
    spec = head(job)
    assert spec["serviceType"] == "NodePort"
    assert spec["enableIngress"] is False
    template = spec["template"]
    [container] = template["spec"]["containers"]
    assert container["name"] == "ray-head"
    assert container["image"] == IMAGE
    assert "args" not in container
    assert "command" not in container
    assert container["env"][-3:] == [
        {"name": "MY_POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "RAY_COLOR_PREFIX", "value": "0"},
        {"name": "RAY_DATA_DISABLE_PROGRESS_BARS", "value": "1"},
    ]
    assert {"name": "FOO", "value": "bar"} in container["env"]
    assert container["ports"] == [
        {"name": "redis", "containerPort": 6379},
        {"name": "head", "containerPort": 10001},
        {"name": "dashboard", "containerPort": 8265},
    ]
    assert container["resources"] == {
        "requests": {"cpu": "500m", "memory": "1Gi"},
        "limits": {"cpu": "500m", "memory": "1Gi"},
    }
    assert template["metadata"]["labels"]["team"] == "ml"
    assert template["metadata"]["annotations"]["note"] == "x"
    # plugins.k8s default annotations are in the pod templates (Flyte's default keeps pods un-evicted).
    assert template["metadata"]["annotations"]["cluster-autoscaler.kubernetes.io/safe-to-evict"] == "false"


def test_workers_get_kuberays_environment_a_prestop_hook_and_their_group() -> None:
    job = build(ray_custom(groups=[group("small", 1), group("big", 3)]))
    assert [(w["groupName"], w["replicas"]) for w in workers(job)] == [("small", 1), ("big", 3)]
    [container] = workers(job)[1]["template"]["spec"]["containers"]
    assert container["name"] == "ray-worker"
    assert "args" not in container
    assert env_names(container)[-10:] == [
        "RAY_DISABLE_DOCKER_CPU_WARNING",
        "TYPE",
        "CPU_REQUEST",
        "CPU_LIMITS",
        "MEMORY_REQUESTS",
        "MEMORY_LIMITS",
        "MY_POD_NAME",
        "MY_POD_IP",
        "RAY_COLOR_PREFIX",
        "RAY_DATA_DISABLE_PROGRESS_BARS",
    ]
    assert "FOO" in env_names(container)
    by_name = {e["name"]: e for e in container["env"]}
    assert by_name["CPU_REQUEST"]["valueFrom"] == {
        "resourceFieldRef": {"containerName": "ray-worker", "resource": "requests.cpu"}
    }
    assert by_name["CPU_LIMITS"]["valueFrom"]["resourceFieldRef"]["resource"] == "limits.cpu"
    # Deviation from Flyte (quirk Q8): the memory variables read memory.
    assert by_name["MEMORY_REQUESTS"]["valueFrom"]["resourceFieldRef"]["resource"] == "requests.memory"
    assert by_name["MEMORY_LIMITS"]["valueFrom"]["resourceFieldRef"]["resource"] == "limits.memory"
    assert by_name["MY_POD_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert container["lifecycle"] == {"preStop": {"exec": {"command": ["/bin/sh", "-c", "ray stop"]}}}
    assert [p["containerPort"] for p in container["ports"]] == [6379, 10001, 8265]


@pytest.mark.parametrize(
    ("replicas", "low", "high", "expected"),
    [(2, 2, 2, (2, 2)), (3, 5, 1, (3, 3)), (2, 1, 4, (1, 4)), (0, 0, 0, (0, 0)), (4, 0, 0, (0, 4))],
)
def test_min_and_max_replicas_always_bracket_replicas(
    replicas: int, low: int, high: int, expected: tuple[int, int]
) -> None:
    custom = ray_custom(groups=[group(replicas=replicas, minReplicas=low, maxReplicas=high)])
    spec = workers(build(custom))[0]
    assert (spec["minReplicas"], spec["maxReplicas"]) == expected
    assert spec["replicas"] == replicas


def test_node_pod_specs_are_merged_over_the_pod_by_container_name() -> None:
    head_pod = {
        "podSpec": {
            "containers": [
                {
                    "name": "ray-head",
                    "resources": {"limits": {"cpu": "2", "memory": "4Gi"}, "requests": {"cpu": "2"}},
                },
                {"name": "unmatched", "image": "dropped"},
            ],
            "nodeSelector": {"pool": "head"},
        },
        "metadata": {"labels": {"role": "head"}, "annotations": {"a": "head"}},
        "primaryContainerName": "ignored",
    }
    worker_pod = {
        "podSpec": {"containers": [{"name": "ray-worker", "resources": {"limits": {"cpu": "4"}}}]},
        "metadata": {"labels": {"role": "worker"}},
    }
    job = build(ray_custom(head={"k8sPod": head_pod}, groups=[group(k8sPod=worker_pod)]))
    head_template = head(job)["template"]
    assert [c["name"] for c in head_template["spec"]["containers"]] == ["ray-head"]
    assert head_template["spec"]["containers"][0]["resources"] == {
        "limits": {"cpu": "2", "memory": "4Gi"},
        "requests": {"cpu": "2", "memory": "1Gi"},
    }
    assert head_template["spec"]["nodeSelector"] == {"pool": "head"}
    assert head_template["metadata"]["labels"]["role"] == "head"
    assert head_template["metadata"]["annotations"]["a"] == "head"
    worker_template = workers(job)[0]["template"]
    assert worker_template["spec"]["containers"][0]["resources"]["limits"]["cpu"] == "4"
    assert worker_template["metadata"]["labels"]["role"] == "worker"
    assert "nodeSelector" not in worker_template["spec"]
    # The submitter is the task's own pod: no node overlay.
    submitter = job["spec"]["submitterPodTemplate"]
    assert "role" not in submitter["metadata"]["labels"]
    assert submitter["spec"]["containers"][0]["resources"]["limits"]["cpu"] == "500m"


def test_a_node_pod_spec_that_is_not_a_pod_spec_is_a_bad_task() -> None:
    custom = ray_custom(head={"k8sPod": {"podSpec": {"containers": "not a list"}}})
    with pytest.raises(BadTaskSpecification, match="Unable to unmarshal pod spec"):
        build(custom)


def test_extended_resource_tolerations_follow_each_nodes_own_requests() -> None:
    head_pod = {
        "podSpec": {
            "containers": [{"name": "ray-head", "resources": {"requests": {"example.com/fpga": "1"}}}]
        }
    }
    pod = platform(**{"add-tolerations-for-extended-resources": ["example.com/fpga"]})
    job = build(ray_custom(head={"k8sPod": head_pod}, groups=[group()]), pod=pod)
    assert head(job)["template"]["spec"]["tolerations"] == [
        {"key": "example.com/fpga", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert "tolerations" not in workers(job)[0]["template"]["spec"]


def test_an_interruptible_task_makes_every_ray_pod_interruptible() -> None:
    # Quirk Q8, as Flyte: the head too (unlike the Spark driver or the Dask scheduler).
    pod = platform(**{"interruptible-tolerations": [{"key": "spot", "operator": "Exists"}]})
    job = build(pod=pod, interruptible=True)
    for spec in (
        head(job)["template"]["spec"],
        workers(job)[0]["template"]["spec"],
        job["spec"]["submitterPodTemplate"]["spec"],
    ):
        assert spec["tolerations"] == [{"key": "spot", "operator": "Exists"}]


# -- logs sidecar --------------------------------------------------------------------------------

SIDECAR = {
    "name": "logs",
    "image": "fluent-bit",
    "volumeMounts": [
        {"name": "elsewhere", "mountPath": "/tmp/ray"},
        {"name": "cfg", "mountPath": "/etc/cfg"},
    ],
}


def test_the_logs_sidecar_reads_a_new_ray_state_volume_of_the_head() -> None:
    job = build(config=ray_config(logsSidecar=SIDECAR))
    spec = head(job)["template"]["spec"]
    assert spec["volumes"] == [{"name": "system-ray-state", "emptyDir": {}}]
    ray_head, sidecar = spec["containers"]
    assert ray_head["volumeMounts"] == [{"name": "system-ray-state", "mountPath": "/tmp/ray"}]
    assert sidecar["name"] == "logs"
    assert sidecar["volumeMounts"] == [
        {"name": "system-ray-state", "mountPath": "/tmp/ray", "readOnly": True},
        {"name": "cfg", "mountPath": "/etc/cfg"},
    ]
    # Workers have none.
    assert [c["name"] for c in workers(job)[0]["template"]["spec"]["containers"]] == ["ray-worker"]


def test_the_logs_sidecar_reuses_a_mount_the_head_already_has_at_tmp_ray() -> None:
    template = {
        "id": {"resourceType": "TASK", "project": "p", "domain": "d", "name": "t", "version": "v1"},
        "type": "ray",
        "k8sPod": {
            "podSpec": {
                "containers": [
                    {
                        "name": "main",
                        "image": IMAGE,
                        "args": ["run"],
                        "volumeMounts": [{"name": "mine", "mountPath": "/tmp/ray"}],
                    }
                ],
                "volumes": [{"name": "mine", "emptyDir": {}}],
            }
        },
        "config": {"primary_container_name": "main"},
        "custom": ray_custom(),
    }
    job = build(template=template, config=ray_config(logsSidecar={"name": "logs", "image": "fluent-bit"}))
    spec = head(job)["template"]["spec"]
    assert spec["volumes"] == [{"name": "mine", "emptyDir": {}}]
    assert spec["containers"][1]["volumeMounts"] == [
        {"name": "mine", "mountPath": "/tmp/ray", "readOnly": True}
    ]


# -- autoscaling ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (None, None),
        ({}, {"resources": {}}),
        (
            {
                "upscalingMode": "UPSCALING_MODE_AGGRESSIVE",
                "idleTimeoutSeconds": 60,
                "image": "ray-autoscaler:v1",
                "env": [{"key": "A", "value": "1"}, {"key": "B", "value": "2"}],
                "resources": {
                    "limits": [{"name": "CPU", "value": "1"}],
                    "requests": [{"name": "MEMORY", "value": "1Gi"}],
                },
            },
            {
                "idleTimeoutSeconds": 60,
                "upscalingMode": "Aggressive",
                "image": "ray-autoscaler:v1",
                "resources": {"limits": {"cpu": "1"}, "requests": {"memory": "1Gi"}},
                "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
            },
        ),
        ({"upscalingMode": "UPSCALING_MODE_DEFAULT"}, {"upscalingMode": "Default", "resources": {}}),
        (
            {"upscalingMode": "UPSCALING_MODE_CONSERVATIVE", "idleTimeoutSeconds": 0},
            {"upscalingMode": "Conservative", "resources": {}},
        ),
        ({"upscalingMode": "UPSCALING_MODE_UNSPECIFIED", "idleTimeoutSeconds": -5}, {"resources": {}}),
        # Resources that do not convert are left out.
        ({"resources": {"limits": [{"name": "CPU", "value": "lots"}]}, "image": "i"}, {"image": "i"}),
    ],
)
def test_autoscaler_options(options: dict[str, Any] | None, expected: dict[str, Any] | None) -> None:
    extra: dict[str, Any] = {"enableAutoscaling": True}
    if options is not None:
        extra["autoscalerOptions"] = options
    cluster = build(ray_custom(**extra))["spec"]["rayClusterSpec"]
    assert cluster["enableInTreeAutoscaling"] is True
    assert cluster.get("autoscalerOptions") == expected


def test_in_tree_autoscaling_is_always_written() -> None:
    assert build(ray_custom())["spec"]["rayClusterSpec"]["enableInTreeAutoscaling"] is False


# -- shutdown and TTL ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("task", "config", "expected"),
    [
        ({"shutdownAfterJobFinishes": True, "ttlSecondsAfterFinished": 60}, {}, (True, 60)),
        ({"shutdownAfterJobFinishes": True}, {}, (True, 0)),
        # The task's TTL counts only when the task asks for the shutdown itself.
        ({"ttlSecondsAfterFinished": 60}, {}, (True, 3600)),
        ({}, {"ttlSecondsAfterFinished": 100}, (True, 100)),
        (
            {"shutdownAfterJobFinishes": True, "ttlSecondsAfterFinished": 5},
            {"shutdownAfterJobFinishes": False},
            (True, 5),
        ),
        # Deviation (quirk Q11): a kept cluster gets no TTL, which KubeRay would reject.
        ({}, {"shutdownAfterJobFinishes": False}, (False, 0)),
        (
            {"ttlSecondsAfterFinished": 60},
            {"shutdownAfterJobFinishes": False, "ttlSecondsAfterFinished": 10},
            (False, 0),
        ),
    ],
)
def test_shutdown_and_ttl(task: dict[str, Any], config: dict[str, Any], expected: tuple[bool, int]) -> None:
    spec = build(ray_custom(**task), config=ray_config(**config))["spec"]
    # Go leaves false and 0 out (omitempty).
    assert (spec.get("shutdownAfterJobFinishes", False), spec.get("ttlSecondsAfterFinished", 0)) == expected
    assert spec.get("shutdownAfterJobFinishes") is not False
    assert spec.get("ttlSecondsAfterFinished") != 0


# -- runtime env ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("custom", "expected"),
    [
        ({"runtimeEnvYaml": "pip:\n- numpy\n"}, "pip:\n- numpy\n"),
        ({"runtimeEnv": "eyJwaXAiOiBbIm51bXB5Il19"}, "pip:\n- numpy\n"),  # base64 of {"pip": ["numpy"]}
        (
            {"runtimeEnvYaml": "working_dir: s3://x\n", "runtimeEnv": "eyJwaXAiOiBbIm51bXB5Il19"},
            "working_dir: s3://x\n",
        ),
        (
            # {"pip": ["b", "a"], "env_vars": {"Z": "zed", "A": "ay"}}: keys sorted, block style.
            {"runtimeEnv": "eyJwaXAiOiBbImIiLCAiYSJdLCAiZW52X3ZhcnMiOiB7IloiOiAiemVkIiwgIkEiOiAiYXkifX0="},
            "env_vars:\n  A: ay\n  Z: zed\npip:\n- b\n- a\n",
        ),
        ({}, None),
    ],
)
def test_runtime_env_yaml(custom: dict[str, Any], expected: str | None) -> None:
    assert build(ray_custom(**custom))["spec"].get("runtimeEnvYAML") == expected


@pytest.mark.parametrize("runtime_env", ["not base64!", "bm90IGpzb24=", "WzEsIDJd"])  # -, "not json", [1, 2]
def test_a_runtime_env_that_is_not_base64_json_fails_the_build(runtime_env: str) -> None:
    with pytest.raises(BadTaskSpecification, match="runtime_env is not base64-encoded JSON"):
        build(ray_custom(runtimeEnv=runtime_env))


# -- entrypoint and submitter --------------------------------------------------------------------


def test_the_entrypoint_is_the_rendered_args_joined_with_empty_ones_quoted() -> None:
    args = ["pyflyte-map-execute", "--inputs", "{{.input}}", "--", "vars", "", "resolver", "x"]
    job = build(template=ray_template(ray_custom(), args=args, command=["ignored", "command"]))
    assert job["spec"]["entrypoint"] == (
        "pyflyte-map-execute --inputs s3://taskplug-testing/data/metadata/testproject/development/exec1/n0/inputs.pb"
        " -- vars '' resolver x"
    )


def test_the_submitter_is_the_unmodified_task_pod() -> None:
    args = ["run", ""]
    job = build(template=ray_template(ray_custom(), args=args), labels={"team": "ml"})
    template = job["spec"]["submitterPodTemplate"]
    [container] = template["spec"]["containers"]
    assert container["name"] == "exec1-n0-0"  # the pod plugin's name for the primary container
    assert container["args"] == ["run", ""]
    assert container["resources"] == {
        "requests": {"cpu": "500m", "memory": "1Gi"},
        "limits": {"cpu": "500m", "memory": "1Gi"},
    }
    assert "MY_POD_IP" not in env_names(container)
    assert "ports" not in container
    assert template["metadata"]["labels"]["team"] == "ml"
    assert job["spec"]["entrypoint"] == "run ''"


def test_the_ray_job_carries_the_pods_metadata_and_config_service_settings() -> None:
    template = {
        "id": {"resourceType": "TASK", "project": "p", "domain": "d", "name": "t", "version": "v1"},
        "type": "ray",
        "k8sPod": {
            "podSpec": {"containers": [{"name": "main", "image": IMAGE, "args": ["run"]}]},
            "metadata": {"labels": {"from-pod": "yes"}, "annotations": {"pod-note": "1"}},
        },
        "config": {"primary_container_name": "main"},
        "custom": ray_custom(),
    }
    job = build(template=template, config=ray_config(serviceType="ClusterIP", enableIngress=True))
    assert (job["apiVersion"], job["kind"]) == ("ray.io/v1", "RayJob")
    assert job["metadata"] == {"annotations": {"pod-note": "1"}, "labels": {"from-pod": "yes"}}
    assert (head(job)["serviceType"], head(job)["enableIngress"]) == ("ClusterIP", True)
    assert job["spec"]["entrypoint"] == "run"
    assert "workerGroupSpecs" not in job["spec"]["rayClusterSpec"]
