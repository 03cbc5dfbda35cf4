"""A task's own pod spec is checked for the Go types of the fields the builder and the kubelet read, on
every path that brings one (sidecar v0 and v1 ``custom``, a ``k8sPod`` target, a pod template override):
a wrong type is Flyte's BadTaskSpecification (``pod_spec_from_struct`` fails to unmarshal into
``v1.PodSpec``) naming the field, never a string turned into a list of characters."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest
from flyteidl.core import tasks_pb2
from google.protobuf import json_format, struct_pb2

from taskplug.core import BadTaskSpecification
from taskplug.k8s import PlatformPodConfig, pod_spec_from_struct
from taskplug.k8s._config import K8sPluginConfig
from taskplug.k8s._pod_template import PodTemplateStore
from taskplug.plugins.pod._plugin import PodPlugin
from taskplug.testing import fake_task_context

PRIMARY_KEY = "primary_container_name"
Spec = dict[str, Any]


def struct(value: Mapping[str, Any]) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    json_format.ParseDict(value, out)
    return out


def build(template: tasks_pb2.TaskTemplate) -> dict[str, Any]:
    plugin = PodPlugin(PlatformPodConfig(K8sPluginConfig(), PodTemplateStore(), {}))
    context = fake_task_context(template, namespace="ns", execution={"id": {"name": "exec1", "nodeId": "n0"}})
    return plugin.build_resource(context)


def sidecar_v0(custom: Mapping[str, Any]) -> tasks_pb2.TaskTemplate:
    return tasks_pb2.TaskTemplate(type="sidecar", task_type_version=0, custom=struct(custom))


def _v0(spec: Spec) -> tasks_pb2.TaskTemplate:
    return sidecar_v0({"podSpec": spec, "primaryContainerName": "main"})


def _v1(spec: Spec) -> tasks_pb2.TaskTemplate:
    return tasks_pb2.TaskTemplate(
        type="sidecar", task_type_version=1, custom=struct(spec), config={PRIMARY_KEY: "main"}
    )


def _k8s_pod(spec: Spec) -> tasks_pb2.TaskTemplate:
    return tasks_pb2.TaskTemplate(
        type="python-task",
        k8s_pod=tasks_pb2.K8sPod(pod_spec=struct(spec)),
        config={PRIMARY_KEY: "main"},
    )


PATHS: dict[str, tuple[Callable[[Spec], tasks_pb2.TaskTemplate], str]] = {
    "sidecar-v0": (_v0, "podSpec."),
    "sidecar-v1": (_v1, ""),
    "k8s-pod": (_k8s_pod, ""),
}


def main(**fields: Any) -> Spec:
    return {"containers": [{"name": "main", "image": "main:1", **fields}]}


BAD: list[Any] = [
    pytest.param(
        {"containers": [{"name": 7, "image": "x"}, {"name": "main"}]},
        "containers[0].name: must be a string, got an integer 7",
        id="name-int",
    ),
    pytest.param(
        main(command="echo hi"), "containers[0].command: must be a list, got a string", id="command-str"
    ),
    pytest.param(main(args="a b"), "containers[0].args: must be a list, got a string", id="args-str"),
    pytest.param(
        main(args=["ok", 3]), "containers[0].args[1]: must be a string, got an integer 3", id="args-int"
    ),
    pytest.param(main(env="A=1"), "containers[0].env: must be a list, got a string", id="env-str"),
    pytest.param(main(env=["A=1"]), "containers[0].env[0]: must be a mapping", id="env-item-str"),
    pytest.param(main(env=[{"value": "1"}]), "containers[0].env[0].name: required", id="env-no-name"),
    pytest.param(
        main(env=[{"name": "A", "value": 1}]),
        "containers[0].env[0].value: must be a string, got an integer 1",
        id="env-value-int",
    ),
    pytest.param(
        main(resources={"requests": {"memory": "-1"}}),
        "containers[0].resources.requests.memory: must be greater than or equal to 0",
        id="negative-memory",
    ),
    pytest.param(
        main(resources={"limits": {"cpu": "lots"}}), "containers[0].resources.limits.cpu: ", id="bad-quantity"
    ),
    pytest.param(main(resources="big"), "containers[0].resources: must be a mapping", id="resources-str"),
    pytest.param(
        main(ports=[{"containerPort": 8080.5}]),
        "containers[0].ports[0].containerPort: must be an integer",
        id="port-fraction",
    ),
    pytest.param(
        main(ports=[{"containerPort": 2**40}]),
        "containers[0].ports[0].containerPort: must be a 32-bit integer",
        id="port-out-of-range",
    ),
    pytest.param(
        {**main(), "initContainers": [{"name": "init", "command": "true"}]},
        "initContainers[0].command: must be a list, got a string",
        id="init-command-str",
    ),
    pytest.param(
        {**main(), "nodeSelector": ["a"]}, "nodeSelector: must be a mapping", id="node-selector-list"
    ),
    pytest.param(
        {**main(), "nodeSelector": {"disk": 1}},
        "nodeSelector.disk: must be a string, got an integer 1",
        id="node-selector-int",
    ),
    pytest.param({**main(), "volumes": "scratch"}, "volumes: must be a list, got a string", id="volumes-str"),
    pytest.param(
        {**main(), "volumes": [{"name": "v", "emptyDir": {"sizeLimit": "-1Gi"}}]},
        "volumes[0].emptyDir.sizeLimit: must be greater than or equal to 0",
        id="volume-negative-size",
    ),
    pytest.param(
        {**main(), "tolerations": [{"key": "k", "tolerationSeconds": "60"}]},
        "tolerations[0].tolerationSeconds: must be an integer",
        id="toleration-seconds-str",
    ),
    pytest.param({"containers": "main"}, "containers: must be a list, got a string", id="containers-str"),
]


@pytest.mark.parametrize("route", list(PATHS))
@pytest.mark.parametrize(("spec", "field"), BAD)
def test_a_wrong_type_in_the_task_pod_spec_is_a_bad_task_specification_naming_the_field(
    route: str, spec: Spec, field: str
) -> None:
    make, prefix = PATHS[route]
    with pytest.raises(BadTaskSpecification) as info:
        build(make(spec))
    assert "Unable to unmarshal" in info.value.message
    assert f"[{prefix}{field}" in info.value.message


@pytest.mark.parametrize(("spec", "field"), BAD)
def test_a_pod_template_override_is_checked_the_same_way(spec: Spec, field: str) -> None:
    # The override is refused when the spec is loaded (executor/_spec.py, naming the spec's field); the plugin
    # checks it again, for a context built some other way.
    with pytest.raises(BadTaskSpecification) as info:
        pod_spec_from_struct(struct(spec), "pod template override")
    assert f"[{field}" in info.value.message


@pytest.mark.parametrize("route", list(PATHS))
def test_a_well_typed_pod_spec_builds_with_whole_numbers_as_integers(route: str) -> None:
    make, _ = PATHS[route]
    spec = main(
        command=["sh", "-c"],
        args=["echo hi"],
        env=[{"name": "A", "value": "1"}],
        ports=[{"containerPort": 8080}],
        resources={"requests": {"cpu": 0.5, "memory": "1Gi"}},
    )
    spec["nodeSelector"] = {"disk": "ssd"}
    spec["volumes"] = [{"name": "v", "emptyDir": {}}]
    pod = build(make(spec))
    container = pod["spec"]["containers"][0]
    assert container["command"] == ["sh", "-c"]
    assert container["args"] == ["echo hi"]
    assert {"name": "A", "value": "1"} in container["env"]
    # A Struct holds 8080 as a double; Flyte's protojson writes it as 8080, which an int32 field accepts.
    port = container["ports"][0]["containerPort"]
    assert port == 8080 and type(port) is int
    assert container["resources"]["requests"]["cpu"] == "500m"
    assert pod["spec"]["nodeSelector"]["disk"] == "ssd"


def test_null_fields_read_as_go_reads_them() -> None:
    spec = {"containers": [{"name": "main", "image": "i", "command": None, "env": None}], "volumes": None}
    pod = build(_k8s_pod(spec))
    assert pod["spec"]["containers"][0]["name"] == "main"


@pytest.mark.parametrize(
    ("custom", "field"),
    [
        pytest.param(
            {"podSpec": main(), "primaryContainerName": ["main"]}, "primaryContainerName", id="primary-list"
        ),
        pytest.param(
            {"podSpec": main(), "primaryContainerName": "main", "labels": {"a": 1}}, "labels", id="label-int"
        ),
        pytest.param(
            {"podSpec": main(), "primaryContainerName": "main", "annotations": ["a"]},
            "annotations",
            id="annotations-list",
        ),
        pytest.param({"PodSpec": ["x"], "primaryContainerName": "main"}, "PodSpec", id="spec-list"),
    ],
)
def test_sidecar_v0_job_fields_have_their_types(custom: Mapping[str, Any], field: str) -> None:
    with pytest.raises(BadTaskSpecification) as info:
        build(sidecar_v0(custom))
    assert f"Err: [{field}: must be" in info.value.message
