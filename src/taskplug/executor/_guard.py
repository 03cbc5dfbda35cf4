"""The Kubernetes client an executor's plugins use when it shares executions with other processes: every
create and delete passes the coordinator's guard, and an AlreadyExists is adopted only when the object's
labels say it is this execution's.

docs/service.md ("No object created twice") explains why: deterministic object names make a second object per
attempt
impossible and a replayed create harmless (Flyte adopts AlreadyExists after a lost round,
``pluginmachinery/k8s`` plugin manager), but a process whose executions were taken over (a replica paused
past its lease, a ``taskplug run`` whose lease another run took) could still create or delete an object
the new holder now owns. The guard refuses the call once this process may no longer act: a replica's is
``monotonic() < safe_until`` (no round trip: its last heartbeat was confirmed recently enough that nobody
can have declared it dead before the call lands), the single process's is "nothing it holds was taken
over". The label check refuses to adopt an object another execution made under the same name (a name
collision fails the attempt instead of silently sharing it).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, Literal

from taskplug.k8s import (
    EXECUTION_ID_LABEL,
    KubeApiError,
    KubeClient,
    ResourceType,
    WatchEvent,
    is_already_exists,
)

__all__ = ["FencedError", "GuardedKubeClient"]

_OWNER_LABELS = (EXECUTION_ID_LABEL, "node-id")


class FencedError(ConnectionError):
    """This process may no longer act for its executions (a replica's heartbeat is late or it was declared
    dead; a run's execution was taken over): the call was not sent. A ``ConnectionError``, so the plugin machinery counts it as a round that could not decide."""


class GuardedKubeClient:
    """A :class:`~taskplug.k8s.KubeClient` over ``inner`` whose creates and deletes wait for ``guard`` (which
    raises :class:`FencedError` when this process may no longer act). Closing it leaves ``inner`` open: a
    replica's incarnations share one client."""

    def __init__(self, inner: KubeClient, guard: Callable[[], Awaitable[None]]) -> None:
        self._inner = inner
        self._guard = guard
        self.adopted = 0
        self.collisions = 0

    async def create(self, rtype: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        await self._guard()
        try:
            return await self._inner.create(rtype, obj)
        except KubeApiError as e:
            if not is_already_exists(e):
                raise
            meta = obj.get("metadata") or {}
            namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
            existing = await self._inner.get(rtype, namespace, name)
            theirs = (existing.get("metadata") or {}).get("labels") or {}
            ours = meta.get("labels") or {}
            mismatch = [k for k in _OWNER_LABELS if k in ours and theirs.get(k) != ours.get(k)]
            if mismatch:
                self.collisions += 1
                # Invalid, not AlreadyExists: the plugin manager fails the attempt instead of adopting.
                raise KubeApiError(
                    422,
                    "Invalid",
                    f"{rtype.kind} {namespace}/{name} already exists and belongs to another execution "
                    f"(label {mismatch[0]}={theirs.get(mismatch[0])!r}, this execution's is "
                    f"{ours.get(mismatch[0])!r}): the generated names collide",
                ) from e
            self.adopted += 1
            raise

    async def get(self, rtype: ResourceType, namespace: str, name: str) -> dict[str, Any]:
        return await self._inner.get(rtype, namespace, name)

    async def list(
        self, rtype: ResourceType, namespace: str | None = None, *, label_selector: str | None = None
    ) -> tuple[list[dict[str, Any]], str]:
        return await self._inner.list(rtype, namespace, label_selector=label_selector)

    def watch(
        self,
        rtype: ResourceType,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        label_selector: str | None = None,
        timeout_seconds: int | None = None,
    ) -> AsyncIterator[WatchEvent]:
        return self._inner.watch(
            rtype,
            namespace,
            resource_version=resource_version,
            label_selector=label_selector,
            timeout_seconds=timeout_seconds,
        )

    async def patch(
        self,
        rtype: ResourceType,
        namespace: str,
        name: str,
        patch: Mapping[str, Any],
        *,
        patch_type: Literal["merge", "json", "strategic"] = "merge",
    ) -> dict[str, Any]:
        return await self._inner.patch(rtype, namespace, name, patch, patch_type=patch_type)

    async def replace(self, rtype: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        return await self._inner.replace(rtype, obj)

    async def delete(self, rtype: ResourceType, namespace: str, name: str) -> dict[str, Any] | None:
        await self._guard()
        return await self._inner.delete(rtype, namespace, name)

    async def close(self) -> None:
        pass
