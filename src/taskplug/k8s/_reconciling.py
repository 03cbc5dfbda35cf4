"""An operator for the embedded cluster that creates objects and follows the pods it created (a reconciler).

Follows controller-runtime's reconcile loop (``pkg/internal/controller``), not a Flyte file: Flyte runs
against real operators, the embedded cluster needs stand-ins for them.

``LocalCluster.register_operator`` calls an operator with every change of one kind (here the job), but an
operator such as the dask or Ray operator also acts when *its pods* change (the job runner succeeded, the
Ray head is up). A :class:`ReconcilingOperator` therefore runs, beside the calls it gets, a small
controller in the manner of controller-runtime: one work queue of object keys, fed by the job's own
events and by a watch on pods (each pod mapped to the job it belongs to), drained by one worker that
reconciles one job at a time from what the cluster holds now (level-triggered: nothing is remembered
between calls that the cluster does not hold). A reconcile may ask to be called again (:class:`Requeue`):
after a time on the operator's clock (a TTL), or after a real pause (polling a process, which no clock
but the wall's moves).

Ownership: the controller is one task (a ``TaskGroup`` of the pod watch, the worker and the delayed
requeues), started by the first call and cancelled when the task that calls the operator ends (the
cluster cancels its operator tasks when it stops) or by :meth:`ReconcilingOperator.aclose`. Nothing runs
once the cluster is gone; the pod watch re-lists after ``watch_timeout`` seconds, so no wait is unbounded.

The local cluster has no garbage collector: when a job is deleted, :meth:`ReconcilingOperator.cleanup`
deletes what the real garbage collector would (the objects whose owner references lead to it).

It lives here, beside :class:`taskplug.k8s.StatusStepOperator` (an operator that only steps a status), for
plugins whose operator makes objects of its own: the Ray and Dask plugins' operators are built on it.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from taskplug.core import POD, Clock, KubeClient, ResourceType, SystemClock, WatchEvent
from taskplug.k8s._errors import is_already_exists, is_conflict, is_not_found

__all__ = [
    "ObjectKey",
    "ReconcilingOperator",
    "Requeue",
    "create_or_get",
    "delete_if_present",
    "loopback_port",
    "owned_by",
    "owner_reference",
]

_log = logging.getLogger(__name__)

ObjectKey = tuple[str, str]
"""``(namespace, name)``: what the work queue holds (controller-runtime's ``client.ObjectKey``)."""
KubeObject = dict[str, Any]

_RETRY_SECONDS = 0.5


@dataclass(frozen=True, slots=True)
class Requeue:
    """Reconcile the object again after ``seconds``: on the operator's clock, or of real time when
    ``real_time`` (waiting on a process, which only real time moves)."""

    seconds: float
    real_time: bool = False


def loopback_port() -> int:
    """A TCP port free on 127.0.0.1 right now (the kernel's choice; the caller's process binds it next)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def owner_reference(owner: Mapping[str, Any], *, controller: bool = True) -> dict[str, Any]:
    """An ownerReference to ``owner`` as controller-runtime's ``SetControllerReference`` writes it."""
    meta = owner.get("metadata") or {}
    return {
        "apiVersion": owner.get("apiVersion", ""),
        "kind": owner.get("kind", ""),
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
        "controller": controller,
        "blockOwnerDeletion": True,
    }


def owned_by(obj: Mapping[str, Any], uid: str) -> bool:
    return any(ref.get("uid") == uid for ref in (obj.get("metadata") or {}).get("ownerReferences") or [])


async def create_or_get(client: KubeClient, rtype: ResourceType, obj: KubeObject) -> KubeObject:
    """Create ``obj``; if a previous reconcile already did, the stored one (creates are idempotent)."""
    try:
        return await client.create(rtype, obj)
    except Exception as e:
        meta = obj.get("metadata") or {}
        if is_already_exists(e) and meta.get("name"):
            return await client.get(rtype, str(meta.get("namespace") or ""), str(meta["name"]))
        raise


async def delete_if_present(client: KubeClient, rtype: ResourceType, namespace: str, name: str) -> None:
    try:
        await client.delete(rtype, namespace, name)
    except Exception as e:
        if not is_not_found(e):
            raise


class ReconcilingOperator:
    """An :class:`taskplug.k8s.Operator` that reconciles objects of ``rtype`` on their events and on the
    events of the pods :meth:`owner_of_pod` maps to them. Subclasses implement :meth:`owner_of_pod`,
    :meth:`reconcile` and :meth:`cleanup`."""

    rtype: ResourceType

    def __init__(self, rtype: ResourceType, *, clock: Clock | None = None, watch_timeout: int = 60) -> None:
        self.rtype = rtype
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.watch_timeout = watch_timeout
        self._queue: asyncio.Queue[ObjectKey] = asyncio.Queue()
        self._pending: set[ObjectKey] = set()
        self._gone: dict[ObjectKey, str] = {}
        self._timers: dict[ObjectKey, asyncio.Task[None]] = {}
        self._group: asyncio.TaskGroup | None = None
        self._runner: asyncio.Task[None] | None = None

    # -- what a subclass implements ---------------------------------------------------------------
    def owner_of_pod(self, pod: Mapping[str, Any]) -> ObjectKey | None:
        """The key of the object a pod belongs to (None: not one of ours)."""
        raise NotImplementedError

    async def reconcile(self, client: KubeClient, obj: KubeObject) -> Requeue | None:
        """Move ``obj`` towards what it asks for; return when to look again, or None."""
        raise NotImplementedError

    async def cleanup(self, client: KubeClient, namespace: str, name: str, uid: str) -> None:
        """Delete what belonged to the object (uid ``uid``) that is gone."""
        raise NotImplementedError

    # -- the Operator protocol --------------------------------------------------------------------
    async def __call__(self, event: WatchEvent, client: KubeClient) -> None:
        if event.type not in ("ADDED", "MODIFIED", "DELETED"):
            return
        self._start_controller(client)
        meta = event.object.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        if event.type == "DELETED":
            self._gone[key] = str(meta.get("uid") or "")
        self.enqueue(key)

    async def aclose(self) -> None:
        """Stop the controller and wait until it has stopped (a cluster stops it by ending the task that
        calls the operator; a test that calls the operator itself closes it)."""
        runner, self._runner = self._runner, None
        if runner is not None:
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)

    def enqueue(self, key: ObjectKey) -> None:
        if key not in self._pending:
            self._pending.add(key)
            self._queue.put_nowait(key)

    # -- the controller ---------------------------------------------------------------------------
    def _start_controller(self, client: KubeClient) -> None:
        if self._runner is not None and not self._runner.done():
            return
        runner = asyncio.create_task(self._run(client), name=f"{type(self).__name__}-controller")
        self._runner = runner
        host = asyncio.current_task()
        if host is not None:
            # The cluster owns the task that calls us: when it ends, so does the controller.
            host.add_done_callback(lambda _task: runner.cancel())

    async def _run(self, client: KubeClient) -> None:
        try:
            async with asyncio.TaskGroup() as group:
                self._group = group
                group.create_task(self._follow_pods(client), name="follow-pods")
                group.create_task(self._work(client), name="reconcile")
        finally:
            self._group = None
            self._timers.clear()

    async def _work(self, client: KubeClient) -> None:
        while True:
            key = await self._queue.get()
            self._pending.discard(key)
            requeue: Requeue | None = None
            try:
                gone = self._gone.pop(key, None)
                if gone is not None:
                    await self.cleanup(client, key[0], key[1], gone)
                try:
                    obj = await client.get(self.rtype, key[0], key[1])
                except Exception as e:
                    if is_not_found(e):
                        continue
                    raise
                requeue = await self.reconcile(client, obj)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                # One object's trouble must not stop the others; look at it again shortly. A conflict is
                # expected (someone else wrote the object since it was read).
                if is_conflict(e):
                    _log.debug("%s: %s/%s changed meanwhile: %s", type(self).__name__, *key, e)
                else:
                    _log.exception("%s: reconciling %s/%s failed", type(self).__name__, *key)
                requeue = Requeue(_RETRY_SECONDS, real_time=True)
            if requeue is not None:
                self._requeue_after(key, requeue)

    def _requeue_after(self, key: ObjectKey, requeue: Requeue) -> None:
        group = self._group
        if group is None:
            return
        previous = self._timers.pop(key, None)
        if previous is not None:
            previous.cancel()
        self._timers[key] = group.create_task(self._later(key, requeue), name=f"requeue-{key[1]}")

    async def _later(self, key: ObjectKey, requeue: Requeue) -> None:
        if requeue.real_time:
            await asyncio.sleep(requeue.seconds)
        else:
            await self.clock.sleep(requeue.seconds)
        if self._timers.get(key) is asyncio.current_task():
            del self._timers[key]
        self.enqueue(key)

    async def _follow_pods(self, client: KubeClient) -> None:
        while True:
            try:
                pods, version = await client.list(POD)
                for pod in pods:
                    self._pod_changed(pod)
                async for event in client.watch(
                    POD, resource_version=version, timeout_seconds=self.watch_timeout
                ):
                    if event.type in ("ADDED", "MODIFIED", "DELETED"):
                        self._pod_changed(event.object)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                # A 410 Expired or a dropped stream: list again (after a pause, so a failing API is not
                # hammered).
                _log.debug("%s: pod watch ended: %s", type(self).__name__, e)
                await asyncio.sleep(_RETRY_SECONDS)

    def _pod_changed(self, pod: Mapping[str, Any]) -> None:
        key = self.owner_of_pod(pod)
        if key is not None:
            self.enqueue(key)
