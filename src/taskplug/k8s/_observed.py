"""Observed objects: checking what the API returned before the status code reads it.

Flyte never meets a Pod of the wrong shape: its client decodes the API's JSON into ``v1.Pod`` (k8s.io/api
core/v1 types.go) before flytek8s/pod_helper.go looks at it, so a value of the wrong type is a decode error,
not a crash. Here a Pod is the API's JSON as a dict, and it also comes from files (``taskplug status
--resource``) and from operators of the embedded cluster. So the fields the status helpers of
``_pod_status`` read are checked first against :class:`ObservedPod`, a typed model of exactly those fields:
unknown fields are ignored (the API adds fields every release), the types of the ones read are strict (no
string for an integer, no list for a map), and a mismatch is an :class:`ObservedObjectError` whose ``path``
names the field (``status.containerStatuses[0].state.terminated.exitCode``).

JSON ``null`` is accepted wherever a value is optional, as Go decodes it (the zero value).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Annotated, Any, Final

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from taskplug.core import SpecError
from taskplug.k8s._tasklog import parse_k8s_time

__all__ = [
    "ObservedObjectError",
    "ObservedPod",
    "describe_object",
    "first_error",
    "format_path",
    "json_type",
    "validate_container_statuses",
    "validate_pod",
    "validate_pod_status",
]

_INT32_MIN: Final = -(2**31)
_INT32_MAX: Final = 2**31 - 1
# metav1.Time decodes with time.Parse(time.RFC3339, ...): a date, a time and a zone, nothing else.
_RFC3339: Final = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")
_PLAIN_KEY: Final = re.compile(r"[A-Za-z0-9_-]+")


class ObservedObjectError(SpecError):
    """An observed object with a field of the wrong type or value.

    ``path`` is the field within the object (``status.conditions[0].lastTransitionTime``; empty for the
    object itself), ``reason`` what is wrong with it, ``obj`` the object when it could be named
    (``Pod ns/name``). A :class:`~taskplug.core.SpecError`, so the command line turns it into exit 2; the
    plugin manager reports it as a status it could not read.
    """

    def __init__(self, path: str, reason: str, *, obj: str = "") -> None:
        super().__init__(path, reason)
        self.obj = obj
        where = ": ".join(part for part in (obj, path) if part)
        self.message = f"{where}: {reason}" if where else reason


# -- the fields the status helpers read ------------------------------------------------------------------


def _time(value: Any) -> Any:
    if value is None or value == "" or isinstance(value, datetime):
        return value
    if not isinstance(value, str):
        raise ValueError(f"must be an RFC 3339 time such as 2026-01-01T00:00:00Z, got {json_type(value)}")
    if _RFC3339.fullmatch(value) is None:
        raise ValueError(f"must be an RFC 3339 time such as 2026-01-01T00:00:00Z, got {_shown(value)}")
    try:
        parsed = parse_k8s_time(value)
        # Out of range once in UTC (year 1 east of Greenwich, year 9999 west of it): arithmetic would overflow.
        if parsed is not None:
            parsed.astimezone(UTC)
    except (ValueError, OverflowError):
        raise ValueError(f"is not a valid time: {_shown(value)}") from None
    return value


Time = Annotated[Any, AfterValidator(_time)]
Int32 = Annotated[int, Field(ge=_INT32_MIN, le=_INT32_MAX)]


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


_CONTAINER_STATUSES: Final = TypeAdapter(list[ContainerStatus], config=ConfigDict(strict=True))


# -- validation ------------------------------------------------------------------------------------------


def validate_pod(pod: Any) -> None:
    """Raise :class:`ObservedObjectError` naming the first field of ``pod`` the status helpers cannot read."""
    _validate(lambda: ObservedPod.model_validate(_as_dict(pod, "")), (), pod)


def validate_pod_status(status: Any) -> None:
    """The same check for a Pod's ``status`` alone (the ``demystify_*`` helpers take one)."""
    _validate(lambda: PodStatus.model_validate(_as_dict(status, "status")), ("status",), None)


