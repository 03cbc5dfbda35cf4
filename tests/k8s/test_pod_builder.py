"""The pod pipeline: containers, env, resources, tolerations, affinity, GPU, shared memory, base pod
templates and overrides (Flyte's flytek8s/{container_helper,k8s_resource_adds,utils,pod_helper,
pod_template_store}.go)."""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any

import orjson
import pytest
from flyteidl.core import identifier_pb2, literals_pb2, security_pb2, tasks_pb2
from google.protobuf import json_format, struct_pb2

from taskplug.core import (
    BadTaskSpecification,
    PluginError,
    Quantity,
    ResourceRequirements,
    StaticTaskExecutionContext,
    TaskExecutionID,
    TaskExecutionMetadata,
    TaskOverrides,
    TemplateParameters,
)
from taskplug.k8s._config import K8sPluginConfig
from taskplug.k8s._pod_builder import (
    PlatformPodConfig,
    RawPod,
    add_flyte_customizations_to_container,
    add_required_node_selector_requirements,
    add_tolerations_for_extended_resources,
    apply_flyte_pod_configuration,
    apply_gpu_node_selectors,
    apply_shared_memory,
    build_identity_pod,
    build_raw_container,
    build_raw_pod,
    decorate_env_vars,
    execution_env_vars,
    extract_container_resources_from_pod_template,
    get_container,
    service_account_name,
    to_k8s_pod_spec,
)
from taskplug.k8s._pod_template import PodTemplateStore
from taskplug.k8s._resources import ResourceCustomizationMode, Resources
from taskplug.testing import fake_task_context

R = tasks_pb2.Resources
GPU = "nvidia.com/gpu"
DATA_ROOT = "s3://bucket"
EXECUTION: dict[str, Any] = {"id": {"project": "p", "domain": "d", "name": "exec1", "nodeId": "n0"}}
INPUT_PREFIX = "s3://bucket/metadata/p/d/exec1/n0"
OUTPUT_PREFIX = "s3://bucket/metadata/p/d/exec1/n0/0"
RAW_PREFIX = "s3://bucket/raw/exec1-n0-0"
GENERATED_NAME = "exec1-n0-0"
TASK_ID = identifier_pb2.Identifier(
    resource_type=identifier_pb2.TASK, project="p", domain="d", name="t", version="v1"
)

# -- building tasks, contexts and platforms ---------------------------------------------------------------


def struct(value: Mapping[str, Any]) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    json_format.ParseDict(value, out)
    return out


def entries(values: Mapping[str, str]) -> list[tasks_pb2.Resources.ResourceEntry]:
    names = {"cpu": R.CPU, "memory": R.MEMORY, "gpu": R.GPU, "ephemeral-storage": R.EPHEMERAL_STORAGE}
    return [R.ResourceEntry(name=names[k], value=v) for k, v in values.items()]


def container_task(
    *,
    image: str = "img:1",
    command: Sequence[str] = (),
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    requests: Mapping[str, str] | None = None,
    limits: Mapping[str, str] | None = None,
    config: Mapping[str, str] | None = None,
    task_type: str = "container",
    extended: tasks_pb2.ExtendedResources | None = None,
    pod_template_name: str = "",
) -> tasks_pb2.TaskTemplate:
    container = tasks_pb2.Container(
        image=image,
        command=list(command),
        args=list(args),
        env=[literals_pb2.KeyValuePair(key=k, value=v) for k, v in (env or {}).items()],
        resources=R(requests=entries(requests or {}), limits=entries(limits or {})),
    )
    template = tasks_pb2.TaskTemplate(
        id=TASK_ID, type=task_type, container=container, config=dict(config or {})
    )
    template.metadata.pod_template_name = pod_template_name
    if extended is not None:
        template.extended_resources.CopyFrom(extended)
    return template


def pod_task(
    spec: Mapping[str, Any],
    *,
    primary: str | None = "main",
    config: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    task_type: str = "python-task",
    version: int = 0,
    extended: tasks_pb2.ExtendedResources | None = None,
    pod_template_name: str = "",
) -> tasks_pb2.TaskTemplate:
    cfg = dict(config or {})
    if primary is not None:
        cfg["primary_container_name"] = primary
    pod = tasks_pb2.K8sPod(pod_spec=struct(spec))
    pod.metadata.labels.update(labels or {})
    pod.metadata.annotations.update(annotations or {})
    template = tasks_pb2.TaskTemplate(
        id=TASK_ID, type=task_type, task_type_version=version, k8s_pod=pod, config=cfg
    )
    template.metadata.pod_template_name = pod_template_name
    if extended is not None:
        template.extended_resources.CopyFrom(extended)
    return template


def requirements(
    requests: Mapping[str, str] | None = None, limits: Mapping[str, str] | None = None
) -> dict[str, dict[str, str]]:
    """Resource requirements in the execution spec's (Kubernetes) form."""
    return {"requests": dict(requests or {}), "limits": dict(limits or {})}


def message(value: Any) -> dict[str, Any]:
    """A protobuf message as the execution spec's JSON."""
    return dict(json_format.MessageToDict(value))


def metadata(
    *,
    with_execution_id: bool = True,
    with_task_id: bool = True,
    service_account: str = "",
    security_service_account: str = "",
    environment: Mapping[str, str] | None = None,
) -> TaskExecutionMetadata:
    """Metadata for the functions that take metadata alone, in shapes an execution spec cannot give (no
    execution or task id, a unique node id apart from the node id, attempt 2 under the name of attempt 0)."""
    tid = identifier_pb2.TaskExecutionIdentifier(retry_attempt=2)
    if with_execution_id:
        tid.node_execution_id.CopyFrom(
            identifier_pb2.NodeExecutionIdentifier(
                node_id="n0",
                execution_id=identifier_pb2.WorkflowExecutionIdentifier(
                    project="p", domain="d", name="exec1"
                ),
            )
        )
    if with_task_id:
        tid.task_id.CopyFrom(TASK_ID)
    security = security_pb2.SecurityContext()
    if security_service_account:
        security.run_as.k8s_service_account = security_service_account
    return TaskExecutionMetadata(
        task_execution_id=TaskExecutionID(GENERATED_NAME, tid, "n0-unique"),
        namespace="ns",
        owner_name="exec1",
        overrides=TaskOverrides(resources=ResourceRequirements()),
        k8s_service_account=service_account,
        security_context=security,
        environment_variables=dict(environment or {}),
    )


def context(
    template: tasks_pb2.TaskTemplate,
    *,
    namespace: str = "ns",
    execution: Mapping[str, Any] | None = None,
    **kit: Any,
) -> StaticTaskExecutionContext:
    """The executor's context for ``template``: execution p/d/exec1, node n0, attempt 0 (so the generated
    name is ``exec1-n0-0``), namespace ``ns``, data under ``s3://bucket``, input ``x = 3``. ``execution``
    fields are added to that execution; ``kit`` are :func:`fake_task_context`'s other keywords."""
    return fake_task_context(
        template,
        inputs={"x": 3},
        namespace=namespace,
        execution={**EXECUTION, **(execution or {})},
        data_root=DATA_ROOT,
        **kit,
    )


def platform(
    *, templates: Sequence[Mapping[str, Any]] = (), environ: Mapping[str, str] | None = None, **k8s: Any
) -> PlatformPodConfig:
    store = PodTemplateStore(default_namespace="flyte")
    for t in templates:
        store.store(t)
    config = K8sPluginConfig.model_validate({k.replace("_", "-"): v for k, v in k8s.items()})
    return PlatformPodConfig(config, store, dict(environ or {}))


def build(template: tasks_pb2.TaskTemplate, plat: PlatformPodConfig | None = None, **meta: Any) -> RawPod:
    return to_k8s_pod_spec(context(template, **meta), plat or platform())


def params(
    template: tasks_pb2.TaskTemplate | None = None, *, include_console_url: bool = False, **meta: Any
) -> TemplateParameters:
    tctx = context(template or container_task(), **meta)
    return TemplateParameters(
        metadata=tctx.metadata,
        inputs=tctx.input_reader,
        output_paths=tctx.output_writer,
        task=tctx.task_reader,
        include_console_url=include_console_url,
    )


