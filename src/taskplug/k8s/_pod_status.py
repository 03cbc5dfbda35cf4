"""From an observed Pod to the phase Flyte would report.

Follows flyteplugins/go/tasks/pluginmachinery/flytek8s/pod_helper.go (``DemystifyPending``,
``DemystifySuccess``, ``DeterminePrimaryContainerPhase``, ``DemystifyFailure``,
``GetLastTransitionOccurredAt``, ``GetReportedAt``) and flyteplugins/go/tasks/plugins/k8s/pod/plugin.go
(``DemystifyPodStatus``, ``GetTaskPhaseWithLogs``).

The pod is the API's JSON as a dict (camelCase keys). Every public function first checks the fields it reads
(``_observed``: a field of the wrong type is an ``ObservedObjectError`` naming its path, never an
AttributeError or TypeError from here), then works on the checked dict. Every function is pure: the current
time and the config are passed in, so tests never read the wall clock.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

# The core package's computed __all__ hides its names from mypy; import from the defining modules.
from taskplug.core import Phase, PhaseInfo, TaskInfo, format_go_duration
from taskplug.k8s._config import K8sPluginConfig, LogConfig
from taskplug.k8s._observed import validate_container_statuses, validate_pod, validate_pod_status
from taskplug.k8s._plugin import PluginContext, maybe_update_phase_version
from taskplug.k8s._tasklog import LogTemplate, logs_for_container_in_pod, parse_k8s_time

__all__ = [
    "INTERRUPTED",
    "OOM_KILLED",
    "PRIMARY_CONTAINER_KEY",
    "PRIMARY_CONTAINER_NOT_FOUND",
    "demystify_failure",
    "demystify_pending",
    "demystify_pod_status",
    "demystify_success",
    "determine_primary_container_phase",
    "get_last_transition_occurred_at",
    "get_reported_at",
    "get_task_phase_with_logs",
    "parse_k8s_time",
]

PRIMARY_CONTAINER_KEY = "primary_container_name"
"""Pod annotation naming the container whose exit decides the task."""
PRIMARY_CONTAINER_NOT_FOUND = "PrimaryContainerNotFound"
OOM_KILLED = "OOMKilled"
INTERRUPTED = "Interrupted"

# 137 = 128 + SIGKILL; 247 is the same kill as reported by some runtimes (exit status -9 as a byte).
_SIGKILL_EXIT_CODES = (137, 247)
# Pod-level reasons that mean the node went away (GKE graceful shutdown reports Shutdown or Terminated).
_SYSTEM_FAILURE_REASONS = frozenset({"Shutdown", "Terminated", "NodeShutdown", "NodeAffinity"})

_DEFAULT_PENDING_REASON = "Demistify Pending"  # [sic]: the spelling Flyte users see


def _statuses(status: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    return list(status.get(key) or [])


def _state(container_status: Mapping[str, Any], key: str = "state") -> Mapping[str, Any]:
    return container_status.get(key) or {}


def _exit_code(terminated: Mapping[str, Any]) -> int:
    return int(terminated.get("exitCode") or 0)


def _with_occurred_at(info: TaskInfo, now: datetime) -> TaskInfo:
    # Flyte fills a missing OccurredAt with time.Now(); the injected now keeps this deterministic.
    return info if info.occurred_at is not None else replace(info, occurred_at=now)


def _terminated_message(name: str, terminated: Mapping[str, Any]) -> str:
    return (
        f"\r\n[{name}] terminated with exit code ({_exit_code(terminated)}). "
        f"Reason [{terminated.get('reason') or ''}]. Message: \n{terminated.get('message') or ''}."
    )


# -- Pending --------------------------------------------------------------------------------------------


def _pending_from_conditions(
    status: Mapping[str, Any], info: TaskInfo, config: K8sPluginConfig, now: datetime
) -> tuple[PhaseInfo, datetime]:
    """Flyte's demystifyPendingHelper: the phase, and the time ``t`` the last examined condition changed."""
    phase_info = PhaseInfo.queued_with_task_info(0, _DEFAULT_PENDING_REASON, info)
    t = now
    for cond in status.get("conditions") or []:
        # Deviation: Go reads a missing lastTransitionTime as year 1, which makes every grace period look
        # exceeded at once; a condition without a time counts as changing now instead.
        t = parse_k8s_time(cond.get("lastTransitionTime")) or now
        ctype, cstatus = cond.get("type"), cond.get("status")
        creason, cmessage = cond.get("reason") or "", cond.get("message") or ""
        if ctype == "PodScheduled" and cstatus == "False":
            # Waiting to be scheduled, usually for resources.
            return PhaseInfo.queued_with_task_info(0, f"{creason}:{cmessage}", phase_info.info), t
        if ctype == "Unschedulable":
            # Resources may free up later; the scheduler keeps trying, so stay queued.
            return PhaseInfo.queued_with_task_info(0, f"{creason}:{cmessage}", phase_info.info), t
        if ctype == "Ready" and cstatus == "False":
            decided = _pending_from_waiting_container(status, creason, cmessage, t, config, now)
            if decided is not None:
                return decided, t
    return phase_info, t


