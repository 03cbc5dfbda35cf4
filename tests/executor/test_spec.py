"""The execution spec loader (docs/spec.md): a valid spec loads, a bad field is named."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from flyteidl.admin import task_pb2 as admin_task_pb2
from flyteidl.core import identifier_pb2, interface_pb2, tasks_pb2, types_pb2

from taskplug.core import Quantity, ResourceRequirements, SpecError
from taskplug.executor._spec import load_spec, parse_spec

SPEC_YAML = """
template:
  id: {resourceType: TASK, project: p, domain: d, name: hello, version: v1}
  type: container
  interface:
    inputs:
      variables:
        x: {type: {simple: FLOAT}}
        name: {type: {simple: STRING}}
  container: {image: "python:3.11", command: [python, -c], args: ["print('hi')"],
              resources: {requests: [{name: CPU, value: "500m"}], limits: [{name: MEMORY, value: 1Gi}]},
              env: [{key: A, value: "1"}]}
  metadata: {interruptible: true}
execution:
  id: {project: p, domain: d, name: exec1, nodeId: n0, retryAttempt: 0}
  namespace: p-d
  labels: {team: ml}
  annotations: {note: hello}
  serviceAccount: default
  maxAttempts: 3
  environment: {LOG_LEVEL: debug, N: 3}
  consoleUrl: "https://console"
  securityContext: {runAs: {k8sServiceAccount: sa}}
  platformResources: {requests: {cpu: "1", memory: 1Gi}, limits: {cpu: "4", memory: 8Gi}}
  overrides:
    resources: {requests: {cpu: 250m}, limits: {memory: 2Gi}}
    extendedResources: {gpuAccelerator: {device: nvidia-tesla-a100}}
    containerImage: "python:3.12"
    podTemplate: {primaryContainerName: main}