def raises_bad_spec(message: str) -> Any:
    return pytest.raises(
        BadTaskSpecification, match="^" + re.escape(f"[BadTaskSpecification] {message}") + "$"
    )


def env_names(container: Mapping[str, Any]) -> list[str]:
    return [e["name"] for e in container.get("env") or []]


def env_map(container: Mapping[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container.get("env") or []}


def pod_template(
    name: str = "base",
    namespace: str = "ns",
    *,
    spec: Mapping[str, Any] | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    if labels:
        meta["labels"] = dict(labels)
    if annotations:
        meta["annotations"] = dict(annotations)
    return {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "template": {"metadata": meta, "spec": dict(spec or {"containers": []})},
    }


def sidecar_pod(**primary: Any) -> dict[str, Any]:
    """A pod spec with a primary container ``main`` and a ``side`` container."""
    return {
        "containers": [{"name": "main", "image": "main:1", **primary}, {"name": "side", "image": "side:1"}]
    }


# -- BuildRawContainer ------------------------------------------------------------------------------------


def test_build_raw_container_needs_a_container_target() -> None:
    with raises_bad_spec("unable to create container with no definition in TaskTemplate"):
        build_raw_container(context(pod_task(sidecar_pod())), platform())


def test_build_raw_container_needs_override_resources() -> None:
    tctx = context(container_task())
    # An execution spec always gives override resources (empty when it sets none); Flyte's may be nil.
    tctx.metadata = dataclasses.replace(tctx.metadata, overrides=TaskOverrides(resources=None))
    with raises_bad_spec("resource requirements not found for container task, required!"):
        build_raw_container(tctx, platform())


def test_build_raw_container_copies_the_task_container() -> None:
    template = container_task(
        command=["python", "-c"],
        args=["print(1)"],
        env={"B": "2", "A": "1"},
        requests={"cpu": "500m", "gpu": "1"},
        limits={"memory": "1Gi", "cpu": "0"},
    )
    container = build_raw_container(
        context(template), platform(gpu_resource_name="amd.com/gpu", image_pull_policy="Always")
    )
    assert container == {
        "name": GENERATED_NAME,
        "image": "img:1",
        "command": ["python", "-c"],
        "args": ["print(1)"],
        "env": [{"name": "B", "value": "2"}, {"name": "A", "value": "1"}],
        # GPU maps to nvidia.com/gpu whatever the configured name; zero values are dropped.
        "resources": {"limits": {"memory": "1Gi"}, "requests": {"cpu": "500m", GPU: "1"}},
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "imagePullPolicy": "Always",
    }


def test_build_raw_container_sets_no_pull_policy_by_default() -> None:
    assert "imagePullPolicy" not in build_raw_container(context(container_task()), platform())


@pytest.mark.parametrize(
    ("generated_name", "kept"),
    [
        pytest.param("exec1-n0-0", True, id="valid-label"),
        pytest.param("a" * 63, True, id="63-chars"),
        pytest.param("a" * 64, False, id="too-long"),
        pytest.param("Exec1-n0-0", False, id="upper-case"),
        pytest.param("exec.1", False, id="dot-is-no-label"),
        pytest.param("-exec", False, id="leading-dash"),
    ],
)
def test_container_name_is_the_generated_name_when_a_valid_label(generated_name: str, kept: bool) -> None:
    name = build_raw_container(
        context(container_task(), execution={"generatedName": generated_name}), platform()
    )["name"]
    if kept:
        assert name == generated_name
    else:
        assert re.fullmatch(r"[a-z0-9]{4}", name)


# -- env (flytek8s/k8s_resource_adds.go) --------------------------------------------------------------------


def test_execution_env_vars_identify_execution_attempt_and_task() -> None:
    env = execution_env_vars(metadata(), "")
    assert env == [
        {"name": "FLYTE_INTERNAL_EXECUTION_ID", "value": "exec1"},
        {"name": "FLYTE_INTERNAL_EXECUTION_PROJECT", "value": "p"},
        {"name": "FLYTE_INTERNAL_EXECUTION_DOMAIN", "value": "d"},
        {"name": "FLYTE_ATTEMPT_NUMBER", "value": "2"},
        {"name": "FLYTE_INTERNAL_TASK_PROJECT", "value": "p"},
        {"name": "FLYTE_INTERNAL_TASK_DOMAIN", "value": "d"},
        {"name": "FLYTE_INTERNAL_TASK_NAME", "value": "t"},
        {"name": "FLYTE_INTERNAL_TASK_VERSION", "value": "v1"},
    ]


@pytest.mark.parametrize("console_url", ["https://console.example.com", "https://console.example.com/"])
def test_execution_url_comes_after_the_attempt_number(console_url: str) -> None:
    env = execution_env_vars(metadata(), console_url)
    assert env[4] == {
        "name": "FLYTE_EXECUTION_URL",
        "value": "https://console.example.com/projects/p/domains/d/executions/exec1/nodeId/n0-unique/nodes",
    }
    assert [e["name"] for e in env][5:] == [
        "FLYTE_INTERNAL_TASK_PROJECT",
        "FLYTE_INTERNAL_TASK_DOMAIN",
        "FLYTE_INTERNAL_TASK_NAME",
        "FLYTE_INTERNAL_TASK_VERSION",
    ]


def test_execution_env_vars_without_task_id_stop_after_the_execution() -> None:
    assert [e["name"] for e in execution_env_vars(metadata(with_task_id=False), "")] == [
        "FLYTE_INTERNAL_EXECUTION_ID",
        "FLYTE_INTERNAL_EXECUTION_PROJECT",
        "FLYTE_INTERNAL_EXECUTION_DOMAIN",
        "FLYTE_ATTEMPT_NUMBER",
    ]


def test_execution_env_vars_are_empty_without_an_execution_id() -> None:
    assert execution_env_vars(metadata(with_execution_id=False), "https://c") == []


def test_env_is_existing_then_execution_then_task_then_platform_defaults() -> None:
    container: dict[str, Any] = {
        "name": "c",
        "env": [{"name": "OWN", "value": "1"}],
        "envFrom": [{"configMapRef": {"name": "own"}}],
    }
    plat = platform(
        default_env_vars={"DEFAULT": "d"},
        default_env_vars_from_env={"FROM_HOST": "HOST_VAR", "MISSING": "NOT_SET_ON_HOST"},
        default_env_from_configmaps=["cm1", "cm2"],
        default_env_from_secrets=["s1"],
        environ={"HOST_VAR": "host-value"},
    )
    decorate_env_vars(container, metadata(environment={"TASK_ENV": "t"}), plat, "")
    assert env_names(container) == [
        "OWN",
        "FLYTE_INTERNAL_EXECUTION_ID",
        "FLYTE_INTERNAL_EXECUTION_PROJECT",
        "FLYTE_INTERNAL_EXECUTION_DOMAIN",
        "FLYTE_ATTEMPT_NUMBER",
        "FLYTE_INTERNAL_TASK_PROJECT",
        "FLYTE_INTERNAL_TASK_DOMAIN",
        "FLYTE_INTERNAL_TASK_NAME",
        "FLYTE_INTERNAL_TASK_VERSION",
        "TASK_ENV",
        "DEFAULT",
        "FROM_HOST",
        "MISSING",
    ]
    assert env_map(container)["FROM_HOST"] == "host-value"
    assert env_map(container)["MISSING"] == ""
    assert container["envFrom"] == [
        {"configMapRef": {"name": "own"}},
        {"secretRef": {"name": "s1", "optional": True}},
        {"configMapRef": {"name": "cm1", "optional": True}},
        {"configMapRef": {"name": "cm2", "optional": True}},
    ]


def test_env_is_not_deduplicated() -> None:
    container: dict[str, Any] = {"name": "c", "env": [{"name": "DEFAULT", "value": "own"}]}
    decorate_env_vars(
        container, metadata(with_execution_id=False), platform(default_env_vars={"DEFAULT": "d"}), ""
    )
    assert container["env"] == [{"name": "DEFAULT", "value": "own"}, {"name": "DEFAULT", "value": "d"}]


@pytest.mark.parametrize(
    ("config", "has_url"),
    [
        pytest.param({"link_type": "console"}, True, id="with-link-type"),
        pytest.param({"link_type": ""}, True, id="with-empty-link-type"),
        pytest.param({}, False, id="without-link-type"),
        pytest.param({"other": "x"}, False, id="other-config"),
    ],
)
def test_console_url_only_with_a_link_type_key_in_the_task_config(
    config: dict[str, str], has_url: bool
) -> None:
    pod = build(container_task(config=config), execution={"consoleUrl": "https://console.example.com"})
    assert ("FLYTE_EXECUTION_URL" in env_names(pod.spec["containers"][0])) is has_url


# -- templated command lines ---------------------------------------------------------------------------------


def test_command_and_args_are_rendered() -> None:
    template = container_task(
        command=["run", "{{.Input}}"],
        args=[
            "--out",
            "{{ .OutputPrefix }}",
            "--x",
            "{{.Inputs.x}}",
            "--raw",
            "{{$RawOutputDataPrefix}}",
            "{{.namespace}}",
        ],
    )
    container = build(template).spec["containers"][0]
    assert container["command"] == ["run", f"{INPUT_PREFIX}/inputs.pb"]
    assert container["args"] == ["--out", OUTPUT_PREFIX, "--x", "3", "--raw", RAW_PREFIX, "ns"]


def test_a_missing_input_fails_the_build() -> None:
    with pytest.raises(PluginError, match="requested input is not found"):
        build(container_task(args=["{{.Inputs.nope}}"]))


# -- pod template resources lookup ---------------------------------------------------------------------------

_LOOKUP_TEMPLATE = pod_template(
    spec={
        "containers": [
            {"name": "default", "resources": {"requests": {"cpu": "1"}}},
            {"name": "primary", "resources": {"requests": {"cpu": "2"}}},
            {"name": "side", "resources": {"requests": {"cpu": "3"}}},
        ],
        "initContainers": [
            {"name": "default-init", "resources": {"requests": {"cpu": "4"}}},
            {"name": "primary-init", "resources": {"requests": {"cpu": "5"}}},
            {"name": "fetch", "resources": {"requests": {"cpu": "6"}}},
        ],
    }
)


@pytest.mark.parametrize(
    ("template", "name", "init", "expected_cpu"),
    [
        pytest.param(_LOOKUP_TEMPLATE, "side", False, "3", id="same-name"),
        pytest.param(_LOOKUP_TEMPLATE, "anything", False, "2", id="primary-before-default-for-any-container"),
        pytest.param(_LOOKUP_TEMPLATE, "fetch", True, "6", id="init-same-name"),
        pytest.param(_LOOKUP_TEMPLATE, "other", True, "5", id="primary-init-before-default-init"),
        pytest.param(
            pod_template(spec={"containers": [{"name": "default", "resources": {"requests": {"cpu": "1"}}}]}),
            "x",
            False,
            "1",
            id="default-last",
        ),
        pytest.param(
            pod_template(
                spec={"containers": [{"name": "default-init", "resources": {"requests": {"cpu": "1"}}}]}
            ),
            "x",
            False,
            None,
            id="init-templates-not-for-containers",
        ),
        pytest.param(None, "x", False, None, id="no-template"),
    ],
)
def test_extract_container_resources_from_pod_template(
    template: dict[str, Any] | None, name: str, init: bool, expected_cpu: str | None
) -> None:
    got = extract_container_resources_from_pod_template(template, name, init)
    cpu = got["requests"].get("cpu")
    assert (str(cpu) if cpu is not None else None) == expected_cpu


# -- resource customization modes (flytek8s/container_helper.go) ---------------------------------------------


def customize(
    container: dict[str, Any],
    mode: ResourceCustomizationMode,
    *,
    overrides: Mapping[str, Any] | None = None,
    platform_resources: Mapping[str, Any] | None = None,
    template_resources: Resources | None = None,
    plat: PlatformPodConfig | None = None,
) -> dict[str, Any]:
    p = params(resources=overrides, platform_resources=platform_resources)
    add_flyte_customizations_to_container(container, p, mode, plat or platform(), template_resources)
    return container.get("resources", {})  # type: ignore[no-any-return]


def tmpl_res(requests: Mapping[str, str] | None = None, limits: Mapping[str, str] | None = None) -> Resources:
    return {
        "requests": {k: Quantity(v) for k, v in (requests or {}).items()},
        "limits": {k: Quantity(v) for k, v in (limits or {}).items()},
    }


PLATFORM = requirements({"cpu": "500m", "memory": "512Mi"}, {"cpu": "8", "memory": "16Gi"})


def test_assign_mode_uses_only_the_overrides() -> None:
    container = {"name": "c", "resources": {"requests": {"cpu": "3"}}}
    got = customize(
        container,
        ResourceCustomizationMode.ASSIGN,
        overrides=requirements({"memory": "1Gi"}),
        platform_resources=PLATFORM,
        template_resources=tmpl_res({"cpu": "7"}),
    )
    assert got == {"requests": {"memory": "1Gi", "cpu": "500m"}, "limits": {"cpu": "500m", "memory": "1Gi"}}


@pytest.mark.parametrize(
    ("override", "inline", "template", "expected_request"),
    [
        pytest.param("4", "3", "2", "4", id="override-wins"),
        pytest.param(None, "3", "2", "3", id="inline-beats-template"),
        pytest.param(None, None, "2", "2", id="template-beats-platform"),
        pytest.param(None, None, None, "500m", id="platform-default"),
        pytest.param("100", "3", "2", "8", id="capped-at-platform-limit"),
    ],
)
def test_merge_mode_priority_is_overrides_inline_template_platform(
    override: str | None, inline: str | None, template: str | None, expected_request: str
) -> None:
    container: dict[str, Any] = {"name": "c"}
    if inline is not None:
        container["resources"] = {"requests": {"cpu": inline}}
    got = customize(
        container,
        ResourceCustomizationMode.MERGE_EXISTING,
        overrides=requirements({"cpu": override} if override else {}),
        platform_resources=PLATFORM,
        template_resources=tmpl_res({"cpu": template} if template else {}),
    )
    assert got["requests"]["cpu"] == expected_request
    # An unset limit copies the request (never the platform limit).
    assert got["limits"]["cpu"] == expected_request


def test_merge_mode_override_wins_per_key_only() -> None:
    container = {
        "name": "c",
        "resources": {"requests": {"cpu": "3", "memory": "2Gi"}, "limits": {"memory": "4Gi"}},
    }
    got = customize(
        container,
        ResourceCustomizationMode.MERGE_EXISTING,
        overrides=requirements({"cpu": "1"}),
        platform_resources=PLATFORM,
    )
    assert got == {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"memory": "4Gi", "cpu": "1"}}


def test_ensure_mode_fills_from_the_template_caps_and_writes_explicit_zeros() -> None:
    container = {"name": "side", "resources": {"limits": {"cpu": "20"}}}
    got = customize(
        container,
        ResourceCustomizationMode.ENSURE_IN_RANGE,
        overrides=requirements({"cpu": "5"}),
        platform_resources=PLATFORM,
        template_resources=tmpl_res({"cpu": "12"}, {"cpu": "1"}),
    )
    # Own limit 20 kept over the template's 1 then capped at 8; template request 12 capped to 8; no memory → 0.
    assert got == {"limits": {"cpu": "8", "memory": "0"}, "requests": {"cpu": "8", "memory": "0"}}


@pytest.mark.parametrize(
    ("mode", "kept"),
    [
        pytest.param(ResourceCustomizationMode.MERGE_EXISTING, True, id="merge"),
        pytest.param(ResourceCustomizationMode.ENSURE_IN_RANGE, True, id="ensure"),
        pytest.param(ResourceCustomizationMode.ASSIGN, False, id="assign-uses-overrides-only"),
    ],
)
def test_resource_claims_are_kept_unless_resources_are_assigned(
    mode: ResourceCustomizationMode, kept: bool
) -> None:
    claims = [{"name": "gpu-claim"}]
    got = customize({"name": "c", "resources": {"claims": claims, "limits": {"cpu": "1"}}}, mode)
    assert got.get("claims") == (claims if kept else None)


def test_numeric_quantities_in_a_pod_spec_struct_are_accepted() -> None:
    spec = {
        "containers": [
            {"name": "main", "resources": {"limits": {"cpu": 2, "memory": "1Gi"}, "requests": {"cpu": 0.5}}}
        ]
    }
    resources = build(pod_task(spec)).spec["containers"][0]["resources"]
    assert resources == {
        "limits": {"cpu": "2", "memory": "1Gi"},
        "requests": {"cpu": "500m", "memory": "1Gi"},
    }


def test_config_default_cpu_and_memory_apply_only_when_the_platform_request_key_is_absent() -> None:
    plat = platform(default_cpus="250m", default_memory="300Mi")
    absent = customize({"name": "c"}, ResourceCustomizationMode.MERGE_EXISTING, plat=plat)
    assert absent["requests"] == {"cpu": "250m", "memory": "300Mi"}
    present = customize(
        {"name": "c"},
        ResourceCustomizationMode.MERGE_EXISTING,
        plat=plat,
        platform_resources=requirements({"cpu": "0", "memory": "2Gi"}),
    )
    assert present["requests"] == {"cpu": "0", "memory": "2Gi"}


def test_gpu_key_is_renamed_in_the_container_but_not_in_overrides() -> None:
    container = {"name": "c", "resources": {"limits": {"gpu": "2"}}}
    got = customize(
        container,
        ResourceCustomizationMode.MERGE_EXISTING,
        overrides=requirements(limits={"gpu": "1"}),
        plat=platform(gpu_resource_name="amd.com/gpu"),
    )
    assert got["limits"]["amd.com/gpu"] == "2"
    assert got["requests"]["amd.com/gpu"] == "2"
    assert got["limits"]["gpu"] == "1"
    assert "gpu" not in got["requests"]


def test_primary_and_init_containers_merge_others_only_stay_in_range() -> None:
    spec = {
        "initContainers": [{"name": "fetch", "image": "f"}],
        "containers": [{"name": "main", "image": "m"}, {"name": "side", "image": "s"}],
    }
    pod = build(pod_task(spec), platform_resources=PLATFORM)
    defaults = {"limits": {"cpu": "500m", "memory": "512Mi"}, "requests": {"cpu": "500m", "memory": "512Mi"}}
    assert pod.spec["initContainers"][0]["resources"] == defaults
    assert pod.spec["containers"][0]["resources"] == defaults
    assert pod.spec["containers"][1]["resources"] == {
        "limits": {"cpu": "0", "memory": "0"},
        "requests": {"cpu": "0", "memory": "0"},
    }


def test_init_containers_use_init_template_resources() -> None:
    template = pod_template(
        spec={
            "containers": [{"name": "primary", "resources": {"requests": {"cpu": "2"}}}],
            "initContainers": [{"name": "primary-init", "resources": {"requests": {"cpu": "3"}}}],
        }
    )
    spec = {"initContainers": [{"name": "fetch"}], "containers": [{"name": "main"}]}
    pod = build(pod_task(spec), platform(templates=[template], default_pod_template_name="base"))
    assert pod.spec["initContainers"][0]["resources"]["requests"]["cpu"] == "3"
    assert pod.spec["containers"][0]["resources"]["requests"]["cpu"] == "2"


def test_the_primary_template_container_gives_resources_to_sidecars_before_default() -> None:
    template = pod_template(
        spec={
            "containers": [
                {"name": "default", "resources": {"requests": {"memory": "1Gi"}}},
                {"name": "primary", "resources": {"requests": {"memory": "2Gi"}}},
            ]
        }
    )
    pod = build(pod_task(sidecar_pod()), platform(templates=[template], default_pod_template_name="base"))
    side = pod.spec["containers"][1]
    assert side["resources"]["requests"]["memory"] == "2Gi"


def test_primary_container_must_exist() -> None:
    with raises_bad_spec("invalid TaskSpecification, primary container [nope] not defined"):
        build(pod_task(sidecar_pod(), primary="nope"))


# -- UpdatePod (flytek8s/pod_helper.go) ----------------------------------------------------------------------

TOL_GPU = {"key": "flyte/gpu", "value": "dedicated", "operator": "Equal", "effect": "NoSchedule"}
TOL_INTERRUPTIBLE = {"key": "x/flyte", "value": "interruptible", "operator": "Equal", "effect": "NoSchedule"}
TOL_DEFAULT = {"key": "default", "operator": "Exists"}
TOL_OWN = {"key": "own", "operator": "Exists", "effect": "NoExecute"}


@pytest.mark.parametrize(
    ("interruptible", "gpu_on", "expected"),
    [
        pytest.param(True, "main", [TOL_GPU, TOL_INTERRUPTIBLE, TOL_DEFAULT, TOL_OWN], id="all"),
        pytest.param(False, "main", [TOL_GPU, TOL_DEFAULT, TOL_OWN], id="not-interruptible"),
        pytest.param(True, None, [TOL_INTERRUPTIBLE, TOL_DEFAULT, TOL_OWN], id="no-gpu"),
        pytest.param(False, "side", [TOL_GPU, TOL_DEFAULT, TOL_OWN], id="gpu-on-a-sidecar-counts"),
    ],
)
def test_tolerations_are_resource_interruptible_default_then_the_pods_own(
    interruptible: bool, gpu_on: str | None, expected: list[dict[str, Any]]
) -> None:
    spec = sidecar_pod()
    spec["tolerations"] = [TOL_OWN]
    for c in spec["containers"]:
        if c["name"] == gpu_on:
            c["resources"] = {"limits": {GPU: "1"}}
    plat = platform(
        resource_tolerations={GPU: [TOL_GPU], "storage": [{"key": "storage", "operator": "Exists"}]},
        interruptible_tolerations=[TOL_INTERRUPTIBLE],
        default_tolerations=[TOL_DEFAULT],
    )
    assert build(pod_task(spec), plat, interruptible=interruptible).spec["tolerations"] == expected


@pytest.mark.parametrize(
    ("interruptible", "expected"),
    [
        pytest.param(False, {"zone": "default", "pool": "pod"}, id="pod-keys-beat-default"),
        pytest.param(True, {"zone": "default", "pool": "spot", "extra": "i"}, id="interruptible-beats-pod"),
    ],
)
def test_node_selector_default_loses_to_the_pod_and_interruptible_wins(
    interruptible: bool, expected: dict[str, str]
) -> None:
    spec = sidecar_pod()
    spec["nodeSelector"] = {"pool": "pod"}
    plat = platform(
        default_node_selector={"zone": "default", "pool": "default"},
        interruptible_node_selector={"pool": "spot", "extra": "i"},
    )
    assert build(pod_task(spec), plat, interruptible=interruptible).spec["nodeSelector"] == expected


INTERRUPTIBLE_REQ = {"key": "x/interruptible", "operator": "In", "values": ["true"]}
NON_INTERRUPTIBLE_REQ = {"key": "x/interruptible", "operator": "DoesNotExist"}


@pytest.mark.parametrize(
    ("interruptible", "requirement"),
    [
        pytest.param(True, INTERRUPTIBLE_REQ, id="interruptible"),
        pytest.param(False, NON_INTERRUPTIBLE_REQ, id="not"),
    ],
)
def test_interruptible_node_selector_requirement_is_added_to_every_required_term(
    interruptible: bool, requirement: dict[str, Any]
) -> None:
    spec = sidecar_pod()
    preferred = [{"weight": 1, "preference": {"matchExpressions": [{"key": "p", "operator": "Exists"}]}}]
    spec["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "a", "operator": "Exists"}]},
                    {"matchExpressions": [{"key": "b", "operator": "Exists"}]},
                ]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": preferred,
        }
    }
    plat = platform(
        interruptible_node_selector_requirement=INTERRUPTIBLE_REQ,
        non_interruptible_node_selector_requirement=NON_INTERRUPTIBLE_REQ,
    )
    node_affinity = build(pod_task(spec), plat, interruptible=interruptible).spec["affinity"]["nodeAffinity"]
    assert node_affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
        {"matchExpressions": [{"key": "a", "operator": "Exists"}, requirement]},
        {"matchExpressions": [{"key": "b", "operator": "Exists"}, requirement]},
    ]
    assert node_affinity["preferredDuringSchedulingIgnoredDuringExecution"] == preferred


