"""Phases, PhaseInfo, TaskInfo and Transition: what a plugin reports about a task execution.

Follows flyteplugins/go/tasks/pluginmachinery/core/{phase,transition}.go. A failed task is data (a failure
PhaseInfo); an exception raised by a plugin means "could not decide this round".
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

__all__ = [
    "DEFAULT_PHASE_VERSION",
    "PHASE_INFO_UNDEFINED",
    "SYSTEM_ERROR_CODE",
    "UNKNOWN_TRANSITION",
    "ErrorKind",
    "ExecutionError",
    "ExternalResource",
    "Phase",
    "PhaseInfo",
    "ReasonInfo",
    "TaskInfo",
    "TaskLog",
    "Transition",
    "TransitionType",
    "rfc3339",
]

DEFAULT_PHASE_VERSION = 0
SYSTEM_ERROR_CODE = "SystemError"


class Phase(enum.IntEnum):
    """Flyte's plugin phase; ``str(phase)`` is the Go name without its ``Phase`` prefix."""

    UNDEFINED = 0
    NOT_READY = 1
    WAITING_FOR_RESOURCES = 2
    QUEUED = 3
    INITIALIZING = 4
    RUNNING = 5
    SUCCESS = 6
    RETRYABLE_FAILURE = 7
    PERMANENT_FAILURE = 8
    WAITING_FOR_CACHE = 9
    ABORTED = 10

    def __str__(self) -> str:
        return _PHASE_NAMES[self]

    @classmethod
    def from_name(cls, name: str) -> Phase:
        """Parse ``Running`` or ``PhaseRunning`` (the Go names)."""
        key = name.removeprefix("Phase")
        for phase, phase_name in _PHASE_NAMES.items():
            if phase_name == key:
                return phase
        raise ValueError(f"unknown phase {name!r}")

    @property
    def is_failure(self) -> bool:
        return self in (Phase.RETRYABLE_FAILURE, Phase.PERMANENT_FAILURE)

    @property
    def is_success(self) -> bool:
        return self is Phase.SUCCESS

    @property
    def is_aborted(self) -> bool:
        return self is Phase.ABORTED

    @property
    def is_terminal(self) -> bool:
        return self.is_failure or self.is_success or self.is_aborted

    @property
    def is_waiting_for_resources(self) -> bool:
        return self is Phase.WAITING_FOR_RESOURCES


_PHASE_NAMES: dict[Phase, str] = {
    Phase.UNDEFINED: "Undefined",
    Phase.NOT_READY: "NotReady",
    Phase.WAITING_FOR_RESOURCES: "WaitingForResources",
    Phase.QUEUED: "Queued",
    Phase.INITIALIZING: "Initializing",
    Phase.RUNNING: "Running",
    Phase.SUCCESS: "Success",
    Phase.RETRYABLE_FAILURE: "RetryableFailure",
    Phase.PERMANENT_FAILURE: "PermanentFailure",
    Phase.WAITING_FOR_CACHE: "WaitingForCache",
    Phase.ABORTED: "Aborted",
}


class ErrorKind(enum.StrEnum):
    """Who is to blame for a failure; decides which retry budget it spends."""

    USER = "USER"
    SYSTEM = "SYSTEM"


@dataclass(frozen=True, slots=True)
class ExecutionError:
    """Why a task failed, as a failure :class:`PhaseInfo` carries it (flyteidl's ``core.ExecutionError``).

    ``code`` is a string (``OOMKilled``, an :class:`~taskplug.core.ErrorCode` value, a connector's own
    code): Flyte tells failures apart by code, not by type. ``kind`` decides which retry budget the
    executor charges (:class:`ErrorKind`). Plugins get one through the failure constructors
    (``PhaseInfo.failure``, ``PhaseInfo.system_retryable_failure``, …) rather than building it.
    """

    code: str
    message: str
    kind: ErrorKind = ErrorKind.USER

    def __str__(self) -> str:
        return f"code:{self.code} message:{self.message} kind:{self.kind}"


@dataclass(frozen=True, slots=True)
class TaskLog:
    """A log link shown to the user (flyteidl ``core.TaskLog``)."""

    uri: str
    name: str
    message_format: str = "UNKNOWN"
    show_while_pending: bool = False
    hide_once_finished: bool = False

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"uri": self.uri, "name": self.name, "messageFormat": self.message_format}
        if self.show_while_pending:
            out["showWhilePending"] = True
        if self.hide_once_finished:
            out["hideOnceFinished"] = True
        return out


