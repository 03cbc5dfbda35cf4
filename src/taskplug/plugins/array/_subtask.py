"""One sub-task of a map task: its context, its pod, and what its pod's status means. Pure: no I/O.

Follows flyteplugins/go/tasks/plugins/array/k8s/subtask_exec_context.go (the sub-task's metadata, template,
paths, name, log suffix and log variables) and subtask.go (``addMetadata``, ``getTaskContainerIndex``, the
environment of ``launchSubtask``, the classification of create errors and ``getSubtaskPhaseInfo``).

A sub-task's pod is built exactly as the pod plugin builds a pod (``taskplug.plugins.pod.PodPlugin``, over a
copy of the template typed ``container`` or ``sidecar`` at version 2, so that it goes through
``build_raw_pod``), then given the array's metadata (``{parent}-{index}`` name, namespace template, the
``flyte.org/finalizer-array`` finalizer, the config's scheduler, node selector and tolerations) and the array
index environment: ``FLYTE_K8S_ARRAY_INDEX={index}`` and
``BATCH_JOB_ARRAY_INDEX_VAR_NAME=FLYTE_K8S_ARRAY_INDEX``, which flytekit's ``pyflyte-map-execute`` reads.

Deviation: a sub-task's metadata is the one the plugin manager gives every pod
(``taskplug.k8s.k8s_task_execution_metadata``: secret annotations, ``inject-flyte-secrets`` and the
``execution-identity`` label); Flyte's array plugin adds only the secrets, so its sub-task pods lack the
identity label its other pods carry.

Deviation: whether a sub-task may run on interruptible nodes follows propeller's own threshold rule
(``isAboveInterruptibleFailureThreshold``: a threshold ≤ 0 counts back from the attempts). Flyte's array
plugin compares the system failures with the raw threshold, so with propeller's default threshold (-1)
no sub-task is ever interruptible.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Final, Protocol

from flyteidl.core import tasks_pb2

from taskplug.core import (
    ErrorCode,
    InputReader,
    OutputWriter,
    PhaseInfo,
    PluginError,
    PluginStateHolder,
    PluginStateReader,
    PluginStateWriter,
    ResourceManager,
    SecretManager,
    StaticOutputWriter,
    StaticTaskReader,
    TaskExecutionContext,
    TaskExecutionMetadata,
    TaskReader,
)
from taskplug.k8s import (
    PRIMARY_CONTAINER_KEY,
    K8sPluginConfig,
    LogConfig,
    PluginState,
    StaticPluginContext,
    api_error_of,
    convert_to_dns1123_subdomain_compatible,
    get_task_phase_with_logs,
    is_bad_request,
    is_forbidden,
    is_invalid,
    is_request_entity_too_large,
    k8s_task_execution_metadata,
)
from taskplug.plugins.array._config import K8sArrayConfig

__all__ = [
    "ARRAY_FINALIZER",
    "CMD_TEMPLATE_FAILED",
    "FLYTE_K8S_ARRAY_INDEX",
    "JOB_INDEX_VAR_NAME",
    "POD_TEMPLATE_FAILED",
    "PodBuilder",
    "SubTask",
    "SubTaskExecutionContext",
    "add_metadata",
    "build_subtask_pod",
    "classify_create_error",
    "is_interruptible",
    "log_suffix",
    "log_vars",
    "new_subtask",
    "not_found_phase",
    "subtask_name",
    "subtask_namespace",
    "subtask_phase",
    "subtask_template",
]

KubeObject = dict[str, Any]

FLYTE_K8S_ARRAY_INDEX: Final = "FLYTE_K8S_ARRAY_INDEX"
JOB_INDEX_VAR_NAME: Final = "BATCH_JOB_ARRAY_INDEX_VAR_NAME"
ARRAY_FINALIZER: Final = "flyte.org/finalizer-array"
POD_TEMPLATE_FAILED: Final = "POD_TEMPLATE_FAILED"
CMD_TEMPLATE_FAILED: Final = "CMD_TEMPLATE_FAILED"
AWS_BATCH_TASK_TYPE: Final = "aws-batch"

# Flyte's pattern, kept as is: "." matches any character, case is ignored.
_NAMESPACE_PLACEHOLDER: Final = re.compile(r"\{\{.namespace\}\}", re.IGNORECASE)


# -- names ---------------------------------------------------------------------------------------------


def subtask_name(parent: str, execution_index: int, retry_attempt: int) -> str:
    """``{parent}-{index}``, or ``{parent}-{index}-{retry}`` from the second attempt on, DNS-1123-safe."""
    raw = (
        f"{parent}-{execution_index}" if retry_attempt == 0 else f"{parent}-{execution_index}-{retry_attempt}"
    )
    return convert_to_dns1123_subdomain_compatible(raw)


def log_suffix(parent_retry: int, execution_index: int, retry_attempt: int) -> str:
    """`` #{parentRetry}-{index}`` (``-{retry}`` appended from the sub-task's second attempt on)."""
    if retry_attempt == 0:
        return f" #{parent_retry}-{execution_index}"
    return f" #{parent_retry}-{execution_index}-{retry_attempt}"


