"""What the PyTorch, TensorFlow and MPI plugins share: reading ``custom``, building replica specs, the run
policy, and mapping a job's status and pods to a phase with log links.

Follows flyteplugins/go/tasks/plugins/k8s/kfoperators/common/common_operator.go.
Everything here is a pure function of the task context, the platform's pod config and the time handed in.

A replica spec is the task's whole pod, built through the pod pipeline (``taskplug.k8s.to_k8s_pod_spec``)
with the primary container renamed to the operator's container name (``pytorch``, ``tensorflow``, ``mpi``).
A v1 replica's ``resources`` replace the node's override resources for that replica, its ``image`` replaces
the container image and (MPI) its ``command`` becomes the container's ``args``. Flyte runs the pipeline
once per replica; :class:`ReplicaSpecs` runs it once per distinct ``resources`` and copies the result for
the other replicas, which is the same pod (the pipeline is a pure function of the context and resources).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import orjson
from flyteidl.core import tasks_pb2
from flyteidl.plugins import common_pb2
from flyteidl.plugins.kubeflow import common_pb2 as kf_common_pb2
from google.protobuf import json_format
from google.protobuf.message import Message

from taskplug.core import (
    BadTaskSpecification,
    ErrorCode,
    PhaseInfo,
    PluginError,
    QuantityError,
    ResourceRequirements,
    TaskExecutionContext,
    TaskExecutionMetadata,
    TaskInfo,
    TaskLog,
    TaskplugError,
)
from taskplug.k8s import (
    K8sPluginConfig,
    LogConfig,
    LogInput,
    PlatformPodConfig,
    PluginContext,
    PluginTaskExecutionContext,
    apply_k8s_resource_overrides,
    deep_copy,
    maybe_update_phase_version,
    parse_k8s_time,
    task_logs,
    to_k8s_pod_spec,
    to_k8s_resource_requirements,
)
from taskplug.plugins.kubeflow._config import KfOperatorConfig
from taskplug.plugins.kubeflow._kinds import JobKind

__all__ = [
    "LogTarget",
    "ReplicaSpecs",
    "copy_with_replicas",
    "current_condition",
    "decode_custom",
    "job_task_info",
    "kubeflow_task_phase",
    "parse_run_policy",
    "read_template",
    "replica_count",
    "restart_policy",
    "to_replica_spec",
    "wrap_build_error",
]

KubeObject = dict[str, Any]
M = TypeVar("M", bound=Message)

_RESTART_POLICIES = {
    common_pb2.RESTART_POLICY_NEVER: "Never",
    common_pb2.RESTART_POLICY_ON_FAILURE: "OnFailure",
    common_pb2.RESTART_POLICY_ALWAYS: "Always",
}
_CLEAN_POD_POLICIES = {
    kf_common_pb2.CLEANPOD_POLICY_NONE: "None",
    kf_common_pb2.CLEANPOD_POLICY_RUNNING: "Running",
    kf_common_pb2.CLEANPOD_POLICY_ALL: "All",
}

# Go's zero time, which ``metav1.Time.Unix()`` gives for an object without a creationTimestamp.
_GO_ZERO = datetime(1, 1, 1, tzinfo=UTC)
_GO_ZERO_UNIX = -62135596800


# -- the task ---------------------------------------------------------------------------------------------


def read_template(tctx: TaskExecutionContext) -> tasks_pb2.TaskTemplate:
    """The task template, or BadTaskSpecification as Flyte reports an unreadable one."""
    try:
        template: tasks_pb2.TaskTemplate | None = tctx.task_reader.read()
    except PluginError:
        raise
    except Exception as e:
        raise BadTaskSpecification(f"unable to fetch task specification [{e}]") from e
    if template is None:
        raise BadTaskSpecification("nil task specification")
    return template


def _compact(message: Message | None) -> str:
    # Deviation: Flyte prints the message with Go's %v (its internal field dump); compact JSON is readable.
    if message is None:
        return "<nil>"
    return str(json_format.MessageToJson(message, indent=None, sort_keys=True))


def decode_custom(template: tasks_pb2.TaskTemplate, message: M) -> M:
    """``custom`` decoded into ``message`` as Flyte's UnmarshalStruct does: through JSON, unknown keys
    ignored, so a payload of another version decodes to zeros rather than failing."""
    if not template.HasField("custom"):
        raise BadTaskSpecification("invalid TaskSpecification [<nil>], Err: [nil Struct Object passed]")
    try:
        json_format.ParseDict(json_format.MessageToDict(template.custom), message, ignore_unknown_fields=True)
    except (json_format.ParseError, ValueError, TypeError) as e:
        raise BadTaskSpecification(
            f"invalid TaskSpecification [{_compact(template.custom)}], Err: [{e}]"
        ) from e
    return message


def wrap_build_error(prefix: str, error: PluginError) -> BadTaskSpecification:
    """Flyte's ``Errorf(BadTaskSpecification, "{prefix}: [%v]", err)``: the cause is printed, not chained."""
    return BadTaskSpecification(f"{prefix}: [{error}]")