def test_a_requirement_without_terms_makes_a_single_term() -> None:
    pod = build(container_task(), platform(non_interruptible_node_selector_requirement=NON_INTERRUPTIBLE_REQ))
    assert pod.spec["affinity"] == {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [NON_INTERRUPTIBLE_REQ]}]
            }
        }
    }


def test_no_configured_requirement_leaves_an_empty_affinity() -> None:
    assert build(container_task()).spec["affinity"] == {}


@pytest.mark.parametrize(
    ("existing", "new", "expected_terms"),
    [
        pytest.param(
            {},
            [{"key": "k", "operator": "Exists"}],
            [{"matchExpressions": [{"key": "k", "operator": "Exists"}]}],
            id="create",
        ),
        pytest.param(
            {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchFields": [{"key": "f"}]}]
                    }
                }
            },
            [{"key": "k", "operator": "Exists"}],
            [{"matchFields": [{"key": "f"}], "matchExpressions": [{"key": "k", "operator": "Exists"}]}],
            id="term-without-expressions",
        ),
        pytest.param(
            {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [{"key": "a"}]}]
                    }
                }
            },
            [{"key": "k", "operator": "Exists"}, {"key": "l", "operator": "Exists"}],
            [
                {
                    "matchExpressions": [
                        {"key": "a"},
                        {"key": "k", "operator": "Exists"},
                        {"key": "l", "operator": "Exists"},
                    ]
                }
            ],
            id="several-appended-in-order",
        ),
    ],
)
def test_add_required_node_selector_requirements(
    existing: dict[str, Any], new: list[dict[str, Any]], expected_terms: list[dict[str, Any]]
) -> None:
    add_required_node_selector_requirements(existing, new)
    assert (
        existing["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        == expected_terms
    )


@pytest.mark.parametrize(
    ("own", "expected"),
    [pytest.param(None, "Never", id="defaulted"), pytest.param("OnFailure", "OnFailure", id="kept")],
)
def test_restart_policy_defaults_to_never(own: str | None, expected: str) -> None:
    spec = sidecar_pod()
    if own:
        spec["restartPolicy"] = own
    assert build(pod_task(spec)).spec["restartPolicy"] == expected


@pytest.mark.parametrize(
    ("own", "k8s_account", "security_account", "expected"),
    [
        pytest.param(None, "ksa", "", "ksa", id="execution-account"),
        pytest.param("mine", "ksa", "", "mine", id="pod-own-kept"),
        pytest.param(None, "", "sc", None, id="security-context-account-not-used-here"),
        pytest.param(None, "ksa", "sc", "ksa", id="execution-account-not-security-context"),
    ],
)
def test_update_pod_service_account_is_the_executions(
    own: str | None, k8s_account: str, security_account: str, expected: str | None
) -> None:
    spec = sidecar_pod()
    if own:
        spec["serviceAccountName"] = own
    pod = build(
        pod_task(spec),
        execution={
            "serviceAccount": k8s_account,
            "securityContext": {"runAs": {"k8sServiceAccount": security_account}},
        },
    )
    assert pod.spec.get("serviceAccountName") == expected


@pytest.mark.parametrize(
    ("own", "configured", "expected"),
    [
        pytest.param(None, "flyte-scheduler", "flyte-scheduler", id="configured"),
        pytest.param("mine", "flyte-scheduler", "mine", id="pod-own-kept"),
        pytest.param(None, "", None, id="none"),
    ],
)
def test_scheduler_name_from_config_when_unset(
    own: str | None, configured: str, expected: str | None
) -> None:
    spec = sidecar_pod()
    if own:
        spec["schedulerName"] = own
    assert build(pod_task(spec), platform(scheduler_name=configured)).spec.get("schedulerName") == expected


DEFAULT_AFFINITY = {
    "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "zone"}]}
}


def test_default_affinity_only_when_the_pod_has_none_and_as_a_copy() -> None:
    plat = platform(default_affinity=DEFAULT_AFFINITY)
    pod = build(container_task(), plat)
    assert pod.spec["affinity"] == DEFAULT_AFFINITY
    pod.spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"].append({"x": 1})
    assert plat.k8s.default_affinity == DEFAULT_AFFINITY
    spec = sidecar_pod()
    spec["affinity"] = {"podAffinity": {}}
    assert build(pod_task(spec), plat).spec["affinity"] == {"podAffinity": {}}


def test_pod_security_context_defaults_when_unset() -> None:
    plat = platform(default_pod_security_context={"runAsUser": 1000, "runAsGroup": 3000, "fsGroup": 2000})
    assert build(container_task(), plat).spec["securityContext"] == {
        "runAsUser": 1000,
        "runAsGroup": 3000,
        "fsGroup": 2000,
    }
    spec = sidecar_pod()
    spec["securityContext"] = {"runAsUser": 5}
    assert build(pod_task(spec), plat).spec["securityContext"] == {"runAsUser": 5}


def test_primary_container_security_context_defaults_when_unset() -> None:
    plat = platform(default_security_context={"allowPrivilegeEscalation": False})
    pod = build(pod_task(sidecar_pod()), plat)
    assert pod.spec["containers"][0]["securityContext"] == {"allowPrivilegeEscalation": False}
    assert "securityContext" not in pod.spec["containers"][1]
    own = build(pod_task(sidecar_pod(securityContext={"privileged": True})), plat)
    assert own.spec["containers"][0]["securityContext"] == {"privileged": True}


@pytest.mark.parametrize(
    ("own", "configured", "expected"),
    [
        pytest.param(None, None, None, id="unset"),
        pytest.param(True, None, True, id="pod-own-kept-when-unconfigured"),
        pytest.param(None, True, True, id="forced-on"),
        pytest.param(True, False, False, id="forced-off"),
    ],
)
def test_host_networking_is_forced_when_configured(
    own: bool | None, configured: bool | None, expected: bool | None
) -> None:
    spec = sidecar_pod()
    if own is not None:
        spec["hostNetwork"] = own
    kwargs = {} if configured is None else {"enable_host_networking_pod": configured}
    assert build(pod_task(spec), platform(**kwargs)).spec.get("hostNetwork") == expected


DNS = {
    "options": [{"name": "ndots", "value": "1"}, {"name": "single-request-reopen"}],
    "nameservers": ["8.8.8.8", "8.8.4.4"],
    "searches": ["ns1.svc.cluster-domain.example"],
}


def test_dns_config_defaults_when_unset() -> None:
    plat = platform(default_pod_dns_config=DNS)
    assert build(container_task(), plat).spec["dnsConfig"] == DNS
    spec = sidecar_pod()
    spec["dnsConfig"] = {"nameservers": ["1.1.1.1"]}
    assert build(pod_task(spec), plat).spec["dnsConfig"] == {"nameservers": ["1.1.1.1"]}


# -- GPU accelerators (ApplyGPUNodeSelectors, flytek8s/pod_helper.go) ----------------------------------------

DEVICE_LABEL = "k8s.amazonaws.com/accelerator"
PARTITION_LABEL = "k8s.amazonaws.com/gpu-partition-size"


def gpu_pod(*, resource: str = GPU, where: str = "limits") -> dict[str, Any]:
    return {"containers": [{"name": "main", "resources": {where: {resource: "1"}}}]}


def required_expressions(spec: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    node = (spec.get("affinity") or {}).get("nodeAffinity")
    if node is None:
        return None
    terms = node["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert len(terms) == 1
    return terms[0]["matchExpressions"]  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("accelerator", "k8s", "requirements_", "tolerations"),
    [
        pytest.param(
            tasks_pb2.GPUAccelerator(device="nvidia-tesla-a100"),
            {},
            [{"key": DEVICE_LABEL, "operator": "In", "values": ["nvidia-tesla-a100"]}],
            [
                {
                    "key": DEVICE_LABEL,
                    "operator": "Equal",
                    "value": "nvidia-tesla-a100",
                    "effect": "NoSchedule",
                }
            ],
            id="device",
        ),
        pytest.param(
            tasks_pb2.GPUAccelerator(device="nvidia-tesla-a100", partition_size="1g.5gb"),
            {},
            [
                {"key": DEVICE_LABEL, "operator": "In", "values": ["nvidia-tesla-a100"]},
                {"key": PARTITION_LABEL, "operator": "In", "values": ["1g.5gb"]},
            ],
            [
                {
                    "key": DEVICE_LABEL,
                    "operator": "Equal",
                    "value": "nvidia-tesla-a100",
                    "effect": "NoSchedule",
                },
                {"key": PARTITION_LABEL, "operator": "Equal", "value": "1g.5gb", "effect": "NoSchedule"},
            ],
            id="device-and-partition",
        ),
        pytest.param(
            tasks_pb2.GPUAccelerator(device="a100", unpartitioned=True),
            {},
            [
                {"key": DEVICE_LABEL, "operator": "In", "values": ["a100"]},
                {"key": PARTITION_LABEL, "operator": "DoesNotExist"},
            ],
            [{"key": DEVICE_LABEL, "operator": "Equal", "value": "a100", "effect": "NoSchedule"}],
            id="unpartitioned-default",
        ),
        pytest.param(
            tasks_pb2.GPUAccelerator(device="a100", unpartitioned=True),
            {
                "gpu_unpartitioned_node_selector_requirement": {
                    "key": "gpu-unpartitioned",
                    "operator": "In",
                    "values": ["yes"],
                },
                "gpu_unpartitioned_toleration": {
                    "key": "gpu-unpartitioned",
                    "operator": "Equal",
                    "value": "yes",
                    "effect": "NoSchedule",
                },
            },
            [
                {"key": DEVICE_LABEL, "operator": "In", "values": ["a100"]},
                {"key": "gpu-unpartitioned", "operator": "In", "values": ["yes"]},
            ],
            [
                {"key": DEVICE_LABEL, "operator": "Equal", "value": "a100", "effect": "NoSchedule"},
                {"key": "gpu-unpartitioned", "operator": "Equal", "value": "yes", "effect": "NoSchedule"},
            ],
            id="unpartitioned-configured",
        ),
        pytest.param(
            tasks_pb2.GPUAccelerator(device="a100", unpartitioned=False),
            {},
            [{"key": DEVICE_LABEL, "operator": "In", "values": ["a100"]}],
            [{"key": DEVICE_LABEL, "operator": "Equal", "value": "a100", "effect": "NoSchedule"}],
            id="unpartitioned-false",
        ),
        pytest.param(
            tasks_pb2.GPUAccelerator(partition_size="2g.10gb"),
            {"gpu_device_node_label": "gpu/device", "gpu_partition_size_node_label": "gpu/partition"},
            [{"key": "gpu/partition", "operator": "In", "values": ["2g.10gb"]}],
            [{"key": "gpu/partition", "operator": "Equal", "value": "2g.10gb", "effect": "NoSchedule"}],
            id="partition-only-configured-labels",
        ),
    ],
)
def test_gpu_node_selectors(
    accelerator: tasks_pb2.GPUAccelerator,
    k8s: dict[str, Any],
    requirements_: list[dict[str, Any]],
    tolerations: list[dict[str, Any]],
) -> None:
    spec = gpu_pod()
    apply_gpu_node_selectors(spec, accelerator, platform(**k8s))
    assert required_expressions(spec) == requirements_
    assert spec["tolerations"] == tolerations


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param({"containers": [{"name": "main"}]}, id="no-gpu"),
        pytest.param(gpu_pod(where="requests"), id="gpu-request-only"),
        pytest.param(gpu_pod(resource="amd.com/gpu"), id="other-gpu-name"),
        pytest.param(
            {
                "containers": [{"name": "main"}],
                "initContainers": [{"name": "i", "resources": {"limits": {GPU: "1"}}}],
            },
            id="init-container-gpu",
        ),
    ],
)
def test_gpu_node_selectors_need_a_regular_container_with_a_gpu_limit(spec: dict[str, Any]) -> None:
    before = copy.deepcopy(spec)
    apply_gpu_node_selectors(spec, tasks_pb2.GPUAccelerator(device="a100", partition_size="1g"), platform())
    assert spec == before


