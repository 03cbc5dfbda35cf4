"""The execution spec: one YAML or JSON document describing one task execution (docs/spec.md).

It is loaded into the real Flyte IDL (``flyteidl.core.TaskTemplate``, literals) and taskplug's
:class:`~taskplug.core.TaskExecutionMetadata`. Every malformed field is reported by its dotted path.

Reading is strict, by two mechanisms that together cover every field:

* the spec's own sections (the top level, ``execution``, ``arrayNode``, and the pod spec of
  ``execution.overrides.podTemplate``) are pydantic models validated in strict mode: a value of another type
  is an error, never converted (no list turned into a string, no string into a list), unknown keys are
  errors, and the types carry their ranges (uint32 where flyteidl has it, non-negative quantities,
  durations Go can hold);
* the sections that are flyteidl messages (``template``, ``execution.securityContext``,
  ``execution.overrides.extendedResources`` / ``podTemplate``) are parsed by protobuf's JSON parser, whose
  error is traced back to the exact field. What a template's Struct ``custom`` (or its ``k8sPod`` pod spec)
  holds is the plugin's to decode, as in Flyte: a malformed one is the plugin's ``BadTaskSpecification``.

Label and annotation keys and values are checked by Kubernetes' rules wherever a spec gives them, so a spec
that loads is not refused by an API server later.

A spec may also describe an ArrayNode (a flytekit ``map_task``): by hand, with an ``arrayNode`` section beside
the mapped task's template, or by pointing ``templateFile`` at the workflow ``pyflyte serialize`` wrote (or a
``pyflyte package`` archive), whose array node, map task and bindings are read by ``_workflow.py``.
"""

from __future__ import annotations

import copy
import enum
import hashlib
import math
import re
import secrets
import typing
from collections.abc import Mapping
from dataclasses import dataclass, replace
from dataclasses import field as dataclass_field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final, TypeVar

import orjson
from flyteidl.core import compiler_pb2, identifier_pb2, literals_pb2, security_pb2, tasks_pb2, workflow_pb2
from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor
from google.protobuf.message import DecodeError, Message
from google.protobuf.message_factory import GetMessageClass
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from taskplug.compiler import task_overrides
from taskplug.core import (
    Quantity,
    QuantityError,
    ResourceRequirements,
    SpecError,
    TaskExecutionID,
    TaskExecutionMetadata,
    TaskOverrides,
    literal_map_from_plain,
    load_document,
    parse_go_duration,
)
from taskplug.k8s import PodSpecModel, execution_labels

if TYPE_CHECKING:
    from taskplug.compiler import WorkflowBundle
    from taskplug.executor._workflow import LaunchPlanRun, WorkflowArrayNode

__all__ = [
    "WORKFLOW_NODE_ID",
    "ArrayNodeSpec",
    "ExecutionSpec",
    "LaunchPlanRun",
    "NodeKind",
    "WorkflowSpec",
    "child_workflow_spec",
    "load_spec",
    "new_execution_name",
    "node_array_spec",
    "node_task_spec",
    "parse_spec",
    "workflow_execution_spec",
    "workflow_spec",
]

_UINT32_MAX: Final = 2**32 - 1
_MAX_FILE_BYTES: Final = 4 * 1024 * 1024
"""The most read of a template or workflow file: the bound load_document holds every document to."""
_GO_DURATION_MAX_SECONDS: Final = (2**63 - 1) / 1e9


class NodeKind(enum.StrEnum):
    """The kind of an execution's root node (propeller's ``v1alpha1.NodeKind``, the kinds taskplug runs)."""

    TASK = "task"  # a single task
    ARRAY = "array"  # a map task (flytekit's map_task): an ArrayNode over its sub-task
    WORKFLOW = "workflow"  # a workflow: its nodes, run as propeller runs them


WORKFLOW_NODE_ID: Final = "wf"
"""The node id in a workflow execution's key (``project/domain/name/wf``). Flyte keys a workflow execution by
project, domain and name; taskplug's keys also name the root node, and a workflow's root is the workflow."""
DEFAULT_PROJECT: Final = "project"
"""The project of an execution whose spec names none (nor its task's id)."""
DEFAULT_DOMAIN: Final = "development"
DEFAULT_MAX_PARALLELISM: Final = 25
"""flyteadmin's ``maxParallelism`` default: the task, map and launch-plan nodes of one workflow execution that
run at once."""


@dataclass(frozen=True)
class WorkflowSpec:
    """What makes a spec a workflow execution: the workflow compiled as flyteadmin compiles it (the primary
    workflow, its sub-workflows and every task they run), the launch plans its nodes launch, and the
    execution's settings. The spec's ``template`` then stands for the workflow (type ``workflow``, its id and
    interface) and its ``inputs`` are the workflow's, launch-plan defaults and fixed inputs merged."""

    closure: compiler_pb2.CompiledWorkflowClosure
    launch_plans: Mapping[str, LaunchPlanRun] = dataclass_field(default_factory=dict)
    """Launch plans the workflow's nodes (at any depth, and those of the workflows they launch) launch, by
    :func:`taskplug.compiler.id_key` of the launch plan's id."""
    max_parallelism: int = DEFAULT_MAX_PARALLELISM
    """Task, map and launch-plan nodes running at once (0: no limit), as ``ExecutionSpec.max_parallelism``."""

    @property
    def template(self) -> workflow_pb2.WorkflowTemplate:
        return self.closure.primary.template

    @property
    def fail_after_executable_nodes_complete(self) -> bool:
        policy: int = self.template.metadata.on_failure
        return bool(policy == workflow_pb2.WorkflowMetadata.FAIL_AFTER_EXECUTABLE_NODES_COMPLETE)


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
class ChildLaunch:
    """What a launch-plan node launched its child execution with: enough to write the child down as a spec
    document that any executor replica reads back (:func:`child_document`)."""

    launch_plan: str
    """The launch plan's name."""
    given: literals_pb2.LiteralMap
    """The node's inputs, before the launch plan's defaults and fixed inputs were merged in."""


@dataclass(frozen=True)
class ExecutionSpec:
    """A loaded execution spec: the task, what the platform knows about the execution, and the inputs.

    With ``array`` set it is an ArrayNode: ``template`` is the mapped task, ``inputs`` the node's inputs."""

    template: tasks_pb2.TaskTemplate
    metadata: TaskExecutionMetadata
    inputs: literals_pb2.LiteralMap
    source: str = ""
    array: ArrayNodeSpec | None = None
    named: bool = True
    """Whether the spec gave ``execution.id.name``; False when the name was made for it (see
    :func:`parse_spec`)."""
    workflow: WorkflowSpec | None = None
    overwrite_cache: bool = False
    """Flyte's ``overwrite_cache`` execution flag (``execution.overwriteCache``, ``taskplug run
    --overwrite-cache``): cacheable tasks run without a lookup and their results replace the cached ones."""
    launched_as: ChildLaunch | None = None
    """For a launch-plan node's child execution: what it was launched with (see :func:`child_document`)."""

    @property
    def kind(self) -> NodeKind:
        """The kind of the execution's root node."""
        if self.workflow is not None:
            return NodeKind.WORKFLOW
        return NodeKind.TASK if self.array is None else NodeKind.ARRAY

    @property
    def execution_key(self) -> str:
        """Identifies the execution across attempts (project/domain/name/node)."""
        node = self.metadata.task_execution_id.id.node_execution_id
        ex = node.execution_id
        return f"{ex.project}/{ex.domain}/{ex.name}/{node.node_id}"

    def for_attempt(self, attempt: int) -> ExecutionSpec:
        """The same execution at another retry attempt (new generated name, same everything else); this
        spec itself when it is already that attempt's."""
        current = self.metadata.task_execution_id
        if current.id.retry_attempt == attempt and current.generated_name.endswith(f"-{attempt}"):
            return self
        tid = identifier_pb2.TaskExecutionIdentifier()
        tid.CopyFrom(self.metadata.task_execution_id.id)
        tid.retry_attempt = attempt
        base = self.metadata.task_execution_id.generated_name.rsplit("-", 1)[0]
        exec_id = TaskExecutionID(f"{base}-{attempt}", tid, self.metadata.task_execution_id.unique_node_id)
        return replace(self, metadata=replace(self.metadata, task_execution_id=exec_id))


