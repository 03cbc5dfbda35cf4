"""The array plugin's state machine: its phases, its persisted state, and the pure rules over them.

Follows flyteplugins/go/tasks/plugins/array/core/state.go (``State``, ``Phase``, ``SummaryToPhase``,
``MapArrayStateToPluginPhase``, ``ToArrayJob``) and arraystatus/status.go.

The state is persisted as plugin state (version 0, as Flyte's) in a JSON form: the per-sub-task phases as a
string of one hex digit per sub-task (Flyte packs them 4 bits each in a ``CompactArray``), retry attempts and
system failures as lists of counts. Flyte's ``indexesToCache`` bit set is not kept: taskplug has no data
catalog, so every sub-task executes and a sub-task's execution index is its original index.
"""

from __future__ import annotations

import enum
import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Final

from flyteidl.plugins import array_job_pb2
from google.protobuf import json_format

from taskplug.core import (
    ErrorCode,
    ErrorKind,
    ExecutionError,
    ExternalResource,
    Phase,
    PhaseInfo,
    PluginError,
    TaskInfo,
)

__all__ = [
    "ARRAY_JOB_GENERIC_FAILURE",
    "PLUGIN_STATE_VERSION",
    "ArrayJob",
    "ArrayPhase",
    "ArrayState",
    "initial_details",
    "summary_to_phase",
    "to_array_job",
    "to_phase_info",
]

PLUGIN_STATE_VERSION: Final = 0
ARRAY_JOB_GENERIC_FAILURE: Final = "ARRAY_JOB_GENERIC_FAILURE"


class ArrayPhase(enum.IntEnum):
    """Flyte's array phases, in Flyte's order (the numbers are what the state stores)."""

    START = 0
    PRE_LAUNCH = 1
    LAUNCH = 2
    WAITING_FOR_RESOURCES = 3
    CHECKING_SUB_TASK_EXECUTIONS = 4
    ASSEMBLE_FINAL_OUTPUT = 5
    WRITE_TO_DISCOVERY = 6
    WRITE_TO_DISCOVERY_THEN_FAIL = 7
    SUCCESS = 8
    ASSEMBLE_FINAL_ERROR = 9
    RETRYABLE_FAILURE = 10
    PERMANENT_FAILURE = 11
    ABORT_SUB_TASKS = 12

    def __str__(self) -> str:
        return "Phase" + "".join(part.capitalize() for part in self.name.split("_"))


@dataclass(frozen=True, slots=True)
class ArrayState:
    """Where a map task is (Flyte's ``arrayCore.State``), per round.

    ``details`` holds one :class:`~taskplug.core.Phase` per executed sub-task (empty until the first launch
    round); ``retry_attempts`` and ``system_failures`` one count per sub-task. ``assembly_failures`` counts
    rounds in which assembling the outputs or errors failed (Flyte's work queue retries them in the
    background; here the round does, up to ``maxRetries``).
    """

    phase: ArrayPhase = ArrayPhase.START
    phase_version: int = 0
    reason: str = ""
    err: ExecutionError | None = None
    array_size: int = 0
    original_array_size: int = 0
    min_success: int = 0
    details: tuple[Phase, ...] = ()
    retry_attempts: tuple[int, ...] = ()
    system_failures: tuple[int, ...] = ()
    assembly_failures: int = 0

    def with_phase(self, phase: ArrayPhase, version: int, reason: str | None = None) -> ArrayState:
        return replace(
            self, phase=phase, phase_version=version, reason=self.reason if reason is None else reason
        )

    # -- persistence -----------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            "phase": int(self.phase),
            "phaseVersion": self.phase_version,
            "reason": self.reason,
            "err": None
            if self.err is None
            else {"code": self.err.code, "message": self.err.message, "kind": str(self.err.kind)},
            "arraySize": self.array_size,
            "originalArraySize": self.original_array_size,
            "minSuccess": self.min_success,
            "arrayStatus": {"details": "".join(format(int(p), "x") for p in self.details)},
            "retryAttempts": list(self.retry_attempts),
            "systemFailures": list(self.system_failures),
            "assemblyFailures": self.assembly_failures,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> ArrayState:
        """The state a round stored; None (nothing stored yet) is the start state.

        Raises PluginError ``CorruptedPluginState`` for anything else that is not such a state.
        """
        if data is None:
            return cls()
        try:
            raw_err = data.get("err")
            err = (
                None
                if raw_err is None
                else ExecutionError(str(raw_err["code"]), str(raw_err["message"]), ErrorKind(raw_err["kind"]))
            )
            details = str((data.get("arrayStatus") or {}).get("details") or "")
            return cls(
                phase=ArrayPhase(int(data["phase"])),
                phase_version=_count(data.get("phaseVersion", 0)),
                reason=str(data.get("reason") or ""),
                err=err,
                array_size=_count(data.get("arraySize", 0)),
                original_array_size=_count(data.get("originalArraySize", 0)),
                min_success=int(data.get("minSuccess", 0)),
                details=tuple(Phase(int(c, 16)) for c in details),
                retry_attempts=tuple(_count(v) for v in data.get("retryAttempts") or ()),
                system_failures=tuple(_count(v) for v in data.get("systemFailures") or ()),
                assembly_failures=_count(data.get("assemblyFailures", 0)),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise PluginError(
                ErrorCode.CORRUPTED_PLUGIN_STATE, "Failed to read unmarshal custom state", cause=e
            ) from e


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"expected a non-negative integer, got {value!r}")
    return value


