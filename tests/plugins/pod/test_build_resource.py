"""The pod plugin's BuildResource: sidecar v0 / v1 / k8s_pod targets, the primary container annotation and
the service account (Flyte's plugins/k8s/pod/plugin.go)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from flyteidl.core import tasks_pb2
from google.protobuf import json_format, struct_pb2

from taskplug.core import BadTaskSpecification, StaticInputReader, StaticTaskExecutionContext
from taskplug.k8s._config import K8sPluginConfig
from taskplug.k8s._plugin import K8sPluginProperties
from taskplug.k8s._pod_builder import PlatformPodConfig
from taskplug.k8s._pod_template import PodTemplateStore
from taskplug.plugins.pod._plugin import PodPlugin, plugin_entries
from taskplug.testing import fake_task_context

EXECUTION: dict[str, Any] = {"id": {"project": "p", "domain": "d", "name": "exec1", "nodeId": "n0"}}
GENERATED_NAME = "exec1-n0-0"
PRIMARY_KEY = "primary_container_name"


def struct(value: Mapping[str, Any]) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    json_format.ParseDict(value, out)
    return out


def two_containers() -> dict[str, Any]:
    return {"containers": [{"name": "main", "image": "main:1"}, {"name": "side", "image": "side:1"}]}


def one_container() -> dict[str, Any]:
    return {"containers": [{"name": "main", "image": "main:1"}]}


def container_task(task_type: str = "container") -> tasks_pb2.TaskTemplate:
    return tasks_pb2.TaskTemplate(
        type=task_type,
        container=tasks_pb2.Container(image="img:1", args=["run", "{{.Input}}"]),
    )


def k8s_pod_task(
    spec: Mapping[str, Any],
    *,
    task_type: str = "python-task",
    version: int = 0,
    config: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
) -> tasks_pb2.TaskTemplate:
    pod = tasks_pb2.K8sPod(pod_spec=struct(spec))
    pod.metadata.labels.update(labels or {})
    return tasks_pb2.TaskTemplate(
        type=task_type,
        task_type_version=version,
        k8s_pod=pod,
        config=dict(config if config is not None else {PRIMARY_KEY: "main"}),
    )


def sidecar_v0(custom: Mapping[str, Any]) -> tasks_pb2.TaskTemplate:
    return tasks_pb2.TaskTemplate(type="sidecar", task_type_version=0, custom=struct(custom))


def sidecar_v1(
    spec: Mapping[str, Any], config: Mapping[str, str], labels: Mapping[str, str] | None = None
) -> tasks_pb2.TaskTemplate:
    template = tasks_pb2.TaskTemplate(
        type="sidecar", task_type_version=1, custom=struct(spec), config=dict(config)
    )
    if labels is not None:
        template.k8s_pod.metadata.labels.update(labels)
    return template


def context(
    template: tasks_pb2.TaskTemplate,
    *,
    service_account: str = "",
    security_service_account: str = "",
) -> StaticTaskExecutionContext:
    """The executor's context for ``template``: execution p/d/exec1, node n0 (generated name ``exec1-n0-0``),
    namespace ``ns``, data under ``s3://b``, run by the given service accounts."""
    return fake_task_context(
        template,
        namespace="ns",
        execution={
            **EXECUTION,
            "serviceAccount": service_account,
            "securityContext": {"runAs": {"k8sServiceAccount": security_service_account}},
        },
        data_root="s3://b",
    )


def plugin(**k8s: Any) -> PodPlugin:
    config = K8sPluginConfig.model_validate({k.replace("_", "-"): v for k, v in k8s.items()})
    return PodPlugin(PlatformPodConfig(config, PodTemplateStore(), {}))


def build(template: tasks_pb2.TaskTemplate, plug: PodPlugin | None = None, **meta: Any) -> dict[str, Any]:
    return (plug or plugin()).build_resource(context(template, **meta))


def raises_bad_spec(message: str, *, prefix: bool = False) -> Any:
    text = re.escape(f"[BadTaskSpecification] {message}")
    return pytest.raises(BadTaskSpecification, match="^" + text + ("" if prefix else "$"))


def names(containers: Sequence[Mapping[str, Any]]) -> list[str]:
    return [c["name"] for c in containers]


# -- sidecar, task type version 0 -------------------------------------------------------------------------


