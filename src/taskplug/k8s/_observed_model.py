"""The fields of a Pod that ``taskplug.k8s``'s status helpers and log links read, as a strict model.

Loaded by :mod:`taskplug.k8s._observed`'s ``validate_*`` functions when they first read an object, so that a
command that reads none (``render``) does not pay for it; that module says what is checked and why.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any, Final

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, TypeAdapter

from taskplug.k8s._field_errors import INT32_MAX, INT32_MIN, json_type, shown
from taskplug.k8s._tasklog import parse_k8s_time

__all__ = ["CONTAINER_STATUSES", "ObservedPod", "PodStatus"]

# metav1.Time decodes with time.Parse(time.RFC3339, ...): a date, a time and a zone, nothing else.
_RFC3339: Final = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")


def _time(value: Any) -> Any:
    if value is None or value == "" or isinstance(value, datetime):
        return value
    if not isinstance(value, str):
        raise ValueError(f"must be an RFC 3339 time such as 2026-01-01T00:00:00Z, got {json_type(value)}")
    if _RFC3339.fullmatch(value) is None:
        raise ValueError(f"must be an RFC 3339 time such as 2026-01-01T00:00:00Z, got {shown(value)}")
    try:
        parsed = parse_k8s_time(value)
        # Out of range once in UTC (year 1 east of Greenwich, year 9999 west of it): arithmetic would overflow.
        if parsed is not None:
            parsed.astimezone(UTC)
    except (ValueError, OverflowError):
        raise ValueError(f"is not a valid time: {shown(value)}") from None
    return value


Time = Annotated[Any, AfterValidator(_time)]
Int32 = Annotated[int, Field(ge=INT32_MIN, le=INT32_MAX)]


class _Observed(BaseModel):
    # defer_build: the validators are built on first use, not when a command imports the module.
    model_config = ConfigDict(extra="ignore", strict=True, frozen=True, defer_build=True)


class ContainerStateWaiting(_Observed):
    reason: str | None = None
    message: str | None = None


class ContainerStateRunning(_Observed):
    started_at: Time = Field(None, alias="startedAt")


class ContainerStateTerminated(_Observed):
    exit_code: Int32 | None = Field(None, alias="exitCode")
    reason: str | None = None
    message: str | None = None
    finished_at: Time = Field(None, alias="finishedAt")


class ContainerState(_Observed):
    waiting: ContainerStateWaiting | None = None
    running: ContainerStateRunning | None = None
    terminated: ContainerStateTerminated | None = None


class ContainerStatus(_Observed):
    name: str | None = None
    ready: bool | None = None
    state: ContainerState | None = None
    last_state: ContainerState | None = Field(None, alias="lastState")
    container_id: str | None = Field(None, alias="containerID")


class PodCondition(_Observed):
    type: str | None = None
    status: str | None = None
    reason: str | None = None
    message: str | None = None
    last_transition_time: Time = Field(None, alias="lastTransitionTime")


class PodStatus(_Observed):
    phase: str | None = None
    reason: str | None = None
    message: str | None = None
    conditions: list[PodCondition] | None = None
    container_statuses: list[ContainerStatus] | None = Field(None, alias="containerStatuses")
    init_container_statuses: list[ContainerStatus] | None = Field(None, alias="initContainerStatuses")
    ephemeral_container_statuses: list[ContainerStatus] | None = Field(
        None, alias="ephemeralContainerStatuses"
    )


class Container(_Observed):
    name: str | None = None


class PodSpec(_Observed):
    containers: list[Container] | None = None
    hostname: str | None = None
    node_name: str | None = Field(None, alias="nodeName")


class ObjectMeta(_Observed):
    name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    annotations: dict[str, str] | None = None
    creation_timestamp: Time = Field(None, alias="creationTimestamp")
    deletion_timestamp: Time = Field(None, alias="deletionTimestamp")


class ObservedPod(_Observed):
    """The fields of a Pod that ``taskplug.k8s``'s status helpers and log links read."""

    metadata: ObjectMeta | None = None
    spec: PodSpec | None = None
    status: PodStatus | None = None


CONTAINER_STATUSES: Final = TypeAdapter(list[ContainerStatus], config=ConfigDict(strict=True))
