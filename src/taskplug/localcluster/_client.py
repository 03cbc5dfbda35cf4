"""The in-process :class:`taskplug.k8s.KubeClient` of the local cluster.

Behaves as the lightkube adapter does against a real API server, minus the network: what it is given is
decoded and validated as the HTTP façade's bodies are (the same store does it), every answer is a fresh
copy (nothing aliases the store), errors are :class:`taskplug.k8s.KubeApiError` with the API's
``Status`` reason, code and message, a watch yields events after the requested version, raises the 410
``Expired`` error from the iterator for a version older than the retained history, and simply ends when the
server closes it (``timeout_seconds`` on the cluster's clock, or :meth:`LocalCluster.drop_watches`).
Scripted faults apply before each call.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Literal

import orjson

from taskplug.k8s import POD, ResourceType, WatchEvent
from taskplug.localcluster._faults import Faults
from taskplug.localcluster._resources import deep_copy
from taskplug.localcluster._selectors import FieldSelector, LabelSelector
from taskplug.localcluster._store import Store
from taskplug.localcluster._timers import Timers
from taskplug.localcluster._validation import json_copy

__all__ = ["LocalKubeClient"]

KubeObject = dict[str, Any]


class LocalKubeClient:
    """Implements :class:`taskplug.k8s.KubeClient` on the cluster's store."""

    def __init__(
        self,
        store: Store,
        timers: Timers,
        faults: Faults | None,
        logs: Callable[..., str] | None = None,
    ) -> None:
        self._store = store
        self._timers = timers
        self._faults = faults
        self._logs = logs

    async def pod_log(
        self, namespace: str, name: str, container: str | None = None, *, tail_lines: int | None = None
    ) -> str:
        """A container's log, as ``pods/{name}/log`` answers it (:class:`taskplug.k8s.ReadsPodLogs`)."""
        return self._logs(namespace, name, container, tail_lines=tail_lines) if self._logs is not None else ""

    async def follow_pod_log(
        self, namespace: str, name: str, container: str | None = None
    ) -> AsyncIterator[str]:
        """The log as it is written, until the pod has ended or is gone (read again every 0.2 s, as the
        HTTP façade's ``follow=true`` does)."""
        shown = 0
        while True:
            pod = self._store.get(POD, namespace, name)  # 404 once gone, as the API answers
            ended = (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
            text = self._logs(namespace, name, container) if self._logs is not None else ""
            if len(text) > shown:
                yield text[shown:]
                shown = len(text)
            if ended:
                return
            await asyncio.sleep(0.2)

    async def _check(self, verb: str, rtype: ResourceType) -> None:
        if self._faults is not None:
            await self._faults.check(verb, rtype.plural)

    async def create(self, rtype: ResourceType, obj: KubeObject) -> KubeObject:
        await self._check("create", rtype)
        # The store decodes ``obj`` into a private copy (a 400 naming the field when it is not JSON or a
        # field has the wrong type), exactly as the HTTP façade's bodies are.
        created: KubeObject = deep_copy(self._store.create(rtype, obj))
        return created

    async def get(self, rtype: ResourceType, namespace: str, name: str) -> KubeObject:
        await self._check("get", rtype)
        found: KubeObject = deep_copy(self._store.get(rtype, namespace, name))
        return found

    async def list(
        self,
        rtype: ResourceType,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> tuple[builtins.list[KubeObject], str]:
        await self._check("list", rtype)
        items, rv = self._store.list(
            rtype,
            namespace,
            labels=LabelSelector.parse(label_selector),
            fields=FieldSelector.parse(field_selector),
        )
        copied: builtins.list[KubeObject] = orjson.loads(orjson.dumps(items))
        return copied, str(rv)

    async def watch(
        self,
        rtype: ResourceType,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        label_selector: str | None = None,
        timeout_seconds: int | None = None,
        field_selector: str | None = None,
        allow_watch_bookmarks: bool = False,
    ) -> AsyncIterator[WatchEvent]:
        await self._check("watch", rtype)
        watcher = self._store.watch(
            rtype,
            namespace,
            resource_version=resource_version,
            labels=LabelSelector.parse(label_selector),
            fields=FieldSelector.parse(field_selector),
            bookmarks=allow_watch_bookmarks,
        )
        deadline = self._timers.call_later(timeout_seconds, watcher.close) if timeout_seconds else None
        try:
            while (item := await watcher.next()) is not None:
                type_, event = item
                yield WatchEvent(type_, orjson.loads(event.raw_object()))  # type: ignore[arg-type]
        finally:
            if deadline is not None:
                deadline.cancel()
            watcher.close()

    async def patch(
        self,
        rtype: ResourceType,
        namespace: str,
        name: str,
        patch: Mapping[str, Any] | builtins.list[Any],
        *,
        patch_type: Literal["merge", "json", "strategic"] = "merge",
    ) -> KubeObject:
        await self._check("patch", rtype)
        patched: KubeObject = deep_copy(
            self._store.patch(rtype, namespace, name, json_copy(patch, rtype), patch_type)
        )
        return patched

    async def replace(self, rtype: ResourceType, obj: KubeObject) -> KubeObject:
        await self._check("replace", rtype)
        replaced: KubeObject = deep_copy(self._store.replace(rtype, obj))
        return replaced

    async def delete(self, rtype: ResourceType, namespace: str, name: str) -> KubeObject | None:
        await self._check("delete", rtype)
        deleted: KubeObject = deep_copy(self._store.delete(rtype, namespace, name))
        return deleted

    async def close(self) -> None:
        """Nothing to release: the client holds no connection."""