# -- execution names ---------------------------------------------------------------------------------------

# k8s.io/apimachinery/pkg/util/rand's alphabet (no vowels, so no words), which flyteadmin's names are made of.
_NAME_ALPHABET: Final = "bcdfghjklmnpqrstvwxz2456789"
_NAME_LENGTH: Final = 20
# flyteadmin's validation of a given name (CheckValidExecutionID): lowercased, this regex, at most 63 bytes
# (a Kubernetes label value).
_NAME_RE: Final = re.compile(r"[a-z][a-z\-0-9]*")


def new_execution_name() -> str:
    """A fresh execution name as flyteadmin makes one when ``pyflyte run`` gives none (``GetExecutionName``):
    ``a`` and 19 random characters of Kubernetes' random-string alphabet — a valid label value and object
    name prefix."""
    return "a" + "".join(secrets.choice(_NAME_ALPHABET) for _ in range(_NAME_LENGTH - 1))


def _content_name(document: Mapping[str, Any]) -> str:
    """A name of the same form, drawn from the spec's content: the same spec always gets the same one."""
    try:
        canonical = orjson.dumps(document, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS, default=str)
    except orjson.JSONEncodeError:  # an integer beyond 64 bits somewhere in the inputs
        canonical = repr(document).encode()
    digest = hashlib.sha256(canonical).digest()
    return "a" + "".join(_NAME_ALPHABET[b % len(_NAME_ALPHABET)] for b in digest[: _NAME_LENGTH - 1])


# -- Kubernetes' rules for names, labels and annotations (k8s.io/apimachinery/pkg/util/validation) ----------

_DNS1123_LABEL_RE: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN_RE: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_QUALIFIED_NAME_RE: Final = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_TOTAL_ANNOTATION_SIZE: Final = 256 * 1024


def _qualified_name_problem(key: str) -> str | None:
    """IsQualifiedName: ``[prefix/]name``, the prefix a DNS-1123 subdomain, the name 63 characters of
    ``[-A-Za-z0-9_.]`` starting and ending alphanumeric."""
    parts = key.split("/")
    if len(parts) > 2:
        return "a qualified name is [prefix/]name, with at most one '/'"
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            return "prefix part must be non-empty"
        if len(prefix) > 253 or not _DNS1123_SUBDOMAIN_RE.fullmatch(prefix):
            return "prefix part must be a lowercase RFC 1123 subdomain (e.g. 'example.com')"
    if not name:
        return "name part must be non-empty"
    if len(name) > 63:
        return "name part must be no more than 63 characters"
    if not _QUALIFIED_NAME_RE.fullmatch(name):
        return (
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
            "with an alphanumeric character"
        )
    return None


def _label_value_problem(value: str) -> str | None:
    if len(value) > 63:
        return "a label value must be no more than 63 characters"
    if value and not _QUALIFIED_NAME_RE.fullmatch(value):
        return (
            "a label value must be empty or consist of alphanumeric characters, '-', '_' or '.', and must "
            "start and end with an alphanumeric character"
        )
    return None


def _check_labels(labels: Mapping[str, str] | None, path: str) -> None:
    for key, value in (labels or {}).items():
        problem = _qualified_name_problem(key) or _label_value_problem(value)
        if problem:
            raise SpecError(f"{path}.{key}", f"invalid label ({problem})")


def _check_annotations(annotations: Mapping[str, str] | None, path: str) -> None:
    total = 0
    for key, value in (annotations or {}).items():
        problem = _qualified_name_problem(key.lower())
        if problem:
            raise SpecError(f"{path}.{key}", f"invalid annotation key ({problem})")
        total += len(key.encode()) + len(value.encode())
    if total > _TOTAL_ANNOTATION_SIZE:
        raise SpecError(
            path, f"annotations may hold at most {_TOTAL_ANNOTATION_SIZE} bytes, these hold {total}"
        )


# -- the typed sections -----------------------------------------------------------------------------------


def _scalar_text(value: Any) -> Any:
    """A label, annotation or environment value: a string, or a number or boolean written without quotes
    (``n: 3`` means "3"), as Kubernetes' YAML tools and viper read them; never a list, a map or null."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"must be a string, got {value!r}")
        return repr(value)
    if not isinstance(value, str):
        raise ValueError(f"must be a string, got {_kind(value)}")
    return value


def _quantity(value: Any) -> Any:
    """A resource quantity as Kubernetes reads one (a string, or a number by its text), never negative."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"must be a quantity such as '500m' or '1Gi', got {_kind(value)}")
    try:
        quantity = Quantity.from_json(value)
    except QuantityError as e:
        raise ValueError(str(e)) from None
    if quantity.nanos < 0:
        raise ValueError(f"must be a non-negative quantity, got {value!r}")
    return value


