"""The execution spec: one YAML or JSON document describing one task execution (docs/spec.md).

It is loaded into the real Flyte IDL (``flyteidl.core.TaskTemplate``, literals) and taskplug's
:class:`~taskplug.core.TaskExecutionMetadata`. Every malformed field is reported by its dotted path.

A spec may also describe an ArrayNode (a flytekit ``map_task``): by hand, with an ``arrayNode`` section beside
the mapped task's template, or by pointing ``templateFile`` at the workflow ``pyflyte serialize`` wrote (or a
``pyflyte package`` archive), whose array node, map task and bindings are read by ``_workflow.py``.
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
    parse_go_duration,
)
from taskplug.executor._workflow import WorkflowArrayNode, is_archive, read_workflow_array_node
from taskplug.k8s import execution_labels

__all__ = ["ArrayNodeSpec", "ExecutionSpec", "load_spec", "parse_spec"]

_TOP_LEVEL = {"template", "templateFile", "execution", "inputs", "arrayNode", "node", "workflow"}
_ARRAY_KEYS = {"parallelism", "minSuccesses", "minSuccessRatio", "boundInputs", "retries", "timeout"}
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
class ArrayNodeSpec:
    """What makes a spec an ArrayNode (flyteidl ``core.ArrayNode`` plus the sub-node's metadata): the spec's
    template is then the mapped task's (list-typed inputs and outputs, as flytekit registers a map task),
    its inputs the node's full lists, and each element runs the template through its plugin."""

    parallelism: int | None = None
    """Elements evaluated at once: None (unset) follows ``default-parallelism-behavior``; 0 means all."""
    min_successes: int | None = None
    min_success_ratio: float | None = None
    bound_inputs: tuple[str, ...] = ()
    """Inputs every element receives whole (flytekit's ``functools.partial`` arguments)."""
    min_attempts: int | None = None
    """The sub-node's retry strategy (task retries + 1); None or 1 leaves ``default-max-attempts``."""
    timeout: float | None = None
    """Seconds an element's attempt may run (the sub-node's execution deadline); None for no limit."""
    workflow: str = ""
    """The workflow the node was read from, when flytekit serialized it."""


@dataclass(frozen=True)
class ExecutionSpec:
    """A loaded execution spec: the task, what the platform knows about the execution, and the inputs.

    With ``array`` set it is an ArrayNode: ``template`` is the mapped task, ``inputs`` the node's inputs."""

    template: tasks_pb2.TaskTemplate
    metadata: TaskExecutionMetadata
    inputs: literals_pb2.LiteralMap
    source: str = ""
    array: ArrayNodeSpec | None = None

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
    workflow = _load_workflow(document, base_dir)
    template = workflow.task if workflow is not None else _load_template(document, base_dir)
    execution = document.get("execution") or {}
    _expect_mapping(execution, "execution")
    _reject_unknown(execution, _EXECUTION_KEYS, "execution")
    raw_inputs = document.get("inputs") or {}
    _expect_mapping(raw_inputs, "inputs")
    if workflow is not None:
        metadata = _load_metadata(
            execution,
            template,
            default_node_id=workflow.node.id,
            default_interruptible=_sub_node_interruptible(workflow),
        )
        if "overrides" not in execution:
            metadata = replace(metadata, overrides=_task_node_overrides(workflow))
        inputs = workflow.node_inputs(raw_inputs)
        array = _workflow_array(workflow, execution)
        return ExecutionSpec(template, metadata, inputs, source, array)
    metadata = _load_metadata(execution, template)
    interface = template.interface.inputs if template.HasField("interface") else None
    inputs = literal_map_from_plain(raw_inputs, interface, "inputs")
    if interface is not None:
        missing = sorted(set(interface.variables) - set(inputs.literals))
        if missing:
            raise SpecError(f"inputs.{missing[0]}", f"the task needs input(s) {missing} and none was given")
    hand_array = _load_array(document["arrayNode"], template, execution) if "arrayNode" in document else None
    return ExecutionSpec(template, metadata, inputs, source, hand_array)


# -- array nodes -----------------------------------------------------------------------------------------


def _load_workflow(document: Mapping[str, Any], base_dir: Path) -> WorkflowArrayNode | None:
    """The ArrayNode of a workflow ``templateFile`` (pyflyte serialize / package); None for a task file."""
    node_id, name = document.get("node"), document.get("workflow")
    for key, value in (("node", node_id), ("workflow", name)):
        if value is not None and (not isinstance(value, str) or not value):
            raise SpecError(key, "must be a non-empty string")
    found = None
    value = document.get("templateFile")
    if "template" not in document and isinstance(value, str) and value:
        path = (base_dir / value) if not Path(value).is_absolute() else Path(value)
        data = None
        if not is_archive(path):
            try:
                data = path.read_bytes()
            except OSError as e:
                raise SpecError("templateFile", f"cannot read {str(path)!r}: {e.strerror}") from e
        found = read_workflow_array_node(path, data, node_id=node_id, workflow_name=name)
    if found is None:
        for key in ("node", "workflow"):
            if key in document:
                raise SpecError(
                    key, "only with a templateFile that is a workflow (pyflyte serialize / package)"
                )
        return None
    if "arrayNode" in document:
        raise SpecError(
            "arrayNode", "not with a workflow templateFile: the workflow's array node describes the map"
        )
    return found


def _sub_node_interruptible(workflow: WorkflowArrayNode) -> bool | None:
    metadata = workflow.sub_node.metadata
    if metadata.WhichOneof("interruptible_value") is not None:
        return bool(metadata.interruptible)
    return None


_RESOURCE_NAMES = {
    tasks_pb2.Resources.CPU: "cpu",
    tasks_pb2.Resources.MEMORY: "memory",
    tasks_pb2.Resources.EPHEMERAL_STORAGE: "ephemeral-storage",
    tasks_pb2.Resources.GPU: "nvidia.com/gpu",
}


def _task_node_overrides(workflow: WorkflowArrayNode) -> TaskOverrides:
    """The sub-node's ``task_node.overrides`` (what ``.with_overrides`` sets on a map task's node)."""
    overrides = workflow.sub_node.task_node.overrides
    resources: dict[str, dict[str, str]] = {}
    for kind in ("requests", "limits"):
        for entry in getattr(overrides.resources, kind):
            name = _RESOURCE_NAMES.get(entry.name)
            if name is not None and entry.value:
                resources.setdefault(kind, {})[name] = entry.value
    return TaskOverrides(
        resources=_resources(resources, "node.overrides.resources"),
        extended_resources=overrides.extended_resources if overrides.HasField("extended_resources") else None,
        container_image=overrides.container_image,
        pod_template=overrides.pod_template if overrides.HasField("pod_template") else None,
    )


def _workflow_array(workflow: WorkflowArrayNode, execution: Mapping[str, Any]) -> ArrayNodeSpec:
    array = workflow.array
    sub_metadata = workflow.sub_node.metadata
    min_attempts: int | None = None
    if sub_metadata.HasField("retries"):
        min_attempts = sub_metadata.retries.retries + 1
    elif workflow.task.metadata.HasField("retries"):
        min_attempts = workflow.task.metadata.retries.retries + 1
    if "maxAttempts" in execution:
        min_attempts = execution["maxAttempts"]
    timeout = None
    if sub_metadata.HasField("timeout") and sub_metadata.timeout.ToTimedelta().total_seconds() > 0:
        timeout = sub_metadata.timeout.ToTimedelta().total_seconds()
    elif workflow.task.metadata.timeout.ToTimedelta().total_seconds() > 0:
        timeout = workflow.task.metadata.timeout.ToTimedelta().total_seconds()
    return ArrayNodeSpec(
        parallelism=array.parallelism if array.WhichOneof("parallelism_option") else None,
        min_successes=array.min_successes
        if array.WhichOneof("success_criteria") == "min_successes"
        else None,
        min_success_ratio=(
            array.min_success_ratio if array.WhichOneof("success_criteria") == "min_success_ratio" else None
        ),
        bound_inputs=tuple(array.bound_inputs),
        min_attempts=min_attempts,
        timeout=timeout,
        workflow=workflow.workflow.id.name,
    )


def _duration_seconds(value: Any) -> float:
    """A Go duration (``90s``, ``1h30m``) or a number of seconds."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return parse_go_duration(value).total_seconds()


def _non_negative_int(value: Any, path: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise SpecError(path, f"must be a non-negative integer, got {value!r}")
    return value


def _load_array(value: Any, template: tasks_pb2.TaskTemplate, execution: Mapping[str, Any]) -> ArrayNodeSpec:
    if value is None:
        value = {}
    _expect_mapping(value, "arrayNode")
    _reject_unknown(value, _ARRAY_KEYS, "arrayNode")
    parallelism = value.get("parallelism")
    if parallelism is not None:
        parallelism = _non_negative_int(parallelism, "arrayNode.parallelism")
    min_successes = value.get("minSuccesses")
    ratio = value.get("minSuccessRatio")
    if min_successes is not None and ratio is not None:
        raise SpecError("arrayNode.minSuccessRatio", "give at most one of minSuccesses and minSuccessRatio")
    if min_successes is not None:
        min_successes = _non_negative_int(min_successes, "arrayNode.minSuccesses")
    if ratio is not None:
        if not isinstance(ratio, int | float) or isinstance(ratio, bool) or not 0 <= ratio <= 1:
            raise SpecError("arrayNode.minSuccessRatio", f"must be a number from 0 to 1, got {ratio!r}")
        ratio = float(ratio)
    bound = value.get("boundInputs") or []
    if not isinstance(bound, list):
        raise SpecError("arrayNode.boundInputs", "must be a list of input names")
    declared = set(template.interface.inputs.variables) if template.HasField("interface") else None
    for i, name in enumerate(bound):
        if not isinstance(name, str) or not name:
            raise SpecError(f"arrayNode.boundInputs[{i}]", f"must be an input name, got {name!r}")
        if declared is not None and name not in declared:
            raise SpecError(
                f"arrayNode.boundInputs[{i}]",
                f"the task declares no input named {name!r} (it has {sorted(declared)})",
            )
    min_attempts: int | None = None
    if "retries" in value:
        min_attempts = _non_negative_int(value["retries"], "arrayNode.retries") + 1
    elif template.metadata.HasField("retries"):
        min_attempts = template.metadata.retries.retries + 1
    if "maxAttempts" in execution:
        min_attempts = execution["maxAttempts"]
    timeout: float | None = None
    if value.get("timeout") is not None:
        try:
            seconds = _duration_seconds(value["timeout"])
        except ValueError as e:
            raise SpecError("arrayNode.timeout", str(e)) from e
        timeout = seconds if seconds > 0 else None
    elif template.metadata.timeout.ToTimedelta().total_seconds() > 0:
        timeout = template.metadata.timeout.ToTimedelta().total_seconds()
    return ArrayNodeSpec(
        parallelism=parallelism,
        min_successes=min_successes,
        min_success_ratio=ratio,
        bound_inputs=tuple(bound),
        min_attempts=min_attempts,
        timeout=timeout,
    )


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
    raise SpecError(
        "templateFile",
        f"{str(path)!r} is not a binary flyteidl TaskTemplate (nor an admin TaskSpec, nor a workflow "
        "written by pyflyte serialize / package)",
    )


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


def _load_metadata(
    execution: Mapping[str, Any],
    template: tasks_pb2.TaskTemplate,
    *,
    default_node_id: str = "n0",
    default_interruptible: bool | None = None,
) -> TaskExecutionMetadata:
    raw_id = execution.get("id") or {}
    _expect_mapping(raw_id, "execution.id")
    _reject_unknown(raw_id, _ID_KEYS, "execution.id")
    project = str(raw_id.get("project") or template.id.project or "project")
    domain = str(raw_id.get("domain") or template.id.domain or "development")
    name = str(raw_id.get("name") or "")
    if not name:
        raise SpecError("execution.id.name", "required (the execution's name)")
    node_id = str(raw_id.get("nodeId") or default_node_id)
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

    # Flyte's single-task launch gives the node the task's retry strategy: retries + 1 attempts, unless the
    # spec says otherwise (a budget of 1 then falls to the executor's default-max-attempts, as in propeller).
    default_attempts = template.metadata.retries.retries + 1 if template.metadata.HasField("retries") else 1
    max_attempts = execution.get("maxAttempts", default_attempts)
    if not isinstance(max_attempts, int) or isinstance(max_attempts, bool) or max_attempts < 1:
        raise SpecError("execution.maxAttempts", f"must be an integer ≥ 1, got {max_attempts!r}")
    interruptible = _bool(
        execution.get("interruptible"),
        "execution.interruptible",
        template.metadata.interruptible if default_interruptible is None else default_interruptible,
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