def log_vars(parent: str, execution_index: int, retry_attempt: int, parent_retry: int) -> dict[str, str]:
    """The sub-task's extra log template variables (Flyte's ``TemplateVarsByScheme``)."""
    return {
        "subtaskParentName": parent,
        "subtaskExecutionIndex": str(execution_index),
        "subtaskRetryAttempt": str(retry_attempt),
        "subtaskParentRetryAttempt": str(parent_retry),
    }


def subtask_namespace(template: str, namespace: str) -> str:
    """``namespaceTemplate`` applied: the placeholder replaced by ``namespace``; a template without one is
    used as is; no template: ``namespace``."""
    if not template:
        return namespace
    if _NAMESPACE_PLACEHOLDER.search(template):
        return _NAMESPACE_PLACEHOLDER.sub(lambda _: namespace, template)
    return template


def is_interruptible(meta: TaskExecutionMetadata, system_failures: int) -> bool:
    """The map task's interruptibility, until the sub-task's system failures reach the threshold (a
    threshold ≤ 0 counts back from the attempts, as propeller's ``isAboveInterruptibleFailureThreshold``)."""
    if not meta.interruptible:
        return False
    threshold = meta.interruptible_failure_threshold
    if threshold > 0:
        return system_failures < threshold
    limit = meta.max_attempts + threshold
    # Go computes maxAttempts - |threshold| in uint32: below zero it wraps, and nothing is ever above it.
    return limit < 0 or system_failures < limit


# -- the context the pod plugin builds a sub-task's pod from --------------------------------------------


@dataclass(frozen=True, slots=True)
class _PrefixInputReader:
    """v0 map tasks read their inputs from the input *prefix* (Flyte's ``arrayJobInputReader``)."""

    inner: InputReader

    @property
    def input_prefix(self) -> str:
        return self.inner.input_prefix

    @property
    def input_path(self) -> str:
        return self.inner.input_prefix

    def get(self) -> Any:
        return self.inner.get()


@dataclass(frozen=True, slots=True)
class SubTaskExecutionContext:
    """A sub-task's view of the map task's context (Flyte's ``SubTaskExecutionContext``): its own metadata,
    template and paths; no plugin state (a sub-task keeps none)."""

    metadata: TaskExecutionMetadata
    task_reader: TaskReader
    input_reader: InputReader
    output_writer: OutputWriter
    resource_manager: ResourceManager | None = None
    secret_manager: SecretManager | None = None
    _state: PluginStateHolder = field(default_factory=PluginStateHolder)

    @property
    def plugin_state_reader(self) -> PluginStateReader:
        return self._state

    @property
    def plugin_state_writer(self) -> PluginStateWriter:
        return self._state


@dataclass(frozen=True, slots=True)
class SubTask:
    """One attempt of one sub-task: its indices, attempt, system failures, context, pod name and namespace."""

    execution_index: int
    original_index: int
    retry_attempt: int
    system_failures: int
    context: SubTaskExecutionContext
    parent_name: str
    parent_retry: int
    namespace: str

    @property
    def name(self) -> str:
        return self.context.metadata.task_execution_id.generated_name

    @property
    def log_suffix(self) -> str:
        return log_suffix(self.parent_retry, self.execution_index, self.retry_attempt)

    @property
    def log_vars(self) -> dict[str, str]:
        return log_vars(self.parent_name, self.execution_index, self.retry_attempt, self.parent_retry)


def subtask_template(template: tasks_pb2.TaskTemplate) -> tasks_pb2.TaskTemplate:
    """The template a sub-task's pod is built from: a copy at version 2, typed ``container`` for a Container
    target and ``sidecar`` for a K8sPod target (so the pod plugin builds it with ``build_raw_pod``)."""
    copy = tasks_pb2.TaskTemplate()
    copy.CopyFrom(template)
    copy.task_type_version = 2
    if template.HasField("container"):
        copy.type = "container"
    elif template.HasField("k8s_pod"):
        copy.type = "sidecar"
    return copy


def _join(prefix: str, *parts: object) -> str:
    return "/".join([prefix.rstrip("/"), *(str(p) for p in parts)])