# -- replica specs ----------------------------------------------------------------------------------------


def to_replica_spec(
    tctx: TaskExecutionContext, platform: PlatformPodConfig, container_name: str
) -> KubeObject:
    """The task's pod as a replica spec with 0 replicas and restart policy ``Never`` (Flyte's ToReplicaSpec)."""
    try:
        raw = to_k8s_pod_spec(tctx, platform)
    except (TaskplugError, ValueError, TypeError, KeyError) as e:
        raise BadTaskSpecification(f"Unable to create pod spec: [{e}]") from e
    spec = raw.spec
    # The operator configures only the container of its own name: the primary container takes it.
    for container in spec.get("containers") or []:
        if container.get("name") == raw.primary:
            container["name"] = container_name
            break
    meta = tctx.metadata
    k8s = platform.k8s
    annotations = {**k8s.default_annotations, **(raw.meta.get("annotations") or {}), **meta.annotations}
    labels = {**k8s.default_labels, **(raw.meta.get("labels") or {}), **meta.labels}
    metadata: KubeObject = {}
    if labels:
        metadata["labels"] = labels
    if annotations:
        metadata["annotations"] = annotations
    return {"replicas": 0, "template": {"metadata": metadata, "spec": spec}, "restartPolicy": "Never"}


def restart_policy(value: int) -> str:
    """A flyteidl RestartPolicy as the operator's; an unknown value is unset, as Flyte's map lookup gives."""
    return _RESTART_POLICIES.get(value, "")


def _replica_resources(
    resources: tasks_pb2.Resources, meta: TaskExecutionMetadata, k8s: K8sPluginConfig
) -> ResourceRequirements:
    """A replica's resources as the override resources its pods are built with: Flyte's
    ``ToK8sResourceRequirements`` then ``ApplyK8sResourceOverrides`` (an unset request takes the limit, else
    the platform default; an unset limit copies the request; both capped at the platform limit), with the
    error common_operator.go gives a value that is no quantity."""
    try:
        requirements = to_k8s_resource_requirements(resources)
    except BadTaskSpecification as e:
        if not isinstance(e.cause, QuantityError):
            raise
        shown = json_format.MessageToJson(resources, indent=None, sort_keys=True)
        raise BadTaskSpecification(
            f"invalid TaskSpecification on Resources [{shown}], "
            f"Err: [Failed to parse resource as a valid quantity. {e.cause}]"
        ) from e.cause
    completed = apply_k8s_resource_overrides(meta, requirements, k8s)
    return ResourceRequirements(completed["requests"], completed["limits"])


class ReplicaSpecs:
    """The v1 replica specs of one job (Flyte's ToReplicaSpecWithOverrides, once per replica type), with
    the pod pipeline run once per distinct replica ``resources`` rather than once per replica.

    The pipeline is what a job's build spends its time on, and its result depends only on the task context
    and the replica's resources: the first replica asking for a pod gets the one built, every later one a
    copy of it as it was built (before the first one's own overrides).
    """

    def __init__(self, tctx: TaskExecutionContext, platform: PlatformPodConfig, container_name: str) -> None:
        self._tctx = tctx
        self._platform = platform
        self._container_name = container_name
        self._built: dict[bytes, bytes] = {}
        """Each pod built so far, as JSON, by the serialized resources it was built with (b"" for none)."""

    def with_overrides(self, replica: Message, *, is_master: bool) -> KubeObject:
        """A v1 replica's spec: ``common`` wins over the deprecated fields when present; resources replace
        the override resources; image and command override the container."""
        source: Any = replica.common if replica.HasField("common") else replica
        resources: tasks_pb2.Resources = source.resources
        if len(resources.requests) + len(resources.limits) > 0:
            spec = self._pod(resources.SerializeToString(deterministic=True), resources)
        else:
            spec = self._pod(b"", None)
        _apply_replica_overrides(spec, replica, source, self._container_name, is_master=is_master)
        return spec

    def _pod(self, key: bytes, resources: tasks_pb2.Resources | None) -> KubeObject:
        built = self._built.get(key)
        if built is not None:
            copied: KubeObject = orjson.loads(built)
            return copied
        tctx = self._tctx
        if resources is not None:
            tctx = PluginTaskExecutionContext(
                tctx, resources=_replica_resources(resources, tctx.metadata, self._platform.k8s)
            )
        spec = to_replica_spec(tctx, self._platform, self._container_name)
        self._built[key] = orjson.dumps(spec)
        return spec


