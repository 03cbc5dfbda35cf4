"""The web-API status cache: CacheItem terminality and SyncResource (internal/webapi/cache.go;
cache_test.go's TestNewResourceCache and TestResourceCache_SyncResource cases), plus the
consecutive-failure deviation."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from taskplug.core import ErrorCode, FakeClock, PluginError
from taskplug.engine.webapi._autorefresh import SyncAction
from taskplug.engine.webapi._cache import CacheItem, new_resource_cache, sync_resource
from taskplug.engine.webapi._state import State, WebApiPhase
from taskplug.webapi import CachingConfig, RateLimiterConfig

from ._doubles import ScriptedPlugin
from .conftest import Advance

CREATED = State(phase=WebApiPhase.RESOURCES_CREATED, phase_version=2, resource_meta="abc")


class TerminalResource:
    def __init__(self, terminal: bool) -> None:
        self.terminal = terminal

    def is_terminal(self) -> bool:
        return self.terminal


def test_a_cache_of_size_ten_with_qps_one_and_burst_one_builds(clock: FakeClock) -> None:
    caching = CachingConfig(size=10)
    new_resource_cache("c", ScriptedPlugin(), caching, RateLimiterConfig(qps=1, burst=1), clock=clock)


def test_a_zero_caching_config_is_an_error(clock: FakeClock) -> None:
    caching = CachingConfig(size=0, resyncInterval=timedelta(0), workers=0, maxSystemFailures=0)
    with pytest.raises(PluginError):
        new_resource_cache("c", ScriptedPlugin(), caching, RateLimiterConfig(), clock=clock)


async def test_a_succeeded_item_is_left_unchanged() -> None:
    plugin = ScriptedPlugin(gets=[RuntimeError("must not be called")])
    item = CacheItem(State(phase=WebApiPhase.SUCCEEDED))
    [response] = await sync_resource(plugin, 5, [("id", item)])
    assert response.action is SyncAction.UNCHANGED
    assert response.item is item
    assert plugin.get_calls == []


async def test_too_many_failures_mark_system_failure_without_calling_get() -> None:
    plugin = ScriptedPlugin()
    state = State(WebApiPhase.RESOURCES_CREATED, 2, "abc", sync_failure_count=5, error_message="e")
    [response] = await sync_resource(plugin, 2, [("id", CacheItem(state))])
    assert response.action is SyncAction.UPDATE
    assert response.item.state == State(
        WebApiPhase.SYSTEM_FAILURE, 2, "abc", sync_failure_count=5, error_message="e"
    )
    assert plugin.get_calls == []


async def test_a_successful_get_updates_the_resource() -> None:
    plugin = ScriptedPlugin(gets=["newID"])
    [response] = await sync_resource(plugin, 5, [("id", CacheItem(CREATED, "old"))])
    assert response.action is SyncAction.UPDATE
    assert response.item.resource == "newID"
    assert plugin.get_calls[0].resource_meta == "abc"
    assert plugin.get_calls[0].resource == "old"


async def test_a_failing_get_counts_a_failure_and_keeps_the_phase() -> None:
    plugin = ScriptedPlugin(gets=[RuntimeError("remote down")])
    [response] = await sync_resource(plugin, 5, [("id", CacheItem(CREATED, "old"))])
    assert response.action is SyncAction.UPDATE
    assert response.item.state.phase is WebApiPhase.RESOURCES_CREATED
    assert response.item.state.sync_failure_count == 1
    assert response.item.state.error_message == "remote down"
    assert response.item.resource == "old"


async def test_a_successful_get_resets_the_failure_count() -> None:
    # Deviation: Flyte's count is cumulative; here it counts consecutive failures.
    plugin = ScriptedPlugin(gets=["Running"])
    state = State(WebApiPhase.RESOURCES_CREATED, 2, "abc", sync_failure_count=3, error_message="e")
    [response] = await sync_resource(plugin, 5, [("id", CacheItem(state))])
    assert response.item.state.sync_failure_count == 0
    assert response.item.state.error_message == ""


async def test_an_empty_id_is_left_unchanged() -> None:
    [response] = await sync_resource(ScriptedPlugin(), 5, [("", CacheItem(CREATED))])
    assert response.action is SyncAction.UNCHANGED


async def test_a_value_that_is_not_a_cache_item_fails_the_batch() -> None:
    with pytest.raises(PluginError) as info:
        await sync_resource(ScriptedPlugin(), 5, [("id", "not an item")])  # type: ignore[list-item]
    assert info.value.code == ErrorCode.CACHE_FAILED


@pytest.mark.parametrize(
    ("phase", "resource", "terminal"),
    [
        (WebApiPhase.RESOURCES_CREATED, None, False),
        (WebApiPhase.SUCCEEDED, None, True),
        (WebApiPhase.USER_FAILURE, None, True),
        (WebApiPhase.RESOURCES_CREATED, TerminalResource(True), True),
        (WebApiPhase.SUCCEEDED, TerminalResource(False), False),
        (WebApiPhase.RESOURCES_CREATED, "no is_terminal method", False),
        # Deviation: a SystemFailure item is final even if its resource says it is not.
        (WebApiPhase.SYSTEM_FAILURE, TerminalResource(False), True),
    ],
)
def test_an_item_is_terminal_by_its_resource_else_by_its_phase(
    phase: WebApiPhase, resource: Any, terminal: bool
) -> None:
    assert CacheItem(State(phase=phase), resource).is_terminal() is terminal


async def test_consecutive_failures_after_a_success_still_fail_the_item(
    clock: FakeClock, advance: Advance
) -> None:
    # One good get, then failures: Flyte would keep the stale "Running" forever; here the item fails.
    failures: list[Any] = [RuntimeError(f"down {i}") for i in range(10)]
    plugin = ScriptedPlugin(gets=["Running", *failures])
    caching = CachingConfig(size=10, resyncInterval=timedelta(seconds=5), workers=1, maxSystemFailures=2)
    cache = new_resource_cache("c", plugin, caching, RateLimiterConfig(qps=100, burst=100), clock=clock)
    async with cache:
        cache.get_or_create("id", CacheItem(CREATED))
        await advance(clock, 0.01)
        assert cache.get("id").resource == "Running"
        await advance(clock, 5 * 4 + 1, step=0.5)
        item = cache.get("id")
        assert item.state.phase is WebApiPhase.SYSTEM_FAILURE
        assert item.state.sync_failure_count == 3
        assert item.state.error_message == "down 2"
        assert item.resource == "Running"
        calls = len(plugin.get_calls)
        await advance(clock, 20, step=0.5)
        assert len(plugin.get_calls) == calls  # terminal: never synced again
