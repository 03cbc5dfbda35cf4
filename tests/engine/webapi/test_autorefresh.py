"""The auto-refresh cache (flytestdlib/cache/in_memory_auto_refresh.go and its _test.go cases), on a fake
clock."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

import pytest
from prometheus_client import CollectorRegistry

from taskplug.core import FakeClock, PluginError
from taskplug.engine.webapi._autorefresh import (
    NOT_FOUND,
    AutoRefreshCache,
    Batch,
    ItemSyncResponse,
    SyncAction,
)
from taskplug.engine.webapi._metrics import CacheMetrics
from taskplug.engine.webapi._ratelimit import TokenBucket, TokenBucketSpec, WorkQueueRateLimiter

from .conftest import Advance


@dataclass(frozen=True)
class Count:
    value: int = 0
    limit: int = 10

    def is_terminal(self) -> bool:
        return self.value >= self.limit


class Recorder:
    """A sync function that increments each item and records every id it saw."""

    def __init__(self, fail: bool = False) -> None:
        self.calls: list[str] = []
        self.fail = fail

    async def __call__(self, batch: Batch[Count]) -> Sequence[ItemSyncResponse[Count]]:
        self.calls.extend(id for id, _ in batch)
        if self.fail:
            raise RuntimeError("sync failed")
        return [
            ItemSyncResponse(id, Count(item.value + 1, item.limit), SyncAction.UPDATE) for id, item in batch
        ]


def make_cache(
    clock: FakeClock,
    sync: Recorder,
    *,
    size: int = 10,
    workers: int = 10,
    resync: float = 1.0,
    qps: float = 1000,
    burst: int = 1000,
    sync_on_create: bool = True,
    metrics: CacheMetrics | None = None,
) -> AutoRefreshCache[Count]:
    limiter = WorkQueueRateLimiter(TokenBucket(TokenBucketSpec(qps, burst), clock))
    return AutoRefreshCache(
        "test",
        sync,
        limiter=limiter,
        resync_period=resync,
        workers=workers,
        size=size,
        clock=clock,
        metrics=metrics,
        sync_on_create=sync_on_create,
    )


async def test_every_item_is_synced_until_terminal(clock: FakeClock, advance: Advance) -> None:
    sync = Recorder()
    async with make_cache(clock, sync) as cache:
        for i in range(10):
            cache.get_or_create(str(i), Count())
        await advance(clock, 12)
        assert [cache.get(str(i)).value for i in range(10)] == [10] * 10
    # Ten syncs each, then never again: terminal items are not synced.
    assert len(sync.calls) == 100


async def test_without_sync_on_create_nothing_is_processing_until_the_first_resync(
    clock: FakeClock, advance: Advance
) -> None:
    sync = Recorder()
    async with make_cache(clock, sync, sync_on_create=False) as cache:
        for i in range(10):
            cache.get_or_create(str(i), Count())
        assert not any(cache.in_processing(str(i)) for i in range(10))
        await advance(clock, 12)
        assert [cache.get(str(i)).value for i in range(10)] == [10] * 10


async def test_a_full_cache_evicts_the_least_recently_used_items(clock: FakeClock) -> None:
    registry = CollectorRegistry()
    cache = make_cache(clock, Recorder(), size=2, metrics=CacheMetrics(registry, "t"))
    for i in range(10):
        cache.get_or_create(str(i), Count())
    errors = []
    for i in range(10):
        try:
            cache.get(str(i))
        except PluginError as e:
            errors.append((e.code, e.message))
    assert len(errors) == 8
    assert errors[0] == (NOT_FOUND, "Item with id [0] not found.")
    assert registry.get_sample_value("t_cache_lru_evictions_total") == 8
    assert registry.get_sample_value("t_cache_cache_miss_total") == 8
    assert registry.get_sample_value("t_cache_cache_hit_total") == 2


async def test_terminal_items_are_never_synced(clock: FakeClock, advance: Advance) -> None:
    sync = Recorder(fail=True)
    async with make_cache(clock, sync) as cache:
        for i in range(5):
            cache.get_or_create(str(i), Count(value=10))
        await advance(clock, 2.1)
    assert sync.calls == []


async def test_a_delayed_delete_removes_the_item_after_the_next_pass(
    clock: FakeClock, advance: Advance
) -> None:
    async with make_cache(clock, Recorder()) as cache:
        cache.get_or_create("a", Count())
        cache.delete_delayed("a")
        assert "a" in cache  # still returned until the removal
        await advance(clock, 1.1)
        with pytest.raises(PluginError):
            cache.get("a")


async def test_a_raising_sync_function_does_not_kill_the_workers(clock: FakeClock, advance: Advance) -> None:
    registry = CollectorRegistry()
    sync = Recorder(fail=True)
    async with make_cache(clock, sync, workers=10, metrics=CacheMetrics(registry, "t")) as cache:
        for i in range(10):
            cache.get_or_create(str(i), Count())
        await advance(clock, 0.1)
        assert len(sync.calls) == 10  # Flyte stops here: every worker died once
        await advance(clock, 3)
        assert len(sync.calls) >= 30  # each item again on every resync
        assert cache.running
    assert registry.get_sample_value("t_cache_sync_errors_total") == len(sync.calls)


async def test_an_item_being_processed_is_not_queued_again(clock: FakeClock, advance: Advance) -> None:
    sync = Recorder(fail=True)
    async with make_cache(clock, sync, size=100, resync=3600) as cache:
        for i in range(100):
            cache.get_or_create(str(i), Count())
        await advance(clock, 1)
    assert sorted(sync.calls) == sorted(str(i) for i in range(100))


async def test_processing_marks_expire_after_five_resync_periods(clock: FakeClock) -> None:
    cache = make_cache(clock, Recorder(), resync=10, workers=0)
    assert not cache.in_processing("unknown")
    cache.get_or_create("a", Count())
    assert cache.in_processing("a")
    await clock.advance(50)
    assert cache.in_processing("a")
    await clock.advance(0.001)
    assert not cache.in_processing("a")
    assert not cache.in_processing("a")  # the stale mark was removed


async def test_a_resync_pass_queues_again_an_item_whose_mark_went_stale(clock: FakeClock) -> None:
    cache = make_cache(clock, Recorder(), resync=10, workers=0)
    cache.get_or_create("a", Count())
    assert cache.enqueue_batches() == 0  # processing since creation
    await clock.advance(51)
    assert cache.enqueue_batches() == 1
    assert cache.in_processing("a")


@pytest.mark.parametrize("n", [1, 5])
async def test_every_queued_id_is_marked_processing(clock: FakeClock, n: int) -> None:
    cache = make_cache(clock, Recorder(), sync_on_create=False, workers=0)
    for i in range(n):
        cache.get_or_create(str(i), Count())
    assert cache.enqueue_batches() == n
    assert all(cache.in_processing(str(i)) for i in range(n))


async def test_reads_are_rate_limited_by_the_read_bucket(clock: FakeClock, advance: Advance) -> None:
    sync = Recorder()
    async with make_cache(clock, sync, size=100, qps=2, burst=5, resync=3600) as cache:
        for i in range(50):
            cache.get_or_create(str(i), Count(limit=1))
        await advance(clock, 0.01)
        assert len(sync.calls) == 5  # the burst
        for t in range(1, 11):
            await advance(clock, 1)
            assert len(sync.calls) <= 5 + 2 * (t + 0.01)
        assert len(sync.calls) >= 5 + 2 * 10 - 1


async def test_a_deleted_item_is_not_resurrected_by_a_sync_in_flight(
    clock: FakeClock, advance: Advance
) -> None:
    release = asyncio.Event()
    entered = asyncio.Event()

    async def slow_sync(batch: Batch[Count]) -> Sequence[ItemSyncResponse[Count]]:
        entered.set()
        await release.wait()
        return [ItemSyncResponse(id, Count(item.value + 1), SyncAction.UPDATE) for id, item in batch]

    limiter = WorkQueueRateLimiter(TokenBucket(TokenBucketSpec(100, 100), clock))
    cache = AutoRefreshCache(
        "t", slow_sync, limiter=limiter, resync_period=1, workers=1, size=10, clock=clock
    )
    async with cache:
        cache.get_or_create("a", Count())
        await advance(clock, 0.01)
        await entered.wait()
        cache.delete_delayed("a")
        cache.enqueue_batches()  # the resync pass drops it from the LRU
        assert "a" not in cache
        release.set()
        await advance(clock, 0.01)
        assert "a" not in cache


async def test_an_update_of_a_live_item_replaces_it(clock: FakeClock, advance: Advance) -> None:
    async with make_cache(clock, Recorder()) as cache:
        cache.get_or_create("a", Count())
        await advance(clock, 0.01)
        assert cache.get("a") == Count(1)


async def test_get_or_create_never_replaces_an_existing_item(clock: FakeClock) -> None:
    cache = make_cache(clock, Recorder(), workers=0)
    first = cache.get_or_create("a", Count(1))
    assert cache.get_or_create("a", Count(5)) is first


@pytest.mark.parametrize(("size", "resync"), [(0, 1.0), (-1, 1.0), (10, 0.0)])
def test_a_cache_needs_a_positive_size_and_resync_period(clock: FakeClock, size: int, resync: float) -> None:
    with pytest.raises(PluginError):
        make_cache(clock, Recorder(), size=size, resync=resync)


async def test_start_twice_is_an_error_and_stop_is_idempotent(clock: FakeClock) -> None:
    cache = make_cache(clock, Recorder())
    await cache.start()
    with pytest.raises(RuntimeError):
        await cache.start()
    await cache.stop()
    await cache.stop()
    assert not cache.running


async def test_the_size_gauge_follows_the_resync_pass(clock: FakeClock) -> None:
    registry = CollectorRegistry()
    cache = make_cache(clock, Recorder(), workers=0, metrics=CacheMetrics(registry, "t"))
    for i in range(3):
        cache.get_or_create(str(i), Count())
    cache.enqueue_batches()
    assert registry.get_sample_value("t_cache_size") == 3