def _seconds(value: Any) -> float:
    """A duration: a Go duration string (``90s``, ``1h30m``) or a number of seconds, that Go can hold."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"must be a duration such as '90s' or a number of seconds, got {_kind(value)}")
    if isinstance(value, str):
        return parse_go_duration(value).total_seconds()
    if not math.isfinite(value) or abs(value) > _GO_DURATION_MAX_SECONDS:
        raise ValueError(
            f"duration {value!r} (seconds) is out of range (a Go duration holds about 292 years)"
        )
    return float(value)


def _not_null(value: Any) -> Any:
    # For keys whose null means nothing ("templateFile:" left empty): given, they must hold a value.
    if value is None:
        raise ValueError("must have a value, got null")
    return value


Text = Annotated[str, BeforeValidator(_scalar_text)]
QuantityValue = Annotated[str | int | float, BeforeValidator(_quantity)]
Seconds = Annotated[float, BeforeValidator(_seconds)]
Uint32 = Annotated[int, Field(ge=0, le=_UINT32_MAX)]
NonEmpty = Annotated[str, Field(min_length=1)]


class _Section(BaseModel):
    """A section of the spec: strict types, unknown keys refused, camelCase keys."""

    # defer_build: a section's validator is built when it first validates. A spec validates the top level and
    # ``execution`` only; the others are parts of those two validators and never need their own.
    model_config = ConfigDict(
        strict=True,
        extra="forbid",
        frozen=True,
        alias_generator=to_camel,
        validate_by_name=False,
        defer_build=True,
    )


class _Id(_Section):
    project: str | None = None
    domain: str | None = None
    name: str | None = None
    node_id: str | None = None
    retry_attempt: Uint32 = 0


class _Resources(_Section):
    requests: dict[str, QuantityValue] | None = None
    limits: dict[str, QuantityValue] | None = None


class _Overrides(_Section):
    resources: _Resources | None = None
    extended_resources: dict[str, Any] | None = None
    container_image: str | None = None
    pod_template: dict[str, Any] | None = None


class _OwnerReference(_Section):
    api_version: NonEmpty
    kind: NonEmpty
    name: NonEmpty
    uid: NonEmpty
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class _Execution(_Section):
    id: _Id | None = None
    generated_name: NonEmpty | None = None
    namespace: str | None = None
    labels: dict[str, Text] | None = None
    annotations: dict[str, Text] | None = None
    service_account: str | None = None
    interruptible: bool | None = None
    max_attempts: Annotated[int, Field(ge=1, le=_UINT32_MAX)] | None = None
    environment: dict[str, Text] | None = None
    console_url: str | None = None
    security_context: dict[str, Any] | None = None
    platform_resources: _Resources | None = None
    overrides: _Overrides | None = None
    owner_reference: _OwnerReference | None = None
    overwrite_cache: bool | None = None
    max_parallelism: Uint32 | None = None


class _ArrayNode(_Section):
    parallelism: Uint32 | None = None
    min_successes: Uint32 | None = None
    min_success_ratio: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] | None = None
    bound_inputs: list[NonEmpty] | None = None
    retries: Uint32 | None = None
    timeout: Seconds | None = None


class _Spec(_Section):
    template: Annotated[dict[str, Any] | None, BeforeValidator(_not_null)] = None
    template_file: Annotated[NonEmpty | None, BeforeValidator(_not_null)] = None
    execution: _Execution | None = None
    inputs: dict[str, Any] | None = None
    array_node: _ArrayNode | None = None
    node: Annotated[NonEmpty | None, BeforeValidator(_not_null)] = None
    workflow: Annotated[NonEmpty | None, BeforeValidator(_not_null)] = None
    launch_plan: Annotated[NonEmpty | None, BeforeValidator(_not_null)] = None
    workflow_closure: Annotated[dict[str, Any] | None, BeforeValidator(_not_null)] = None
    launch_plans: list[dict[str, Any]] | None = None


M = TypeVar("M", bound=BaseModel)


def _validate(model: type[M], value: Any, path: str) -> M:
    try:
        return model.model_validate(value)
    except ValidationError as e:
        raise _spec_error(model, e, path) from None


_TYPE_WORDS: Final = {
    "string_type": "must be a string",
    "int_type": "must be an integer",
    "bool_type": "must be true or false",
    "float_type": "must be a number",
    "dict_type": "must be a mapping",
    "model_type": "must be a mapping",
    "list_type": "must be a list",
    "sequence_str": "must be a list",  # a str given for a Sequence field
    "missing": "required",
    "finite_number": "must be a finite number",
}


def _spec_error(model: type[BaseModel], error: ValidationError, prefix: str) -> SpecError:
    first = error.errors(include_url=False)[0]
    loc = list(first["loc"])
    kind = first["type"]
    if loc and loc[-1] == "[key]":  # a mapping's key of the wrong type: name it as the key it is
        loc = [*loc[:-2], str(loc[-2])]
        return SpecError(_dotted(prefix, loc), f"keys must be strings, got {_kind(first['input'])}")
    path = _dotted(prefix, loc)
    if kind == "extra_forbidden":
        known = _known_fields(model, loc[:-1])
        listed = f" (expected one of: {', '.join(known)})" if known else ""
        return SpecError(path, f"unknown field{listed}")
    bound = (first.get("ctx") or {}).get("le" if kind == "less_than_equal" else "ge")
    if kind in ("less_than_equal", "greater_than_equal") and bound is not None:
        word = "at most" if kind == "less_than_equal" else "at least"
        uint32 = " (a uint32, as in flyteidl)" if bound == _UINT32_MAX else ""
        return SpecError(path, f"must be {word} {bound}{uint32}, got {_kind(first['input'])}")
    if kind in _TYPE_WORDS:
        reason = _TYPE_WORDS[kind]
        if kind != "missing":
            reason += f", got {_kind(first['input'])}"
        return SpecError(path, reason)
    message = str(first["msg"]).removeprefix("Value error, ")
    message = message.replace("Input should be", "must be")
    return SpecError(path, message)


def _dotted(prefix: str, loc: list[Any]) -> str:
    path = prefix
    for part in loc:
        path = f"{path}[{part}]" if isinstance(part, int) else (f"{path}.{part}" if path else str(part))
    return path


def _known_fields(model: type[BaseModel], loc: list[Any]) -> list[str]:
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return []
        field = next((f for n, f in current.model_fields.items() if (f.alias or n) == part), None)
        if field is None:
            return []
        current = _model_in(field.annotation)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return sorted(f.alias or n for n, f in current.model_fields.items())
    return []


def _model_in(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# -- loading ---------------------------------------------------------------------------------------------


def load_spec(path: str | Path, *, fresh_name: bool = True) -> ExecutionSpec:
    """Read and parse the spec at ``path`` through the bounded document reader (size, UTF-8, YAML aliases
    and nesting; errors name the file). ``fresh_name``: see :func:`parse_spec`."""
    p = Path(path)
    document = load_document(p, what="execution spec")
    if not isinstance(document, Mapping):
        raise SpecError("", f"execution spec {str(p)!r} must be a mapping at the top level")
    try:
        return parse_spec(document, base_dir=p.parent, source=str(p), fresh_name=fresh_name)
    except SpecError as e:
        if not e.path:
            raise
        raise SpecError(e.path, f"{e.reason} (in {str(p)!r})") from None


def parse_spec(
    document: Mapping[str, Any], *, base_dir: Path = Path("."), source: str = "", fresh_name: bool = True
) -> ExecutionSpec:
    """The execution a spec document describes; a malformed field is a :class:`SpecError` naming it.

    A spec without ``execution.id.name`` gets a name made for it: with ``fresh_name`` a new random one each
    time (as flyteadmin names an execution ``pyflyte run`` launches without ``--name``: every ``taskplug
    run`` of it is a new execution), otherwise one drawn from the spec's content, so that the same spec
    always renders the same objects (``taskplug render``)."""
    spec = _validate(_Spec, dict(document), "")
    execution = spec.execution or _Execution()
    closure_form = _load_closure_workflow(spec, document, source=source, fresh_name=fresh_name)
    if closure_form is not None:
        return closure_form
    whole = _load_whole_workflow(spec, document, base_dir, source=source, fresh_name=fresh_name)
    if whole is not None:
        return _overwriting(whole, execution)
    workflow = _load_workflow(spec, base_dir)
    template = workflow.task if workflow is not None else _load_template(spec, base_dir)
    _check_task_pod_metadata(template)
    given = execution.id.name if execution.id is not None and execution.id.name else None
    name = given or (new_execution_name() if fresh_name else _content_name(document))
    raw_inputs = spec.inputs or {}
    if workflow is not None:
        metadata = _load_metadata(
            execution,
            template,
            name=name,
            default_node_id=workflow.node.id,
            default_interruptible=_sub_node_interruptible(workflow),
        )
        if execution.overrides is None:
            metadata = replace(metadata, overrides=_task_node_overrides(workflow))
        inputs = workflow.node_inputs(raw_inputs)
        array = _workflow_array(workflow, execution)
        spec_ = ExecutionSpec(template, metadata, inputs, source, array, named=given is not None)
        return _overwriting(spec_, execution)
    metadata = _load_metadata(execution, template, name=name)
    interface = template.interface.inputs if template.HasField("interface") else None
    inputs = literal_map_from_plain(raw_inputs, interface, "inputs")
    if interface is not None:
        missing = sorted(set(interface.variables) - set(inputs.literals))
        if missing:
            raise SpecError(f"inputs.{missing[0]}", f"the task needs input(s) {missing} and none was given")
    hand_array = None
    if "array_node" in spec.model_fields_set:
        hand_array = _load_array(spec.array_node or _ArrayNode(), template, execution)
    spec_ = ExecutionSpec(template, metadata, inputs, source, hand_array, named=given is not None)
    return _overwriting(spec_, execution)


def _overwriting(spec: ExecutionSpec, execution: _Execution) -> ExecutionSpec:
    return replace(spec, overwrite_cache=True) if execution.overwrite_cache else spec


# -- array nodes -----------------------------------------------------------------------------------------


def _load_whole_workflow(
    spec: _Spec, document: Mapping[str, Any], base_dir: Path, *, source: str, fresh_name: bool
) -> ExecutionSpec | None:
    """A workflow ``templateFile`` (pyflyte serialize / package) without ``node``: the whole workflow (or the
    launch plan ``launchPlan`` names), run as flyteadmin would launch it; None for anything else."""
    if spec.template is not None or spec.template_file is None or spec.node is not None:
        if spec.launch_plan is not None and spec.node is not None:
            raise SpecError("launchPlan", "not with node: a launch plan runs its whole workflow")
        return None
    # Imported here: only a spec with a templateFile may name a workflow (archives, flyteidl.admin's types).
    from taskplug.compiler import as_workflow_spec, is_archive, read_bundle

    path = _relative(spec.template_file, base_dir)
    if not is_archive(path) and not path.is_dir():
        data = _read_binary(path)
        if as_workflow_spec(data) is None and not _is_launch_plan(data):
            if spec.launch_plan is not None:
                raise SpecError("launchPlan", "only with a templateFile that is a workflow")
            return None
    if "array_node" in spec.model_fields_set:
        raise SpecError("arrayNode", "not with a workflow templateFile: its nodes describe themselves")
    bundle = read_bundle(path, workflow=spec.workflow, launch_plan=spec.launch_plan, field="templateFile")
    execution = document.get("execution")
    return workflow_spec(
        bundle,
        spec.inputs or {},
        execution=execution if isinstance(execution, Mapping) else None,
        source=source,
        fresh_name=fresh_name,
    )


def _load_closure_workflow(
    spec: _Spec, document: Mapping[str, Any], *, source: str, fresh_name: bool
) -> ExecutionSpec | None:
    """The self-contained workflow form (what ``taskplug run --server`` sends, since a server reads no
    files): ``workflowClosure`` holds the workflow's templates in a ``CompiledWorkflowClosure``'s shape as
    protobuf JSON (the primary workflow, every other workflow it may run, its tasks; as flytekit serializes
    them, not compiled: a template with a start or end node is refused), ``launchPlans`` the
    ``admin.LaunchPlan`` documents its launch plans are (``launchPlan`` names the one that runs it, else the
    workflow's default one), ``inputs`` the plain values given. None for a spec without ``workflowClosure``.

    The closure is not trusted: its primary workflow's template, its sub-workflows' templates and its tasks'
    templates are read back into a bundle and compiled again with flyteadmin's rules, and the launch plan's
    defaults and fixed inputs merged, exactly as a workflow file is (``taskplug.compiler``)."""
    if spec.workflow_closure is None:
        if spec.launch_plans is not None:
            raise SpecError("launchPlans", "only with workflowClosure")
        return None
    for name, given in (
        ("template", spec.template),
        ("templateFile", spec.template_file),
        ("node", spec.node),
        ("workflow", spec.workflow),
    ):
        if given is not None:
            raise SpecError(name, "not with workflowClosure: the closure's primary workflow is what runs")
    if "array_node" in spec.model_fields_set:
        raise SpecError("arrayNode", "not with workflowClosure: its nodes describe themselves")
    # Imported here: only a workflow needs the compiler and flyteidl.admin's types.
    from flyteidl.admin import launch_plan_pb2
    from flyteidl.admin import workflow_pb2 as admin_workflow_pb2

    from taskplug.compiler import SerializedEntities, make_bundle

    closure = _parse_message(spec.workflow_closure, compiler_pb2.CompiledWorkflowClosure(), "workflowClosure")
    if not closure.primary.template.id.name:
        raise SpecError("workflowClosure.primary.template.id.name", "required (the workflow to run)")
    templates = [("workflowClosure.primary.template", closure.primary.template)] + [
        (f"workflowClosure.subWorkflows[{i}].template", sub.template)
        for i, sub in enumerate(closure.sub_workflows)
    ]
    for where, template in templates:
        if any(node.id in ("start-node", "end-node") for node in template.nodes):
            # Compiling renames a branch's cases (<branch>-<case>): a compiled template compiled again would
            # have them renamed twice. What flytekit serializes has no start or end node.
            raise SpecError(
                f"{where}.nodes",
                "is a compiled template (it has a start-node or end-node): send the workflow's templates as "
                "flytekit serializes them; the server compiles them",
            )
    plans = tuple(
        _parse_message(plan, launch_plan_pb2.LaunchPlan(), f"launchPlans[{i}]")
        for i, plan in enumerate(spec.launch_plans or ())
    )
    entities = SerializedEntities(
        workflows=(
            admin_workflow_pb2.WorkflowSpec(
                template=closure.primary.template,
                sub_workflows=[sub.template for sub in closure.sub_workflows],
            ),
        ),
        tasks=tuple(task.template for task in closure.tasks),
        launch_plans=plans,
        source=source or "workflowClosure",
    )
    if spec.launch_plan is not None:
        bundle = make_bundle(entities, workflow=None, launch_plan=spec.launch_plan)
    else:
        bundle = make_bundle(entities, workflow=closure.primary.template.id.name, launch_plan=None)
    execution = document.get("execution")
    return workflow_spec(
        bundle,
        spec.inputs or {},
        execution=execution if isinstance(execution, Mapping) else None,
        source=source,
        fresh_name=fresh_name,
    )


def _is_launch_plan(data: bytes) -> bool:
    from flyteidl.admin import launch_plan_pb2

    plan = launch_plan_pb2.LaunchPlan()
    try:
        plan.ParseFromString(data)
    except DecodeError:
        return False
    return plan.HasField("spec") and plan.spec.HasField("workflow_id") and bool(plan.id.name)


def _load_workflow(spec: _Spec, base_dir: Path) -> WorkflowArrayNode | None:
    """The ArrayNode of a workflow ``templateFile`` (pyflyte serialize / package); None for a task file."""
    found = None
    if spec.template is None and spec.template_file is not None:
        # Imported here: only a spec with a templateFile may name a workflow (archives, flyteidl.admin's types).
        from taskplug.executor._workflow import is_archive, read_workflow_array_node

        path = _relative(spec.template_file, base_dir)
        data = None if is_archive(path) else _read_binary(path)
        found = read_workflow_array_node(path, data, node_id=spec.node, workflow_name=spec.workflow)
    if found is None:
        for key, value in (("node", spec.node), ("workflow", spec.workflow)):
            if value is not None:
                raise SpecError(
                    key, "only with a templateFile that is a workflow (pyflyte serialize / package)"
                )
        return None
    if "array_node" in spec.model_fields_set:
        raise SpecError(
            "arrayNode", "not with a workflow templateFile: the workflow's array node describes the map"
        )
    return found


def _relative(value: str, base_dir: Path) -> Path:
    return (base_dir / value) if not Path(value).is_absolute() else Path(value)


def _read_binary(path: Path) -> bytes:
    """A template or workflow file's bytes, read within the same bound as any document."""
    try:
        with path.open("rb") as f:
            data = f.read(_MAX_FILE_BYTES + 1)
    except OSError as e:
        raise SpecError("templateFile", f"cannot read {str(path)!r}: {e.strerror or e}") from None
    if len(data) > _MAX_FILE_BYTES:
        raise SpecError("templateFile", f"{str(path)!r} is larger than {_MAX_FILE_BYTES} bytes")
    return data


def _sub_node_interruptible(workflow: WorkflowArrayNode) -> bool | None:
    metadata = workflow.sub_node.metadata
    if metadata.WhichOneof("interruptible_value") is not None:
        return bool(metadata.interruptible)
    return None


def _task_node_overrides(workflow: WorkflowArrayNode) -> TaskOverrides:
    """The sub-node's ``task_node.overrides`` (what ``.with_overrides`` sets on a map task's node)."""
    return task_overrides(workflow.sub_node)


def _workflow_array(workflow: WorkflowArrayNode, execution: _Execution) -> ArrayNodeSpec:
    return _array_node_spec(
        workflow.array, workflow.task, execution.max_attempts, workflow_name=workflow.workflow.id.name
    )


def _array_node_spec(
    array: workflow_pb2.ArrayNode,
    task: tasks_pb2.TaskTemplate,
    max_attempts: int | None,
    *,
    workflow_name: str,
) -> ArrayNodeSpec:
    """An ArrayNode as taskplug runs it: its parallelism and success criteria, and its sub-node's retry
    strategy (node retries, else the task's) and execution deadline (node timeout, else the task's)."""
    sub_metadata = array.node.metadata
    min_attempts: int | None = None
    if sub_metadata.HasField("retries"):
        min_attempts = sub_metadata.retries.retries + 1
    elif task.metadata.HasField("retries"):
        min_attempts = task.metadata.retries.retries + 1
    if max_attempts is not None:
        min_attempts = max_attempts
    timeout = None
    if sub_metadata.HasField("timeout") and sub_metadata.timeout.ToTimedelta().total_seconds() > 0:
        timeout = sub_metadata.timeout.ToTimedelta().total_seconds()
    elif task.metadata.timeout.ToTimedelta().total_seconds() > 0:
        timeout = task.metadata.timeout.ToTimedelta().total_seconds()
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
        workflow=workflow_name,
    )


