"""The errors a Kubernetes API answers, and apimachinery's ``errors.IsXxx`` predicates over them.

Follows k8s.io/apimachinery/pkg/api/errors. Every adapter (lightkube, the embedded cluster) raises
:class:`KubeApiError`; a plugin or the engine may wrap it (``PluginError(cause=...)`` or ``raise ... from``),
so every predicate looks for the API error along the whole cause chain, as Go's ``errors.As`` does.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

from taskplug.core import PluginError, TaskplugError

__all__ = [
    "KubeApiError",
    "api_error_of",
    "is_already_exists",
    "is_bad_request",
    "is_conflict",
    "is_forbidden",
    "is_invalid",
    "is_not_found",
    "is_request_entity_too_large",
    "is_server_timeout",
    "is_too_many_requests",
]


class KubeApiError(TaskplugError):
    """An error answered by the Kubernetes API, as its ``Status``: HTTP code, reason and message."""

    def __init__(
        self, status: int, reason: str, message: str, *, details: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(message, code=reason or str(status))
        self.status = status
        self.reason = reason
        self.details = dict(details or {})

    def __str__(self) -> str:
        return self.message

    @classmethod
    def from_status(cls, status: Mapping[str, Any], http_status: int | None = None) -> KubeApiError:
        return cls(
            int(status.get("code") or http_status or 500),
            str(status.get("reason") or ""),
            str(status.get("message") or ""),
            details=status.get("details"),
        )

    def to_status(self) -> dict[str, Any]:
        status: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.status,
        }
        if self.details:
            status["details"] = self.details
        return status


# Reasons apimachinery knows; an error with any other reason is classified by its HTTP code instead.
_KNOWN_REASONS: Final = frozenset(
    {
        "Unauthorized",
        "Forbidden",
        "NotFound",
        "AlreadyExists",
        "Conflict",
        "Gone",
        "Invalid",
        "ServerTimeout",
        "StoreReadError",
        "Timeout",
        "TooManyRequests",
        "BadRequest",
        "MethodNotAllowed",
        "NotAcceptable",
        "RequestEntityTooLarge",
        "UnsupportedMediaType",
        "InternalError",
        "Expired",
        "ServiceUnavailable",
    }
)


def _chain(err: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        nxt = current.cause if isinstance(current, PluginError) else None
        current = nxt if nxt is not None else current.__cause__


def api_error_of(err: BaseException) -> KubeApiError | None:
    """The Kubernetes API error in ``err``'s cause chain (Go's ``errors.As`` for an APIStatus)."""
    for e in _chain(err):
        if isinstance(e, KubeApiError):
            return e
    return None


def _has_reason(err: BaseException, reason: str, code: int | None) -> bool:
    api = api_error_of(err)
    if api is None:
        return False
    if api.reason == reason:
        return True
    return code is not None and api.reason not in _KNOWN_REASONS and api.status == code


def is_forbidden(err: BaseException) -> bool:
    return _has_reason(err, "Forbidden", 403)


def is_too_many_requests(err: BaseException) -> bool:
    return _has_reason(err, "TooManyRequests", 429)


def is_server_timeout(err: BaseException) -> bool:
    return _has_reason(err, "ServerTimeout", None)


def is_bad_request(err: BaseException) -> bool:
    return _has_reason(err, "BadRequest", 400)


def is_invalid(err: BaseException) -> bool:
    return _has_reason(err, "Invalid", 422)


def is_request_entity_too_large(err: BaseException) -> bool:
    return _has_reason(err, "RequestEntityTooLarge", 413)


def is_not_found(err: BaseException) -> bool:
    """Not found, gone or expired: the object is no longer there (Flyte's IsNotFound/IsGone/IsResourceExpired)."""
    api = api_error_of(err)
    return api is not None and (api.status in (404, 410) or api.reason in ("NotFound", "Gone", "Expired"))


def is_already_exists(err: BaseException) -> bool:
    api = api_error_of(err)
    return api is not None and api.status == 409 and api.reason == "AlreadyExists"


def is_conflict(err: BaseException) -> bool:
    api = api_error_of(err)
    return api is not None and api.status == 409 and api.reason != "AlreadyExists"
