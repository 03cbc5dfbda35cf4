"""The scheduler: binds pending pods to nodes, or marks them Unschedulable and retries when room frees.

Follows kube-scheduler's observable behaviour: a bound pod gets ``spec.nodeName`` and the condition
``PodScheduled=True`` and an event ``Scheduled`` (``Successfully assigned ns/name to node``); a pod that fits
nowhere stays Pending with ``PodScheduled=False``, reason ``Unschedulable`` and the FitError message, plus a
``FailedScheduling`` warning event; unschedulable pods go back to the queue when a pod on a node ends or
is deleted, or when a node is added or changed (the scheduler's "move to active queue" events).
The fit rules themselves are pure functions in :mod:`._nodes`.

Nothing a pod holds stops the scheduler: an error while handling one pod is logged with the pod's name and
fails that pod alone (phase ``Failed``, reason ``SchedulerError``, the error as the message), and the loop
goes on. Deviation: a real scheduler has no such outcome (it would crash and restart, or leave the pod
Pending); failing the pod tells whoever waits for it what went wrong instead of leaving it pending for ever.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Final

from taskplug.localcluster._events import EventRecorder
from taskplug.localcluster._nodes import filter_node, fit_error_message
from taskplug.localcluster._podres import ResourceList, add_resources, pod_requests
from taskplug.localcluster._resources import NODE, POD, TERMINAL_PHASES, format_time, set_condition
from taskplug.localcluster._store import Store, Watcher

__all__ = ["SCHEDULER_ERROR", "Scheduler"]

SCHEDULER_ERROR: Final = "SchedulerError"

_log = logging.getLogger(__name__)


class Scheduler:
    def __init__(self, store: Store, recorder: EventRecorder) -> None:
        self._store = store
        self._recorder = recorder
        self._bound: dict[str, tuple[str, ResourceList]] = {}  # pod uid → (node, requests)
        self._used: dict[str, ResourceList] = {}  # node → requests of its live pods
        self._count: dict[str, int] = {}  # node → live pods
        self._unschedulable: dict[str, tuple[str, str]] = {}  # pod uid → (namespace, name), in arrival order

    async def run(self) -> None:
        pods = self._store.watch(POD, internal=True)
        nodes = self._store.watch(NODE, internal=True)
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self._drain(pods, self._on_pod))
                group.create_task(self._drain(nodes, lambda _type, _obj: self._retry()))
        finally:
            pods.close()
            nodes.close()

    async def _drain(self, watcher: Watcher, handle: Callable[[str, dict[str, Any]], None]) -> None:
        while (item := await watcher.next()) is not None:
            type_, obj = item[0], item[1].obj
            try:
                handle(type_, obj)
            except Exception as err:
                spec = obj.get("spec")
                bound = isinstance(spec, dict) and spec.get("nodeName")
                if watcher.rtype == POD and type_ != "DELETED" and not bound:
                    self._fail(obj, err)
                else:
                    # A bound pod is the kubelet's to run or fail; only its accounting here is lost.
                    _log.exception("scheduler: could not handle a %s event", watcher.rtype.kind)

    def _fail(self, pod: dict[str, Any], err: Exception) -> None:
        """Fail the one pod whose handling raised; the scheduler goes on with the others."""
        found = pod.get("metadata")
        meta: dict[str, Any] = found if isinstance(found, dict) else {}
        namespace, name, uid = meta.get("namespace"), meta.get("name"), meta.get("uid")
        _log.error("scheduler: pod %s/%s could not be scheduled", namespace, name, exc_info=err)
        if isinstance(uid, str):
            self._unschedulable.pop(uid, None)
            self._release(uid)
        if not isinstance(name, str) or not isinstance(namespace, str):
            return
        message = f"the scheduler could not handle this pod: {type(err).__name__}: {err}"
        now = format_time(self._store.clock.now())

        def mark(obj: dict[str, Any]) -> None:
            status = obj.get("status")
            if not isinstance(status, dict):
                status = obj["status"] = {}
            status.update(phase="Failed", reason=SCHEDULER_ERROR, message=message)
            conditions = status.get("conditions")
            if not isinstance(conditions, list) or not all(isinstance(c, dict) for c in conditions):
                status["conditions"] = []
            set_condition(status, "PodScheduled", "False", now, SCHEDULER_ERROR, message)

        try:
            self._store.update(POD, namespace, name, mark)
        except Exception:
            _log.exception("scheduler: could not mark pod %s/%s failed", namespace, name)

    # -- pods --------------------------------------------------------------------------------------------
    def _on_pod(self, type_: str, pod: dict[str, Any]) -> None:
        meta, spec = pod["metadata"], pod.get("spec") or {}
        uid = meta["uid"]
        gone = type_ == "DELETED" or (pod.get("status") or {}).get("phase") in TERMINAL_PHASES
        if gone:
            self._unschedulable.pop(uid, None)
            if self._release(uid):
                self._retry()
            return
        node = spec.get("nodeName")
        if node:
            self._unschedulable.pop(uid, None)
            if uid not in self._bound:
                self._account(uid, node, pod_requests(spec))  # bound by someone else (nodeName in the spec)
            return
        if (
            meta.get("deletionTimestamp")
            or spec.get("schedulerName", "default-scheduler") != "default-scheduler"
        ):
            return
        if uid not in self._unschedulable:
            self._schedule(pod)

    def _account(self, uid: str, node: str, requests: ResourceList) -> None:
        self._bound[uid] = (node, requests)
        add_resources(self._used.setdefault(node, {}), requests)
        self._count[node] = self._count.get(node, 0) + 1

    def _release(self, uid: str) -> bool:
        entry = self._bound.pop(uid, None)
        if entry is None:
            return False
        node, requests = entry
        add_resources(self._used.setdefault(node, {}), requests, sign=-1)
        self._count[node] -= 1
        return True

    def _retry(self) -> None:
        for uid, (namespace, name) in list(self._unschedulable.items()):
            pod = self._store.try_get(POD, namespace, name)
            if pod is None or pod["metadata"]["uid"] != uid or (pod.get("spec") or {}).get("nodeName"):
                self._unschedulable.pop(uid, None)
                continue
            try:
                self._schedule(pod)
            except Exception as err:
                self._fail(pod, err)

    def _schedule(self, pod: dict[str, Any]) -> None:
        meta, spec = pod["metadata"], pod.get("spec") or {}
        requests = pod_requests(spec)
        nodes = sorted(self._store.iter(NODE), key=lambda n: n["metadata"]["name"])
        failures: list[list[str]] = []
        for node in nodes:
            name = node["metadata"]["name"]
            reasons = filter_node(spec, requests, node, self._used.get(name, {}), self._count.get(name, 0))
            if not reasons:
                self._bind(pod, name, requests)
                return
            failures.append(reasons)
        message = fit_error_message(len(nodes), failures)
        now = format_time(self._store.clock.now())
        previous = next(
            (c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") == "PodScheduled"),
            None,
        )
        self._unschedulable[meta["uid"]] = (meta["namespace"], meta["name"])
        if previous is not None and previous.get("message") == message:
            return  # nothing new to say

        def mark(obj: dict[str, Any]) -> None:
            set_condition(
                obj.setdefault("status", {}), "PodScheduled", "False", now, "Unschedulable", message
            )

        if self._store.update(POD, meta["namespace"], meta["name"], mark) is not None:
            self._recorder.record(
                pod,
                "FailedScheduling",
                message,
                type_="Warning",
                action="Scheduling",
                controller="default-scheduler",
            )

    def _bind(self, pod: dict[str, Any], node: str, requests: ResourceList) -> None:
        meta = pod["metadata"]
        now = format_time(self._store.clock.now())

        def bind(obj: dict[str, Any]) -> None:
            obj.setdefault("spec", {})["nodeName"] = node
            set_condition(obj.setdefault("status", {}), "PodScheduled", "True", now)

        bound = self._store.update(POD, meta["namespace"], meta["name"], bind)
        if bound is None:
            return
        self._unschedulable.pop(meta["uid"], None)
        self._account(meta["uid"], node, requests)
        self._recorder.record(
            bound,
            "Scheduled",
            f"Successfully assigned {meta['namespace']}/{meta['name']} to {node}",
            action="Binding",
            controller="default-scheduler",
        )