def _apply_replica_overrides(
    spec: KubeObject, replica: Message, source: Any, container_name: str, *, is_master: bool
) -> None:
    """A v1 replica's image, command, restart policy and count, on its spec built from the pod pipeline."""
    replicas: int = source.replicas
    image: str = source.image
    policy: int = source.restart_policy
    command: Sequence[str] = list(replica.command) if "command" in replica.DESCRIPTOR.fields_by_name else []
    for container in spec["template"]["spec"].get("containers") or []:
        if container.get("name") != container_name:
            continue
        if image:
            container["image"] = image
        if command:
            # Flyte writes the replica's command into the container's args, leaving its command alone.
            container["args"] = list(command)
    policy_name = restart_policy(policy)
    if policy_name:
        spec["restartPolicy"] = policy_name
    else:
        spec.pop("restartPolicy", None)
    spec["replicas"] = 1 if is_master else replicas


def parse_run_policy(policy: kf_common_pb2.RunPolicy) -> KubeObject:
    """The job's ``runPolicy`` (Flyte's ParseRunPolicy): cleanPodPolicy always, the rest when not zero."""
    out: KubeObject = {}
    if policy.backoff_limit != 0:
        out["backoffLimit"] = policy.backoff_limit
    out["cleanPodPolicy"] = _CLEAN_POD_POLICIES.get(policy.clean_pod_policy, "")
    if policy.active_deadline_seconds != 0:
        out["activeDeadlineSeconds"] = policy.active_deadline_seconds
    if policy.ttl_seconds_after_finished != 0:
        out["ttlSecondsAfterFinished"] = policy.ttl_seconds_after_finished
    return out


def replica_count(specs: Mapping[str, Any] | None, replica_type: str) -> int:
    """The replicas of a replica type in a job's spec, 0 when absent (Flyte's GetReplicaCount)."""
    spec = (specs or {}).get(replica_type) or {}
    value = spec.get("replicas")
    return int(value) if value is not None else 0


def copy_with_replicas(spec: KubeObject, replicas: int) -> KubeObject:
    out: KubeObject = deep_copy(spec)
    out["replicas"] = replicas
    return out


# -- status -----------------------------------------------------------------------------------------------


def _transition_time(condition: Mapping[str, Any]) -> datetime:
    parsed = parse_k8s_time(condition.get("lastTransitionTime"))
    return parsed if parsed is not None else _GO_ZERO


def current_condition(conditions: Sequence[Mapping[str, Any]] | None) -> Mapping[str, Any] | None:
    """The newest condition whose status is ``"True"`` (Flyte's ExtractCurrentCondition); None when the job
    has no conditions yet.

    Deviation: Flyte keeps list order among conditions of the same second, so the *older* one wins a tie
    (the operator appends each new condition at the end); here the later one in the list wins. And an empty
    list is read as no conditions, where Flyte errors every round.
    """
    if not conditions:
        return None
    ranked = sorted(
        enumerate(conditions), key=lambda item: (_transition_time(item[1]), item[0]), reverse=True
    )
    for _, condition in ranked:
        if condition.get("status") == "True":
            return condition
    raise PluginError(
        ErrorCode.SYSTEM_ERROR,
        f"found no current condition. Conditions: {json.dumps(list(conditions), sort_keys=True)}",
    )


def _go_time(value: Any) -> str:
    """A timestamp as Go's ``%v`` of a ``metav1.Time`` prints it."""
    parsed = parse_k8s_time(value)
    when = parsed.astimezone(UTC) if parsed is not None else _GO_ZERO
    return when.strftime("%Y-%m-%d %H:%M:%S +0000 UTC")