# -- workflows ---------------------------------------------------------------------------------------------


def workflow_spec(
    bundle: WorkflowBundle,
    values: Mapping[str, Any],
    *,
    execution: Mapping[str, Any] | None = None,
    source: str = "",
    fresh_name: bool = True,
    partial_inputs: bool = False,
) -> ExecutionSpec:
    """The execution of ``bundle``'s launch plan with the plain input ``values``, as flyteadmin creates one
    (:func:`~taskplug.executor._workflow.compile_bundle`: hydrated, compiled, inputs merged); ``execution``
    is a spec's ``execution`` section (the id, namespace, environment…). ``partial_inputs``: required inputs
    may be missing (a spec to render, never to run)."""
    from taskplug.executor._workflow import compile_bundle  # flyteidl.admin's types load only for workflows

    ids = (execution or {}).get("id") or {}
    project = (ids.get("project") if isinstance(ids, Mapping) else None) or DEFAULT_PROJECT
    domain = (ids.get("domain") if isinstance(ids, Mapping) else None) or DEFAULT_DOMAIN
    compiled = compile_bundle(
        bundle, values, project=str(project), domain=str(domain), partial_inputs=partial_inputs
    )
    return workflow_execution_spec(
        compiled.closure,
        compiled.inputs,
        execution=execution,
        launch_plans=compiled.launch_plans,
        max_parallelism=compiled.max_parallelism,
        source=source,
        fresh_name=fresh_name,
    )