@pytest.mark.parametrize("spec_key", ["podSpec", "PodSpec", "podspec"])
def test_sidecar_v0_decodes_the_sidecar_job(spec_key: str) -> None:
    custom = {
        spec_key: two_containers(),
        "primaryContainerName": "main",
        "annotations": {"a": "1"},
        "labels": {"l": "2"},
    }
    pod = build(sidecar_v0(custom))
    assert pod["kind"] == "pod"
    assert pod["apiVersion"] == "v1"
    assert pod["metadata"] == {"annotations": {"a": "1", PRIMARY_KEY: "main"}, "labels": {"l": "2"}}
    assert names(pod["spec"]["containers"]) == ["main", "side"]
    assert pod["spec"]["restartPolicy"] == "Never"


def test_sidecar_v0_primary_container_gets_merge_mode_and_the_sidecar_explicit_zeros() -> None:
    pod = build(sidecar_v0({"podSpec": two_containers(), "primaryContainerName": "main"}))
    main, side = pod["spec"]["containers"]
    assert main["resources"]["requests"] == {"cpu": "1", "memory": "1Gi"}
    assert side["resources"]["requests"] == {"cpu": "0", "memory": "0"}


def test_sidecar_v0_without_pod_spec_is_a_bad_task_specification() -> None:
    with raises_bad_spec("invalid TaskSpecification, nil PodSpec [", prefix=True):
        build(sidecar_v0({"primaryContainerName": "main"}))


def test_sidecar_v0_with_a_malformed_pod_spec_is_a_bad_task_specification() -> None:
    with raises_bad_spec("invalid TaskSpecification [", prefix=True):
        build(sidecar_v0({"podSpec": "not a pod spec", "primaryContainerName": "main"}))


def test_sidecar_v0_primary_must_be_one_of_the_containers() -> None:
    with raises_bad_spec("invalid TaskSpecification, primary container [] not defined"):
        build(sidecar_v0({"podSpec": two_containers()}))


# -- sidecar, task type version 1 -------------------------------------------------------------------------


def test_sidecar_v1_custom_is_the_pod_spec_and_metadata_comes_from_the_k8s_pod() -> None:
    pod = build(sidecar_v1(two_containers(), {PRIMARY_KEY: "side"}, labels={"l": "1"}))
    assert names(pod["spec"]["containers"]) == ["main", "side"]
    assert pod["metadata"] == {"annotations": {PRIMARY_KEY: "side"}, "labels": {"l": "1"}}
    assert pod["spec"]["containers"][1]["resources"]["requests"] == {"cpu": "1", "memory": "1Gi"}


def test_sidecar_v1_without_k8s_pod_has_empty_metadata() -> None:
    pod = build(sidecar_v1(two_containers(), {PRIMARY_KEY: "main"}))
    assert pod["metadata"] == {"annotations": {PRIMARY_KEY: "main"}, "labels": {}}


@pytest.mark.parametrize(
    ("config", "message"),
    [
        pytest.param(
            {},
            "invalid TaskSpecification, config needs to be non-empty and include missing [primary_container_name] key",
            id="empty-config",
        ),
        pytest.param(
            {"foo": "bar"},
            "invalid TaskSpecification, config missing [primary_container_name] key in [map[foo:bar]]",
            id="missing-key",
        ),
    ],
)
def test_sidecar_v1_needs_the_primary_container_name_in_the_config(
    config: dict[str, str], message: str
) -> None:
    with raises_bad_spec(message):
        build(sidecar_v1(two_containers(), config))


# -- k8s_pod targets (sidecar v2, python-task with a pod template) ---------------------------------------------


def test_sidecar_v2_goes_through_build_raw_pod() -> None:
    pod = build(k8s_pod_task(two_containers(), task_type="sidecar", version=2, labels={"l": "1"}))
    assert names(pod["spec"]["containers"]) == ["main", "side"]
    assert pod["metadata"] == {"annotations": {PRIMARY_KEY: "main"}, "labels": {"l": "1"}}


@pytest.mark.parametrize(
    ("template", "message"),
    [
        pytest.param(
            tasks_pb2.TaskTemplate(
                type="sidecar", task_type_version=2, k8s_pod=tasks_pb2.K8sPod(), config={PRIMARY_KEY: "m"}
            ),
            "Pod tasks with task type version > 1 should specify their target as a K8sPod with a defined pod spec",
            id="no-pod-spec",
        ),
        pytest.param(
            k8s_pod_task(two_containers(), task_type="sidecar", version=2, config={"foo": "bar"}),
            "invalid TaskSpecification, config missing [primary_container_name] key in [map[foo:bar]]",
            id="no-primary-key",
        ),
        pytest.param(
            tasks_pb2.TaskTemplate(type="python-task"),
            "invalid TaskSpecification, unable to determine Pod configuration",
            id="no-target",
        ),
        pytest.param(
            k8s_pod_task(two_containers(), config={PRIMARY_KEY: "absent"}),
            "invalid TaskSpecification, primary container [absent] not defined",
            id="primary-not-in-pod",
        ),
    ],
)
def test_k8s_pod_target_errors(template: tasks_pb2.TaskTemplate, message: str) -> None:
    with raises_bad_spec(message):
        build(template)


