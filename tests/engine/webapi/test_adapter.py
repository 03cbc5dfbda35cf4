"""The web-API core adapter (internal/webapi/{core,launcher,monitor,allocation_token}.go and their
_test.go cases): the lifecycle over rounds, tokens, the cache, abort and
finalize, and the deviations (terminal re-report, non-terminal create results, write limit, SyncPlugin)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from taskplug.core import (
    AllocationStatus,
    ErrorCode,
    ErrorKind,
    FakeClock,
    Phase,
    PhaseInfo,
    PluginError,
    ResourceConstraintsSpec,
    SetupContext,
    StaticTaskExecutionContext,
)
from taskplug.engine.webapi import (
    RETURNED_UNKNOWN,
    BaseResourceManager,
    CacheItem,
    ConfigValidationError,
    InProcessResourceManager,
    State,
    SyncPluginAdapter,
    WebApiPhase,
    WebApiPluginAdapter,
    allocation_outcome,
    decode_state,
    encode_state,
    load_webapi_plugin,
    webapi_plugin_entry,
)
from taskplug.testing import fake_task_context, next_round
from taskplug.webapi import PluginConfig, WebApiPluginEntry

from ._doubles import ScriptedPlugin, ScriptedSyncPlugin
from .conftest import Advance

QUOTAS = {"resourceQuotas": {"ns": 1}}


def config(**overrides: Any) -> PluginConfig:
    base: dict[str, Any] = {
        "caching": {"size": 10, "resyncInterval": "5s", "workers": 2, "maxSystemFailures": 2},
        "readRateLimiter": {"qps": 100, "burst": 100},
        "writeRateLimiter": {"qps": 100, "burst": 100},
    }
    base.update(overrides)
    return PluginConfig.model_validate(base)


def tctx(
    name: str = "my-id", *, exec_name: str = "exec", state: State | Mapping[str, Any] | None = None
) -> StaticTaskExecutionContext:
    """A round of task ``name`` (its generated name) of execution p/d/``exec_name``, namespace ``p-d``, with
    ``state`` stored by an earlier round: a :class:`State` as the adapter writes it, or a raw mapping."""
    stored = encode_state(state) if isinstance(state, State) else state
    return fake_task_context(
        {"type": "test"},
        execution={
            "id": {"project": "p", "domain": "d", "name": exec_name, "nodeId": "n0"},
            "generatedName": name,
        },
        state=stored,
        state_version=1 if stored is not None else 0,
    )


def persisted(ctx: StaticTaskExecutionContext) -> State:
    changed, version, raw = ctx.plugin_state.written
    assert changed
    assert version == 1
    return decode_state(raw)


Loader = Callable[..., Awaitable[WebApiPluginAdapter]]


@pytest.fixture
async def load(clock: FakeClock) -> AsyncIterator[Loader]:
    """Load adapters on the fake clock; every one is closed after the test."""
    loaded: list[WebApiPluginAdapter | SyncPluginAdapter] = []

    async def _load(
        plugin: Any,
        *,
        manager: BaseResourceManager | None = None,
        registry: CollectorRegistry | None = None,
        plugin_id: str = "test-plugin",
    ) -> Any:
        entry = WebApiPluginEntry(plugin_id, ("test",), lambda setup: plugin)
        adapter = await load_webapi_plugin(
            entry,
            SetupContext(enqueue_owner=lambda ns, name: None),
            clock=clock,
            resource_manager=manager,
            metrics_registry=registry,
        )
        loaded.append(adapter)
        return adapter

    yield _load
    for adapter in loaded:
        await adapter.aclose()


# -- load ------------------------------------------------------------------------------------------------


async def test_a_plugin_with_a_small_cache_loads_through_its_core_entry(clock: FakeClock) -> None:
    plugin = ScriptedPlugin(config=config())
    entry = webapi_plugin_entry(
        WebApiPluginEntry("test-plugin", ("test",), lambda setup: plugin, is_default=True), clock=clock
    )
    assert (entry.id, entry.registered_task_types, entry.is_default) == ("test-plugin", ("test",), True)
    adapter = await entry.load_plugin(SetupContext(enqueue_owner=lambda ns, name: None))
    try:
        assert adapter.id == "test-plugin"
        assert adapter.cache.running
    finally:
        await adapter.aclose()


async def test_an_invalid_config_fails_the_load_with_flytes_message(load: Loader) -> None:
    plugin = ScriptedPlugin(config=config(caching={"size": 0}))
    with pytest.raises(ConfigValidationError) as info:
        await load(plugin)
    assert str(info.value) == (
        "config validation failed. Error: \ncache size is expected to be between 10 and 500000. Provided value is 0"
    )


async def test_quotas_are_registered_under_the_managers_and_plugins_ids(load: Loader) -> None:
    manager = InProcessResourceManager()
    await load(ScriptedPlugin(config=config(**QUOTAS)), manager=manager)
    with pytest.raises(PluginError, match="already exists"):
        await manager.register_resource_quota("inprocessresourcemanager:test-plugin:ns", 1)


# -- launch ----------------------------------------------------------------------------------------------


async def test_create_without_a_resource_registers_the_job_in_the_cache(load: Loader) -> None:
    adapter = await load(ScriptedPlugin(config=config(), create=[("abc", None)]))
    ctx = tctx()
    transition = await adapter.handle(ctx)
    assert (transition.info.phase, transition.info.version, transition.info.reason) == (
        Phase.QUEUED,
        2,
        "launched",
    )
    expected = State(WebApiPhase.RESOURCES_CREATED, 2, "abc")
    assert persisted(ctx) == expected
    assert adapter.cache.get("my-id") == CacheItem(expected)


async def test_create_with_a_terminal_resource_finishes_without_the_cache(load: Loader) -> None:
    plugin = ScriptedPlugin(config=config(), create=[("abc", "Success")])
    adapter = await load(plugin)
    ctx = tctx()
    transition = await adapter.handle(ctx)
    assert transition.info.phase is Phase.SUCCESS
    assert "my-id" not in adapter.cache
    # Deviation: the terminal phase is persisted and re-reported; create is not called again.
    again = await adapter.handle(next_round(ctx))
    assert again.info.phase is Phase.SUCCESS
    assert plugin.creates == ["my-id"]


async def test_a_failing_create_is_a_retryable_failure_with_the_state_unchanged(load: Loader) -> None:
    adapter = await load(ScriptedPlugin(config=config(), create=[RuntimeError("remote said no")]))
    ctx = tctx()
    transition = await adapter.handle(ctx)
    assert transition.info.phase is Phase.RETRYABLE_FAILURE
    assert transition.info.err is not None
    assert (transition.info.err.code, transition.info.err.message) == (
        "TaskFailedWithError",
        "remote said no",
    )
    assert transition.info.err.kind is ErrorKind.USER
    assert persisted(ctx) == State()


async def test_a_non_terminal_create_result_with_meta_is_followed_as_created(
    load: Loader, clock: FakeClock, advance: Advance
) -> None:
    plugin = ScriptedPlugin(config=config(), create=[("abc", "Running")], gets=["Success"])
    adapter = await load(plugin)
    ctx = tctx()
    transition = await adapter.handle(ctx)
    assert transition.info.phase is Phase.RUNNING
    assert persisted(ctx).phase is WebApiPhase.RESOURCES_CREATED
    assert adapter.cache.get("my-id").resource == "Running"
    ctx = next_round(ctx)
    transition = await adapter.handle(ctx)
    assert transition.info.phase is Phase.RUNNING  # the seeded resource, before any get
    await advance(clock, 0.01)
    assert (await adapter.handle(next_round(ctx))).info.phase is Phase.SUCCESS
    assert [(c.resource_meta, c.resource) for c in plugin.get_calls] == [("abc", "Running")]


async def test_a_non_terminal_create_result_without_meta_is_a_system_retryable_failure(load: Loader) -> None:
    adapter = await load(ScriptedPlugin(config=config(), create=[(None, "Running")]))
    ctx = tctx()
    transition = await adapter.handle(ctx)
    assert transition.info.phase is Phase.RETRYABLE_FAILURE
    assert transition.info.err is not None
    assert transition.info.err.kind is ErrorKind.SYSTEM
    assert transition.info.err.code == ErrorCode.RUNTIME_FAILURE
    assert "non-terminal phase Running without a resource meta" in transition.info.err.message
    assert "my-id" not in adapter.cache
    assert (await adapter.handle(next_round(ctx))).info.phase is Phase.RETRYABLE_FAILURE


async def test_creates_and_deletes_go_through_the_write_limit(load: Loader, clock: FakeClock) -> None:
    plugin = ScriptedPlugin(config=config(writeRateLimiter={"qps": 1, "burst": 5}, caching={"size": 100}))
    adapter = await load(plugin)
    rounds = [asyncio.create_task(adapter.handle(tctx(f"t{i}"))) for i in range(6)]
    for _ in range(5):
        await asyncio.sleep(0)
    assert len(plugin.creates) == 5
    await clock.advance(0.99)
    assert len(plugin.creates) == 5
    await clock.advance(0.01)
    await asyncio.gather(*rounds)
    assert len(plugin.creates) == 6
    aborting = asyncio.create_task(adapter.abort(tctx("t0")))
    await asyncio.sleep(0)
    assert plugin.deletes == []
    await clock.advance(1)
    await aborting
    assert len(plugin.deletes) == 1


# -- monitor ---------------------------------------------------------------------------------------------


async def test_a_job_is_queued_until_the_first_sync_then_follows_the_remote_status(
    load: Loader, clock: FakeClock, advance: Advance
) -> None:
    plugin = ScriptedPlugin(config=config(), create=[("abc", None)], gets=["Running", "Running", "Success"])
    adapter = await load(plugin)
    ctx = tctx()
    await adapter.handle(ctx)
    # Nothing synced yet (the 5 ms queue delay has not passed).
    ctx = next_round(ctx)
    transition = await adapter.handle(ctx)
    assert (transition.info.phase, transition.info.version, transition.info.reason) == (
        Phase.QUEUED,
        2,
        "job submitted",
    )
    await advance(clock, 0.01)
    ctx = next_round(ctx)
    transition = await adapter.handle(ctx)
    assert (transition.info.phase, transition.info.version) == (Phase.RUNNING, 3)
    assert persisted(ctx) == State(WebApiPhase.RESOURCES_CREATED, 3, "abc")
    await advance(clock, 10.1, step=0.05)
    ctx = next_round(ctx)
    transition = await adapter.handle(ctx)
    assert transition.info.phase is Phase.SUCCESS
    assert persisted(ctx).phase is WebApiPhase.SUCCEEDED
    # Deviation: re-entering the terminal state re-reports it.
    assert (await adapter.handle(next_round(ctx))).info.phase is Phase.SUCCESS
    assert [c.resource_meta for c in plugin.get_calls] == ["abc"] * len(plugin.get_calls)


async def test_a_terminal_status_drops_the_item_after_the_next_pass(
    load: Loader, clock: FakeClock, advance: Advance
) -> None:
    adapter = await load(ScriptedPlugin(config=config()))
    state = State(WebApiPhase.RESOURCES_CREATED, 2, "abc")
    adapter.cache.get_or_create("my-id", CacheItem(state, "Success"))
    transition = await adapter.handle(tctx(state=state))
    assert transition.info.phase is Phase.SUCCESS
    assert adapter.cache.get("my-id") == CacheItem(state, "Success")  # still there, unchanged
    await advance(clock, 5.1, step=0.05)
    assert "my-id" not in adapter.cache
    fresh = adapter.cache.get_or_create("my-id", CacheItem(State()))
    assert fresh == CacheItem(State())


async def test_a_job_lost_by_the_cache_is_registered_again(
    load: Loader, clock: FakeClock, advance: Advance
) -> None:
    # A restarted executor: a new adapter (empty cache) and a persisted ResourcesCreated state.
    plugin = ScriptedPlugin(config=config(), gets=["Running"])
    adapter = await load(plugin)
    ctx = tctx(state=State(WebApiPhase.RESOURCES_CREATED, 2, "abc"))
    transition = await adapter.handle(ctx)
    assert (transition.info.phase, transition.info.reason) == (Phase.QUEUED, "job submitted")
    await advance(clock, 0.01)
    assert (await adapter.handle(next_round(ctx))).info.phase is Phase.RUNNING
    assert plugin.get_calls[0].resource_meta == "abc"


async def test_a_job_never_synced_fails_after_too_many_get_failures(
    load: Loader, clock: FakeClock, advance: Advance
) -> None:
    adapter = await load(ScriptedPlugin(config=config(), gets=[RuntimeError("connection refused")]))
    ctx = tctx(state=State(WebApiPhase.RESOURCES_CREATED, 2, "abc"))
    await adapter.handle(ctx)
    await advance(clock, 5 * 4, step=0.05)  # 3 failures recorded (max 2), the 4th pass marks SystemFailure
    ctx = next_round(ctx)
    transition = await adapter.handle(ctx)
    assert transition.info.phase is Phase.PERMANENT_FAILURE
    assert transition.info.err is not None
    assert (transition.info.err.code, transition.info.err.message) == (
        "AutoRefreshCacheFailed",
        "connection refused",
    )
    assert (await adapter.handle(next_round(ctx))).info.phase is Phase.PERMANENT_FAILURE


async def test_get_failures_after_a_success_still_fail_the_task(
    load: Loader, clock: FakeClock, advance: Advance
) -> None:
    # Deviation: Flyte reports the stale "Running" forever here.
    gets: list[Any] = ["Running", *[RuntimeError("gone") for _ in range(10)]]
    adapter = await load(ScriptedPlugin(config=config(), gets=gets))
    ctx = tctx(state=State(WebApiPhase.RESOURCES_CREATED, 2, "abc"))
    await adapter.handle(ctx)
    await advance(clock, 0.01)
    ctx = next_round(ctx)
    assert (await adapter.handle(ctx)).info.phase is Phase.RUNNING
    await advance(clock, 5 * 4, step=0.05)
    transition = await adapter.handle(next_round(ctx))
    assert transition.info.phase is Phase.PERMANENT_FAILURE
    assert transition.info.err is not None
    assert transition.info.err.code == "AutoRefreshCacheFailed"


@pytest.mark.parametrize("resource", ["WaitingForCache", "Aborted"])
async def test_a_status_the_core_cannot_follow_is_an_error_and_no_state_is_written(
    load: Loader, resource: str
) -> None:
    adapter = await load(ScriptedPlugin(config=config()))
    state = State(WebApiPhase.RESOURCES_CREATED, 2, "abc")
    adapter.cache.get_or_create("my-id", CacheItem(state, resource))
    ctx = tctx(state=state)
    with pytest.raises(PluginError) as info:
        await adapter.handle(ctx)
    assert info.value.code == RETURNED_UNKNOWN
    assert ctx.plugin_state.written == (False, 0, None)


async def test_a_failing_status_is_an_error(load: Loader) -> None:
    adapter = await load(ScriptedPlugin(config=config()))
    state = State(WebApiPhase.RESOURCES_CREATED, 2, "abc")
    adapter.cache.get_or_create("my-id", CacheItem(state, "unreadable"))
    with pytest.raises(PluginError) as info:
        await adapter.handle(tctx(state=state))
    assert isinstance(info.value.cause, ValueError)


async def test_a_state_that_does_not_decode_is_corrupted(load: Loader) -> None:
    registry = CollectorRegistry()
    adapter = await load(ScriptedPlugin(config=config()), registry=registry)
    ctx = tctx(state={"phase": 42})
    with pytest.raises(PluginError) as info:
        await adapter.handle(ctx)
    assert info.value.code == ErrorCode.CORRUPTED_PLUGIN_STATE
    assert registry.get_sample_value("webapi_test_plugin_unmarshal_state_failed_total") == 1


# -- allocation tokens ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "phase", "reason"),
    [
        (AllocationStatus.GRANTED, WebApiPhase.ALLOCATION_TOKEN_ACQUIRED, "Allocation token required"),
        (
            AllocationStatus.EXHAUSTED,
            WebApiPhase.NOT_STARTED,
            "Quota for task has exceeded. Waiting for the resource.",
        ),
    ],
)
def test_allocation_outcomes(
    status: AllocationStatus, phase: WebApiPhase, reason: str, clock: FakeClock
) -> None:
    state, info = allocation_outcome(status, State(), clock.now())
    assert state == State(phase, allocation_token_request_start_time=clock.now())
    assert (info.version, info.reason) == (0, reason)


@pytest.mark.parametrize(
    ("status", "name"),
    [
        (AllocationStatus.NAMESPACE_QUOTA_EXCEEDED, "AllocationStatusNamespaceQuotaExceeded"),
        (AllocationStatus.UNDEFINED, "AllocationUndefined"),
    ],
)
def test_other_allocation_statuses_are_errors(status: AllocationStatus, name: str, clock: FakeClock) -> None:
    with pytest.raises(PluginError, match=rf"allocation status undefined \[{name}\]"):
        allocation_outcome(status, State(), clock.now())


async def test_a_token_is_allocated_in_one_round_and_the_job_created_in_the_next(
    load: Loader, clock: FakeClock
) -> None:
    registry = CollectorRegistry()
    plugin = ScriptedPlugin(config=config(**QUOTAS), create=[("abc", None)])
    adapter = await load(plugin, registry=registry)
    ctx = tctx()
    transition = await adapter.handle(ctx)
    assert (transition.info.phase, transition.info.reason) == (Phase.QUEUED, "Allocation token required")
    assert persisted(ctx) == State(
        WebApiPhase.ALLOCATION_TOKEN_ACQUIRED, allocation_token_request_start_time=clock.now()
    )
    assert plugin.creates == []
    transition = await adapter.handle(next_round(ctx))
    assert (transition.info.phase, transition.info.reason) == (Phase.QUEUED, "launched")
    assert plugin.creates == ["my-id"]
    assert registry.get_sample_value("webapi_test_plugin_allocation_grant_success_total") == 1


async def test_an_exhausted_quota_waits_until_the_holder_is_finalized(load: Loader, clock: FakeClock) -> None:
    registry = CollectorRegistry()
    manager = InProcessResourceManager()
    plugin = ScriptedPlugin(config=config(**QUOTAS), constraints=ResourceConstraintsSpec(project_scope=5))
    adapter = await load(plugin, manager=manager, registry=registry)
    holder, waiter = tctx("first", exec_name="e1"), tctx("second", exec_name="e2")
    await adapter.handle(holder)
    started = clock.now()
    transition = await adapter.handle(waiter)
    assert transition.info.phase is Phase.WAITING_FOR_RESOURCES
    assert persisted(waiter) == State(WebApiPhase.NOT_STARTED, allocation_token_request_start_time=started)
    await clock.advance(7)
    waiter = next_round(waiter)
    assert (await adapter.handle(waiter)).info.phase is Phase.WAITING_FOR_RESOURCES
    assert persisted(waiter).allocation_token_request_start_time == started  # the first request time is kept
    await adapter.finalize(holder)
    assert manager.allocated("inprocessresourcemanager:test-plugin:ns") == frozenset()
    assert (await adapter.handle(next_round(waiter))).info.phase is Phase.QUEUED
    assert manager.allocated("inprocessresourcemanager:test-plugin:ns") == {"ex:p:d:e2-second"}
    assert registry.get_sample_value("webapi_test_plugin_allocation_grant_failed_total") == 2
    assert registry.get_sample_value("webapi_test_plugin_resource_release_success_total") == 1
    assert registry.get_sample_value("webapi_test_plugin_resource_wait_time_sum") == 7000


async def test_finalize_drops_the_cache_entry_and_never_deletes(
    load: Loader, clock: FakeClock, advance: Advance
) -> None:
    plugin = ScriptedPlugin(config=config(), create=[("abc", None)])
    adapter = await load(plugin)
    ctx = tctx()
    await adapter.handle(ctx)
    await adapter.finalize(next_round(ctx))
    await advance(clock, 5.1, step=0.05)
    assert "my-id" not in adapter.cache
    assert plugin.deletes == []


async def test_a_failing_release_is_a_finalize_error(load: Loader) -> None:
    class BrokenRelease(InProcessResourceManager):
        async def release_resource(self, namespace: str, token: str) -> None:
            raise OSError("lost the manager")

    registry = CollectorRegistry()
    adapter = await load(ScriptedPlugin(config=config(**QUOTAS)), manager=BrokenRelease(), registry=registry)
    with pytest.raises(PluginError, match="failed to release token"):
        await adapter.finalize(tctx())
    assert registry.get_sample_value("webapi_test_plugin_resource_release_failed_total") == 1


# -- abort -----------------------------------------------------------------------------------------------


async def test_abort_deletes_the_remote_job_with_reason_aborted(load: Loader) -> None:
    plugin = ScriptedPlugin(config=config())
    adapter = await load(plugin)
    await adapter.abort(tctx(state=State(WebApiPhase.RESOURCES_CREATED, 2, "abc")))
    assert [(d.resource_meta, d.reason) for d in plugin.deletes] == [("abc", "Aborted")]


async def test_abort_before_create_deletes_with_no_meta(load: Loader) -> None:
    plugin = ScriptedPlugin(config=config())
    adapter = await load(plugin)
    await adapter.abort(tctx())
    assert [d.resource_meta for d in plugin.deletes] == [None]


async def test_a_failing_delete_is_an_abort_error(load: Loader) -> None:
    adapter = await load(ScriptedPlugin(config=config(), delete_error=RuntimeError("502")))
    with pytest.raises(PluginError, match=r"Failed to abort some resources \[my-id\]"):
        await adapter.abort(tctx(state=State(WebApiPhase.RESOURCES_CREATED, 2, "abc")))


# -- SyncPlugin ------------------------------------------------------------------------------------------


async def test_a_sync_plugin_finishes_in_one_round_and_re_reports_after(load: Loader) -> None:
    plugin = ScriptedSyncPlugin(PhaseInfo.success(), config=config())
    adapter = await load(plugin)
    assert isinstance(adapter, SyncPluginAdapter)
    ctx = tctx()
    assert (await adapter.handle(ctx)).info.phase is Phase.SUCCESS
    assert persisted(ctx).phase is WebApiPhase.SUCCEEDED
    assert (await adapter.handle(next_round(ctx))).info.phase is Phase.SUCCESS
    assert plugin.calls == 1


async def test_a_sync_plugin_returning_a_non_terminal_phase_is_a_system_retryable_failure(
    load: Loader,
) -> None:
    adapter = await load(ScriptedSyncPlugin(PhaseInfo.running(0), config=config()))
    info = (await adapter.handle(tctx())).info
    assert info.phase is Phase.RETRYABLE_FAILURE
    assert info.err is not None
    assert info.err.kind is ErrorKind.SYSTEM
    assert "returned the non-terminal phase Running" in info.err.message


async def test_a_raising_sync_plugin_is_a_retryable_failure(load: Loader) -> None:
    adapter = await load(ScriptedSyncPlugin(RuntimeError("nope"), config=config()))
    info = (await adapter.handle(tctx())).info
    assert info.phase is Phase.RETRYABLE_FAILURE
    assert info.err is not None
    assert (info.err.code, info.err.message) == ("TaskFailedWithError", "nope")


async def test_something_that_is_no_plugin_does_not_load(load: Loader) -> None:
    class NotAPlugin:
        def get_config(self) -> PluginConfig:
            return config()

    with pytest.raises(PluginError, match="neither an AsyncPlugin nor a SyncPlugin"):
        await load(NotAPlugin())