def _pending_from_waiting_container(
    status: Mapping[str, Any],
    cond_reason: str,
    cond_message: str,
    t: datetime,
    config: K8sPluginConfig,
    now: datetime,
) -> PhaseInfo | None:
    for cs in _statuses(status, "containerStatuses"):
        waiting = _state(cs).get("waiting")
        if cs.get("ready") or waiting is None:
            continue
        reason = waiting.get("reason") or ""
        final_reason = f"{cond_reason}|{reason}"
        final_message = f"{cond_message}|{waiting.get('message') or ''}"
        # Flyte builds a fresh TaskInfo here: logs and ReportedAt are dropped, OccurredAt is the condition's.
        at = TaskInfo(occurred_at=t)
        initializing = PhaseInfo.initializing(0, f"[{final_reason}]: {final_message}", at)
        if reason in ("ErrImagePull", "ContainerCreating", "PodInitializing"):
            # The normal waits while an image is pulled or init containers run; ErrImagePull turns into
            # ImagePullBackOff, which has its own grace period.
            return initializing
        if reason in ("CreateContainerError", "CreateContainerConfigError"):
            # Transient runtime errors and permanent ones look alike; a grace period lets kubelet resolve
            # the transient kind. The elapsed time mixes kubelet's clock with ours, as in Flyte.
            grace = (
                config.create_container_error_grace_period
                if reason == "CreateContainerError"
                else config.create_container_config_error_grace_period
            )
            if now - t >= grace:
                return PhaseInfo.failure_with_cleanup(final_reason, _after_grace(final_message, grace), at)
            return initializing
        if reason == "InvalidImageName":
            return PhaseInfo.failure_with_cleanup(final_reason, final_message, at)
        if reason == "ImagePullBackOff":
            grace = config.image_pull_backoff_grace_period
            if now - t >= grace:
                return PhaseInfo.retryable_failure_with_cleanup(
                    final_reason, _after_grace(final_message, grace), at
                )
            return initializing
        # Any other waiting reason would otherwise leave the task queued until the pod is reaped; fail it
        # now as a system error and delete the pod.
        return PhaseInfo.system_retryable_failure_with_cleanup(final_reason, final_message, at)
    return None


def _after_grace(message: str, grace: timedelta) -> str:
    return f"Grace period [{format_go_duration(grace)}] exceeded|{message}"


def demystify_pending(
    status: Mapping[str, Any], info: TaskInfo, *, config: K8sPluginConfig, now: datetime
) -> PhaseInfo:
    """A Pending pod: still queued or initializing, or stuck in a state it will not leave (Flyte's
    ``DemystifyPending``)."""
    validate_pod_status(status)
    return _demystify_pending(status, info, config, now)