def test_gpu_selectors_use_the_configured_gpu_resource_name() -> None:
    spec = gpu_pod(resource="amd.com/gpu")
    apply_gpu_node_selectors(
        spec, tasks_pb2.GPUAccelerator(device="mi300"), platform(gpu_resource_name="amd.com/gpu")
    )
    assert required_expressions(spec) == [{"key": DEVICE_LABEL, "operator": "In", "values": ["mi300"]}]


def test_gpu_accelerator_through_the_pipeline_and_override_replacing_it_wholesale() -> None:
    extended = tasks_pb2.ExtendedResources(
        gpu_accelerator=tasks_pb2.GPUAccelerator(device="t4", partition_size="1g")
    )
    template = container_task(limits={"gpu": "1"}, extended=extended)
    pod = build(template)
    assert required_expressions(pod.spec) == [
        {"key": DEVICE_LABEL, "operator": "In", "values": ["t4"]},
        {"key": PARTITION_LABEL, "operator": "In", "values": ["1g"]},
    ]
    override = tasks_pb2.ExtendedResources(gpu_accelerator=tasks_pb2.GPUAccelerator(unpartitioned=True))
    pod = build(template, execution={"overrides": {"extendedResources": message(override)}})
    assert required_expressions(pod.spec) == [{"key": PARTITION_LABEL, "operator": "DoesNotExist"}]