def workflow_execution_spec(
    closure: compiler_pb2.CompiledWorkflowClosure,
    inputs: literals_pb2.LiteralMap,
    *,
    execution: Mapping[str, Any] | None = None,
    launch_plans: Mapping[str, LaunchPlanRun] | None = None,
    max_parallelism: int | None = None,
    source: str = "",
    fresh_name: bool = True,
) -> ExecutionSpec:
    """A workflow execution of ``closure`` (compiled) with ``inputs`` (the workflow's, merged with its launch
    plan's): ``execution`` is a spec's ``execution`` section (the id, namespace, labels, environment… every
    node's pod gets them, as a Flyte execution's do)."""
    model = _validate(_Execution, dict(execution or {}), "execution")
    workflow = closure.primary.template
    template = tasks_pb2.TaskTemplate(type=str(NodeKind.WORKFLOW))
    template.id.CopyFrom(workflow.id)
    if workflow.HasField("interface"):
        template.interface.CopyFrom(workflow.interface)
    given = model.id.name if model.id is not None and model.id.name else None
    digest = hashlib.sha256(closure.SerializeToString(deterministic=True) + inputs.SerializeToString())
    name = given or (new_execution_name() if fresh_name else "w" + digest.hexdigest()[:19])
    interruptible = model.interruptible
    if interruptible is None and workflow.metadata_defaults.interruptible:
        interruptible = True
    metadata = _load_metadata(
        model, template, name=name, default_node_id=WORKFLOW_NODE_ID, default_interruptible=interruptible
    )
    return ExecutionSpec(
        template,
        metadata,
        inputs,
        source,
        named=given is not None,
        overwrite_cache=bool(model.overwrite_cache),
        workflow=WorkflowSpec(
            closure,
            dict(launch_plans or {}),
            # flyteadmin: the execution's own max_parallelism, else the launch plan's, else the default.
            next(
                (p for p in (model.max_parallelism, max_parallelism) if p is not None),
                DEFAULT_MAX_PARALLELISM,
            ),
        ),
    )


