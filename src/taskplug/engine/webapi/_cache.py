"""The web-API status cache: what it holds per remote job and how one item is synced.

Follows flyteplugins/go/tasks/pluginmachinery/internal/webapi/cache.go (``ResourceCache``, ``CacheItem``,
``SyncResource``) over the auto-refresh cache of ``_autorefresh``. Cache ids are the task execution's
generated name (unique per attempt). ``get`` is called with the resource meta and the previous resource only
(no task context), through the read limit of the cache's work queue.

Deviation (failure counting): Flyte never resets ``SyncFailureCount``, so once a job had one successful
``get`` followed by more than ``maxSystemFailures`` failures in total, the item is re-marked SystemFailure on
every pass without ``get`` ever being called again, and the task reports its stale last phase forever. Here:

* a successful ``get`` resets the count (and the error message): the count is of *consecutive* failures;
* after more than ``maxSystemFailures`` consecutive failures the next pass marks the item SystemFailure
  without calling ``get`` (Flyte's threshold: with 5, six failures are recorded, the seventh pass marks it);
* a SystemFailure item is terminal for the cache (never synced again) and the adapter fails the task with
  ``AutoRefreshCacheFailed`` whether or not an earlier ``get`` succeeded.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from taskplug.core import Clock, ErrorCode, PluginError
from taskplug.engine.webapi._autorefresh import AutoRefreshCache, Batch, ItemSyncResponse, SyncAction
from taskplug.engine.webapi._metrics import CacheMetrics
from taskplug.engine.webapi._ratelimit import TokenBucket, TokenBucketSpec, WorkQueueRateLimiter
from taskplug.engine.webapi._state import State, WebApiPhase
from taskplug.webapi import AsyncPlugin, CachingConfig, GetContext, RateLimiterConfig

__all__ = ["CacheItem", "ResourceCache", "new_resource_cache", "sync_resource"]


@dataclass(frozen=True, slots=True)
class CacheItem:
    """One remote job in the cache: its persisted state and its last observed status (``resource``)."""

    state: State
    resource: Any = None

    def is_terminal(self) -> bool:
        # Deviation: a SystemFailure item is final even when its resource claims otherwise (see module doc).
        if self.state.phase is WebApiPhase.SYSTEM_FAILURE:
            return True
        if self.resource is not None:
            resource_is_terminal = getattr(self.resource, "is_terminal", None)
            if callable(resource_is_terminal):
                return bool(resource_is_terminal())
        return self.state.phase.is_terminal


ResourceCache = AutoRefreshCache[CacheItem]


async def _sync_one(
    plugin: AsyncPlugin, max_system_failures: int, id: str, value: object
) -> ItemSyncResponse[Any]:
    if not isinstance(value, CacheItem):
        raise PluginError(ErrorCode.CACHE_FAILED, f"Failed to cast cache item [{id}] to CacheItem")
    if not id or value.is_terminal():
        return ItemSyncResponse(id, value, SyncAction.UNCHANGED)
    state = value.state
    if state.sync_failure_count > max_system_failures:
        failed = dataclasses.replace(state, phase=WebApiPhase.SYSTEM_FAILURE)
        return ItemSyncResponse(id, CacheItem(failed, value.resource), SyncAction.UPDATE)
    try:
        resource = await plugin.get(GetContext(state.resource_meta, value.resource))
    except Exception as e:
        # A failing (or raising) get is a sync failure of this item, never of the worker.
        failed = dataclasses.replace(
            state, sync_failure_count=state.sync_failure_count + 1, error_message=str(e) or type(e).__name__
        )
        return ItemSyncResponse(id, CacheItem(failed, value.resource), SyncAction.UPDATE)
    if state.sync_failure_count or state.error_message:
        # Deviation: consecutive failures only (see module doc).
        state = dataclasses.replace(state, sync_failure_count=0, error_message="")
    return ItemSyncResponse(id, CacheItem(state, resource), SyncAction.UPDATE)


async def sync_resource(
    plugin: AsyncPlugin, max_system_failures: int, batch: Batch[CacheItem]
) -> Sequence[ItemSyncResponse[CacheItem]]:
    """Flyte's SyncResource: one response per item of the batch, in order."""
    return [await _sync_one(plugin, max_system_failures, id, item) for id, item in batch]


def new_resource_cache(
    name: str,
    plugin: AsyncPlugin,
    caching: CachingConfig,
    read_limit: RateLimiterConfig,
    *,
    clock: Clock,
    metrics: CacheMetrics | None = None,
    sync_on_create: bool = True,
    on_update: Callable[[str], None] | None = None,
) -> ResourceCache:
    """The status cache Flyte's NewResourceCache builds (not started); ``on_update`` gets the id (the
    task execution's generated name) of every item whose status a sync changed."""
    max_failures = caching.max_system_failures

    async def sync(batch: Batch[CacheItem]) -> Sequence[ItemSyncResponse[CacheItem]]:
        return await sync_resource(plugin, max_failures, batch)

    try:
        spec = TokenBucketSpec.from_config(read_limit)
    except ValueError as e:
        raise PluginError(ErrorCode.CACHE_FAILED, f"invalid read rate limit: {e}") from e
    return AutoRefreshCache(
        name,
        sync,
        limiter=WorkQueueRateLimiter(TokenBucket(spec, clock)),
        resync_period=caching.resync_interval.total_seconds(),
        workers=caching.workers,
        size=caching.size,
        clock=clock,
        metrics=metrics,
        sync_on_create=sync_on_create,
        on_update=on_update,
    )