def test_gpu_requirements_are_added_to_every_existing_term() -> None:
    spec = gpu_pod()
    spec["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "a", "operator": "Exists"}]},
                    {"matchExpressions": []},
                ]
            }
        }
    }
    apply_gpu_node_selectors(spec, tasks_pb2.GPUAccelerator(device="t4"), platform())
    device = {"key": DEVICE_LABEL, "operator": "In", "values": ["t4"]}
    assert spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ] == [
        {"matchExpressions": [{"key": "a", "operator": "Exists"}, device]},
        {"matchExpressions": [device]},
    ]


# -- shared memory (ApplySharedMemory, flytek8s/pod_helper.go) ----------------------------------------------


def shm(name: str = "dshm", path: str = "/dev/shm", size: str = "") -> tasks_pb2.SharedMemory:
    return tasks_pb2.SharedMemory(mount_name=name, mount_path=path, size_limit=size)


@pytest.mark.parametrize(
    ("spec", "primary", "memory", "message"),
    [
        pytest.param(sidecar_pod(), "main", shm(name=""), "mount name is not set", id="no-name"),
        pytest.param(sidecar_pod(), "main", shm(path=""), "mount path is not set", id="no-path"),
        pytest.param(sidecar_pod(), "nope", shm(), "Unable to find primary container", id="no-primary"),
        pytest.param(
            {**sidecar_pod(), "volumes": [{"name": "dshm", "emptyDir": {}}]},
            "main",
            shm(),
            "A volume is already named dshm in pod spec",
            id="pod-volume-name-taken",
        ),
        pytest.param(
            sidecar_pod(volumeMounts=[{"name": "dshm", "mountPath": "/other"}]),
            "main",
            shm(),
            "A volume is already named dshm in container",
            id="mount-name-taken",
        ),
        pytest.param(
            sidecar_pod(volumeMounts=[{"name": "other", "mountPath": "/dev/shm"}]),
            "main",
            shm(),
            "/dev/shm is already mounted in container",
            id="mount-path-taken",
        ),
    ],
)
def test_shared_memory_errors(
    spec: dict[str, Any], primary: str, memory: tasks_pb2.SharedMemory, message: str
) -> None:
    with raises_bad_spec(message):
        apply_shared_memory(spec, primary, memory)


