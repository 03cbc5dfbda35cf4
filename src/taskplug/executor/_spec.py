"""The execution spec: one YAML or JSON document describing one task execution (docs/spec.md).

It is loaded into the real Flyte IDL (``flyteidl.core.TaskTemplate``, literals) and taskplug's
:class:`~taskplug.core.TaskExecutionMetadata`. Every malformed field is reported by its dotted path.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import orjson
import yaml
from flyteidl.admin import task_pb2 as admin_task_pb2
from flyteidl.core import identifier_pb2, literals_pb2, security_pb2, tasks_pb2
from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message

from taskplug.core import (
    QuantityError,
    ResourceRequirements,
    SpecError,
    TaskExecutionID,
    TaskExecutionMetadata,
    TaskOverrides,
    literal_map_from_plain,
)
from taskplug.k8s import execution_labels

__all__ = ["ExecutionSpec", "load_spec", "parse_spec"]

_TOP_LEVEL = {"template", "templateFile", "execution", "inputs"}
_EXECUTION_KEYS = {
    "id",
    "generatedName",
    "namespace",
    "labels",
    "annotations",
    "serviceAccount",
    "interruptible",
    "maxAttempts",
    "environment",
    "consoleUrl",
    "securityContext",
    "platformResources",
    "overrides",
    "ownerReference",
}
_ID_KEYS = {"project", "domain", "name", "nodeId", "retryAttempt"}
_OVERRIDE_KEYS = {"resources", "extendedResources", "containerImage", "podTemplate"}


@dataclass(frozen=True)
class ExecutionSpec:
    """A loaded execution spec: the task, what the platform knows about the execution, and the inputs."""

    template: tasks_pb2.TaskTemplate
    metadata: TaskExecutionMetadata
    inputs: literals_pb2.LiteralMap
    source: str = ""

    @property
    def execution_key(self) -> str:
        """Identifies the execution across attempts (project/domain/name/node)."""
        node = self.metadata.task_execution_id.id.node_execution_id
        ex = node.execution_id
        return f"{ex.project}/{ex.domain}/{ex.name}/{node.node_id}"

    def for_attempt(self, attempt: int) -> ExecutionSpec:
        """The same execution at another retry attempt (new generated name, same everything else)."""
        tid = identifier_pb2.TaskExecutionIdentifier()
        tid.CopyFrom(self.metadata.task_execution_id.id)
        tid.retry_attempt = attempt
        base = self.metadata.task_execution_id.generated_name.rsplit("-", 1)[0]
        exec_id = TaskExecutionID(f"{base}-{attempt}", tid, self.metadata.task_execution_id.unique_node_id)
        return replace(self, metadata=replace(self.metadata, task_execution_id=exec_id))


def load_spec(path: str | Path) -> ExecutionSpec:
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise SpecError("", f"cannot read execution spec {str(p)!r}: {e.strerror}") from e
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise SpecError("", f"execution spec {str(p)!r} is not valid YAML or JSON: {e}") from e
    if not isinstance(document, Mapping):
        raise SpecError("", f"execution spec {str(p)!r} must be a mapping at the top level")
    return parse_spec(document, base_dir=p.parent, source=str(p))


def parse_spec(document: Mapping[str, Any], *, base_dir: Path = Path("."), source: str = "") -> ExecutionSpec:
    _reject_unknown(document, _TOP_LEVEL, "")
    template = _load_template(document, base_dir)
    execution = document.get("execution") or {}
    _expect_mapping(execution, "execution")
    _reject_unknown(execution, _EXECUTION_KEYS, "execution")
    metadata = _load_metadata(execution, template)
    raw_inputs = document.get("inputs") or {}
    _expect_mapping(raw_inputs, "inputs")
    interface = template.interface.inputs if template.HasField("interface") else None
    inputs = literal_map_from_plain(raw_inputs, interface, "inputs")
    if interface is not None:
        missing = sorted(set(interface.variables) - set(inputs.literals))
        if missing:
            raise SpecError(f"inputs.{missing[0]}", f"the task needs input(s) {missing} and none was given")
    return ExecutionSpec(template, metadata, inputs, source)


def _reject_unknown(mapping: Mapping[str, Any], known: set[str], path: str) -> None:
    for key in mapping:
        if key not in known:
            where = f"{path}.{key}" if path else str(key)
            raise SpecError(where, f"unknown field (expected one of: {', '.join(sorted(known))})")


def _expect_mapping(value: Any, path: str) -> None:
    if not isinstance(value, Mapping):
        raise SpecError(path, f"must be a mapping, got {type(value).__name__}")


def _parse_message(value: Any, message: Message, path: str) -> Any:
    _expect_mapping(value, path)
    try:
        # Round-trip through JSON so YAML-only types (dates, ints as keys) are normalised first.
        return json_format.Parse(orjson.dumps(value, default=str), message)
    except (json_format.ParseError, TypeError, ValueError) as e:
        raise SpecError(path, _parse_error_text(e)) from e


def _parse_error_text(e: Exception) -> str:
    return str(e).replace('Message type "flyteidl.core.', 'message "').replace("Failed to parse ", "")


def _load_template(document: Mapping[str, Any], base_dir: Path) -> tasks_pb2.TaskTemplate:
    has_inline, has_file = "template" in document, "templateFile" in document
    if has_inline == has_file:
        raise SpecError(
            "template", "give exactly one of `template` (inline) or `templateFile` (binary TaskTemplate)"
        )
    if has_inline:
        template = _parse_message(document["template"], tasks_pb2.TaskTemplate(), "template")
    else:
        template = _read_template_file(document["templateFile"], base_dir)
    if not template.type:
        raise SpecError("template.type", "required (the task type, e.g. container or python-task)")
    target = template.WhichOneof("target")
    if target == "container" and not template.container.image:
        raise SpecError("template.container.image", "required")
    return template


def _read_template_file(value: Any, base_dir: Path) -> tasks_pb2.TaskTemplate:
    if not isinstance(value, str) or not value:
        raise SpecError("templateFile", "must be a path to a binary TaskTemplate")
    path = (base_dir / value) if not Path(value).is_absolute() else Path(value)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise SpecError("templateFile", f"cannot read {str(path)!r}: {e.strerror}") from e
    # flytekit writes either a bare TaskTemplate or an admin TaskSpec around it.
    for parse in (_as_template, _as_task_spec):
        template = parse(data)
        if template is not None and template.type:
            return template
    raise SpecError("templateFile", f"{str(path)!r} is not a binary flyteidl TaskTemplate")


def _as_template(data: bytes) -> tasks_pb2.TaskTemplate | None:
    template = tasks_pb2.TaskTemplate()
    try:
        template.ParseFromString(data)
    except DecodeError:
        return None
    return template


def _as_task_spec(data: bytes) -> tasks_pb2.TaskTemplate | None:
    spec = admin_task_pb2.TaskSpec()
    try:
        spec.ParseFromString(data)
    except DecodeError:
        return None
    return spec.template if spec.HasField("template") else None


def _str_map(value: Any, path: str) -> dict[str, str]:
    if value is None:
        return {}
    _expect_mapping(value, path)
    out = {}
    for k, v in value.items():
        if v is None or isinstance(v, Mapping | list):  # YAML `key:` with no value is not the string "None"
            raise SpecError(f"{path}.{k}", "must be a string")
        out[str(k)] = "true" if v is True else "false" if v is False else str(v)
    return out


def _resources(value: Any, path: str) -> ResourceRequirements:
    if value is None:
        return ResourceRequirements()
    _expect_mapping(value, path)
    _reject_unknown(value, {"requests", "limits"}, path)
    for kind in ("requests", "limits"):
        section = value.get(kind) or {}
        _expect_mapping(section, f"{path}.{kind}")
        for name, quantity in section.items():
            try:
                ResourceRequirements.from_k8s({kind: {name: quantity}})
            except QuantityError as e:
                raise SpecError(f"{path}.{kind}.{name}", str(e)) from e
    return ResourceRequirements.from_k8s(value)


def _bool(value: Any, path: str, default: bool) -> bool:
    if value is None:
        return default
    if not isinstance(value, bool):
        raise SpecError(path, f"must be true or false, got {value!r}")
    return value


def _load_metadata(execution: Mapping[str, Any], template: tasks_pb2.TaskTemplate) -> TaskExecutionMetadata:
    raw_id = execution.get("id") or {}
    _expect_mapping(raw_id, "execution.id")
    _reject_unknown(raw_id, _ID_KEYS, "execution.id")
    project = str(raw_id.get("project") or template.id.project or "project")
    domain = str(raw_id.get("domain") or template.id.domain or "development")
    name = str(raw_id.get("name") or "")
    if not name:
        raise SpecError("execution.id.name", "required (the execution's name)")
    node_id = str(raw_id.get("nodeId") or "n0")
    attempt = raw_id.get("retryAttempt", 0)
    if not isinstance(attempt, int) or isinstance(attempt, bool) or attempt < 0:
        raise SpecError("execution.id.retryAttempt", f"must be a non-negative integer, got {attempt!r}")

    tid = identifier_pb2.TaskExecutionIdentifier(
        node_execution_id=identifier_pb2.NodeExecutionIdentifier(
            node_id=node_id,
            execution_id=identifier_pb2.WorkflowExecutionIdentifier(
                project=project, domain=domain, name=name
            ),
        ),
        retry_attempt=attempt,
    )
    if template.HasField("id"):
        tid.task_id.CopyFrom(template.id)
    generated = execution.get("generatedName") or f"{name}-{node_id}-{attempt}"
    if not isinstance(generated, str):
        raise SpecError("execution.generatedName", "must be a string")

    max_attempts = execution.get("maxAttempts", 1)
    if not isinstance(max_attempts, int) or isinstance(max_attempts, bool) or max_attempts < 1:
        raise SpecError("execution.maxAttempts", f"must be an integer ≥ 1, got {max_attempts!r}")
    interruptible = _bool(
        execution.get("interruptible"), "execution.interruptible", template.metadata.interruptible
    )

    namespace = execution.get("namespace") or f"{project}-{domain}"
    if not isinstance(namespace, str):
        raise SpecError("execution.namespace", "must be a string")

    # The labels propeller puts on every task object; the informer finds the owning execution by execution-id.
    labels = execution_labels(name, node_id, interruptible=interruptible, task_name=template.id.name)
    labels.update(_str_map(execution.get("labels"), "execution.labels"))

    security = security_pb2.SecurityContext()
    if execution.get("securityContext"):
        security = _parse_message(
            execution["securityContext"], security_pb2.SecurityContext(), "execution.securityContext"
        )
    owner = execution.get("ownerReference")
    if owner is not None:
        _expect_mapping(owner, "execution.ownerReference")
        for key in ("apiVersion", "kind", "name", "uid"):
            if not owner.get(key):
                raise SpecError(f"execution.ownerReference.{key}", "required")

    service_account = execution.get("serviceAccount") or ""
    if not isinstance(service_account, str):
        raise SpecError("execution.serviceAccount", "must be a string")
    console_url = execution.get("consoleUrl") or ""
    if not isinstance(console_url, str):
        raise SpecError("execution.consoleUrl", "must be a string")

    return TaskExecutionMetadata(
        task_execution_id=TaskExecutionID(generated, tid, node_id),
        namespace=namespace,
        owner_name=name,
        owner_reference=dict(owner) if owner else None,
        overrides=_load_overrides(execution.get("overrides")),
        labels=labels,
        annotations=_str_map(execution.get("annotations"), "execution.annotations"),
        max_attempts=max_attempts,
        k8s_service_account=service_account,
        security_context=security,
        interruptible=interruptible,
        platform_resources=_resources(execution.get("platformResources"), "execution.platformResources"),
        environment_variables=_str_map(execution.get("environment"), "execution.environment"),
        console_url=console_url,
    )


def _load_overrides(value: Any) -> TaskOverrides:
    if value is None:
        return TaskOverrides(resources=ResourceRequirements())
    _expect_mapping(value, "execution.overrides")
    _reject_unknown(value, _OVERRIDE_KEYS, "execution.overrides")
    extended = None
    if value.get("extendedResources"):
        extended = _parse_message(
            value["extendedResources"], tasks_pb2.ExtendedResources(), "execution.overrides.extendedResources"
        )
    pod_template = None
    if value.get("podTemplate"):
        pod_template = _parse_message(
            value["podTemplate"], tasks_pb2.K8sPod(), "execution.overrides.podTemplate"
        )
    image = value.get("containerImage") or ""
    if not isinstance(image, str):
        raise SpecError("execution.overrides.containerImage", "must be a string")
    return TaskOverrides(
        resources=_resources(value.get("resources"), "execution.overrides.resources"),
        extended_resources=extended,
        container_image=image,
        pod_template=pod_template,
    )