def child_workflow_spec(
    parent: ExecutionSpec,
    launched: LaunchPlanRun,
    inputs: literals_pb2.LiteralMap,
    name: str,
    *,
    given: literals_pb2.LiteralMap | None = None,
) -> ExecutionSpec:
    """The execution a launch-plan node of ``parent`` starts (flyteadmin's ``CreateExecution`` from
    propeller's launch-plan handler): named ``name``, in the parent's project and domain, with the parent's
    execution settings (namespace, labels, environment, service account, interruptible, max parallelism —
    propeller hands the parent's over), running ``launched``'s workflow with ``inputs`` (merged)."""
    assert parent.workflow is not None
    _check_name(name)
    workflow = launched.closure.primary.template
    template = tasks_pb2.TaskTemplate(type=str(NodeKind.WORKFLOW))
    template.id.CopyFrom(workflow.id)
    if workflow.HasField("interface"):
        template.interface.CopyFrom(workflow.interface)
    meta = parent.metadata
    execution = meta.task_execution_id.id.node_execution_id.execution_id
    tid = identifier_pb2.TaskExecutionIdentifier(
        node_execution_id=identifier_pb2.NodeExecutionIdentifier(
            node_id=WORKFLOW_NODE_ID,
            execution_id=identifier_pb2.WorkflowExecutionIdentifier(
                project=execution.project, domain=execution.domain, name=name
            ),
        ),
    )
    tid.task_id.CopyFrom(workflow.id)
    labels = dict(meta.labels)
    labels.update(
        execution_labels(name, WORKFLOW_NODE_ID, interruptible=meta.interruptible, task_name=workflow.id.name)
    )
    return ExecutionSpec(
        template,
        replace(
            meta,
            task_execution_id=TaskExecutionID(f"{name}-{WORKFLOW_NODE_ID}-0", tid, WORKFLOW_NODE_ID),
            owner_name=name,
            labels=labels,
        ),
        inputs,
        parent.source,
        workflow=WorkflowSpec(
            launched.closure, parent.workflow.launch_plans, parent.workflow.max_parallelism
        ),
        overwrite_cache=parent.overwrite_cache,  # propeller hands the flag to the child execution
        launched_as=ChildLaunch(launched.launch_plan.id.name, given if given is not None else inputs),
    )


def child_document(parent: Mapping[str, Any], child: ExecutionSpec) -> dict[str, Any]:
    """The self-contained spec document (the ``workflowClosure`` form a server takes) of ``child``, a
    launch-plan node's execution, written from its parent's document ``parent``: the same templates and
    launch plans, the child's launch plan by name, the node's inputs as Literal JSON (reading the document
    merges the launch plan's defaults and fixed inputs again, as for every submission), and the parent's
    ``execution`` section naming the child, with the parent's max parallelism (propeller hands it over).
    Reading it back gives the execution :func:`child_workflow_spec` made."""
    launch = child.launched_as
    if launch is None or child.workflow is None:
        raise ValueError(f"execution {child.execution_key} was not launched by a launch-plan node")
    if "workflowClosure" not in parent:
        raise SpecError(
            "workflowClosure",
            "a launch plan's child execution is written down only from a self-contained workflow document",
        )
    document: dict[str, Any] = {
        "workflowClosure": copy.deepcopy(parent["workflowClosure"]),
        "launchPlans": copy.deepcopy(list(parent.get("launchPlans") or [])),
        "launchPlan": launch.launch_plan,
        "inputs": {name: json_format.MessageToDict(value) for name, value in launch.given.literals.items()},
    }
    section = copy.deepcopy(dict(parent.get("execution") or {}))
    ids = dict(section.get("id") or {})
    ids["name"] = child.metadata.task_execution_id.id.node_execution_id.execution_id.name
    section["id"] = ids
    section.pop("generatedName", None)
    section["maxParallelism"] = child.workflow.max_parallelism
    section["overwriteCache"] = child.overwrite_cache
    document["execution"] = section
    return document


def node_task_spec(
    root: ExecutionSpec,
    node: workflow_pb2.Node,
    task: tasks_pb2.TaskTemplate,
    inputs: literals_pb2.LiteralMap,
    unique_id: str,
    *,
    interruptible: bool | None,
) -> ExecutionSpec:
    """The execution spec a workflow's task node ``node`` runs its task ``task`` with: the workflow
    execution's metadata (namespace, labels, environment, service account…) for node ``unique_id``, the
    node's retry strategy, timeout, interruptible flag and overrides applied as propeller builds a task
    node's context (its ``NodeSpec``: retries, deadlines, resources, image, pod template)."""
    template = task  # shared by the nodes running it (nothing changes a spec's template), copied to change
    metadata = node.metadata
    if (
        metadata.HasField("timeout")
        and metadata.timeout.ToTimedelta().total_seconds() > 0
        and metadata.timeout != task.metadata.timeout
    ):
        # The node's execution deadline (flytekit copies the task's timeout into the node; an override wins).
        template = tasks_pb2.TaskTemplate()
        template.CopyFrom(task)
        template.metadata.timeout.CopyFrom(metadata.timeout)
    max_attempts = 1
    if metadata.HasField("retries") and metadata.retries.retries:
        max_attempts = metadata.retries.retries + 1
    elif task.metadata.HasField("retries") and task.metadata.retries.retries:
        max_attempts = task.metadata.retries.retries + 1
    if metadata.WhichOneof("interruptible_value") is not None:
        interruptible = bool(metadata.interruptible)
    root_meta = root.metadata
    execution = root_meta.task_execution_id.id.node_execution_id.execution_id
    tid = identifier_pb2.TaskExecutionIdentifier(
        node_execution_id=identifier_pb2.NodeExecutionIdentifier(node_id=unique_id, execution_id=execution),
        retry_attempt=0,
    )
    tid.task_id.CopyFrom(task.id)
    labels = dict(root_meta.labels)
    labels.update(
        execution_labels(execution.name, unique_id, interruptible=bool(interruptible), task_name=task.id.name)
    )
    overrides = root_meta.overrides
    if node.WhichOneof("target") == "task_node" and node.task_node.HasField("overrides"):
        overrides = task_overrides(node)
    return replace(
        root,
        template=template,
        inputs=inputs,
        workflow=None,
        metadata=replace(
            root_meta,
            task_execution_id=TaskExecutionID(f"{execution.name}-{unique_id}-0", tid, unique_id),
            labels=labels,
            max_attempts=max_attempts,
            interruptible=bool(interruptible),
            overrides=overrides,
        ),
    )


def node_array_spec(
    root: ExecutionSpec,
    node: workflow_pb2.Node,
    task: tasks_pb2.TaskTemplate,
    inputs: literals_pb2.LiteralMap,
    unique_id: str,
    *,
    interruptible: bool | None,
) -> ExecutionSpec:
    """The execution spec a workflow's array node ``node`` (a ``map_task``) runs with: its sub-node's task
    ``task`` mapped over ``inputs`` (the node's inputs, full lists), its parallelism and success criteria,
    the sub-node's retries, timeout, interruptible flag and overrides."""
    sub_node = node.array_node.node
    spec = node_task_spec(root, sub_node, task, inputs, unique_id, interruptible=interruptible)
    array = _array_node_spec(node.array_node, task, None, workflow_name=root.template.id.name)
    return replace(spec, array=array)