def test_shared_memory_rejects_an_unparseable_size() -> None:
    with pytest.raises(BadTaskSpecification) as e:
        apply_shared_memory(sidecar_pod(), "main", shm(size="lots"))
    assert e.value.message.startswith("Unable to parse size limit: ")


def test_shared_memory_mounts_an_in_memory_volume_into_the_primary() -> None:
    spec = sidecar_pod(volumeMounts=[{"name": "data", "mountPath": "/data"}])
    spec["volumes"] = [{"name": "data", "emptyDir": {}}]
    apply_shared_memory(spec, "main", shm(size="2Gi"))
    assert spec["volumes"] == [
        {"name": "data", "emptyDir": {}},
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}},
    ]
    assert spec["containers"][0]["volumeMounts"] == [
        {"name": "data", "mountPath": "/data"},
        {"name": "dshm", "mountPath": "/dev/shm"},
    ]
    assert "volumeMounts" not in spec["containers"][1]


def test_shared_memory_without_a_size_gets_a_zero_size_limit() -> None:
    spec = sidecar_pod()
    apply_shared_memory(spec, "main", shm())
    assert spec["volumes"] == [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "0"}}]


def test_shared_memory_override_replaces_the_tasks() -> None:
    template = container_task(
        extended=tasks_pb2.ExtendedResources(shared_memory=shm(name="task", path="/task"))
    )
    pod = build(template)
    assert pod.spec["containers"][0]["volumeMounts"] == [{"name": "task", "mountPath": "/task"}]
    override = tasks_pb2.ExtendedResources(shared_memory=shm(name="over", path="/over", size="1Gi"))
    pod = build(template, execution={"overrides": {"extendedResources": message(override)}})
    assert pod.spec["containers"][0]["volumeMounts"] == [{"name": "over", "mountPath": "/over"}]
    assert pod.spec["volumes"] == [{"name": "over", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}}]