inputs: {x: 3, name: world}
"""


def base() -> dict[str, Any]:
    return yaml.safe_load(SPEC_YAML)


def minimal() -> dict[str, Any]:
    return {
        "template": {"id": {"name": "hello"}, "type": "container", "container": {"image": "python:3.11"}},
        "execution": {"id": {"name": "exec1"}},
    }


# -- a valid spec ----------------------------------------------------------------------------------------


def test_a_full_spec_loads_into_flyte_types() -> None:
    spec = parse_spec(base())
    assert spec.template.type == "container"
    assert spec.template.id.resource_type == identifier_pb2.TASK
    assert spec.template.id.version == "v1"
    assert spec.template.container.image == "python:3.11"
    assert list(spec.template.container.args) == ["print('hi')"]
    assert spec.template.container.resources.requests[0].name == tasks_pb2.Resources.CPU
    assert spec.template.metadata.interruptible is True


def test_a_full_spec_loads_the_execution_metadata() -> None:
    meta = parse_spec(base()).metadata
    assert meta.namespace == "p-d"
    assert meta.task_execution_id.generated_name == "exec1-n0-0"
    assert meta.task_execution_id.unique_node_id == "n0"
    tid = meta.task_execution_id.id
    assert tid.node_execution_id.execution_id.name == "exec1"
    assert tid.node_execution_id.node_id == "n0"
    assert tid.retry_attempt == 0
    assert tid.task_id.name == "hello"
    assert meta.max_attempts == 3
    assert meta.k8s_service_account == "default"
    assert meta.console_url == "https://console"
    assert meta.annotations == {"note": "hello"}
    assert meta.environment_variables == {"LOG_LEVEL": "debug", "N": "3"}
    assert meta.security_context.run_as.k8s_service_account == "sa"
    assert meta.interruptible is True  # from the template's metadata when the execution does not say


def test_a_full_spec_loads_resources_and_overrides() -> None:
    meta = parse_spec(base()).metadata
    assert meta.platform_resources == ResourceRequirements(
        {"cpu": Quantity("1"), "memory": Quantity("1Gi")}, {"cpu": Quantity("4"), "memory": Quantity("8Gi")}
    )
    overrides = meta.overrides
    assert overrides.resources == ResourceRequirements({"cpu": Quantity("250m")}, {"memory": Quantity("2Gi")})
    assert overrides.container_image == "python:3.12"
    assert overrides.extended_resources is not None
    assert overrides.extended_resources.gpu_accelerator.device == "nvidia-tesla-a100"
    assert overrides.pod_template is not None
    assert overrides.pod_template.primary_container_name == "main"


def test_inputs_are_typed_by_the_interface() -> None:
    inputs = parse_spec(base()).inputs
    assert inputs.literals["x"].scalar.primitive.float_value == 3.0
    assert inputs.literals["name"].scalar.primitive.string_value == "world"


def test_standard_labels_are_added_and_the_executions_labels_win() -> None:
    labels = parse_spec(base()).metadata.labels
    assert labels == {
        "execution-id": "exec1",
        "node-id": "n0",
        "interruptible": "true",
        "task-name": "hello",
        "team": "ml",
    }
    doc = base()
    doc["execution"]["labels"] = {"node-id": "mine", "flag": True, "n": 1}
    labels = parse_spec(doc).metadata.labels
    assert labels["node-id"] == "mine"
    assert (labels["flag"], labels["n"]) == ("true", "1")


def test_snake_case_template_keys_are_accepted() -> None:
    doc = minimal()
    doc["template"] = {
        "id": {"resource_type": "TASK", "name": "hello"},
        "type": "python-task",
        "task_type_version": 2,
        "container": {"image": "python:3.11"},
    }
    spec = parse_spec(doc)
    assert spec.template.id.resource_type == identifier_pb2.TASK
    assert spec.template.task_type_version == 2


def test_a_minimal_spec_derives_name_namespace_and_defaults() -> None:
    spec = parse_spec(minimal())
    meta = spec.metadata
    assert meta.task_execution_id.generated_name == "exec1-n0-0"
    assert meta.namespace == "project-development"
    assert meta.max_attempts == 1
    assert meta.interruptible is False
    assert meta.labels["interruptible"] == "false"
    assert meta.platform_resources == ResourceRequirements()
    assert meta.overrides.resources == ResourceRequirements()
    assert meta.overrides.container_image == ""
    assert len(spec.inputs.literals) == 0


def test_project_and_domain_fall_back_on_the_templates_id() -> None:
    doc = minimal()
    doc["template"]["id"] = {"project": "flytesnacks", "domain": "staging", "name": "hello"}
    meta = parse_spec(doc).metadata
    assert meta.namespace == "flytesnacks-staging"
    assert meta.task_execution_id.id.node_execution_id.execution_id.project == "flytesnacks"


def test_the_generated_name_follows_the_retry_attempt_unless_given() -> None:
    doc = minimal()
    doc["execution"]["id"].update(nodeId="n3", retryAttempt=2)
    assert parse_spec(doc).metadata.task_execution_id.generated_name == "exec1-n3-2"
    doc["execution"]["generatedName"] = "custom-name"
    assert parse_spec(doc).metadata.task_execution_id.generated_name == "custom-name"


def test_for_attempt_changes_the_attempt_and_the_generated_name_only() -> None:
    spec = parse_spec(minimal())
    again = spec.for_attempt(1)
    assert again.metadata.task_execution_id.generated_name == "exec1-n0-1"
    assert again.metadata.task_execution_id.id.retry_attempt == 1
    assert again.execution_key == spec.execution_key == "project/development/exec1/n0"
    assert again.template is spec.template


def test_interruptible_in_the_execution_overrides_the_template() -> None:
    doc = base()
    doc["execution"]["interruptible"] = False
    meta = parse_spec(doc).metadata
    assert meta.interruptible is False
    assert meta.labels["interruptible"] == "false"


def test_inputs_may_be_literal_json() -> None:
    doc = base()
    doc["inputs"] = {"x": {"scalar": {"primitive": {"floatValue": 2.5}}}, "name": "w"}
    assert parse_spec(doc).inputs.literals["x"].scalar.primitive.float_value == 2.5


def test_the_owner_reference_is_kept() -> None:
    doc = minimal()
    owner = {"apiVersion": "flyte.lyft.com/v1alpha1", "kind": "FlyteWorkflow", "name": "exec1", "uid": "u-1"}
    doc["execution"]["ownerReference"] = owner
    assert parse_spec(doc).metadata.owner_reference == owner


# -- files -----------------------------------------------------------------------------------------------


def test_load_spec_reads_yaml_and_json(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text(SPEC_YAML)
    (tmp_path / "s.json").write_text(json.dumps(base()))
    assert load_spec(tmp_path / "s.yaml").template == load_spec(tmp_path / "s.json").template
    assert load_spec(tmp_path / "s.yaml").source == str(tmp_path / "s.yaml")


def _binary_template() -> tasks_pb2.TaskTemplate:
    return tasks_pb2.TaskTemplate(
        id=identifier_pb2.Identifier(
            resource_type=identifier_pb2.TASK, project="p", domain="d", name="t", version="1"
        ),
        type="python-task",
        container=tasks_pb2.Container(image="python:3.11", args=["pyflyte-execute"]),
        interface=interface_pb2.TypedInterface(
            inputs=interface_pb2.VariableMap(
                variables={"n": interface_pb2.Variable(type=types_pb2.LiteralType(simple=types_pb2.INTEGER))}
            )
        ),
    )


@pytest.mark.parametrize("wrapped", [False, True], ids=["task-template", "admin-task-spec"])
def test_a_template_file_is_read_relative_to_the_spec(tmp_path: Path, wrapped: bool) -> None:
    template = _binary_template()
    data = (
        admin_task_pb2.TaskSpec(template=template).SerializeToString()
        if wrapped
        else template.SerializeToString()
    )
    (tmp_path / "task.pb").write_bytes(data)
    (tmp_path / "spec.yaml").write_text(
        yaml.safe_dump({"templateFile": "task.pb", "execution": {"id": {"name": "e"}}, "inputs": {"n": 4}})
    )
    spec = load_spec(tmp_path / "spec.yaml")
    assert spec.template == template
    assert spec.inputs.literals["n"].scalar.primitive.integer == 4


# -- malformed specs -------------------------------------------------------------------------------------


def _set(path: str, value: Any):
    def mutate(doc: dict[str, Any]) -> None:
        *parents, leaf = path.split(".")
        node = doc
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value

    return mutate


def _both(*mutations: Any):
    def mutate(doc: dict[str, Any]) -> None:
        for each in mutations:
            each(doc)

    return mutate


def _drop(path: str):
    def mutate(doc: dict[str, Any]) -> None:
        *parents, leaf = path.split(".")
        node = doc
        for key in parents:
            node = node[key]
        del node[leaf]

    return mutate


@pytest.mark.parametrize(
    ("mutate", "path"),
    [
        (_set("extra", 1), "extra"),
        (_set("templateFile", "task.pb"), "template"),
        (_drop("template"), "template"),
        (_set("template", [1]), "template"),
        (_drop("template.type"), "template.type"),
        (_set("template.type", ""), "template.type"),
        # Refused only when nothing could supply an image (the base spec's overrides could).
        (
            _both(_drop("execution.overrides"), _set("template.container.image", "")),
            "template.container.image",
        ),
        (_both(_drop("execution.overrides"), _drop("template.container.image")), "template.container.image"),
        (_set("execution", [1]), "execution"),
        (_set("execution.owner", "me"), "execution.owner"),
        (_set("execution.id", "exec1"), "execution.id"),
        (_set("execution.id.attempt", 1), "execution.id.attempt"),
        (_set("execution.id.name", ["exec1"]), "execution.id.name"),
        (_set("execution.id.name", {"a": 1}), "execution.id.name"),
        (_set("execution.id.name", 7), "execution.id.name"),
        (_set("execution.id.name", "exec_1"), "execution.id.name"),
        (_set("execution.id.name", "1exec"), "execution.id.name"),
        (_set("execution.id.name", "e" * 64), "execution.id.name"),
        (_set("execution.id.project", ["p"]), "execution.id.project"),
        (_set("execution.id.nodeId", {"n": 0}), "execution.id.nodeId"),
        (_set("execution.id.retryAttempt", 4294967296), "execution.id.retryAttempt"),
        (_set("execution.id.retryAttempt", 1.0), "execution.id.retryAttempt"),
        (_set("execution.maxAttempts", 4294967296), "execution.maxAttempts"),
        (_set("execution.labels", {"bad key!": "x"}), "execution.labels.bad key!"),
        (_set("execution.labels", {"a/b/c": "x"}), "execution.labels.a/b/c"),
        (_set("execution.labels", {"Example.COM/x": "x"}), "execution.labels.Example.COM/x"),
        (_set("execution.labels", {"team": "bad value!"}), "execution.labels.team"),
        (_set("execution.labels", {"team": "v" * 64}), "execution.labels.team"),
        (_set("execution.labels", {1: "x"}), "execution.labels.1"),
        (_set("execution.annotations", {"bad key!": "x"}), "execution.annotations.bad key!"),
        (_set("execution.annotations", {"big": "x" * (256 * 1024)}), "execution.annotations"),
        (_set("execution.environment", {"A": float("nan")}), "execution.environment.A"),
        (_set("execution.namespace", "Not A Namespace"), "execution.namespace"),
        (_set("execution.generatedName", ""), "execution.generatedName"),
        (_set("execution.platformResources.limits.cpu", "-1"), "execution.platformResources.limits.cpu"),
        (_set("execution.platformResources.limits.cpu", -1), "execution.platformResources.limits.cpu"),
        (
            _set("execution.overrides.resources.requests.memory", "-1"),
            "execution.overrides.resources.requests.memory",
        ),
        (
            _set("execution.overrides.resources.requests.memory", float("inf")),
            "execution.overrides.resources.requests.memory",
        ),
        (
            _set(
                "execution.overrides.podTemplate",
                {"podSpec": {"containers": [{"name": "c", "command": "ls"}]}},
            ),
            "execution.overrides.podTemplate.podSpec.containers[0].command",
        ),
        (
            _set(
                "execution.overrides.podTemplate", {"podSpec": {"containers": [{"name": "c", "args": [1]}]}}
            ),
            "execution.overrides.podTemplate.podSpec.containers[0].args[0]",
        ),
        (
            _set(
                "execution.overrides.podTemplate", {"podSpec": {"containers": [{"name": "c", "env": "A=B"}]}}
            ),
            "execution.overrides.podTemplate.podSpec.containers[0].env",
        ),
        (
            _set(
                "execution.overrides.podTemplate",
                {"podSpec": {"containers": [{"name": "c", "env": [{"name": "A", "value": 1}]}]}},
            ),
            "execution.overrides.podTemplate.podSpec.containers[0].env[0].value",
        ),
        (
            _set("execution.overrides.podTemplate", {"podSpec": {"nodeSelector": ["a"]}}),
            "execution.overrides.podTemplate.podSpec.nodeSelector",
        ),
        (
            _set("execution.overrides.podTemplate", {"metadata": {"labels": {"bad key!": "x"}}}),
            "execution.overrides.podTemplate.metadata.labels.bad key!",
        ),
        (
            _set(
                "execution.ownerReference",
                {"apiVersion": "v1", "kind": "K", "name": "n", "uid": "u", "controller": "yes"},
            ),
            "execution.ownerReference.controller",
        ),
        (_set("template.metadata.timeout", "315576000000s"), "template.metadata.timeout"),
        (_set("template.custom", {"x": float("inf")}), "template.custom.x"),
        (_set("template.custom", {"x": 2**70}), "template.custom.x"),
        (_set("execution.id.retryAttempt", -1), "execution.id.retryAttempt"),
        (_set("execution.id.retryAttempt", "0"), "execution.id.retryAttempt"),
        (_set("execution.id.retryAttempt", True), "execution.id.retryAttempt"),
        (_set("execution.maxAttempts", 0), "execution.maxAttempts"),
        (_set("execution.maxAttempts", "3"), "execution.maxAttempts"),
        (_set("execution.generatedName", 5), "execution.generatedName"),
        (_set("execution.namespace", ["a"]), "execution.namespace"),
        (_set("execution.interruptible", "yes"), "execution.interruptible"),
        (_set("execution.serviceAccount", 1), "execution.serviceAccount"),
        (_set("execution.consoleUrl", 1), "execution.consoleUrl"),
        (_set("execution.labels", {"team": ["a", "b"]}), "execution.labels.team"),
        (_set("execution.labels", {"team": None}), "execution.labels.team"),
        (_set("execution.labels", ["team"]), "execution.labels"),
        (_set("execution.annotations", {"a": {"b": 1}}), "execution.annotations.a"),
        (_set("execution.environment", {"A": [1]}), "execution.environment.A"),
        (_set("execution.platformResources.requests.cpu", "1K"), "execution.platformResources.requests.cpu"),
        (
            _set("execution.platformResources.limits.memory", True),
            "execution.platformResources.limits.memory",
        ),
        (_set("execution.platformResources.requests", ["cpu"]), "execution.platformResources.requests"),
        (_set("execution.platformResources.minimum", {}), "execution.platformResources.minimum"),
        (
            _set("execution.overrides.resources.limits.memory", "lots"),
            "execution.overrides.resources.limits.memory",
        ),
        (_set("execution.overrides.image", "x"), "execution.overrides.image"),
        (_set("execution.overrides.containerImage", 3), "execution.overrides.containerImage"),
        (_set("execution.overrides", "none"), "execution.overrides"),
        (_set("execution.ownerReference", {"kind": "FlyteWorkflow"}), "execution.ownerReference.apiVersion"),
        (_set("templateFile", None), "templateFile"),
        (_set("template", None), "template"),
        (_set("inputs", [1]), "inputs"),
        (_set("inputs.y", 1), "inputs.y"),
        (_drop("inputs.name"), "inputs.name"),
        (_set("inputs.x", "three"), "inputs.x"),
        (_set("inputs.name", 3), "inputs.name"),
    ],
)
def test_a_malformed_field_is_a_spec_error_naming_it(mutate, path: str) -> None:
    doc = copy.deepcopy(base())
    mutate(doc)
    with pytest.raises(SpecError) as err:
        parse_spec(doc)
    assert err.value.path == path
    assert str(err.value).startswith(path + ": ")


@pytest.mark.parametrize(
    ("mutate", "path", "named"),
    [
        (_set("template.id.resourceType", "WORKFLOWZ"), "template.id.resourceType", "WORKFLOWZ"),
        (_set("template.container.image", 3), "template.container.image", "string"),
        (_set("template.container.image", ["a"]), "template.container.image", "string"),
        (_set("template.container.args", "print('hi')"), "template.container.args", "repeated"),
        (_set("template.container.env", [{"key": ["A"]}]), "template.container.env[0].key", "string"),
        (_set("template.bogus", 1), "template.bogus", "unknown field"),
        (
            _set("template.metadata.retries", {"retries": 4294967296}),
            "template.metadata.retries.retries",
            "range",
        ),
        (
            _set("execution.securityContext", {"runAs": {"k8sServiceAccount": 5}}),
            "execution.securityContext.runAs.k8sServiceAccount",
            "string",
        ),
        (
            _set("execution.overrides.extendedResources", {"gpuAccelerator": {"device": 3}}),
            "execution.overrides.extendedResources.gpuAccelerator.device",
            "string",
        ),
        (
            _set("execution.overrides.podTemplate", {"primaryContainerName": ["x"]}),
            "execution.overrides.podTemplate.primaryContainerName",
            "string",
        ),
        (_set("inputs.x", {"scalar": {"nope": 1}}), "inputs.x", "nope"),
    ],
)
def test_protobuf_errors_name_the_exact_field(mutate, path: str, named: str) -> None:
    doc = copy.deepcopy(base())
    mutate(doc)
    with pytest.raises(SpecError) as err:
        parse_spec(doc)
    assert err.value.path == path
    assert named in str(err.value)


def test_an_unreadable_template_file_is_named(tmp_path: Path) -> None:
    (tmp_path / "spec.yaml").write_text(
        yaml.safe_dump({"templateFile": "missing.pb", "execution": {"id": {"name": "e"}}})
    )
    with pytest.raises(SpecError) as err:
        load_spec(tmp_path / "spec.yaml")
    assert err.value.path == "templateFile"
    assert "missing.pb" in str(err.value)


@pytest.mark.parametrize(
    "content", [b"this is not a protobuf", b"\xff\xff\xff\xff", b""], ids=["text", "garbage", "empty"]
)
def test_bytes_that_are_not_a_task_template_are_refused(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "task.pb").write_bytes(content)
    (tmp_path / "spec.yaml").write_text(
        yaml.safe_dump({"templateFile": "task.pb", "execution": {"id": {"name": "e"}}})
    )
    with pytest.raises(SpecError) as err:
        load_spec(tmp_path / "spec.yaml")
    assert err.value.path == "templateFile"
    assert "not a binary flyteidl TaskTemplate" in str(err.value)


@pytest.mark.parametrize("value", [3, "", None, ["task.pb"]])
def test_a_template_file_that_is_not_a_path_is_refused(value: object) -> None:
    with pytest.raises(SpecError) as err:
        parse_spec({"templateFile": value, "execution": {"id": {"name": "e"}}})
    assert err.value.path == "templateFile"


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (None, "cannot read execution spec"),
        (b"template: [", "not valid YAML"),
        (b"- a\n", "mapping at the top level"),
        (b"template: {type: caf\xe9}\n", r"not UTF-8 text \(byte 20 is 0xe9\)"),
        (b"a: &a [*a]\n", "recursive YAML alias"),
        (b"a: \x00\n", "not valid YAML"),
        (b"x" * (4 * 1024 * 1024 + 1), "larger than 4194304 bytes"),
    ],
    ids=["missing", "bad-yaml", "not-a-mapping", "not-utf8", "recursive-alias", "nul", "too-large"],
)
def test_a_spec_file_that_cannot_be_read_is_a_spec_error_naming_the_file(
    tmp_path: Path, content: bytes | None, match: str
) -> None:
    path = tmp_path / "spec.yaml"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(SpecError, match=match) as err:
        load_spec(path)
    assert str(path) in str(err.value)


def test_a_malformed_field_of_a_spec_file_names_the_field_and_the_file(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    doc = base()
    doc["execution"]["id"]["retryAttempt"] = 2**32
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(SpecError) as err:
        load_spec(path)
    assert err.value.path == "execution.id.retryAttempt"
    assert str(err.value).startswith("execution.id.retryAttempt: ")
    assert str(path) in str(err.value)


def test_a_yaml_timestamp_in_a_spec_stays_the_text_it_was_written_as(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC_YAML.replace("annotations: {note: hello}", "annotations: {note: 2024-01-02}"))
    assert load_spec(path).metadata.annotations == {"note": "2024-01-02"}


def test_a_template_file_larger_than_the_bound_is_refused(tmp_path: Path) -> None:
    (tmp_path / "task.pb").write_bytes(b"\x01" * (4 * 1024 * 1024 + 1))
    with pytest.raises(SpecError) as err:
        parse_spec({"templateFile": "task.pb"}, base_dir=tmp_path)
    assert err.value.path == "templateFile"
    assert "larger than" in str(err.value)


def test_k8s_pod_labels_and_annotations_follow_kubernetes_rules() -> None:
    doc = minimal()
    doc["template"] = {
        "type": "sidecar",
        "k8sPod": {"metadata": {"labels": {"ok": "fine"}, "annotations": {"a.b/c": "anything at all!"}}},
    }
    assert parse_spec(doc).template.k8s_pod.metadata.labels == {"ok": "fine"}
    doc["template"]["k8sPod"]["metadata"]["labels"] = {"bad key!": "x"}
    with pytest.raises(SpecError) as err:
        parse_spec(doc)
    assert err.value.path == "template.k8sPod.metadata.labels.bad key!"


def test_a_templates_custom_is_left_to_its_plugin() -> None:
    doc = minimal()
    doc["template"] = {"type": "sidecar", "custom": {"podSpec": "not a pod spec"}}
    assert parse_spec(doc).template.custom["podSpec"] == "not a pod spec"


# -- execution names -------------------------------------------------------------------------------------

_FLYTEADMIN_NAME = re.compile(r"a[bcdfghjklmnpqrstvwxz2456789]{19}")


def _unnamed() -> dict[str, Any]:
    doc = minimal()
    del doc["execution"]
    return doc


@pytest.mark.parametrize("execution", [None, {}, {"id": {}}, {"id": {"name": ""}}, {"id": {"name": None}}])
def test_a_spec_without_a_name_gets_a_fresh_one_each_time(execution: dict[str, Any] | None) -> None:
    doc = _unnamed()
    if execution is not None:
        doc["execution"] = execution
    first, second = parse_spec(doc), parse_spec(doc)
    names = [s.metadata.task_execution_id.id.node_execution_id.execution_id.name for s in (first, second)]
    assert names[0] != names[1]
    for spec, name in zip((first, second), names, strict=True):
        assert _FLYTEADMIN_NAME.fullmatch(name), name
        assert spec.named is False
        assert spec.metadata.task_execution_id.generated_name == f"{name}-n0-0"
        assert spec.metadata.labels["execution-id"] == name
        assert spec.execution_key == f"project/development/{name}/n0"


def test_a_spec_without_a_name_gets_one_drawn_from_its_content_when_asked() -> None:
    doc = _unnamed()
    name = parse_spec(doc, fresh_name=False).metadata.owner_name
    assert _FLYTEADMIN_NAME.fullmatch(name), name
    assert parse_spec(copy.deepcopy(doc), fresh_name=False).metadata.owner_name == name
    doc["template"]["container"]["image"] = "python:3.12"
    assert parse_spec(doc, fresh_name=False).metadata.owner_name != name


@pytest.mark.parametrize("fresh_name", [True, False])
def test_a_given_name_is_kept(fresh_name: bool) -> None:
    spec = parse_spec(minimal(), fresh_name=fresh_name)
    assert spec.named is True
    assert spec.metadata.owner_name == "exec1"
    assert spec.execution_key == "project/development/exec1/n0"


@pytest.mark.parametrize("name", ["a", "exec-1", "Exec1", "e" * 63])
def test_names_flyteadmin_accepts_are_accepted(name: str) -> None:
    doc = minimal()
    doc["execution"]["id"]["name"] = name
    assert parse_spec(doc).metadata.owner_name == name


def test_load_spec_gives_an_unnamed_spec_a_fresh_or_a_content_name(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(_unnamed()))
    assert load_spec(path).metadata.owner_name != load_spec(path).metadata.owner_name
    assert (
        load_spec(path, fresh_name=False).metadata.owner_name
        == load_spec(path, fresh_name=False).metadata.owner_name
    )


def test_numeric_quantities_in_a_spec_are_read_as_kubernetes_reads_them() -> None:
    from taskplug.executor import parse_spec

    spec = parse_spec(
        {
            "template": {"type": "container", "container": {"image": "x"}},
            "execution": {"id": {"name": "e"}, "platformResources": {"requests": {"cpu": 0.5, "memory": 2}}},
        }
    )
    assert spec.metadata.platform_resources is not None
    assert str(spec.metadata.platform_resources.requests["cpu"]) == "500m"
    assert str(spec.metadata.platform_resources.requests["memory"]) == "2"


def test_a_plugins_generated_name_limit_shortens_a_longer_name_as_propeller_does() -> None:
    from taskplug.executor import task_context_for
    from taskplug.k8s import fixed_length_unique_id

    spec = parse_spec(
        {
            "template": {"id": {"name": "t"}, "type": "container", "container": {"image": "i"}},
            "execution": {"id": {"name": "an-execution-name-long-enough-to-need-hashing", "nodeId": "n0"}},
        }
    )
    name = spec.metadata.task_execution_id.generated_name
    assert len(name) > 47
    shortened = task_context_for(spec, "/data", generated_name_max_length=47).metadata.task_execution_id
    assert shortened.generated_name == fixed_length_unique_id(name, 47)
    assert len(shortened.generated_name) <= 47 and shortened.generated_name != name
    kept = task_context_for(spec, "/data", generated_name_max_length=100).metadata.task_execution_id
    assert kept.generated_name == name
    assert task_context_for(spec, "/data").metadata.task_execution_id.generated_name == name


def _array_doc() -> dict[str, Any]:
    return {
        "template": {
            "type": "container",
            "container": {"image": "python:3.11"},
            "interface": {
                "inputs": {
                    "variables": {
                        "x": {"type": {"collectionType": {"simple": "INTEGER"}}},
                        "offset": {"type": {"simple": "INTEGER"}},
                    }
                }
            },
        },
        "arrayNode": {"parallelism": 2, "boundInputs": ["offset"], "timeout": "10m"},
        "execution": {"id": {"name": "sq-1"}},
        "inputs": {"x": [1, 2], "offset": 1},
    }


def test_a_hand_written_array_node_loads() -> None:
    array = parse_spec(_array_doc()).array
    assert array is not None
    assert (array.parallelism, array.bound_inputs, array.timeout) == (2, ("offset",), 600.0)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("parallelism", "3"),
        ("parallelism", -1),
        ("parallelism", 2**32),
        ("minSuccesses", 1.0),
        ("minSuccessRatio", float("nan")),
        ("minSuccessRatio", 1.5),
        ("boundInputs", "offset"),
        ("boundInputs", [["offset"]]),
        ("retries", -1),
        ("timeout", "99999999999999h"),
        ("timeout", 1e300),
        ("timeout", float("inf")),
        ("timeout", ["10m"]),
        ("surprise", 1),
    ],
)
def test_a_malformed_array_node_field_is_named(key: str, value: object) -> None:
    doc = _array_doc()
    doc["arrayNode"][key] = value
    with pytest.raises(SpecError) as err:
        parse_spec(doc)
    assert err.value.path.startswith(f"arrayNode.{key}")
