"""Operators for the embedded local cluster: the contract, and a ready-made one for simulated custom resources.

An :class:`Operator` is what ``LocalCluster.register_operator`` runs for a resource type, and what a
:class:`taskplug.k8s.K8sPluginEntry` offers as its ``local_operator``: the embedded cluster has no
operators of its own, so a plugin whose custom resource needs one (Spark, a plugin author's CRD) brings it.
It lives here, beside the plugin contract, so that a plugin's operator never has to import the embedded
cluster: discovering plugins stays cheap.

A plugin author's simulated operator is usually a pure rule, "given the object and the time, what is its
next status?", plus the same plumbing: react to ADDED/MODIFIED, read the object again so an old event never
moves it backwards, patch the status, and ignore an object deleted meanwhile. :class:`StatusStepOperator`
is that plumbing; the Spark plugin's and the custom-plugin example's operators are built on it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import Any, Protocol

from taskplug.core import Clock, KubeClient, ResourceType, SystemClock, WatchEvent
from taskplug.k8s._errors import is_not_found

__all__ = ["NextStatus", "Operator", "StatusStepOperator"]


class Operator(Protocol):
    """Called with every ADDED / MODIFIED / DELETED of its resource type (the object is a private copy);
    acts through the client it is given. May be a coroutine function or return None."""

    def __call__(self, event: WatchEvent, client: KubeClient) -> Awaitable[None] | None: ...


NextStatus = Callable[[Mapping[str, Any], datetime], "dict[str, Any] | None"]
"""``next_status(obj, now)``: the status patch that moves ``obj`` one step on, or None when it is done."""


class StatusStepOperator:
    """An operator for ``LocalCluster.register_operator`` that applies ``next_status`` to ``rtype`` objects."""

    def __init__(self, rtype: ResourceType, next_status: NextStatus, *, clock: Clock | None = None) -> None:
        self.rtype = rtype
        self.next_status = next_status
        self._clock: Clock = clock if clock is not None else SystemClock()

    async def __call__(self, event: WatchEvent, client: KubeClient) -> None:
        if event.type not in ("ADDED", "MODIFIED"):
            return
        meta = event.object.get("metadata") or {}
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        try:
            # Read it again: the event may be older than the object, and a step must never go backwards.
            current = await client.get(self.rtype, namespace, name)
            status = self.next_status(current, self._clock.now())
            if status is not None:
                await client.patch(self.rtype, namespace, name, {"status": status})
        except Exception as e:
            if is_not_found(e):
                return  # deleted meanwhile: nothing to report on
            raise