def new_subtask(
    tctx: TaskExecutionContext,
    template: tasks_pb2.TaskTemplate,
    sub_template: tasks_pb2.TaskTemplate,
    *,
    execution_index: int,
    original_index: int,
    retry_attempt: int,
    system_failures: int,
    config: K8sArrayConfig,
) -> SubTask:
    """The sub-task ``execution_index`` at ``retry_attempt`` (Flyte's ``NewSubTaskExecutionContext``).

    Its metadata is the map task's with the sub-task's generated name, interruptibility and the launch
    metadata (secrets); its output prefix is the map task's (flytekit appends the index); its raw output
    prefix ``{raw}/{originalIndex}/{retry}``, checkpoints under it, the previous attempt's as previous
    checkpoint. Raises BadTaskSpecification when a secret cannot be encoded.
    """
    parent = tctx.metadata
    parent_tid = parent.task_execution_id
    name = subtask_name(parent_tid.generated_name, execution_index, retry_attempt)
    meta = replace(
        parent,
        task_execution_id=replace(parent_tid, generated_name=name),
        interruptible=is_interruptible(parent, system_failures),
    )
    meta = k8s_task_execution_metadata(meta, template)
    writer = tctx.output_writer
    raw = _join(writer.raw_output_prefix, original_index, retry_attempt)
    previous = _join(writer.raw_output_prefix, original_index, retry_attempt - 1) if retry_attempt else ""
    output_writer = StaticOutputWriter(
        output_prefix=writer.output_prefix,
        raw_output_prefix=raw,
        checkpoint_prefix=_join(raw, "_flytecheckpoints"),
        prev_checkpoint_prefix=_join(previous, "_flytecheckpoints") if previous else "",
    )
    input_reader: InputReader = tctx.input_reader
    if template.task_type_version == 0 and template.type != AWS_BATCH_TASK_TYPE:
        input_reader = _PrefixInputReader(input_reader)
    context = SubTaskExecutionContext(
        metadata=meta,
        task_reader=StaticTaskReader(sub_template, tctx.task_reader.path),
        input_reader=input_reader,
        output_writer=output_writer,
        resource_manager=tctx.resource_manager,
        secret_manager=tctx.secret_manager,
    )
    return SubTask(
        execution_index=execution_index,
        original_index=original_index,
        retry_attempt=retry_attempt,
        system_failures=system_failures,
        context=context,
        parent_name=parent_tid.generated_name,
        parent_retry=parent_tid.id.retry_attempt,
        namespace=subtask_namespace(config.namespace_template, parent.namespace),
    )


# -- the pod ---------------------------------------------------------------------------------------------


