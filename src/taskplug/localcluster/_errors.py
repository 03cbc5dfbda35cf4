"""The API errors the local cluster answers, worded exactly as a real API server words them.

Follows k8s.io/apimachinery/pkg/api/errors/errors.go (``NewNotFound``, ``NewAlreadyExists``,
``NewConflict``, ``NewInvalid``, ``NewForbidden``, ``NewTooManyRequests``, ``NewServerTimeout``,
``NewTimeoutError``, ``NewResourceExpired``) and field/errors.go for the 422 cause lines. Every error is a
:class:`taskplug.k8s.KubeApiError`, so callers cannot tell an in-process answer from an HTTP one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from taskplug.k8s import KubeApiError, ResourceType

__all__ = [
    "FieldError",
    "already_exists",
    "bad_request",
    "conflict",
    "expired",
    "forbidden",
    "group_resource",
    "internal_error",
    "invalid",
    "method_not_allowed",
    "not_found",
    "server_timeout",
    "timeout",
    "too_many_requests",
    "unsupported_media_type",
]


def group_resource(rtype: ResourceType) -> str:
    """``pods`` for the core group, ``sparkapplications.sparkoperator.k8s.io`` otherwise (Go's GroupResource)."""
    return f"{rtype.plural}.{rtype.group}" if rtype.group else rtype.plural


def _details(rtype: ResourceType, name: str) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name, "kind": rtype.plural}
    if rtype.group:
        details["group"] = rtype.group
    return details


def not_found(rtype: ResourceType, name: str) -> KubeApiError:
    return KubeApiError(
        404, "NotFound", f'{group_resource(rtype)} "{name}" not found', details=_details(rtype, name)
    )


def already_exists(rtype: ResourceType, name: str) -> KubeApiError:
    return KubeApiError(
        409,
        "AlreadyExists",
        f'{group_resource(rtype)} "{name}" already exists',
        details=_details(rtype, name),
    )


def conflict(rtype: ResourceType, name: str) -> KubeApiError:
    return KubeApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {group_resource(rtype)} "{name}": the object has been modified; '
        "please apply your changes to the latest version and try again",
        details=_details(rtype, name),
    )


def forbidden(rtype: ResourceType, name: str, why: str) -> KubeApiError:
    return KubeApiError(
        403,
        "Forbidden",
        f'{group_resource(rtype)} "{name}" is forbidden: {why}',
        details=_details(rtype, name),
    )


@dataclass(frozen=True, slots=True)
class FieldError:
    """One cause of a 422, as field.Error renders it: ``spec.containers[0].image: Required value``."""

    field: str
    type: str  # "Required value", "Invalid value", "Unsupported value", "Forbidden"
    detail: str = ""
    value: str | None = None

    @property
    def reason(self) -> str:
        return {
            "Required value": "FieldValueRequired",
            "Invalid value": "FieldValueInvalid",
            "Unsupported value": "FieldValueNotSupported",
            "Forbidden": "FieldValueForbidden",
            "Duplicate value": "FieldValueDuplicate",
        }.get(self.type, "FieldValueInvalid")

    def body(self) -> str:
        text = self.type
        if self.value is not None:
            text += f": {_go_quote(self.value)}"
        if self.detail:
            text += f": {self.detail}"
        return text

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}"


def _go_quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def invalid(kind: str, rtype: ResourceType, name: str, errors: list[FieldError]) -> KubeApiError:
    # NewInvalid: one error is shown bare, several in brackets joined by ", ".
    listing = str(errors[0]) if len(errors) == 1 else "[" + ", ".join(str(e) for e in errors) + "]"
    details: dict[str, Any] = {
        "name": name,
        "kind": kind,
        "causes": [{"reason": e.reason, "message": e.body(), "field": e.field} for e in errors],
    }
    if rtype.group:
        details["group"] = rtype.group
    qualified_kind = f"{kind}.{rtype.group}" if rtype.group else kind  # Go's GroupKind.String()
    return KubeApiError(422, "Invalid", f'{qualified_kind} "{name}" is invalid: {listing}', details=details)


def expired(requested: int, oldest: int) -> KubeApiError:
    return KubeApiError(410, "Expired", f"too old resource version: {requested} ({oldest})")


def bad_request(message: str) -> KubeApiError:
    return KubeApiError(400, "BadRequest", message)


def method_not_allowed(message: str) -> KubeApiError:
    return KubeApiError(405, "MethodNotAllowed", message)


def unsupported_media_type(content_type: str, accepted: Sequence[str]) -> KubeApiError:
    return KubeApiError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media types include: "
        f"{', '.join(accepted)} (got {content_type!r})",
    )


def request_entity_too_large(limit: int) -> KubeApiError:
    return KubeApiError(413, "RequestEntityTooLarge", f"the request body is larger than {limit} bytes")


def internal_error(message: str = "injected fault") -> KubeApiError:
    return KubeApiError(
        500,
        "InternalError",
        f"Internal error occurred: {message}",
        details={"causes": [{"message": message}]},
    )


def too_many_requests(retry_after_seconds: int = 1) -> KubeApiError:
    return KubeApiError(
        429,
        "TooManyRequests",
        "Too many requests, please try again later.",
        details={"retryAfterSeconds": retry_after_seconds},
    )


def server_timeout(rtype: ResourceType, verb: str, retry_after_seconds: int = 1) -> KubeApiError:
    return KubeApiError(
        500,
        "ServerTimeout",
        f"The {verb} operation against {group_resource(rtype)} could not be completed at this time, "
        "please try again.",
        details={"kind": rtype.plural, "retryAfterSeconds": retry_after_seconds},
    )


def timeout(
    message: str = "request did not complete within requested timeout - context deadline exceeded",
) -> KubeApiError:
    return KubeApiError(504, "Timeout", f"Timeout: {message}", details={"retryAfterSeconds": 1})
