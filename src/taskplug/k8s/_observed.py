"""Observed objects: checking what the API returned before the status code reads it.

Flyte never meets a Pod of the wrong shape: its client decodes the API's JSON into ``v1.Pod`` (k8s.io/api
core/v1 types.go) before flytek8s/pod_helper.go looks at it, so a value of the wrong type is a decode error,
not a crash. Here a Pod is the API's JSON as a dict, and it also comes from files (``taskplug status
--resource``) and from operators of the embedded cluster. So the fields the status helpers of
``_pod_status`` read are checked first against ``ObservedPod``, a typed model of exactly those fields:
unknown fields are ignored (the API adds fields every release), the types of the ones read are strict (no
string for an integer, no list for a map), and a mismatch is an :class:`ObservedObjectError` whose ``path``
names the field (``status.containerStatuses[0].state.terminated.exitCode``).

JSON ``null`` is accepted wherever a value is optional, as Go decodes it (the zero value).

The model is in :mod:`taskplug.k8s._observed_model`, imported by the ``validate_*`` functions when they
first read an object: every command imports this module, and one that reads no object (``render``) does not
pay for the model. Errors are named as every model's are (:mod:`taskplug.k8s._field_errors`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from taskplug.core import SpecError
from taskplug.k8s._field_errors import first_error, json_type

__all__ = [
    "ObservedObjectError",
    "describe_object",
    "validate_container_statuses",
    "validate_pod",
    "validate_pod_status",
]


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


# -- validation ------------------------------------------------------------------------------------------


def validate_pod(pod: Any) -> None:
    """Raise :class:`ObservedObjectError` naming the first field of ``pod`` the status helpers cannot read."""
    # Imported here: the model loads when an object is first read, not with every command (render reads none).
    from taskplug.k8s._observed_model import observed_pod

    _validate(lambda: observed_pod().validate_python(_as_dict(pod, "")), (), pod)


def validate_pod_status(status: Any) -> None:
    """The same check for a Pod's ``status`` alone (the ``demystify_*`` helpers take one)."""
    # Imported here: the model loads when an object is first read, not with every command (render reads none).
    from taskplug.k8s._observed_model import pod_status

    _validate(lambda: pod_status().validate_python(_as_dict(status, "status")), ("status",), None)


def validate_container_statuses(statuses: Any) -> None:
    """The same check for a list of container statuses (``status.containerStatuses``)."""
    # Imported here: the model loads when an object is first read, not with every command (render reads none).
    from taskplug.k8s._observed_model import container_statuses

    if isinstance(statuses, Sequence) and not isinstance(statuses, list | str | bytes):
        statuses = list(statuses)
    _validate(lambda: container_statuses().validate_python(statuses), ("status", "containerStatuses"), None)


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