@dataclass(frozen=True, slots=True)
class ReasonInfo:
    """An additional reason (e.g. a Kubernetes event note); not part of persisted phase state."""

    reason: str
    occurred_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class ExternalResource:
    """One of several things a task launched, reported in :attr:`TaskInfo.external_resources` (Flyte's
    ``core.ExternalResource`` in pluginmachinery/core/phase.go, used by its array plugins).

    ``index`` stays the same across retries while ``external_id`` may change. No built-in plugin reports
    external resources yet; the type is here so a plugin that fans out can.
    """

    external_id: str
    index: int = 0
    retry_attempt: int = 0
    phase: Phase = Phase.UNDEFINED
    logs: tuple[TaskLog, ...] = ()
    custom_info: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class TaskInfo:
    """What a plugin tells the user along with a phase (Flyte's ``core.TaskInfo``): log links, when the status
    occurred and was reported, plugin-specific ``custom_info`` (shown as JSON), external resources, and
    additional reasons (Kubernetes events, which the plugin manager adds; they are not persisted).

    A :class:`PhaseInfo` constructor fills a missing ``occurred_at`` with the current time, as Flyte's does.
    """

    logs: tuple[TaskLog, ...] = ()
    occurred_at: datetime | None = None
    reported_at: datetime | None = None
    custom_info: Mapping[str, Any] | None = None
    external_resources: tuple[ExternalResource, ...] = ()
    additional_reasons: tuple[ReasonInfo, ...] = ()

    def __str__(self) -> str:
        return f"Info<@{self.occurred_at.isoformat() if self.occurred_at else None}>"


def _with_occurred_at(info: TaskInfo | None, now: datetime | None = None) -> TaskInfo:
    """Flyte's phaseInfo builder: a missing TaskInfo is created, a missing OccurredAt is set to now."""
    if info is None:
        return TaskInfo(occurred_at=now or datetime.now(UTC))
    if info.occurred_at is None:
        return replace(info, occurred_at=now or datetime.now(UTC))
    return info


def _at(t: datetime | None) -> TaskInfo:
    return TaskInfo(occurred_at=t or datetime.now(UTC))


@dataclass(frozen=True, slots=True)
class PhaseInfo:
    """Immutable report of a plugin's phase; build it with the named constructors."""

    phase: Phase = Phase.UNDEFINED
    version: int = DEFAULT_PHASE_VERSION
    info: TaskInfo | None = None
    err: ExecutionError | None = None
    reason: str = ""
    cleanup_on_failure: bool = False

    def with_version(self, version: int) -> PhaseInfo:
        # Flyte's WithVersion drops the cleanup flag; kept so status reports match what Flyte users see.
        return PhaseInfo(self.phase, version, self.info, self.err, self.reason, False)

    def with_info(self, info: TaskInfo) -> PhaseInfo:
        return replace(self, info=info)

    def __str__(self) -> str:
        if self.err is not None:
            return f"Phase<{self.phase}:{self.version} Error:{self.err}>"
        info = str(self.info) if self.info is not None else "<nil>"
        return f"Phase<{self.phase}:{self.version} {info} Reason:{self.reason}>"

    # -- non-terminal -------------------------------------------------------------------------------
    @classmethod
    def not_ready(cls, t: datetime | None, version: int, reason: str) -> PhaseInfo:
        return cls(Phase.NOT_READY, version, _at(t), reason=reason)

    @classmethod
    def waiting_for_resources(cls, version: int, reason: str, info: TaskInfo | None = None) -> PhaseInfo:
        return cls(Phase.WAITING_FOR_RESOURCES, version, _with_occurred_at(info), reason=reason)

    @classmethod
    def queued(cls, t: datetime | None, version: int, reason: str) -> PhaseInfo:
        return cls(Phase.QUEUED, version, _at(t), reason=reason)

    @classmethod
    def queued_with_task_info(cls, version: int, reason: str, info: TaskInfo | None) -> PhaseInfo:
        return cls(Phase.QUEUED, version, _with_occurred_at(info), reason=reason)

    @classmethod
    def initializing(cls, version: int, reason: str, info: TaskInfo | None = None) -> PhaseInfo:
        return cls(Phase.INITIALIZING, version, _with_occurred_at(info), reason=reason)

    @classmethod
    def running(cls, version: int, info: TaskInfo | None = None) -> PhaseInfo:
        return cls(Phase.RUNNING, version, _with_occurred_at(info))

    @classmethod
    def waiting_for_cache(cls, version: int, info: TaskInfo | None = None) -> PhaseInfo:
        return cls(Phase.WAITING_FOR_CACHE, version, _with_occurred_at(info))

    # -- terminal -----------------------------------------------------------------------------------
    @classmethod
    def success(cls, info: TaskInfo | None = None) -> PhaseInfo:
        return cls(Phase.SUCCESS, DEFAULT_PHASE_VERSION, _with_occurred_at(info))

    @classmethod
    def aborted(cls, info: TaskInfo | None = None) -> PhaseInfo:
        return cls(Phase.ABORTED, DEFAULT_PHASE_VERSION, _with_occurred_at(info))

    @classmethod
    def failed(cls, phase: Phase, err: ExecutionError | None, info: TaskInfo | None = None) -> PhaseInfo:
        """Flyte's PhaseInfoFailed: the error is kept as given, even when it is None."""
        return cls(phase, DEFAULT_PHASE_VERSION, _with_occurred_at(info), err)

    @classmethod
    def _failure(
        cls,
        phase: Phase,
        code: str,
        message: str,
        kind: ErrorKind,
        info: TaskInfo | None,
        cleanup: bool,
    ) -> PhaseInfo:
        # Flyte substitutes "Unknown" only for a nil error, never for an empty code or message.
        err = ExecutionError(code, message, kind)
        return cls(phase, DEFAULT_PHASE_VERSION, _with_occurred_at(info), err, "", cleanup)

    @classmethod
    def failure(cls, code: str, message: str, info: TaskInfo | None = None) -> PhaseInfo:
        return cls._failure(Phase.PERMANENT_FAILURE, code, message, ErrorKind.USER, info, False)

    @classmethod
    def failure_with_cleanup(cls, code: str, message: str, info: TaskInfo | None = None) -> PhaseInfo:
        return cls._failure(Phase.PERMANENT_FAILURE, code, message, ErrorKind.USER, info, True)

    @classmethod
    def system_failure(cls, code: str, message: str, info: TaskInfo | None = None) -> PhaseInfo:
        return cls._failure(Phase.PERMANENT_FAILURE, code, message, ErrorKind.SYSTEM, info, False)

    @classmethod
    def system_failure_with_cleanup(cls, code: str, message: str, info: TaskInfo | None = None) -> PhaseInfo:
        return cls._failure(Phase.PERMANENT_FAILURE, code, message, ErrorKind.SYSTEM, info, True)

    @classmethod
    def retryable_failure(cls, code: str, message: str, info: TaskInfo | None = None) -> PhaseInfo:
        return cls._failure(Phase.RETRYABLE_FAILURE, code, message, ErrorKind.USER, info, False)

    @classmethod
    def retryable_failure_with_cleanup(
        cls, code: str, message: str, info: TaskInfo | None = None
    ) -> PhaseInfo:
        return cls._failure(Phase.RETRYABLE_FAILURE, code, message, ErrorKind.USER, info, True)

    @classmethod
    def system_retryable_failure(cls, code: str, message: str, info: TaskInfo | None = None) -> PhaseInfo:
        return cls._failure(Phase.RETRYABLE_FAILURE, code, message, ErrorKind.SYSTEM, info, False)

    @classmethod
    def system_retryable_failure_with_cleanup(
        cls, code: str, message: str, info: TaskInfo | None = None
    ) -> PhaseInfo:
        return cls._failure(Phase.RETRYABLE_FAILURE, code, message, ErrorKind.SYSTEM, info, True)

    def to_json(self) -> dict[str, Any]:
        """The JSON shape ``taskplug status`` prints."""
        info = self.info
        return {
            "phase": str(self.phase),
            "version": self.version,
            "reason": self.reason,
            "error": None
            if self.err is None
            else {"code": self.err.code, "message": self.err.message, "kind": str(self.err.kind)},
            "cleanupOnFailure": self.cleanup_on_failure,
            "info": None
            if info is None
            else {
                "occurredAt": _rfc3339(info.occurred_at),
                "reportedAt": _rfc3339(info.reported_at),
                "logs": [log.to_json() for log in info.logs],
                "customInfo": dict(info.custom_info) if info.custom_info is not None else None,
                "additionalReasons": [
                    {"reason": r.reason, "occurredAt": _rfc3339(r.occurred_at)}
                    for r in info.additional_reasons
                ],
            },
        }


