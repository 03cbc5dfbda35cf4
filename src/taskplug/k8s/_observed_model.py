"""The fields of a Pod that ``taskplug.k8s``'s status helpers and log links read, as a strict model.

Loaded by :mod:`taskplug.k8s._observed`'s ``validate_*`` functions when they first read an object, so that a
command that reads none (``render``) does not pay for it; that module says what is checked and why.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from functools import cache, lru_cache
from typing import Annotated, Any, Final

from pydantic import AfterValidator, ConfigDict, Field, TypeAdapter, with_config
from typing_extensions import TypedDict

from taskplug.k8s._field_errors import INT32_MAX, INT32_MIN, json_type, shown
from taskplug.k8s._tasklog import parse_k8s_time

__all__ = ["ObservedPod", "PodStatus", "container_statuses", "observed_pod", "pod_status"]

# metav1.Time decodes with time.Parse(time.RFC3339, ...): a date, a time and a zone, nothing else.
_RFC3339: Final = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")


def _time(value: Any) -> Any:
    if value is None or value == "" or isinstance(value, datetime):
        return value
    if not isinstance(value, str):
        raise ValueError(f"must be an RFC 3339 time such as 2026-01-01T00:00:00Z, got {json_type(value)}")
    _check_time_text(value)
    return value


@lru_cache(maxsize=4096)
def _check_time_text(value: str) -> None:
    # Remembered by text: a pod's few times are checked again at every round of its task, and every task in
    # flight shares the same seconds. Only a good time is remembered (lru_cache keeps no exceptions).
    if _RFC3339.fullmatch(value) is None:
        raise ValueError(f"must be an RFC 3339 time such as 2026-01-01T00:00:00Z, got {shown(value)}")
    try:
        parsed = parse_k8s_time(value)
        # Out of range once in UTC (year 1 east of Greenwich, year 9999 west of it): arithmetic would overflow.
        if parsed is not None:
            parsed.astimezone(UTC)
    except (ValueError, OverflowError):
        raise ValueError(f"is not a valid time: {shown(value)}") from None


Time = Annotated[Any, AfterValidator(_time)]
Int32 = Annotated[int, Field(ge=INT32_MIN, le=INT32_MAX)]

# Every part is a TypedDict, not a BaseModel: the check only has to pass or name a field, and validating into
# plain dicts costs a third of building a model instance per part (a pod is checked at every round of its
# task). Keys are the API's JSON names; a missing key, or null, is a value left unset.
_STRICT: Final = ConfigDict(extra="ignore", strict=True)


@with_config(_STRICT)
class ContainerStateWaiting(TypedDict, total=False):
    reason: str | None
    message: str | None


@with_config(_STRICT)
class ContainerStateRunning(TypedDict, total=False):
    startedAt: Time


@with_config(_STRICT)
class ContainerStateTerminated(TypedDict, total=False):
    exitCode: Int32 | None
    reason: str | None
    message: str | None
    finishedAt: Time


@with_config(_STRICT)
class ContainerState(TypedDict, total=False):
    waiting: ContainerStateWaiting | None
    running: ContainerStateRunning | None
    terminated: ContainerStateTerminated | None


@with_config(_STRICT)
class ContainerStatus(TypedDict, total=False):
    name: str | None
    ready: bool | None
    state: ContainerState | None
    lastState: ContainerState | None
    containerID: str | None


@with_config(_STRICT)
class PodCondition(TypedDict, total=False):
    type: str | None
    status: str | None
    reason: str | None
    message: str | None
    lastTransitionTime: Time


@with_config(_STRICT)
class PodStatus(TypedDict, total=False):
    phase: str | None
    reason: str | None
    message: str | None
    conditions: list[PodCondition] | None
    containerStatuses: list[ContainerStatus] | None
    initContainerStatuses: list[ContainerStatus] | None
    ephemeralContainerStatuses: list[ContainerStatus] | None


@with_config(_STRICT)
class Container(TypedDict, total=False):
    name: str | None


@with_config(_STRICT)
class PodSpec(TypedDict, total=False):
    containers: list[Container] | None
    hostname: str | None
    nodeName: str | None


@with_config(_STRICT)
class ObjectMeta(TypedDict, total=False):
    name: str | None
    namespace: str | None
    uid: str | None
    annotations: dict[str, str] | None
    creationTimestamp: Time
    deletionTimestamp: Time


@with_config(_STRICT)
class ObservedPod(TypedDict, total=False):
    """The fields of a Pod that ``taskplug.k8s``'s status helpers and log links read."""

    metadata: ObjectMeta | None
    spec: PodSpec | None
    status: PodStatus | None


# The validators are built on first use, not when the module is imported.
@cache
def observed_pod() -> TypeAdapter[ObservedPod]:
    return TypeAdapter(ObservedPod)


@cache
def pod_status() -> TypeAdapter[PodStatus]:
    return TypeAdapter(PodStatus)


@cache
def container_statuses() -> TypeAdapter[list[ContainerStatus]]:
    return TypeAdapter(list[ContainerStatus], config=ConfigDict(strict=True))
