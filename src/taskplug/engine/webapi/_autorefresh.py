"""An asyncio auto-refresh cache: an LRU of items that background workers keep in sync.

Follows flytestdlib/cache/{auto_refresh,in_memory_auto_refresh,sync_set}.go:

* an LRU of ``size`` items; :meth:`get` and :meth:`get_or_create` refresh recency, the resync pass peeks;
* :meth:`get_or_create` never replaces an existing item; a new item is queued at once (sync-on-create,
  the default) and marked "processing";
* every ``resync_period`` one pass drops the items :meth:`delete_delayed` asked for and queues every item
  that is not terminal and not already processing; a "processing" mark older than 5 × the resync period is
  stale and ignored (the item is queued again);
* ``workers`` tasks take batches in order, each no earlier than 5 ms after it was queued and only with a
  read-bucket token (taken just before the sync, see ``_ratelimit``); an item gone from the LRU or now terminal is skipped; an ``UPDATE`` response
  replaces the value only if the key is still cached (no resurrection of deleted items); then every id
  waiting for deletion is dropped;
* ``on_update`` (optional) is called with the id of every item a sync replaced with a *different* value, so
  whoever waits on that item (the executor, for a web-API task) is woken by the change instead of polling.

Deviation: in Flyte a panic in the sync function kills that worker goroutine for good (10 panics, no workers
left). Here a failing sync function is counted in ``sync_errors`` and logged, and the worker carries on.

All tasks belong to one :class:`asyncio.TaskGroup` run by :meth:`run` (use :meth:`start`/:meth:`stop` or
``async with``); time is read and slept through the injected clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Generic, Protocol, TypeVar

from taskplug.core import Clock, ErrorCode, PluginError
from taskplug.engine.webapi._metrics import CacheMetrics
from taskplug.engine.webapi._ratelimit import WorkQueueRateLimiter

__all__ = [
    "NOT_FOUND",
    "AutoRefreshCache",
    "Batch",
    "CacheableItem",
    "ItemSyncResponse",
    "SyncAction",
    "SyncFunc",
]

_log = logging.getLogger(__name__)

NOT_FOUND = "NOT_FOUND"
STALE_PROCESSING_FACTOR = 5


class CacheableItem(Protocol):
    def is_terminal(self) -> bool:
        """A terminal item is never synced again."""
        ...


T = TypeVar("T", bound=CacheableItem)


class SyncAction(enum.Enum):
    """What a sync function says about an item (flytestdlib's ``cache.SyncAction``): keep the cached value,
    or replace it with the returned one."""

    UNCHANGED = 0
    UPDATE = 1


@dataclass(frozen=True, slots=True)
class ItemSyncResponse(Generic[T]):
    """A sync function's answer for one item of a batch (flytestdlib's ``cache.ItemSyncResponse``)."""

    id: str
    item: T
    action: SyncAction


Batch = Sequence[tuple[str, T]]
"""``(id, item)`` pairs; the items are the values seen when the batch was queued."""

SyncFunc = Callable[[Batch[T]], Awaitable[Sequence[ItemSyncResponse[T]]]]


def _one_item_per_batch(snapshot: Sequence[tuple[str, T]]) -> list[Batch[T]]:
    return [[entry] for entry in snapshot]


class AutoRefreshCache(Generic[T]):
    """An LRU whose items background workers keep in sync (flytestdlib's ``cache.AutoRefresh``); the rules are
    in the module docstring.

    The web-API adapter keeps one per plugin (``ResourceCache``, its items the remote jobs, its sync
    function the plugin's ``get``) so a round reads a job's status from memory and never waits on the
    remote service. Run it with ``async with`` (or :meth:`start` / :meth:`stop`); time comes from the
    injected clock, so tests drive the resync with a ``FakeClock``.
    """

    def __init__(
        self,
        name: str,
        sync: SyncFunc[T],
        *,
        limiter: WorkQueueRateLimiter,
        resync_period: float,
        workers: int,
        size: int,
        clock: Clock,
        metrics: CacheMetrics | None = None,
        sync_on_create: bool = True,
        create_batches: Callable[[Sequence[tuple[str, T]]], list[Batch[T]]] | None = None,
        on_update: Callable[[str], None] | None = None,
    ) -> None:
        if size <= 0:
            raise PluginError(ErrorCode.CACHE_FAILED, "creating LRU cache: must provide a positive size")
        if resync_period <= 0:
            raise PluginError(ErrorCode.CACHE_FAILED, "the resync period must be positive")
        self.name = name
        self._sync = sync
        self._limiter = limiter
        self._resync = resync_period
        self._workers = workers
        self._size = size
        self._clock = clock
        self._metrics = metrics
        self._sync_on_create = sync_on_create
        self._create_batches = create_batches or _one_item_per_batch
        self._on_update = on_update
        self._lru: OrderedDict[str, T] = OrderedDict()
        self._to_delete: set[str] = set()
        self._processing: dict[str, float] = {}
        self._queue: asyncio.Queue[tuple[float, Batch[T]]] = asyncio.Queue()
        self._runner: asyncio.Task[None] | None = None
        self._first_pass_done = asyncio.Event()

    # -- lifecycle -----------------------------------------------------------------------------------------

    async def run(self) -> None:
        """Run the resync loop and the workers until cancelled (all in one TaskGroup)."""
        async with asyncio.TaskGroup() as tg:
            for i in range(self._workers):
                tg.create_task(self._worker(), name=f"{self.name}-worker-{i}")
            tg.create_task(self._resync_loop(), name=f"{self.name}-resync")

    async def start(self) -> None:
        if self._runner is not None:
            raise RuntimeError(f"cache {self.name!r} already started")
        self._first_pass_done = asyncio.Event()
        self._runner = asyncio.create_task(self.run(), name=f"{self.name}-cache")
        # Return once the workers wait and the first resync pass ran, so what callers add next is not
        # raced by that first pass.
        waiter = asyncio.create_task(self._first_pass_done.wait())
        await asyncio.wait([waiter, self._runner], return_when=asyncio.FIRST_COMPLETED)
        if not waiter.done():
            waiter.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await waiter
        if self._runner.done():
            self._runner.result()

    async def stop(self) -> None:
        """Cancel every task of the cache and wait for them to finish; idempotent."""
        runner, self._runner = self._runner, None
        if runner is None:
            return
        runner.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await runner

    @property
    def running(self) -> bool:
        return self._runner is not None and not self._runner.done()

    async def __aenter__(self) -> AutoRefreshCache[T]:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    # -- the cache -----------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._lru)

    def __contains__(self, id: object) -> bool:
        return id in self._lru

    def get(self, id: str) -> T:
        """The cached item (refreshing its recency); NOT_FOUND when absent."""
        item = self._lru.get(id)
        if item is None:
            if self._metrics is not None:
                self._metrics.cache_miss.inc()
            raise PluginError(NOT_FOUND, f"Item with id [{id}] not found.")
        self._lru.move_to_end(id)
        if self._metrics is not None:
            self._metrics.cache_hit.inc()
        return item

    def get_or_create(self, id: str, item: T) -> T:
        """The cached item if there is one (never replaced); else ``item``, inserted and queued for a sync."""
        existing = self._lru.get(id)
        if existing is not None:
            self._lru.move_to_end(id)
            return existing
        self._lru[id] = item
        while len(self._lru) > self._size:
            self._lru.popitem(last=False)
            if self._metrics is not None:
                self._metrics.lru_evictions.inc()
        if self._sync_on_create:
            self._add_rate_limited([(id, item)])
        return item

    def delete_delayed(self, id: str) -> None:
        """Drop ``id`` at the next resync pass or after the next sync; until then it is still returned."""
        self._to_delete.add(id)

    def in_processing(self, id: str) -> bool:
        """Whether ``id`` is queued or being synced; a mark older than 5 × resync is stale and dropped."""
        marked = self._processing.get(id)
        if marked is None:
            return False
        if self._clock.monotonic() - marked > STALE_PROCESSING_FACTOR * self._resync:
            del self._processing[id]
            return False
        return True

    def enqueue_batches(self) -> int:
        """One resync pass (run every resync period): purge deletions, queue what needs a sync.

        Returns how many items were queued.
        """
        snapshot: list[tuple[str, T]] = []
        to_delete = self._to_delete
        for id in list(self._lru):
            if id in to_delete:
                del self._lru[id]
                continue
            item = self._lru[id]
            if not item.is_terminal() and not self.in_processing(id):
                snapshot.append((id, item))
        to_delete.clear()
        for batch in self._create_batches(snapshot):
            self._add_rate_limited(batch)
        if self._metrics is not None:
            self._metrics.size.set(len(self._lru))
        return len(snapshot)

    @property
    def queued(self) -> int:
        """Batches waiting for a worker."""
        return self._queue.qsize()

    # -- internals -----------------------------------------------------------------------------------------

    def _add_rate_limited(self, batch: Batch[T]) -> None:
        now = self._clock.monotonic()
        ready_at = now + self._limiter.base_delay
        for id, _ in batch:
            self._processing[id] = now
        self._queue.put_nowait((ready_at, batch))

    async def _resync_loop(self) -> None:
        while True:
            self.enqueue_batches()
            self._first_pass_done.set()
            await self._clock.sleep(self._resync)

    async def _worker(self) -> None:
        clock = self._clock
        while True:
            ready_at, batch = await self._queue.get()
            delay = ready_at - clock.monotonic()
            if delay > 0:
                await clock.sleep(delay)
            try:
                await self._process(batch)
            except Exception:
                # Deviation: Flyte's worker dies here; this one logs, counts and carries on.
                if self._metrics is not None:
                    self._metrics.sync_errors.inc()
                _log.exception("cache %s: syncing a batch failed", self.name)
            finally:
                self._purge_deleted()

    async def _process(self, batch: Batch[T]) -> None:
        processing, lru = self._processing, self._lru
        live = [
            (id, item) for id, item in batch if (now := lru.get(id)) is not None and not now.is_terminal()
        ]
        if live:
            # A token only for a batch that will really be synced; the items stay marked "processing"
            # while waiting for it, so a resync pass does not queue them twice.
            await self._limiter.bucket.wait()
        for id, _ in batch:
            processing.pop(id, None)
        if not live:
            return
        started = self._clock.monotonic()
        responses = await self._sync(live)
        if self._metrics is not None:
            self._metrics.latency.observe(self._clock.monotonic() - started)
        changed = []
        for response in responses:
            if response.action is SyncAction.UPDATE and response.id in lru:
                if response.item != lru[response.id]:
                    changed.append(response.id)
                lru[response.id] = response.item
        if self._on_update is not None:
            for id in changed:
                try:
                    self._on_update(id)
                except Exception:
                    _log.exception("cache %s: the update callback failed for %s", self.name, id)

    def _purge_deleted(self) -> None:
        if self._to_delete:
            for id in self._to_delete:
                self._lru.pop(id, None)
            self._to_delete.clear()