def _demystify_pending(
    status: Mapping[str, Any], info: TaskInfo, config: K8sPluginConfig, now: datetime
) -> PhaseInfo:
    info = _with_occurred_at(info, now)
    phase_info, t = _pending_from_conditions(status, info, config, now)
    if phase_info.phase.is_terminal:
        return phase_info
    timeout = config.pod_pending_timeout
    if timeout.total_seconds() > 0 and now - t >= timeout:
        return PhaseInfo.retryable_failure_with_cleanup(
            "PodPendingTimeout", phase_info.reason, TaskInfo(occurred_at=t)
        )
    # Flyte's "Scheduling" fallback for an Undefined phase is unreachable: the helper never returns one.
    return phase_info


# -- Success / primary container / failure -------------------------------------------------------------


def demystify_success(status: Mapping[str, Any], info: TaskInfo) -> PhaseInfo:
    """A Succeeded pod is a success unless some container was OOMKilled (Flyte's ``DemystifySuccess``)."""
    validate_pod_status(status)
    return _demystify_success(status, info)


def _demystify_success(status: Mapping[str, Any], info: TaskInfo) -> PhaseInfo:
    for cs in (
        _statuses(status, "initContainerStatuses")
        + _statuses(status, "containerStatuses")
        + _statuses(status, "ephemeralContainerStatuses")
    ):
        terminated = _state(cs).get("terminated")
        if terminated is not None and OOM_KILLED in (terminated.get("reason") or ""):
            return PhaseInfo.retryable_failure(
                OOM_KILLED, "Pod reported success despite being OOMKilled", info
            )
    return PhaseInfo.success(info)


def determine_primary_container_phase(
    primary_name: str, statuses: Sequence[Mapping[str, Any]], info: TaskInfo
) -> PhaseInfo:
    """The task's phase from its primary container alone (Flyte's ``DeterminePrimaryContainerPhase``)."""
    validate_container_statuses(statuses)
    return _determine_primary_container_phase(primary_name, statuses, info)


def _determine_primary_container_phase(
    primary_name: str, statuses: Sequence[Mapping[str, Any]], info: TaskInfo
) -> PhaseInfo:
    for cs in statuses:
        if cs.get("name") != primary_name:
            continue
        state = _state(cs)
        if state.get("waiting") is not None or state.get("running") is not None:
            return PhaseInfo.running(0, info)
        terminated = state.get("terminated")
        if terminated is None:
            # A status with no state yet: Flyte keeps looking, then reports the container as not found.
            continue
        reason = terminated.get("reason") or ""
        code = _exit_code(terminated)
        message = _terminated_message(cs.get("name") or "", terminated)
        if OOM_KILLED in reason:
            # Checked first: an OOM kill is the user's resource request, even when it exits 0 or 137.
            return PhaseInfo.retryable_failure(reason, message, info)
        if code in _SIGKILL_EXIT_CODES:
            # Killed from outside (node drain, preemption): not the user's retry budget.
            return PhaseInfo.system_retryable_failure(reason, message, info)
        if code != 0:
            return PhaseInfo.retryable_failure(reason, message, info)
        return PhaseInfo.success(info)
    return PhaseInfo.failure(
        PRIMARY_CONTAINER_NOT_FOUND,
        f"Primary container [{primary_name}] not found in pod's container statuses",
        info,
    )


def demystify_failure(status: Mapping[str, Any], info: TaskInfo, primary_name: str) -> PhaseInfo:
    """A Failed pod: whose fault, and the containers' exit details appended to the message (Flyte's
    ``DemystifyFailure``)."""
    validate_pod_status(status)
    return _demystify_failure(status, info, primary_name)


