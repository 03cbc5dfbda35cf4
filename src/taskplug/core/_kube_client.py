"""The narrow Kubernetes client contract plugins and the engine use (Flyte's ``pluginmachinery/core/kube_client.go``).

Objects are plain JSON dicts with the API's camelCase keys. A resource type is identified by
:class:`ResourceType` (apiVersion + kind + plural + namespaced). Exactly one production adapter implements
:class:`KubeClient` over lightkube (``taskplug.engine.k8s._lightkube``); the embedded local cluster implements it
in-process. Client-library exceptions never leak past an adapter: they become ``taskplug.k8s.KubeApiError``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

__all__ = [
    "EVENT",
    "POD",
    "FollowsPodLogs",
    "KubeClient",
    "ReadsPodLogs",
    "ResourceType",
    "WatchEvent",
]

KubeObject = dict[str, Any]


@dataclass(frozen=True, slots=True)
class ResourceType:
    """A Kubernetes resource type: apiVersion, kind, the plural its URL uses, and whether it is namespaced
    (what controller-runtime finds in its scheme and REST mapper). A :class:`K8sPluginEntry` names the type
    it watches with one; :data:`POD` and :data:`EVENT` are predefined."""

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


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One event of a watch stream (client-go's ``watch.Event``): what happened and the object as it is now
    (for ``ERROR``, the API's ``Status``)."""

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


@runtime_checkable
class FollowsPodLogs(Protocol):
    """Optional capability of a :class:`KubeClient`: a container's log as it is written (``pods/{name}/log``
    with ``follow=true``, as ``kubectl logs -f``): from its beginning, then each piece as the container
    prints it, until the container has ended. Errors as for :class:`KubeClient`."""

    def follow_pod_log(
        self, namespace: str, name: str, container: str | None = None
    ) -> AsyncIterator[str]: ...


@runtime_checkable
class ReadsPodLogs(Protocol):
    """Optional capability of a :class:`KubeClient`: a container's log (the API's ``pods/{name}/log``), as
    ``kubectl logs`` reads it. Errors as for :class:`KubeClient`."""

    async def pod_log(
        self, namespace: str, name: str, container: str | None = None, *, tail_lines: int | None = None
    ) -> str: ...
