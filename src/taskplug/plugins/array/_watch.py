"""Wake a map task when one of its sub-task pods changes.

Flyte gives every sub-task pod the map task's owner reference, so the pod plugin's informer (which watches
every pod for the plugin manager) re-enqueues the workflow when a sub-task pod changes. taskplug's pod
informer starts with the first pod *task*, so a platform running only map tasks would see no pod events
and advance each map task once per resync period. The array plugin therefore watches pods itself, once
per plugin: pods carrying the ``execution-id`` label, routed to the map tasks it is running (a sub-task pod
may live in another namespace than its map task, through ``namespaceTemplate``), and wakes them through the
setup context's ``enqueue_owner``. Waking a map task more often than needed costs one round; a missed
event costs at most one resync period, so the watch only has to be cheap and to keep going.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from taskplug.core import POD, Clock, KubeClient
from taskplug.k8s import EXECUTION_ID_LABEL, owner_key_of

if TYPE_CHECKING:
    import asyncio

__all__ = ["PodWakeups"]

log = logging.getLogger(__name__)

OwnerKey = tuple[str, str]


class PodWakeups:
    """One pod watch for the plugin; :meth:`route` says which map task the pods of a (namespace,
    execution-id) belong to, :meth:`forget` stops routing them."""

    def __init__(
        self,
        client: KubeClient,
        enqueue_owner: Callable[[str, str], None],
        *,
        clock: Clock,
        max_backoff: float = 30.0,
    ) -> None:
        self._client = client
        self._enqueue_owner = enqueue_owner
        self._clock = clock
        self._max_backoff = max_backoff
        # (pod namespace, execution-id label) → {map task generated name: its owner key}
        self._routes: dict[OwnerKey, dict[str, OwnerKey]] = {}
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def route(self, pod_key: OwnerKey, generated_name: str, owner: OwnerKey) -> None:
        """Wake ``owner`` when a pod of ``pod_key`` changes; starts the watch on first use."""
        self._routes.setdefault(pod_key, {})[generated_name] = owner
        if self._task is None:
            import asyncio  # here, not at the top: discovery (every command) imports this module

            self._task = asyncio.create_task(self._run(), name="k8s-array-pod-wakeups")

    def forget(self, pod_key: OwnerKey, generated_name: str) -> None:
        owners = self._routes.get(pod_key)
        if owners is not None:
            owners.pop(generated_name, None)
            if not owners:
                del self._routes[pod_key]

    def _wake(self, pod_key: OwnerKey) -> None:
        for owner in list(self._routes.get(pod_key, {}).values()):
            try:
                self._enqueue_owner(*owner)
            except Exception as e:  # the resync still comes
                log.warning("failed to enqueue owner [%s/%s]: %s", owner[0], owner[1], e)

    async def _run(self) -> None:
        import asyncio  # here, not at the top: discovery (every command) imports this module

        backoff = 0.5
        while True:
            try:
                pods, version = await self._client.list(POD, None, label_selector=EXECUTION_ID_LABEL)
                # Changes made while no watch was open: wake the owners of what is there now.
                for pod in pods:
                    key = owner_key_of(pod)
                    if key is not None:
                        self._wake(key)
                events = 0
                async for event in self._client.watch(
                    POD,
                    None,
                    resource_version=version,
                    label_selector=EXECUTION_ID_LABEL,
                    timeout_seconds=300,
                ):
                    events += 1
                    if event.type in ("ADDED", "MODIFIED", "DELETED"):
                        key = owner_key_of(event.object)
                        if key is not None:
                            self._wake(key)
                    elif event.type == "ERROR":
                        break  # e.g. 410 Gone: list again
                if events:
                    backoff = 0.5
                    continue
                # A watch that ended without a single event: pause before listing again, so a server that
                # closes watches at once is not listed in a tight loop.
                await self._clock.sleep(backoff)
                backoff = min(backoff * 2, self._max_backoff)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.info("sub-task pod watch ended (%s); listing again in %.1fs", e, backoff)
                await self._clock.sleep(backoff)
                backoff = min(backoff * 2, self._max_backoff)

    async def aclose(self) -> None:
        import asyncio  # here, not at the top: discovery (every command) imports this module

        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
