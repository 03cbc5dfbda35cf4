"""``events.k8s.io/v1`` Events about pods, as the scheduler and the kubelet record them.

Follows k8s.io/client-go/tools/events (``eventTime`` as MicroTime, ``regarding`` the pod's object reference,
``reportingController`` ``default-scheduler`` or ``kubelet``, name ``{object}.{hex}``) and the kubelet's
reasons (``Scheduled``, ``FailedScheduling``, ``Pulling``, ``Pulled``, ``Failed``, ``BackOff``,
``Created``, ``Started``, ``Killing``, ``InspectFailed``, ``OOMKilling``).

An event the API refuses (a name over 253 characters, made from a long pod name) is logged and dropped,
as client-go's recorder drops it; recording never fails the controller that records.

Deviation: a real cluster keeps events for an hour; here the oldest are deleted beyond a count limit, and
repeated events are not aggregated into a ``series``.
"""

from __future__ import annotations

import itertools
import logging
from collections import deque
from typing import Any

from taskplug.k8s import KubeApiError
from taskplug.localcluster._resources import EVENT, format_micro_time
from taskplug.localcluster._store import Store

__all__ = ["EventRecorder"]

_log = logging.getLogger(__name__)


class EventRecorder:
    def __init__(self, store: Store, *, limit: int = 20_000) -> None:
        self._store = store
        self._limit = limit
        self._kept: deque[tuple[str, str]] = deque()
        self._seq = itertools.count(1)

    def record(
        self,
        regarding: dict[str, Any],
        reason: str,
        note: str,
        *,
        type_: str = "Normal",
        action: str = "",
        controller: str = "kubelet",
        field_path: str | None = None,
    ) -> None:
        meta = regarding["metadata"]
        namespace = meta.get("namespace") or "default"
        now = self._store.clock.now()
        name = f"{meta['name']}.{int(now.timestamp() * 1e9) + next(self._seq):x}"
        ref: dict[str, Any] = {
            "apiVersion": regarding.get("apiVersion", "v1"),
            "kind": regarding.get("kind", "Pod"),
            "namespace": namespace,
            "name": meta["name"],
            "uid": meta.get("uid", ""),
            "resourceVersion": meta.get("resourceVersion", ""),
        }
        if field_path:
            ref["fieldPath"] = field_path
        node = (regarding.get("spec") or {}).get("nodeName") or "local-node"
        event = {
            "metadata": {"name": name, "namespace": namespace},
            "eventTime": format_micro_time(now),
            "reportingController": controller,
            "reportingInstance": f"{controller}-{node}",
            "action": action or reason,
            "reason": reason,
            "regarding": ref,
            "note": note,
            "type": type_,
        }
        try:
            self._store.create(EVENT, event)
        except KubeApiError as err:
            _log.warning("event %s/%s dropped: %s", namespace, name, err)
            return
        self._kept.append((namespace, name))
        while len(self._kept) > self._limit:
            old_ns, old_name = self._kept.popleft()
            if self._store.try_get(EVENT, old_ns, old_name) is not None:
                self._store.delete(EVENT, old_ns, old_name)