def test_shared_memory_errors_fail_the_pipeline() -> None:
    template = container_task(extended=tasks_pb2.ExtendedResources(shared_memory=shm(path="")))
    with raises_bad_spec("mount path is not set"):
        build(template)


# -- tolerations for extended resources ---------------------------------------------------------------------


def ext_pod(
    *containers: tuple[str, dict[str, Any]], init: Sequence[tuple[str, dict[str, Any]]] = ()
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": n, "resources": r} for n, r in containers]}
    if init:
        spec["initContainers"] = [{"name": n, "resources": r} for n, r in init]
    return spec


def exists(key: str) -> dict[str, str]:
    return {"key": key, "operator": "Exists", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("spec", "configured", "expected"),
    [
        pytest.param(
            ext_pod(("a", {"requests": {"nvidia.com/gpu": "1", "b.io/x": "1"}})),
            ["nvidia.com/gpu", "b.io/x"],
            [exists("b.io/x"), exists("nvidia.com/gpu")],
            id="sorted",
        ),
        pytest.param(ext_pod(("a", {"limits": {GPU: "1"}})), [GPU], None, id="limits-do-not-count"),
        pytest.param(ext_pod(("a", {"requests": {GPU: "1"}})), [], None, id="not-configured"),
        pytest.param(ext_pod(("a", {"requests": {"other": "1"}})), [GPU], None, id="not-requested"),
        pytest.param(
            ext_pod(("a", {}), init=[("i", {"requests": {GPU: "1"}})]),
            [GPU],
            [exists(GPU)],
            id="init-containers-count",
        ),
        pytest.param(
            ext_pod(("a", {"requests": {GPU: "1"}}), ("b", {"requests": {GPU: "2"}})),
            [GPU],
            [exists(GPU)],
            id="once",
        ),
        pytest.param(
            {**ext_pod(("a", {"requests": {GPU: "1"}})), "tolerations": [exists(GPU)]},
            [GPU],
            [exists(GPU)],
            id="identical-existing-not-repeated",
        ),
        pytest.param(
            {**ext_pod(("a", {"requests": {GPU: "1"}})), "tolerations": [{"key": GPU, "operator": "Exists"}]},
            [GPU],
            [{"key": GPU, "operator": "Exists"}, exists(GPU)],
            id="different-effect-added",
        ),
    ],
)
def test_tolerations_for_extended_resources(
    spec: dict[str, Any], configured: list[str], expected: list[dict[str, str]] | None
) -> None:
    out = add_tolerations_for_extended_resources(
        spec, platform(add_tolerations_for_extended_resources=configured)
    )
    assert out.get("tolerations") == expected


def test_to_k8s_pod_spec_adds_extended_resource_tolerations() -> None:
    pod = build(container_task(requests={"gpu": "1"}), platform(add_tolerations_for_extended_resources=[GPU]))
    assert exists(GPU) in pod.spec["tolerations"]


# -- base pod templates (MergeWithBasePodTemplate, flytek8s/pod_helper.go) -----------------------------------


def test_default_pod_template_is_merged_under_the_task_pod() -> None:
    template = pod_template(
        spec={
            "priorityClassName": "high",
            "tolerations": [{"key": "tmpl", "operator": "Exists"}],
            "containers": [
                {"name": "default", "image": "ignored", "workingDir": "/work"},
                {
                    "name": "primary",
                    "env": [{"name": "TMPL", "value": "1"}],
                    "volumeMounts": [{"name": "v", "mountPath": "/v"}],
                },
                {"name": "orphan", "image": "dropped"},
            ],
        },
        labels={"team": "tmpl", "tier": "t"},
        annotations={"a": "tmpl"},
    )
    task = container_task(env={"OWN": "1"})
    pod = build(task, platform(templates=[template], default_pod_template_name="base"))
    assert [c["name"] for c in pod.spec["containers"]] == [GENERATED_NAME]
    container = pod.spec["containers"][0]
    assert container["image"] == "img:1"
    assert container["workingDir"] == "/work"
    assert container["volumeMounts"] == [{"name": "v", "mountPath": "/v"}]
    assert env_names(container)[:2] == ["TMPL", "OWN"]
    assert pod.spec["priorityClassName"] == "high"
    assert pod.spec["tolerations"] == [{"key": "tmpl", "operator": "Exists"}]
    assert pod.meta == {"labels": {"team": "tmpl", "tier": "t"}, "annotations": {"a": "tmpl"}}


def test_task_object_meta_wins_over_the_templates() -> None:
    template = pod_template(labels={"team": "tmpl", "tier": "t"}, annotations={"a": "tmpl", "b": "tmpl"})
    task = pod_task(sidecar_pod(), labels={"team": "task"}, annotations={"b": "task", "c": "task"})
    pod = build(task, platform(templates=[template], default_pod_template_name="base"))
    assert pod.meta == {
        "labels": {"team": "task", "tier": "t"},
        "annotations": {"a": "tmpl", "b": "task", "c": "task"},
    }


def test_task_pod_template_name_beats_the_default_template() -> None:
    templates = [
        pod_template("base", spec={"containers": [], "priorityClassName": "default"}),
        pod_template("special", spec={"containers": [], "priorityClassName": "special"}),
    ]
    pod = build(
        container_task(pod_template_name="special"),
        platform(templates=templates, default_pod_template_name="base"),
    )
    assert pod.spec["priorityClassName"] == "special"


def test_a_named_pod_template_must_exist() -> None:
    with raises_bad_spec("PodTemplate 'missing' does not exist"):
        build(container_task(pod_template_name="missing"), platform(default_pod_template_name="base"))


def test_a_missing_default_pod_template_is_no_error() -> None:
    pod = build(container_task(), platform(default_pod_template_name="absent"))
    assert [c["name"] for c in pod.spec["containers"]] == [GENERATED_NAME]


@pytest.mark.parametrize(
    ("template_namespace", "task_namespace", "found"),
    [
        pytest.param("ns", "ns", True, id="task-namespace"),
        pytest.param("flyte", "ns", True, id="store-default-namespace"),
        pytest.param("other", "ns", False, id="other-namespace"),
    ],
)
def test_pod_templates_fall_back_to_the_stores_default_namespace(
    template_namespace: str, task_namespace: str, found: bool
) -> None:
    template = pod_template("base", template_namespace, spec={"containers": [], "priorityClassName": "x"})
    pod = build(
        container_task(),
        platform(templates=[template], default_pod_template_name="base"),
        namespace=task_namespace,
    )
    assert ("priorityClassName" in pod.spec) is found


def test_template_resources_feed_the_primary_below_inline_and_overrides() -> None:
    template = pod_template(
        spec={
            "containers": [
                {
                    "name": "primary",
                    "resources": {"requests": {"cpu": "2", "memory": "3Gi"}, "limits": {"cpu": "4"}},
                }
            ]
        }
    )
    task = container_task(requests={"memory": "1Gi"})
    pod = build(
        task,
        platform(templates=[template], default_pod_template_name="base"),
        resources=requirements(limits={"memory": "2Gi"}),
    )
    assert pod.spec["containers"][0]["resources"] == {
        "limits": {"memory": "2Gi", "cpu": "4"},
        "requests": {"memory": "1Gi", "cpu": "2"},
    }


# -- per-execution overrides --------------------------------------------------------------------------------


def test_pod_template_override_replaces_the_task_pod_wholesale() -> None:
    override = tasks_pb2.K8sPod(
        pod_spec=struct({"containers": [{"name": "over", "image": "over:1"}], "hostIPC": True}),
        primary_container_name="over",
    )
    override.metadata.labels.update({"l": "override", "o": "1"})
    override.metadata.annotations.update({"a": "override"})
    task = pod_task(sidecar_pod(), labels={"l": "task", "t": "1"}, annotations={"a": "task"})
    pod = build(task, execution={"overrides": {"podTemplate": message(override)}})
    assert pod.primary == "over"
    assert [c["name"] for c in pod.spec["containers"]] == ["over"]
    assert pod.spec["hostIPC"] is True
    assert pod.meta == {"labels": {"l": "override", "t": "1", "o": "1"}, "annotations": {"a": "override"}}


def test_pod_template_override_applies_to_container_tasks() -> None:
    override = tasks_pb2.K8sPod(
        pod_spec=struct({"containers": [{"name": "p", "image": "x"}]}), primary_container_name="p"
    )
    pod = build(container_task(), execution={"overrides": {"podTemplate": message(override)}})
    assert pod.primary == "p"
    assert pod.spec["containers"][0]["image"] == "x"


def test_a_pod_template_override_without_a_pod_spec_is_ignored() -> None:
    override = tasks_pb2.K8sPod(primary_container_name="p")
    pod = build(container_task(), execution={"overrides": {"podTemplate": message(override)}})
    assert pod.primary == GENERATED_NAME


def test_container_image_override_replaces_only_the_primary_image() -> None:
    pod = build(
        pod_task(sidecar_pod()),
        execution={"overrides": {"containerImage": "new:2"}},
    )
    assert [c["image"] for c in pod.spec["containers"]] == ["new:2", "side:1"]


# -- BuildRawPod ----------------------------------------------------------------------------------------------


def test_k8s_pod_target_needs_a_pod_spec() -> None:
    template = tasks_pb2.TaskTemplate(
        type="sidecar", k8s_pod=tasks_pb2.K8sPod(), config={"primary_container_name": "main"}
    )
    with raises_bad_spec(
        "Pod tasks with task type version > 1 should specify their target as a K8sPod with a defined pod spec"
    ):
        build_raw_pod(context(template), platform())


def test_k8s_pod_target_needs_the_primary_container_name() -> None:
    template = pod_task(sidecar_pod(), primary=None, config={"foo": "bar", "a": "b"})
    with raises_bad_spec(
        "invalid TaskSpecification, config missing [primary_container_name] key in [map[a:b foo:bar]]"
    ):
        build_raw_pod(context(template), platform())


def test_a_template_without_target_cannot_make_a_pod() -> None:
    with raises_bad_spec("invalid TaskSpecification, unable to determine Pod configuration"):
        build_raw_pod(context(tasks_pb2.TaskTemplate(type="container")), platform())


def test_k8s_pod_target_takes_its_metadata_and_primary() -> None:
    raw = build_raw_pod(
        context(pod_task(sidecar_pod(), labels={"l": "1"}, annotations={"a": "2"})), platform()
    )
    assert raw.primary == "main"
    assert raw.meta == {"labels": {"l": "1"}, "annotations": {"a": "2"}}
    assert [c["name"] for c in raw.spec["containers"]] == ["main", "side"]


def test_container_target_makes_a_single_container_pod() -> None:
    raw = build_raw_pod(context(container_task()), platform())
    assert raw.primary == GENERATED_NAME
    assert raw.meta == {"annotations": {}, "labels": {}}
    assert [c["name"] for c in raw.spec["containers"]] == [GENERATED_NAME]


# -- small helpers ---------------------------------------------------------------------------------------------


def test_get_container_names_a_missing_container() -> None:
    assert get_container(sidecar_pod(), "side")["image"] == "side:1"
    with raises_bad_spec("invalid TaskSpecification, container [x] not defined"):
        get_container(sidecar_pod(), "x")


def test_identity_pod() -> None:
    assert build_identity_pod() == {"kind": "pod", "apiVersion": "v1"}


@pytest.mark.parametrize(
    ("k8s_account", "security_account", "expected"),
    [
        pytest.param("ksa", "sc", "sc", id="security-context-first"),
        pytest.param("ksa", "", "ksa", id="execution-account"),
        pytest.param("", "", "", id="none"),
    ],
)
def test_service_account_name(k8s_account: str, security_account: str, expected: str) -> None:
    assert (
        service_account_name(metadata(service_account=k8s_account, security_service_account=security_account))
        == expected
    )


# -- purity: nothing leaks from one build into the next -----------------------------------------------------


def test_building_twice_gives_the_same_pod_and_mutating_one_does_not_leak() -> None:
    template_store = [
        pod_template(
            spec={
                "tolerations": [{"key": "tmpl", "operator": "Exists"}],
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [{"matchExpressions": [{"key": "t", "operator": "Exists"}]}]
                        }
                    }
                },
                "containers": [
                    {"name": "default", "env": [{"name": "T", "value": "1"}]},
                    {"name": "primary", "volumeMounts": [{"name": "v", "mountPath": "/v"}]},
                ],
            },
            labels={"l": "1"},
        )
    ]
    plat = platform(
        templates=template_store,
        default_pod_template_name="base",
        default_affinity=DEFAULT_AFFINITY,
        interruptible_node_selector_requirement=INTERRUPTIBLE_REQ,
        default_tolerations=[TOL_DEFAULT],
        default_env_from_secrets=["s"],
        default_pod_dns_config=DNS,
        default_security_context={"runAsNonRoot": True},
        resource_tolerations={GPU: [TOL_GPU]},
    )
    extended = tasks_pb2.ExtendedResources(
        gpu_accelerator=tasks_pb2.GPUAccelerator(device="t4"), shared_memory=shm()
    )
    task = pod_task(sidecar_pod(resources={"limits": {"gpu": "1"}}), extended=extended)

    def once() -> dict[str, Any]:
        raw = build(task, plat, interruptible=True)
        return {"spec": raw.spec, "meta": raw.meta}

    first = once()
    snapshot = orjson.loads(orjson.dumps(first))
    _scribble(first)
    second = once()
    assert second == snapshot


def _scribble(value: Any) -> None:
    """Change every mutable part of a JSON value in place."""
    if isinstance(value, dict):
        for v in list(value.values()):
            _scribble(v)
        value["__scribbled__"] = True
    elif isinstance(value, list):
        for v in value:
            _scribble(v)
        value.append("__scribbled__")


def test_apply_flyte_pod_configuration_keeps_the_raw_primary_name() -> None:
    tctx = context(pod_task(sidecar_pod()))
    raw = apply_flyte_pod_configuration(tctx, build_raw_pod(tctx, platform()), platform())
    assert raw.primary == "main"