# -- the array job ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ArrayJob:
    """The ``custom`` of a ``container_array`` task (flyteidl.plugins.ArrayJob): parallelism (0: unlimited),
    size (v0 only) and the success criterion (``min_successes`` or ``min_success_ratio``)."""

    parallelism: int = 0
    size: int = 1
    min_successes: int | None = None
    min_success_ratio: float | None = None

    def min_successes_for(self, size: int) -> int:
        """v1: ``ceil(ratio × size)``, as Go computes it in float64."""
        ratio = self.min_success_ratio if self.min_success_ratio is not None else 0.0
        return math.ceil(ratio * size)


def to_array_job(template_custom: Any, has_custom: bool, task_type_version: int) -> ArrayJob:
    """Flyte's ``ToArrayJob``: the defaults without a ``custom``, else the decoded message (unknown keys
    ignored). A ``custom`` that is not an ArrayJob raises PluginError ``BadTaskSpecification``."""
    if not has_custom:
        if task_type_version == 0:
            return ArrayJob(parallelism=0, size=1, min_successes=1)
        return ArrayJob(parallelism=0, size=1, min_success_ratio=1.0)
    message = array_job_pb2.ArrayJob()
    try:
        json_format.ParseDict(json_format.MessageToDict(template_custom), message, ignore_unknown_fields=True)
    except (json_format.ParseError, ValueError, TypeError) as e:
        raise PluginError(
            ErrorCode.BAD_TASK_SPECIFICATION, f"invalid ArrayJob in the task's custom: {e}", cause=e
        ) from e
    criterion = message.WhichOneof("success_criteria")
    return ArrayJob(
        parallelism=message.parallelism,
        size=message.size,
        min_successes=message.min_successes if criterion == "min_successes" else None,
        min_success_ratio=message.min_success_ratio if criterion == "min_success_ratio" else None,
    )


# -- pure rules -------------------------------------------------------------------------------------------


def summary_to_phase(min_successes: int, details: Iterable[Phase]) -> ArrayPhase:
    """Flyte's ``SummaryToPhase``: what the sub-tasks' phases mean for the map task, in Flyte's order.

    Too few sub-tasks, or no way left to reach ``min_successes`` (counting everything not yet failed
    permanently), aborts; any sub-task waiting for resources waits; enough successes *and* every sub-task
    done (succeeded or failed permanently) writes to discovery; anything else keeps checking.
    """
    summary = Counter(details)
    total = sum(summary.values())
    successes = summary[Phase.SUCCESS]
    permanent = summary[Phase.PERMANENT_FAILURE]
    retryable = summary[Phase.RETRYABLE_FAILURE]
    waiting = summary[Phase.WAITING_FOR_RESOURCES]
    running = total - successes - permanent - retryable - waiting
    if total < min_successes:
        return ArrayPhase.ABORT_SUB_TASKS
    if running + successes + waiting + retryable < min_successes:
        return ArrayPhase.ABORT_SUB_TASKS
    if waiting > 0:
        return ArrayPhase.WAITING_FOR_RESOURCES
    if successes >= min_successes and successes + permanent == total:
        return ArrayPhase.WRITE_TO_DISCOVERY
    return ArrayPhase.CHECKING_SUB_TASK_EXECUTIONS


_RUNNING_PHASES: Final = frozenset(
    {
        ArrayPhase.PRE_LAUNCH,
        ArrayPhase.LAUNCH,
        ArrayPhase.CHECKING_SUB_TASK_EXECUTIONS,
        ArrayPhase.ASSEMBLE_FINAL_OUTPUT,
        ArrayPhase.ASSEMBLE_FINAL_ERROR,
        ArrayPhase.ABORT_SUB_TASKS,
        ArrayPhase.WRITE_TO_DISCOVERY_THEN_FAIL,
        ArrayPhase.WRITE_TO_DISCOVERY,
    }
)


def to_phase_info(
    state: ArrayState, *, now: datetime, external_resources: Iterable[ExternalResource] = ()
) -> PhaseInfo:
    """Flyte's ``MapArrayStateToPluginPhase``: the core phase a map task reports for its array phase."""
    info = TaskInfo(occurred_at=now, external_resources=tuple(external_resources))
    phase, version = state.phase, state.phase_version
    if phase is ArrayPhase.START:
        return PhaseInfo.initializing(0, state.reason, info)
    if phase is ArrayPhase.WAITING_FOR_RESOURCES:
        return PhaseInfo.waiting_for_resources(version, state.reason, info)
    if phase in _RUNNING_PHASES:
        return PhaseInfo.running(version, info)
    if phase is ArrayPhase.SUCCESS:
        return PhaseInfo.success(info)
    if phase is ArrayPhase.RETRYABLE_FAILURE:
        if state.err is not None:
            return PhaseInfo.failed(Phase.RETRYABLE_FAILURE, state.err, info)
        return PhaseInfo.retryable_failure(ARRAY_JOB_GENERIC_FAILURE, state.reason, info)
    if phase is ArrayPhase.PERMANENT_FAILURE:
        if state.err is not None:
            return PhaseInfo.failed(Phase.PERMANENT_FAILURE, state.err, info)
        return PhaseInfo.system_failure(ARRAY_JOB_GENERIC_FAILURE, state.reason, info)
    raise PluginError(  # unreachable with a valid ArrayPhase; kept as Flyte's guard
        ErrorCode.SYSTEM_ERROR, f"failed to map custom state phase to core phase. State Phase [{phase}]"
    )


def initial_details(size: int) -> tuple[Phase, ...]:
    return (Phase.UNDEFINED,) * size
