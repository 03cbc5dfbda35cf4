"""The persisted per-attempt state of a web-API task and the phase mapping.

Follows flyteplugins/go/tasks/pluginmachinery/internal/webapi/state.go and ``ToPluginPhase`` in monitor.go.
The state is persisted as a JSON-able mapping (plugin-state version 1) instead of gob.

Deviation: Flyte re-entering a terminal state reports ``Undefined``. The state here also records the terminal
phase it reported (``reportedPhase``), so a terminal state re-entered re-reports the same phase.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from taskplug.core import (
    ErrorKind,
    ExecutionError,
    Phase,
    PhaseInfo,
    PluginError,
    TaskInfo,
)

__all__ = [
    "PLUGIN_STATE_VERSION",
    "RETURNED_UNKNOWN",
    "ReportedPhase",
    "State",
    "WebApiPhase",
    "decode_state",
    "encode_state",
    "to_plugin_phase",
]

PLUGIN_STATE_VERSION = 1
RETURNED_UNKNOWN = "RETURNED_UNKNOWN"
"""Flyte's error code when a plugin's Status returns a phase the web-API core cannot follow."""


class WebApiPhase(enum.IntEnum):
    """Where a web-API task is in the adapter's lifecycle (Flyte's ``webapi.Phase`` in
    internal/webapi/state.go); ``SUCCEEDED``, ``USER_FAILURE`` and ``SYSTEM_FAILURE`` are terminal.
    :func:`to_plugin_phase` maps a core phase onto it."""

    NOT_STARTED = 0
    ALLOCATION_TOKEN_ACQUIRED = 1
    RESOURCES_CREATED = 2
    SUCCEEDED = 3
    USER_FAILURE = 4
    SYSTEM_FAILURE = 5

    @property
    def is_terminal(self) -> bool:
        return self >= WebApiPhase.SUCCEEDED

    def __str__(self) -> str:
        return "".join(part.capitalize() for part in self.name.split("_"))


@dataclass(frozen=True, slots=True)
class ReportedPhase:
    """The terminal phase a state reported, kept so re-entering the state reports it again."""

    phase: Phase
    version: int = 0
    reason: str = ""
    error: ExecutionError | None = None

    @classmethod
    def of(cls, info: PhaseInfo) -> ReportedPhase:
        return cls(info.phase, info.version, info.reason, info.err)

    def to_phase_info(self, now: datetime) -> PhaseInfo:
        return PhaseInfo(self.phase, self.version, TaskInfo(occurred_at=now), self.error, self.reason)


@dataclass(frozen=True, slots=True)
class State:
    """The persisted state of one web-API attempt (Flyte's ``webapi.State``): the lifecycle phase and its
    version, the plugin's resource meta, the status cache's failure count and error message, when the
    token was first asked for, and (taskplug only) the terminal phase reported. Written as JSON by
    :func:`encode_state`."""

    phase: WebApiPhase = WebApiPhase.NOT_STARTED
    phase_version: int = 0
    resource_meta: Any = None
    sync_failure_count: int = 0
    allocation_token_request_start_time: datetime | None = None
    error_message: str = ""
    reported_phase: ReportedPhase | None = None


def encode_state(state: State) -> dict[str, Any]:
    """The JSON-able mapping written through the plugin-state writer."""
    start = state.allocation_token_request_start_time
    out: dict[str, Any] = {
        "phase": int(state.phase),
        "phaseVersion": state.phase_version,
        "resourceMeta": state.resource_meta,
        "syncFailureCount": state.sync_failure_count,
        "allocationTokenRequestStartTime": start.isoformat() if start is not None else None,
        "errorMessage": state.error_message,
    }
    reported = state.reported_phase
    if reported is not None:
        out["reportedPhase"] = {
            "phase": str(reported.phase),
            "version": reported.version,
            "reason": reported.reason,
            "error": None
            if reported.error is None
            else {
                "code": reported.error.code,
                "message": reported.error.message,
                "kind": str(reported.error.kind),
            },
        }
    return out


def _typed(raw: Mapping[str, Any], key: str, kind: type | tuple[type, ...], default: Any) -> Any:
    value = raw.get(key, default)
    if value is default:
        return value
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ValueError(f"{key}: expected {kind}, got {value!r}")
    return value


def decode_state(raw: Mapping[str, Any] | None) -> State:
    """Read a state written by :func:`encode_state`; ``None`` (nothing stored yet) is the zero state.

    Raises ValueError when the mapping is not a state.
    """
    if raw is None:
        return State()
    if not isinstance(raw, Mapping):
        raise ValueError(f"plugin state must be a mapping, got {type(raw).__name__}")
    start = _typed(raw, "allocationTokenRequestStartTime", str, None)
    reported_raw = _typed(raw, "reportedPhase", Mapping, None)
    reported = None
    if reported_raw is not None:
        error_raw = _typed(reported_raw, "error", Mapping, None)
        reported = ReportedPhase(
            Phase.from_name(str(reported_raw["phase"])),
            _typed(reported_raw, "version", int, 0),
            _typed(reported_raw, "reason", str, ""),
            None
            if error_raw is None
            else ExecutionError(
                str(error_raw["code"]), str(error_raw["message"]), ErrorKind(error_raw["kind"])
            ),
        )
    return State(
        phase=WebApiPhase(_typed(raw, "phase", int, 0)),
        phase_version=_typed(raw, "phaseVersion", int, 0),
        resource_meta=raw.get("resourceMeta"),
        sync_failure_count=_typed(raw, "syncFailureCount", int, 0),
        allocation_token_request_start_time=datetime.fromisoformat(start) if start is not None else None,
        error_message=_typed(raw, "errorMessage", str, ""),
        reported_phase=reported,
    )


_TO_WEBAPI = {
    Phase.UNDEFINED: WebApiPhase.NOT_STARTED,
    Phase.NOT_READY: WebApiPhase.NOT_STARTED,
    Phase.INITIALIZING: WebApiPhase.RESOURCES_CREATED,
    Phase.WAITING_FOR_RESOURCES: WebApiPhase.RESOURCES_CREATED,
    Phase.QUEUED: WebApiPhase.RESOURCES_CREATED,
    Phase.RUNNING: WebApiPhase.RESOURCES_CREATED,
    Phase.SUCCESS: WebApiPhase.SUCCEEDED,
    Phase.PERMANENT_FAILURE: WebApiPhase.USER_FAILURE,
    Phase.RETRYABLE_FAILURE: WebApiPhase.USER_FAILURE,
}


def to_plugin_phase(phase: Phase) -> WebApiPhase:
    """Flyte's ToPluginPhase; a phase the core cannot follow (WaitingForCache, Aborted): RETURNED_UNKNOWN."""
    try:
        return _TO_WEBAPI[phase]
    except KeyError:
        raise PluginError(RETURNED_UNKNOWN, f"default fallthrough case (phase {phase})") from None