PHASE_INFO_UNDEFINED = PhaseInfo()
"""Flyte's PhaseInfoUndefined: no info, no error."""


def _rfc3339(t: datetime | None) -> str | None:
    return None if t is None else rfc3339(t)


def rfc3339(t: datetime) -> str:
    """``t`` as the UTC time text events and records carry (``2026-01-02T03:04:05.678901Z``); a time already in
    UTC, as the clocks give it, is not converted again (every event formats one)."""
    if t.tzinfo is not UTC:
        t = t.astimezone(UTC)
    return t.isoformat().replace("+00:00", "Z")


class TransitionType(enum.IntEnum):
    """Flyte's ``TransitionType``: every transition taskplug makes is ``EPHEMERAL``; ``BARRIER`` is deprecated
    in Flyte and kept only so the names and ``str()`` forms match."""

    EPHEMERAL = 0
    BARRIER = 1  # deprecated in Flyte, kept for parity

    def __str__(self) -> str:
        return "TransitionTypeEphemeral" if self is TransitionType.EPHEMERAL else "TransitionTypeBarrier"


@dataclass(frozen=True, slots=True)
class Transition:
    """What :meth:`Plugin.handle` returns for one round: the :class:`PhaseInfo` to report and the transition
    type (Flyte's ``core.Transition`` in pluginmachinery/core/transition.go).

    Build it with :meth:`Transition.to` (Flyte's ``DoTransition``). The executor records the phase as an
    event when it is new, persists what the plugin wrote to its state, and acts on a terminal phase
    (outputs, retry, finalize). :data:`UNKNOWN_TRANSITION` is Flyte's ``UnknownTransition``.
    """

    info: PhaseInfo = field(default_factory=PhaseInfo)
    type: TransitionType = TransitionType.EPHEMERAL

    def __str__(self) -> str:
        return f"{self.type},{self.info}"

    @classmethod
    def to(cls, info: PhaseInfo) -> Transition:
        """Flyte's DoTransition: an ephemeral transition to ``info``."""
        return cls(info, TransitionType.EPHEMERAL)


UNKNOWN_TRANSITION = Transition()