# -- the primary container annotation ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("template", "annotated"),
    [
        pytest.param(container_task("container"), True, id="container"),
        pytest.param(container_task("python-task"), True, id="python-task"),
        pytest.param(container_task("raw-container"), False, id="raw-container"),
        pytest.param(k8s_pod_task(one_container()), True, id="single-container-pod"),
        pytest.param(k8s_pod_task(two_containers()), False, id="several-containers-not-sidecar"),
        pytest.param(
            k8s_pod_task(two_containers(), task_type="sidecar", version=2), True, id="sidecar-several"
        ),
        pytest.param(k8s_pod_task(one_container(), task_type="raw-container"), False, id="raw-container-pod"),
    ],
)
def test_primary_annotation_for_sidecars_or_exactly_one_non_raw_container(
    template: tasks_pb2.TaskTemplate, annotated: bool
) -> None:
    pod = build(template)
    assert (PRIMARY_KEY in pod["metadata"]["annotations"]) is annotated


def test_container_task_is_annotated_with_its_generated_container_name() -> None:
    tctx = context(container_task())
    # The executor puts inputs under s3://b/metadata/p/d/exec1/n0; this test pins a shorter prefix.
    tctx.input_reader = StaticInputReader(tctx.input_reader.get(), "s3://b/in")
    pod = plugin().build_resource(tctx)
    assert pod["metadata"]["annotations"] == {PRIMARY_KEY: GENERATED_NAME}
    container = pod["spec"]["containers"][0]
    assert container["args"] == ["run", "s3://b/in/inputs.pb"]


# -- service account ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("own", "k8s_account", "security_account", "expected"),
    [
        pytest.param("mine", "ksa", "sc", "mine", id="pod-own"),
        pytest.param(None, "ksa", "sc", "ksa", id="execution-account-first-via-update-pod"),
        pytest.param(None, "", "sc", "sc", id="security-context-account-fallback"),
        pytest.param(None, "", "", None, id="none"),
    ],
)
def test_service_account(
    own: str | None, k8s_account: str, security_account: str, expected: str | None
) -> None:
    spec = two_containers()
    if own:
        spec["serviceAccountName"] = own
    pod = build(
        k8s_pod_task(spec, task_type="sidecar", version=2),
        service_account=k8s_account,
        security_service_account=security_account,
    )
    assert pod["spec"].get("serviceAccountName") == expected


# -- the rest of BuildResource --------------------------------------------------------------------------------


def test_build_resource_does_not_add_extended_resource_tolerations() -> None:
    spec = {
        "containers": [{"name": "main", "image": "m", "resources": {"requests": {"nvidia.com/gpu": "1"}}}]
    }
    pod = build(k8s_pod_task(spec), plugin(add_tolerations_for_extended_resources=["nvidia.com/gpu"]))
    assert "tolerations" not in pod["spec"]


def test_build_resource_applies_platform_configuration() -> None:
    plug = plugin(
        default_node_selector={"pool": "default"},
        scheduler_name="flyte-scheduler",
        default_env_vars={"DEFAULT": "1"},
    )
    pod = build(container_task(), plug)
    assert pod["spec"]["nodeSelector"] == {"pool": "default"}
    assert pod["spec"]["schedulerName"] == "flyte-scheduler"
    assert pod["spec"]["containers"][0]["env"][-1] == {"name": "DEFAULT", "value": "1"}


def test_identity_resource_and_properties() -> None:
    plug = plugin()
    meta = context(container_task()).metadata
    assert plug.build_identity_resource(meta) == {"kind": "pod", "apiVersion": "v1"}
    assert plug.get_properties() == K8sPluginProperties()


def test_plugin_entries_register_container_sidecar_and_pod() -> None:
    entries = {e.id: e for e in plugin_entries()}
    assert set(entries) == {"container", "sidecar", "pod"}
    # ``python``: Flyte 2's plain task, on the same plugin with no extra config (as Flyte 2 registers it).
    assert entries["container"].registered_task_types == (
        "container",
        "python-task",
        "python",
        "raw-container",
    )
    assert entries["container"].is_default
    assert entries["sidecar"].registered_task_types == ("sidecar",)
    assert not entries["sidecar"].is_default
    assert set(entries["pod"].registered_task_types) == {
        "container",
        "python-task",
        "python",
        "raw-container",
        "sidecar",
    }
    assert entries["pod"].is_default