def _demystify_failure(status: Mapping[str, Any], info: TaskInfo, primary_name: str) -> PhaseInfo:
    code = status.get("reason") or "UnknownError"
    message = status.get("message") or "Pod failed. No message received from kubernetes."
    # Node interruptions are system failures so they don't spend the user's retries and interruptible
    # nodes can fall back to non-interruptible ones.
    is_system = code in _SYSTEM_FAILURE_REASONS
    for cs in (
        _statuses(status, "initContainerStatuses")
        + _statuses(status, "containerStatuses")
        + _statuses(status, "ephemeralContainerStatuses")
    ):
        # The last termination explains a restarted container better than its current state.
        terminated = _state(cs, "lastState").get("terminated")
        if terminated is None:
            terminated = _state(cs).get("terminated")
        if terminated is None:
            continue
        name = cs.get("name") or ""
        exit_code = _exit_code(terminated)
        if OOM_KILLED in (terminated.get("reason") or ""):
            code = OOM_KILLED
        elif exit_code in _SIGKILL_EXIT_CODES:
            # Some setups SIGKILL every container when a node is terminated.
            code = INTERRUPTED
            if name == primary_name:
                is_system = True
        elif exit_code != 0 and code == "UnknownError":
            # Deviation: Flyte leaves the code UnknownError here, which it reads as "the kubelet recorded
            # nothing" and reports as a system interruption. But a container that exited non-zero on its own
            # is the user's failure, as DeterminePrimaryContainerPhase says when it sees the same container
            # before the pod turns Failed; which of the two a task gets must not depend on when it looked.
            code = terminated.get("reason") or "Error"
        if exit_code == 0:
            message += f"\r\n[{name}] terminated with ExitCode 0."
        else:
            message += _terminated_message(name, terminated)
    if code == "UnknownError":
        is_system = True
    if is_system:
        return PhaseInfo.system_retryable_failure(INTERRUPTED, message, info)
    return PhaseInfo.retryable_failure(code, message, info)


# -- Whole pod -----------------------------------------------------------------------------------------


def _all_terminated_successfully(status: Mapping[str, Any]) -> bool:
    regular = _statuses(status, "containerStatuses")
    if not regular:
        return False
    # Init containers count too: one with restartPolicy Always is a sidecar that keeps running.
    for cs in regular + _statuses(status, "initContainerStatuses"):
        state = _state(cs)
        terminated = state.get("terminated")
        if (
            state.get("waiting") is not None
            or state.get("running") is not None
            or (terminated is not None and _exit_code(terminated) != 0)
        ):
            return False
    return True


def demystify_pod_status(
    pod: Mapping[str, Any], info: TaskInfo, *, config: K8sPluginConfig, now: datetime
) -> PhaseInfo:
    """The phase of a pod task from the whole pod (``DemystifyPodStatus`` of Flyte's pod plugin)."""
    validate_pod(pod)
    return _demystify_pod_status(pod, info, config, now)


def _demystify_pod_status(
    pod: Mapping[str, Any], info: TaskInfo, config: K8sPluginConfig, now: datetime
) -> PhaseInfo:
    info = _with_occurred_at(info, now)
    status: Mapping[str, Any] = pod.get("status") or {}
    annotations: Mapping[str, str] = (pod.get("metadata") or {}).get("annotations") or {}
    has_primary = PRIMARY_CONTAINER_KEY in annotations
    primary_name = annotations.get(PRIMARY_CONTAINER_KEY, "")
    has_logs = len(info.logs) > 0

    phase = status.get("phase", "")
    if phase == "Succeeded":
        return _demystify_success(status, info)
    if phase == "Failed":
        return _demystify_failure(status, info, primary_name)
    if phase == "Pending":
        return _demystify_pending(status, info, config, now)
    if phase == "Unschedulable":
        # Not a real pod phase, but Flyte checks for it.
        return PhaseInfo.queued_with_task_info(0, "pod unschedulable", info)

    if not has_primary:
        # Without a primary container every container must finish; declare success as soon as they all
        # have, rather than waiting for the pod phase to catch up.
        if _all_terminated_successfully(status):
            return _demystify_success(status, info)
        running = PhaseInfo.running(0, info)
        # A new version makes the log links reach the UI.
        return running.with_version(1) if has_logs else running

    phase_info = _determine_primary_container_phase(
        primary_name, _statuses(status, "containerStatuses"), info
    )
    if (
        phase_info.phase is Phase.PERMANENT_FAILURE
        and phase_info.err is not None
        and phase_info.err.code == PRIMARY_CONTAINER_NOT_FOUND
    ):
        # No status yet for a container that is in the spec: it is still starting.
        containers = (pod.get("spec") or {}).get("containers") or []
        if any(c.get("name") == primary_name for c in containers):
            return PhaseInfo.running(0, info)
        return phase_info
    if phase_info.phase is Phase.RUNNING and has_logs:
        return phase_info.with_version(1)
    return phase_info


