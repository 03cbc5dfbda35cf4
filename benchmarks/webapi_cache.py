"""Benchmark of the web-API status cache: read rate vs the read limit, full-resync speed, memory per item.

Run by hand (not part of the test suite; prints figures):

    .venv/bin/python benchmarks/webapi_cache.py [--items 100000] [--qps 5000] [--burst 100] [--window 5]

1. Read rate on the real clock: ``--items`` outstanding jobs, a free in-process ``get``; every get's time is
   recorded and over the window the achieved rate is compared with ``qps``; the bucket law (no interval t
   holds more than burst + qps·t gets) is checked on the recorded times.
2. One full resync of all items with the read limit lifted (qps = ∞): gets per second.
3. Memory per tracked job (tracemalloc): the LRU entry, its id, CacheItem, State and resource meta.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import math
import time
import tracemalloc
from typing import Any

from taskplug.core import PhaseInfo, ResourceConstraintsSpec, SystemClock, TaskExecutionContext
from taskplug.webapi import (
    AutoRefreshCache,
    CacheItem,
    DeleteContext,
    GetContext,
    PluginConfig,
    State,
    StatusContext,
    TokenBucket,
    TokenBucketSpec,
    WebApiPhase,
    WorkQueueRateLimiter,
    sync_resource,
)


class FreePlugin:
    """An in-process AsyncPlugin whose get costs nothing but recording when it was called."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.target = 0
        self.done = asyncio.Event()

    def get_config(self) -> PluginConfig:
        return PluginConfig()

    async def resource_requirements(self, tctx: TaskExecutionContext) -> tuple[str, ResourceConstraintsSpec]:
        return "default", ResourceConstraintsSpec()

    async def create(self, tctx: TaskExecutionContext) -> tuple[Any, Any]:
        return None, None

    async def get(self, ctx: GetContext) -> Any:
        self.times.append(time.monotonic())
        if len(self.times) == self.target:
            self.done.set()
        return "Running"

    async def delete(self, ctx: DeleteContext) -> None:
        return None

    async def status(self, ctx: StatusContext) -> PhaseInfo:
        return PhaseInfo.running(0)


def make_cache(
    plugin: FreePlugin, *, qps: float, burst: int, size: int, sync_on_create: bool
) -> AutoRefreshCache[CacheItem]:
    clock = SystemClock()

    async def sync(batch: Any) -> Any:
        return await sync_resource(plugin, 5, batch)

    return AutoRefreshCache(
        "bench",
        sync,
        limiter=WorkQueueRateLimiter(TokenBucket(TokenBucketSpec(qps, burst), clock)),
        resync_period=3600,
        workers=10,
        size=size,
        clock=clock,
        sync_on_create=sync_on_create,
    )


def item(i: int) -> tuple[str, CacheItem]:
    return f"exec-{i:06d}-n0-0", CacheItem(State(WebApiPhase.RESOURCES_CREATED, 2, {"jobId": f"job-{i:06d}"}))


def worst_law_excess(times: list[float], qps: float, burst: int) -> float:
    """max over i <= j of (j - i + 1) - (burst + qps * (t_j - t_i)); <= 0 means the law holds."""
    worst, best_prefix = -math.inf, math.inf
    for j, t in enumerate(times):
        best_prefix = min(best_prefix, j - qps * t)
        worst = max(worst, (j - qps * t) - best_prefix + 1 - burst)
    return worst


def max_in_window(times: list[float], width: float) -> int:
    best, i = 0, 0
    for j, t in enumerate(times):
        while t - times[i] > width:
            i += 1
        best = max(best, j - i + 1)
    return best


async def read_rate(items: int, qps: float, burst: int, window: float) -> None:
    plugin = FreePlugin()
    cache = make_cache(plugin, qps=qps, burst=burst, size=items, sync_on_create=True)
    async with cache:
        t0 = time.monotonic()
        for start in range(0, items, 1000):
            for i in range(start, min(items, start + 1000)):
                cache.get_or_create(*item(i))
            await asyncio.sleep(0)  # let workers run while jobs arrive, as they would
        inserted = time.monotonic() - t0
        await asyncio.sleep(window + 1)
    times = [t - t0 for t in plugin.times]
    in_window = [t for t in times if 1.0 <= t < 1.0 + window]
    rate = len(in_window) / window
    excess = worst_law_excess(times, qps, burst)
    print(f"1. read rate, {items} outstanding jobs, qps {qps:g}, burst {burst} (real clock)")
    print(f"   inserting {items} jobs took {inserted:.2f} s")
    print(
        f"   gets in [1 s, {1 + window:g} s): {len(in_window)} -> {rate:.1f} gets/s = {100 * rate / qps:.1f}% of qps"
    )
    print(
        f"   bucket law on the recorded times of all {len(times)} gets: worst count - (burst + qps*t) = "
        f"{excess:.2f} gets (<= 0 holds; a fraction of one get is the jitter between taking the token and "
        f"recording the call: {max(excess, 0) / qps * 1e6:.0f} µs here)"
    )
    print(f"   most gets in any 1 s: {max_in_window(times, 1.0)} (burst + qps = {burst + qps:g})")


async def full_resync(items: int) -> None:
    plugin = FreePlugin()
    cache = make_cache(plugin, qps=math.inf, burst=1, size=items, sync_on_create=False)
    for i in range(items):
        cache.get_or_create(*item(i))
    plugin.target = items
    t0 = time.perf_counter()
    async with cache:  # the first pass (at start) queues every job
        await plugin.done.wait()
        elapsed = time.perf_counter() - t0
    print(
        f"2. one full resync of {items} jobs, read limit lifted: {elapsed:.2f} s -> {items / elapsed:,.0f} gets/s"
    )


def memory_per_item(items: int) -> None:
    plugin = FreePlugin()
    gc.collect()
    tracemalloc.start()
    cache = make_cache(plugin, qps=math.inf, burst=1, size=items, sync_on_create=False)
    before = tracemalloc.take_snapshot()
    for i in range(items):
        id, value = item(i)
        cache.get_or_create(id, CacheItem(value.state, "Running"))
    gc.collect()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    used = sum(s.size_diff for s in after.compare_to(before, "filename"))
    print(f"3. memory per tracked job: {used / items:.0f} bytes ({used / 2**20:.1f} MiB for {items})")
    del cache


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--qps", type=float, default=5000)
    parser.add_argument("--burst", type=int, default=100)
    parser.add_argument("--window", type=float, default=5.0)
    args = parser.parse_args()
    await read_rate(args.items, args.qps, args.burst, args.window)
    await full_resync(args.items)
    memory_per_item(args.items)


if __name__ == "__main__":
    asyncio.run(main())
