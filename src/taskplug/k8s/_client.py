"""The narrow Kubernetes client contract the machinery uses, and the API errors it raises.

Objects are plain JSON dicts with the API's camelCase keys. A resource type is identified by
:class:`ResourceType` (apiVersion + kind + plural + namespaced). Exactly one production adapter implements
:class:`KubeClient` over lightkube (``taskplug.k8s._lightkube``); the embedded local cluster implements it
in-process. Client-library exceptions never leak past an adapter: they become :class:`KubeApiError`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from taskplug.core import TaskplugError

__all__ = [
    "EVENT",
    "POD",
    "KubeApiError",
    "KubeClient",
    "ResourceType",
    "WatchEvent",
    "is_already_exists",
    "is_conflict",
    "is_not_found",
]

KubeObject = dict[str, Any]


@dataclass(frozen=True, slots=True)
class ResourceType:
    api_version: str  # "v1", "sparkoperator.k8s.io/v1beta2"
    kind: str  # "Pod", "SparkApplication"
    plural: str  # "pods", "sparkapplications"
    namespaced: bool = True

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        return self.api_version.rpartition("/")[2]

    def gvk_string(self) -> str:
        """Go's ``GroupVersionKind.String()``: ``/v1, Kind=Pod``."""
        return f"{self.group}/{self.version}, Kind={self.kind}"

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> ResourceType:
        """The type of an object, for the kinds the machinery knows (Pod, SparkApplication, …)."""
        api_version, kind = obj.get("apiVersion", ""), obj.get("kind", "")
        plural = kind.lower() + ("es" if kind.lower().endswith("s") else "s")
        return cls(api_version, kind, plural)


POD = ResourceType("v1", "Pod", "pods")
EVENT = ResourceType("events.k8s.io/v1", "Event", "events")


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


def is_not_found(err: BaseException) -> bool:
    """Not found, gone or expired: the object is no longer there (Flyte's IsNotFound/IsGone/IsResourceExpired)."""
    return isinstance(err, KubeApiError) and (
        err.status in (404, 410) or err.reason in ("NotFound", "Gone", "Expired")
    )


def is_already_exists(err: BaseException) -> bool:
    return isinstance(err, KubeApiError) and err.status == 409 and err.reason == "AlreadyExists"


def is_conflict(err: BaseException) -> bool:
    return isinstance(err, KubeApiError) and err.status == 409 and err.reason != "AlreadyExists"


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: Literal["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"]
    object: KubeObject


class KubeClient(Protocol):
    """Namespaced CRUD + list/watch on dicts. Errors are :class:`KubeApiError`; connection trouble is
    ``ConnectionError`` (or ``TimeoutError``)."""

    async def create(self, rtype: ResourceType, obj: KubeObject) -> KubeObject: ...

    async def get(self, rtype: ResourceType, namespace: str, name: str) -> KubeObject: ...

    async def list(
        self, rtype: ResourceType, namespace: str | None = None, *, label_selector: str | None = None
    ) -> tuple[list[KubeObject], str]:
        """Objects and the list's resourceVersion."""
        ...

    def watch(
        self,
        rtype: ResourceType,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        label_selector: str | None = None,
        timeout_seconds: int | None = None,
    ) -> AsyncIterator[WatchEvent]:
        """Events after ``resource_version``; ends when the server closes the stream; 410 → KubeApiError."""
        ...

    async def patch(
        self,
        rtype: ResourceType,
        namespace: str,
        name: str,
        patch: Mapping[str, Any],
        *,
        patch_type: Literal["merge", "json", "strategic"] = "merge",
    ) -> KubeObject: ...

    async def replace(self, rtype: ResourceType, obj: KubeObject) -> KubeObject: ...

    async def delete(self, rtype: ResourceType, namespace: str, name: str) -> KubeObject | None: ...

    async def close(self) -> None: ...