# -- Times ---------------------------------------------------------------------------------------------


def _unix_seconds(t: datetime) -> int:
    return math.floor(t.timestamp())


def get_last_transition_occurred_at(pod: Mapping[str, Any], now: datetime) -> datetime:
    """The latest container start (running) or finish (terminated), regular containers first, compared at
    second resolution; ``now`` if there is none."""
    validate_pod(pod)
    return _get_last_transition_occurred_at(pod, now)


def _get_last_transition_occurred_at(pod: Mapping[str, Any], now: datetime) -> datetime:
    status: Mapping[str, Any] = pod.get("status") or {}
    latest: datetime | None = None
    for cs in _statuses(status, "containerStatuses") + _statuses(status, "initContainerStatuses"):
        state = _state(cs)
        if state.get("running") is not None:
            candidate = parse_k8s_time(state["running"].get("startedAt"))
        elif state.get("terminated") is not None:
            candidate = parse_k8s_time(state["terminated"].get("finishedAt"))
        else:
            continue
        if candidate is not None and (latest is None or _unix_seconds(candidate) > _unix_seconds(latest)):
            latest = candidate
    return latest if latest is not None else now


def get_reported_at(pod: Mapping[str, Any]) -> datetime | None:
    """When the pod reported completion: the latest Ready=False/PodCompleted condition change, or None."""
    validate_pod(pod)
    return _get_reported_at(pod)


def _get_reported_at(pod: Mapping[str, Any]) -> datetime | None:
    latest: datetime | None = None
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if (
            cond.get("reason") != "PodCompleted"
            or cond.get("type") != "Ready"
            or cond.get("status") != "False"
        ):
            continue
        t = parse_k8s_time(cond.get("lastTransitionTime"))
        if t is not None and (latest is None or _unix_seconds(t) > _unix_seconds(latest)):
            latest = t
    return latest


def get_task_phase_with_logs(
    pctx: PluginContext,
    pod: Mapping[str, Any],
    *,
    config: K8sPluginConfig,
    log_config: LogConfig | Sequence[LogTemplate],
    log_suffix: str = " (User)",
    extra_log_vars: Mapping[str, str] | None = None,
) -> PhaseInfo:
    """The pod plugin's ``GetTaskPhase``: times, log links for the first container, the pod's phase, and a
    version bump when the reason changed since last round.

    Raises :class:`~taskplug.k8s._observed.ObservedObjectError` naming the field when the pod has a field of
    the wrong type."""
    validate_pod(pod)
    now: datetime = pctx.now
    state = pctx.plugin_state
    template = pctx.task_reader.read()
    occurred_at = _get_last_transition_occurred_at(pod, now)
    reported_at = _get_reported_at(pod) or occurred_at
    logs = logs_for_container_in_pod(
        log_config,
        pod,
        0,
        log_suffix,
        extra_vars=extra_log_vars,
        now=now,
        task_execution_id=pctx.metadata.task_execution_id,
        task_template_config=dict(template.config),
    )
    info = TaskInfo(logs=logs, occurred_at=occurred_at, reported_at=reported_at)
    phase_info = _demystify_pod_status(pod, info, config, now)
    return maybe_update_phase_version(phase_info, state)