def validate_container_statuses(statuses: Any) -> None:
    """The same check for a list of container statuses (``status.containerStatuses``)."""
    if isinstance(statuses, Sequence) and not isinstance(statuses, list | str | bytes):
        statuses = list(statuses)
    _validate(lambda: _CONTAINER_STATUSES.validate_python(statuses), ("status", "containerStatuses"), None)


def _as_dict(value: Any, path: str) -> Any:
    # Strict models take dicts only; a read-only Mapping from a caller is as good as one.
    if isinstance(value, Mapping) and not isinstance(value, dict):
        return dict(value)
    if not isinstance(value, Mapping):
        raise ObservedObjectError(path, f"must be a mapping (JSON object), got {json_type(value)}")
    return value


def _validate(check: Callable[[], object], prefix: tuple[str | int, ...], obj: Any) -> None:
    try:
        check()
    except ValidationError as e:
        path, reason = first_error(e, prefix)
        raise ObservedObjectError(path, reason, obj=describe_object(obj)) from None


def first_error(error: ValidationError, prefix: Sequence[str | int] = ()) -> tuple[str, str]:
    """The path (:func:`format_path`, after ``prefix``) and a plain reason of a validation's first error."""
    first = error.errors(include_url=False)[0]
    loc = (*prefix, *first["loc"])
    if loc and loc[-1] == "[key]":
        return format_path(loc[:-2]), f"has a key that is not a string: {_shown(first['input'])}"
    return format_path(loc), _reason(first)


def format_path(loc: Sequence[str | int]) -> str:
    """``("status", "containerStatuses", 0, "name")`` as ``status.containerStatuses[0].name``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _PLAIN_KEY.fullmatch(part):
            out += f".{part}" if out else part
        else:
            # Annotation keys hold dots and slashes (flyte.org/x): bracket them so the path stays readable.
            out += f"[{part!r}]"
    return out


def _reason(error: Any) -> str:
    kind = error["type"]
    value = error.get("input")
    expected = {
        "model_type": "a mapping (JSON object)",
        "model_attributes_type": "a mapping (JSON object)",
        "dict_type": "a mapping (JSON object)",
        "list_type": "a list",
        "sequence_str": "a list",  # a str given for a Sequence field
        "string_type": "a string",
        "int_type": "an integer",
        "bool_type": "true or false",
    }.get(kind)
    if expected is not None:
        shown = json_type(value) if isinstance(value, dict | list) else _shown(value)
        return f"must be {expected}, got {shown}"
    if kind in ("greater_than_equal", "less_than_equal"):
        return f"must be a 32-bit integer ({_INT32_MIN} to {_INT32_MAX}), got {_shown(value)}"
    if kind == "missing":
        return "required"
    if kind == "string_too_short":
        return "must not be empty"
    return str(error["msg"]).removeprefix("Value error, ")


def json_type(value: Any) -> str:
    """How a JSON reader would name the type of ``value`` ("a list", "an integer", "null")."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    return type(value).__name__


def _shown(value: Any) -> str:
    if value is None:
        return "null"
    text = repr(value)
    return f"{json_type(value)} {text if len(text) <= 60 else text[:57] + '...'}"


def describe_object(obj: Any) -> str:
    """``Kind namespace/name`` of an observed object, as far as it can be read (never raises)."""
    if not isinstance(obj, Mapping):
        return ""
    kind = obj.get("kind")
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    namespace, name = meta.get("namespace"), meta.get("name")
    kind_text = kind if isinstance(kind, str) and kind else ""
    ns_text = namespace if isinstance(namespace, str) else ""
    name_text = name if isinstance(name, str) and name else ""
    if not kind_text and not name_text:
        return ""
    where = f"{ns_text}/{name_text or '?'}" if ns_text else name_text or "?"
    return f"{kind_text or 'object'} {where}"