@dataclass(frozen=True, slots=True)
class LogTarget:
    """A pod to link logs for, and the log name shown right after the display name (Flyte's ``LogName``)."""

    pod_name: str
    log_name: str = ""


def _unix_and_rfc3339(when: datetime | None) -> tuple[int, str]:
    if when is None:
        return _GO_ZERO_UNIX, "0001-01-01T00:00:00Z"
    seconds = int(when.timestamp() // 1)
    return seconds, datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def job_task_info(
    pctx: PluginContext,
    job: Mapping[str, Any],
    *,
    kind: JobKind,
    targets: Sequence[LogTarget],
    log_config: LogConfig,
    now: datetime,
) -> TaskInfo:
    """Log links for ``targets`` (Flyte's GetLogs) and the job's status as custom info."""
    template = pctx.task_reader.read()
    meta = job.get("metadata") or {}
    # The job's creation stands in for the pods' start; the finish is now (Flyte has nothing better).
    start_unix, start_rfc = _unix_and_rfc3339(parse_k8s_time(meta.get("creationTimestamp")))
    finish_unix, finish_rfc = _unix_and_rfc3339(now)
    namespace = str(meta.get("namespace") or "")
    logs: list[TaskLog] = []
    for target in targets:
        inp = LogInput(
            pod_name=target.pod_name,
            namespace=namespace,
            log_name=target.log_name,
            container_name=kind.container_name,
            pod_rfc3339_start_time=start_rfc,
            pod_rfc3339_finish_time=finish_rfc,
            pod_unix_start_time=start_unix,
            pod_unix_finish_time=finish_unix,
            task_execution_id=pctx.metadata.task_execution_id,
            task_template_config=dict(template.config),
        )
        logs.extend(task_logs(log_config, inp))
    status = job.get("status")
    custom = deep_copy(dict(status)) if isinstance(status, Mapping) else {}
    return TaskInfo(logs=tuple(logs), occurred_at=now, custom_info=custom)


def _now(pctx: PluginContext) -> datetime:
    now = pctx.now
    return now if isinstance(now, datetime) else datetime.now(UTC)


def kubeflow_task_phase(
    pctx: PluginContext,
    job: Mapping[str, Any],
    *,
    kind: JobKind,
    targets: Sequence[LogTarget],
    config: KfOperatorConfig,
    log_config: LogConfig,
) -> PhaseInfo:
    """The phase of a training job (Flyte's GetTaskPhase, the same for the three kinds), version-bumped
    against the last report. Raises PluginError when it cannot decide (the operator never picked the job up,
    no condition is true, a condition type it does not know)."""
    now = _now(pctx)
    info = job_task_info(pctx, job, kind=kind, targets=targets, log_config=log_config, now=now)
    spec = job.get("spec") or {}
    status = job.get("status") or {}
    meta = job.get("metadata") or {}
    suspended = (spec.get("runPolicy") or {}).get("suspend") is True
    if not suspended and not status.get("startTime"):
        created = parse_k8s_time(meta.get("creationTimestamp")) or _GO_ZERO
        if created + config.timeout < now:
            raise PluginError(
                ErrorCode.SYSTEM_ERROR,
                f"kubeflow operator hasn't updated the {kind.task_type} custom resource since creation time "
                f"{_go_time(meta.get('creationTimestamp'))}",
            )
    condition = current_condition(status.get("conditions"))
    kind_of = str((condition or {}).get("type") or "")
    if kind_of in ("", "Created"):
        phase = PhaseInfo.queued_with_task_info(0, "JobCreated", info)
    elif kind_of in ("Running", "Restarting"):
        phase = PhaseInfo.running(0, info)
    elif kind_of == "Succeeded":
        phase = PhaseInfo.success(info)
    elif kind_of == "Failed":
        assert condition is not None
        details = f"Job failed:\n\t{condition.get('reason') or ''} - {condition.get('message') or ''}"
        phase = PhaseInfo.retryable_failure(ErrorCode.DOWNSTREAM_SYSTEM_ERROR, details, info)
    elif kind_of == "Suspended":
        phase = PhaseInfo.queued_with_task_info(0, "Suspended", info)
    else:
        # Flyte returns Undefined here, which its task handler turns into this same kind of error.
        raise PluginError(ErrorCode.SYSTEM_ERROR, f"unknown {kind.kind} condition type [{kind_of}]")
    return maybe_update_phase_version(phase, pctx.plugin_state)
