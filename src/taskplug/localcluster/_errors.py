"""The API errors the local cluster answers, worded exactly as a real API server words them.

Follows k8s.io/apimachinery/pkg/api/errors/errors.go (``NewNotFound``, ``NewAlreadyExists``,
``NewConflict``, ``NewInvalid``, ``NewForbidden``, ``NewTooManyRequests``, ``NewServerTimeout``,
``NewTimeoutError``, ``NewResourceExpired``) and field/errors.go for the 422 cause lines. Every error is a
:class:`taskplug.k8s.KubeApiError`, so callers cannot tell an in-process answer from an HTTP one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from taskplug.k8s import KubeApiError, ResourceType

__all__ = [
    "FieldError",
    "already_exists",
    "bad_request",
    "cannot_decode",
    "conflict",
    "expired",
    "forbidden",
    "go_quote",
    "group_resource",
    "internal_error",
    "invalid",
    "method_not_allowed",
    "not_found",
    "request_entity_too_large",
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


_REASONS: Final = {
    "Required value": "FieldValueRequired",
    "Invalid value": "FieldValueInvalid",
    "Unsupported value": "FieldValueNotSupported",
    "Forbidden": "FieldValueForbidden",
    "Duplicate value": "FieldValueDuplicate",
    "Too long": "FieldValueTooLong",
    "Too many": "FieldValueTooMany",
    "Not found": "FieldValueNotFound",
}


@dataclass(frozen=True, slots=True)
class FieldError:
    """One cause of a 422, as field.Error renders it: ``spec.containers[0].image: Required value``.

    ``value`` is shown as Go's ``%q`` for a string, bare for a number, a bool or a quantity (a Stringer), and
    not at all when None (Required, Forbidden and Too long never show it)."""

    field: str
    type: str  # "Required value", "Invalid value", "Unsupported value", "Forbidden", "Too long", …
    detail: str = ""
    value: object = None

    @property
    def reason(self) -> str:
        return _REASONS.get(self.type, "FieldValueInvalid")

    def body(self) -> str:
        text = self.type
        if self.value is not None and self.type not in ("Required value", "Forbidden", "Too long"):
            text += f": {_go_value(self.value)}"
        if self.detail:
            text += f": {self.detail}"
        return text

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}"


def _go_value(value: object) -> str:
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


_ESCAPES: Final = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


def go_quote(value: str) -> str:
    """Go's ``%q``: double quotes, backslash escapes, non-printable runes as ``\\x``/``\\u``/``\\U``."""
    if value.isprintable() and '"' not in value and "\\" not in value:
        return f'"{value}"'
    out = ['"']
    for ch in value:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)


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
    return KubeApiError(
        422, "Invalid", f"{qualified_kind} {go_quote(name)} is invalid: {listing}", details=details
    )


def expired(requested: int, oldest: int) -> KubeApiError:
    return KubeApiError(410, "Expired", f"too old resource version: {requested} ({oldest})")


def bad_request(message: str) -> KubeApiError:
    return KubeApiError(400, "BadRequest", message)


def cannot_decode(kind: str, version: str, detail: str, field: str) -> KubeApiError:
    """The 400 of a body that does not decode into the kind's Go type (a wrong JSON type, a bad quantity):
    ``Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal …``. The field path, with
    indices, is in ``details.causes`` (a real server names it only in the message, without indices)."""
    cause: dict[str, Any] = {"reason": "FieldValueInvalid", "message": detail}
    if field:
        cause["field"] = field
    return KubeApiError(
        400,
        "BadRequest",
        f"{kind} in version {go_quote(version)} cannot be handled as a {kind}: {detail}",
        details={"kind": kind, "causes": [cause]},
    )


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