def _load_array(value: _ArrayNode, template: tasks_pb2.TaskTemplate, execution: _Execution) -> ArrayNodeSpec:
    if value.min_successes is not None and value.min_success_ratio is not None:
        raise SpecError("arrayNode.minSuccessRatio", "give at most one of minSuccesses and minSuccessRatio")
    bound = value.bound_inputs or []
    declared = set(template.interface.inputs.variables) if template.HasField("interface") else None
    for i, name in enumerate(bound):
        if declared is not None and name not in declared:
            raise SpecError(
                f"arrayNode.boundInputs[{i}]",
                f"the task declares no input named {name!r} (it has {sorted(declared)})",
            )
    min_attempts: int | None = None
    if value.retries is not None:
        min_attempts = value.retries + 1
    elif template.metadata.HasField("retries"):
        min_attempts = template.metadata.retries.retries + 1
    if execution.max_attempts is not None:
        min_attempts = execution.max_attempts
    timeout: float | None = None
    if value.timeout is not None:
        timeout = value.timeout if value.timeout > 0 else None
    elif template.metadata.timeout.ToTimedelta().total_seconds() > 0:
        timeout = template.metadata.timeout.ToTimedelta().total_seconds()
    return ArrayNodeSpec(
        parallelism=value.parallelism,
        min_successes=value.min_successes,
        min_success_ratio=value.min_success_ratio,
        bound_inputs=tuple(bound),
        min_attempts=min_attempts,
        timeout=timeout,
    )


# -- flyteidl messages -------------------------------------------------------------------------------------

_INT_RANGE: Final = (-(2**63), 2**64 - 1)
_WELL_KNOWN: Final = "google.protobuf."


def _parse_message(value: Mapping[str, Any], message: Message, path: str) -> Any:
    _check_json_values(value, path)
    try:
        # Round-trip through JSON so that integer keys are written as JSON writes them.
        return json_format.Parse(orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS), message)
    except json_format.ParseError as e:
        where, reason = _locate(value, message.DESCRIPTOR, path)
        raise SpecError(where, reason or _parse_error_text(e)) from None