def _union(*maps: Mapping[str, str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for m in maps:
        if m:
            out.update(m)
    return out


def add_metadata(pod: KubeObject, sub: SubTask, config: K8sArrayConfig, k8s: K8sPluginConfig) -> KubeObject:
    """Flyte's ``addMetadata``: namespace, annotations and labels (config defaults, then the pod's, then
    the sub-task's), name, owner reference, finalizer, and the config's scheduler, node selector and
    tolerations, the last two *replacing* the pod's. Mutates and returns ``pod``."""
    meta = sub.context.metadata
    metadata = pod.setdefault("metadata", {})
    metadata["namespace"] = sub.namespace
    metadata["annotations"] = _union(k8s.default_annotations, metadata.get("annotations"), meta.annotations)
    metadata["labels"] = _union(k8s.default_labels, metadata.get("labels"), meta.labels)
    metadata["name"] = sub.name
    if not config.remote_cluster_config.enabled and meta.owner_reference is not None:
        metadata["ownerReferences"] = [dict(meta.owner_reference)]
    if k8s.inject_finalizer:
        finalizers = list(metadata.get("finalizers") or [])
        if ARRAY_FINALIZER not in finalizers:
            finalizers.append(ARRAY_FINALIZER)
        metadata["finalizers"] = finalizers
    spec = pod.setdefault("spec", {})
    if config.scheduler:
        spec["schedulerName"] = config.scheduler
    if config.node_selector:
        spec["nodeSelector"] = dict(config.node_selector)
    if config.tolerations:
        spec["tolerations"] = [dict(t.k8s) for t in config.tolerations]
    return pod


def _task_container_index(pod: Mapping[str, Any]) -> int:
    """Flyte's ``getTaskContainerIndex``: the annotated primary container, else the only container."""
    containers = (pod.get("spec") or {}).get("containers") or []
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    primary = annotations.get(PRIMARY_CONTAINER_KEY)
    if primary is None:
        if len(containers) == 1:
            return 0
        raise PluginError(
            POD_TEMPLATE_FAILED,
            "Expected a specified primary container key when building an array job with a K8sPod spec target",
        )
    for index, container in enumerate(containers):
        if container.get("name") == primary:
            return index
    raise PluginError(
        POD_TEMPLATE_FAILED,
        "Couldn't find any container matching the primary container key when building an array job with "
        "a K8sPod spec target",
    )


class PodBuilder(Protocol):
    """What builds a pod from a task context (``taskplug.plugins.pod.PodPlugin``)."""

    def build_resource(self, tctx: TaskExecutionContext) -> KubeObject: ...


def build_subtask_pod(
    pod_plugin: PodBuilder, sub: SubTask, config: K8sArrayConfig, k8s: K8sPluginConfig
) -> KubeObject:
    """The pod to create for ``sub``: the pod plugin's pod, the array's metadata, the index environment.

    Raises whatever the pod plugin raises for a task it cannot build, and PluginError
    ``POD_TEMPLATE_FAILED`` / ``CMD_TEMPLATE_FAILED`` when the primary container cannot be found.
    """
    pod: KubeObject = pod_plugin.build_resource(sub.context)
    add_metadata(pod, sub, config, k8s)
    pod["kind"] = "Pod"  # the kind the API registers (the pod plugin's identity says "pod")
    containers = pod["spec"].get("containers") or []
    if not containers:
        raise PluginError(CMD_TEMPLATE_FAILED, "No containers found in podSpec.")
    container = containers[_task_container_index(pod)]
    container["env"] = [
        *(container.get("env") or []),
        # The original index: the sub-task's position in the user's list.
        {"name": FLYTE_K8S_ARRAY_INDEX, "value": str(sub.original_index)},
        {"name": JOB_INDEX_VAR_NAME, "value": FLYTE_K8S_ARRAY_INDEX},
    ]
    return pod


# -- what the cluster answered ----------------------------------------------------------------------------


def classify_create_error(err: BaseException) -> PhaseInfo:
    """The sub-task's phase after its pod could not be created (``launchSubtask``): quota exceeded waits,
    another Forbidden fails retryably (``RuntimeFailure``), a bad or too large pod fails permanently
    (``BadTaskFormat``, ``EntityTooLarge``). Anything else raises PluginError (the round could not decide),
    coded with the API's reason, "failed to create resource".

    Deviation: an unclassified create error (a 500, a timeout) reaches the executor as the round's error.
    Flyte returns it from the launch, but ``LaunchAndCheckSubTasksState`` replaces it with the result of
    releasing the allocation token, which succeeds, so the error is dropped and the sub-task is launched
    again every round without anyone being told.
    """
    text = str(err)
    if is_forbidden(err):
        if "exceeded quota" in text:
            return PhaseInfo.waiting_for_resources(0, f"Exceeded resourcequota: {text}")
        return PhaseInfo.retryable_failure(ErrorCode.RUNTIME_FAILURE, text)
    if is_bad_request(err) or is_invalid(err):
        return PhaseInfo.failure("BadTaskFormat", text)
    if is_request_entity_too_large(err):
        return PhaseInfo.failure("EntityTooLarge", text)
    api = api_error_of(err)
    raise PluginError(api.reason if api is not None else "", "failed to create resource", cause=err) from err


def subtask_phase(
    pod: KubeObject, sub: SubTask, *, k8s: K8sPluginConfig, log_config: LogConfig, now: datetime
) -> PhaseInfo:
    """What the pod's status means for the sub-task (``getSubtaskPhaseInfo`` after the GET): the pod plugin's
    phase with the sub-task's log links; a pod being deleted that has not finished is a system retryable
    failure (``UnexpectedObjectDeletion``)."""
    ctx = sub.context
    pctx = StaticPluginContext(
        ctx.metadata, ctx.task_reader, ctx.input_reader, ctx.output_writer, PluginState(), now
    )
    info = get_task_phase_with_logs(
        pctx, pod, config=k8s, log_config=log_config, log_suffix=sub.log_suffix, extra_log_vars=sub.log_vars
    )
    if not info.phase.is_terminal and (pod.get("metadata") or {}).get("deletionTimestamp"):
        return PhaseInfo.system_retryable_failure(
            "UnexpectedObjectDeletion",
            f"object [{sub.namespace}/{sub.name}] terminated in the background, manually",
        )
    return info


def not_found_phase(sub: SubTask, err: BaseException) -> PhaseInfo:
    """A sub-task whose pod is gone: a system retryable failure (``ResourceDeletedExternally``)."""
    return PhaseInfo.system_retryable_failure(
        "ResourceDeletedExternally", f"resource not found, name [{sub.namespace}/{sub.name}]. reason: {err}"
    )