def _check_json_values(value: Any, path: str) -> None:
    """What protobuf's JSON form cannot hold is an error naming it: a float that is not finite (JSON has
    none; a Struct would turn it into null) or an integer beyond 64 bits."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            raise SpecError(where, f"must be a finite number, got {item!r}")
        if (
            isinstance(item, int)
            and not isinstance(item, bool)
            and not _INT_RANGE[0] <= item <= _INT_RANGE[1]
        ):
            raise SpecError(where, "is out of range (integers here hold at most 64 bits)")
        if isinstance(item, Mapping):
            stack.extend((v, f"{where}.{k}") for k, v in item.items())
        elif isinstance(item, list):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(item))


def _locate(value: Mapping[str, Any], descriptor: Descriptor, path: str) -> tuple[str, str | None]:
    """The field of ``value`` (JSON for a ``descriptor`` message) that protobuf refuses, and why: each key is
    parsed alone, and a message-typed one is searched in turn. ``(path, None)`` when no one key is at fault
    (two members of a oneof, say)."""
    for key, sub in value.items():
        where = f"{path}.{key}"
        field = descriptor.fields_by_camelcase_name.get(str(key)) or descriptor.fields_by_name.get(str(key))
        if field is None:
            known = sorted(f.json_name for f in descriptor.fields)
            return where, f"unknown field (expected one of: {', '.join(known)})"
        error = _parse_error({key: sub}, descriptor)
        if error is None:
            continue
        inner = field.message_type
        if inner is None and field.is_repeated and isinstance(sub, list):
            for i, item in enumerate(sub):  # a list of scalars: the element at fault
                problem = _parse_error({key: [item]}, descriptor)
                if problem is not None:
                    return f"{where}[{i}]", problem
        elif inner is not None and inner.GetOptions().map_entry:
            # A map: the entry at fault, and within it the field when its values are messages.
            values = inner.fields_by_name["value"].message_type
            if (values is None or values.full_name.startswith(_WELL_KNOWN)) and isinstance(sub, Mapping):
                for name, item in sub.items():
                    problem = _parse_error({key: {name: item}}, descriptor)
                    if problem is not None:
                        return f"{where}.{name}", problem
            elif values is not None and isinstance(sub, Mapping):
                for name, item in sub.items():
                    if not isinstance(item, Mapping):
                        return f"{where}.{name}", f"must be a mapping, got {_kind(item)}"
                    found = _locate(item, values, f"{where}.{name}")
                    if found[1] is not None:
                        return found
        elif inner is not None and not inner.full_name.startswith(_WELL_KNOWN):
            if field.is_repeated and isinstance(sub, list):
                for i, item in enumerate(sub):
                    if not isinstance(item, Mapping):
                        return f"{where}[{i}]", f"must be a mapping, got {_kind(item)}"
                    if _parse_error(item, inner) is not None:
                        found = _locate(item, inner, f"{where}[{i}]")
                        return found if found[1] is not None else (found[0], _parse_error(item, inner))
            elif not field.is_repeated and isinstance(sub, Mapping):
                found = _locate(sub, inner, where)
                if found[1] is not None:
                    return found
        return where, error
    return path, None


def _parse_error(value: Mapping[str, Any], descriptor: Descriptor) -> str | None:
    try:
        json_format.Parse(orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS), GetMessageClass(descriptor)())
    except json_format.ParseError as e:
        return _parse_error_text(e)
    return None


_FAILED_TO_PARSE = re.compile(r"Failed to parse \w+ field: ")
_AT = re.compile(r"\.? at [\w.\[\]]+\.*$")


def _parse_error_text(e: Exception) -> str:
    text = _FAILED_TO_PARSE.sub("", str(e)).replace('Message type "flyteidl.core.', 'message "')
    return _AT.sub("", text.strip()).rstrip(".")


# -- the template ------------------------------------------------------------------------------------------


def _load_template(spec: _Spec, base_dir: Path) -> tasks_pb2.TaskTemplate:
    if (spec.template is None) == (spec.template_file is None):
        raise SpecError(
            "template", "give exactly one of `template` (inline) or `templateFile` (binary TaskTemplate)"
        )
    if spec.template is not None:
        template = _parse_message(spec.template, tasks_pb2.TaskTemplate(), "template")
    else:
        assert spec.template_file is not None
        template = _read_template_file(spec.template_file, base_dir)
    if not template.type:
        raise SpecError("template.type", "required (the task type, e.g. container or python-task)")
    target = template.WhichOneof("target")
    if target == "container" and not template.container.image and not _image_supplied(spec, template):
        raise SpecError(
            "template.container.image",
            "required (or give execution.overrides.containerImage, or a pod template that sets it)",
        )
    # Deviation: propeller converts the protobuf Duration to a Go time.Duration, which saturates at about 292
    # years; taskplug refuses a longer timeout (it is a mistake, and a deadline past year 9999 cannot be
    # computed) instead of running with a silently shortened one.
    if template.metadata.timeout.seconds > _GO_DURATION_MAX_SECONDS:
        raise SpecError("template.metadata.timeout", "is out of range (a Go duration holds about 292 years)")
    return template


def _image_supplied(spec: _Spec, template: tasks_pb2.TaskTemplate) -> bool:
    """Whether something other than the template may give the container its image: Flyte applies
    ``overrides.containerImage`` to a template without one (pod_helper_test.go TestToK8sPodContainerImage),
    a pod template's ``primary``/``default`` container image fills an empty one, and a pod template
    override replaces the pod spec; with any of them a missing image is left, as in Flyte, to the API server.

    Deviation: Flyte never refuses a missing container image itself (the API server refuses the pod at
    create). A spec whose container has no image, no ``overrides.containerImage``, no pod template override
    and no ``podTemplateName`` cannot run, and is refused when read, naming the field; a platform default
    pod template (``plugins.k8s.default-pod-template-name``) is not known then, so a spec relying on it for
    the image must still name the image or the pod template."""
    overrides = spec.execution.overrides if spec.execution is not None else None
    if overrides is not None and (overrides.container_image or overrides.pod_template):
        return True
    return bool(template.metadata.pod_template_name)


def _read_template_file(value: str, base_dir: Path) -> tasks_pb2.TaskTemplate:
    path = _relative(value, base_dir)
    data = _read_binary(path)
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
    # Imported here: flyteidl.admin's types load only for a templateFile, not with every spec.
    from flyteidl.admin import task_pb2 as admin_task_pb2

    spec = admin_task_pb2.TaskSpec()
    try:
        spec.ParseFromString(data)
    except DecodeError:
        return None
    return spec.template if spec.HasField("template") else None


def _check_task_pod_metadata(template: tasks_pb2.TaskTemplate) -> None:
    """The labels and annotations a K8sPod task puts on its pod are valid Kubernetes ones. (Its pod spec, like
    every ``custom``, is the plugin's to decode: a malformed one is the plugin's BadTaskSpecification, with
    Flyte's words.)"""
    if template.HasField("k8s_pod"):
        metadata = template.k8s_pod.metadata
        _check_labels(dict(metadata.labels), "template.k8sPod.metadata.labels")
        _check_annotations(dict(metadata.annotations), "template.k8sPod.metadata.annotations")


def _struct(struct: Any) -> dict[str, Any]:
    value: dict[str, Any] = json_format.MessageToDict(struct)
    return value


def _check_pod_spec(value: Any, path: str) -> None:
    # The one model of a pod spec's types (taskplug.k8s), as for a task's own pod spec and pod templates.
    _check_pod_spec_semantics(_validate(PodSpecModel, value, path), path)


def _check_pod_spec_semantics(spec: PodSpecModel, path: str) -> None:
    _check_labels(spec.node_selector, f"{path}.nodeSelector")


# -- the execution -------------------------------------------------------------------------------------------


def _resources(value: _Resources | None) -> ResourceRequirements:
    if value is None:
        return ResourceRequirements()
    return ResourceRequirements.from_k8s({"requests": value.requests or {}, "limits": value.limits or {}})


def _check_name(name: str) -> None:
    if len(name) > 63 or not _NAME_RE.fullmatch(name.lower()):
        raise SpecError(
            "execution.id.name",
            f"invalid execution name {name!r}: it must start with a letter and hold only letters, digits "
            "and '-', at most 63 characters (flyteadmin's rule; it is a Kubernetes label value)",
        )


def _load_metadata(
    execution: _Execution,
    template: tasks_pb2.TaskTemplate,
    *,
    name: str,
    default_node_id: str = "n0",
    default_interruptible: bool | None = None,
) -> TaskExecutionMetadata:
    raw_id = execution.id or _Id()
    project = raw_id.project or template.id.project or DEFAULT_PROJECT
    domain = raw_id.domain or template.id.domain or DEFAULT_DOMAIN
    _check_name(name)
    node_id = raw_id.node_id or default_node_id
    attempt = raw_id.retry_attempt

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
    generated = execution.generated_name or f"{name}-{node_id}-{attempt}"

    # Flyte's single-task launch gives the node the task's retry strategy: retries + 1 attempts, unless the
    # spec says otherwise (a budget of 1 then falls to the executor's default-max-attempts, as in propeller).
    default_attempts = template.metadata.retries.retries + 1 if template.metadata.HasField("retries") else 1
    max_attempts = execution.max_attempts if execution.max_attempts is not None else default_attempts
    interruptible = execution.interruptible
    if interruptible is None:
        interruptible = (
            template.metadata.interruptible if default_interruptible is None else default_interruptible
        )

    namespace = execution.namespace or f"{project}-{domain}"
    if len(namespace) > 63 or not _DNS1123_LABEL_RE.fullmatch(namespace):
        raise SpecError(
            "execution.namespace",
            f"invalid namespace {namespace!r}: a Kubernetes namespace is a lowercase RFC 1123 label "
            "(lowercase letters, digits and '-', at most 63 characters)",
        )

    # The labels propeller puts on every task object; the informer finds the owning execution by execution-id.
    labels = execution_labels(name, node_id, interruptible=interruptible, task_name=template.id.name)
    _check_labels(execution.labels, "execution.labels")
    labels.update(execution.labels or {})
    _check_annotations(execution.annotations, "execution.annotations")

    security = security_pb2.SecurityContext()
    if execution.security_context:
        security = _parse_message(
            execution.security_context, security_pb2.SecurityContext(), "execution.securityContext"
        )
    owner = execution.owner_reference

    return TaskExecutionMetadata(
        task_execution_id=TaskExecutionID(generated, tid, node_id),
        namespace=namespace,
        owner_name=name,
        owner_reference=owner.model_dump(by_alias=True, exclude_none=True) if owner else None,
        overrides=_load_overrides(execution.overrides),
        labels=labels,
        annotations=dict(execution.annotations or {}),
        max_attempts=max_attempts,
        k8s_service_account=execution.service_account or "",
        security_context=security,
        interruptible=interruptible,
        platform_resources=_resources(execution.platform_resources),
        environment_variables=dict(execution.environment or {}),
        console_url=execution.console_url or "",
    )


def _load_overrides(value: _Overrides | None) -> TaskOverrides:
    if value is None:
        return TaskOverrides(resources=ResourceRequirements())
    path = "execution.overrides"
    extended = None
    if value.extended_resources:
        extended = _parse_message(
            value.extended_resources, tasks_pb2.ExtendedResources(), f"{path}.extendedResources"
        )
    pod_template = None
    if value.pod_template:
        pod_template = _parse_message(value.pod_template, tasks_pb2.K8sPod(), f"{path}.podTemplate")
        # Deviation: Flyte finds a malformed override pod spec when the pod is built (BadTaskSpecification,
        # the task fails); it is part of the spec here, so it is a spec error naming the field, before
        # anything runs.
        if pod_template.HasField("pod_spec"):
            _check_pod_spec(_struct(pod_template.pod_spec), f"{path}.podTemplate.podSpec")
        _check_labels(dict(pod_template.metadata.labels), f"{path}.podTemplate.metadata.labels")
        _check_annotations(
            dict(pod_template.metadata.annotations), f"{path}.podTemplate.metadata.annotations"
        )
    return TaskOverrides(
        resources=_resources(value.resources),
        extended_resources=extended,
        container_image=value.container_image or "",
        pod_template=pod_template,
    )
