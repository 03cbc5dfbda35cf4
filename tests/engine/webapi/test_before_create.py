"""The adapters' ``before_create`` hook: awaited right before every create and every sync plugin's ``do``,
after the write limit; when it raises, the round errors and nothing is called (an executor replica records
its intent to create there)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from taskplug.core import FakeClock, Phase, PhaseInfo, SetupContext, TaskExecutionContext
from taskplug.engine.webapi import (
    State,
    SyncPluginAdapter,
    WebApiPhase,
    WebApiPluginAdapter,
    load_webapi_plugin,
)
from taskplug.engine.webapi._adapter import BeforeCreate
from taskplug.webapi import WebApiPluginEntry

from ._doubles import ScriptedPlugin, ScriptedSyncPlugin
from .test_adapter import config, persisted, tctx

Loader = Callable[..., Awaitable[WebApiPluginAdapter]]


@pytest.fixture
async def load(clock: FakeClock) -> AsyncIterator[Loader]:
    loaded: list[Any] = []

    async def _load(plugin: ScriptedPlugin | ScriptedSyncPlugin, before_create: BeforeCreate | None) -> Any:
        entry = WebApiPluginEntry("test-plugin", ("test",), lambda setup: plugin)
        adapter = await load_webapi_plugin(
            entry, SetupContext(enqueue_owner=lambda ns, name: None), clock=clock, before_create=before_create
        )
        loaded.append(adapter)
        return adapter

    yield _load
    for adapter in loaded:
        await adapter.aclose()


async def test_before_create_is_awaited_with_the_tasks_context_before_the_create(load: Loader) -> None:
    plugin = ScriptedPlugin(config=config(), create=[("abc", None)])
    seen: list[tuple[str, list[str]]] = []

    async def before(ctx: TaskExecutionContext) -> None:
        # What the plugin had created when the hook ran: nothing yet.
        seen.append((ctx.metadata.task_execution_id.generated_name, list(plugin.creates)))

    adapter = await load(plugin, before)
    ctx = tctx("t-1")
    await adapter.handle(ctx)
    assert seen == [("t-1", [])]
    assert plugin.creates == ["t-1"]
    assert persisted(ctx).phase is WebApiPhase.RESOURCES_CREATED


async def test_a_raising_before_create_errors_the_round_and_creates_nothing(load: Loader) -> None:
    plugin = ScriptedPlugin(config=config(), create=[("abc", None)])

    async def refuse(ctx: TaskExecutionContext) -> None:
        raise ConnectionError("no longer this replica's execution")

    adapter = await load(plugin, refuse)
    ctx = tctx("t-1")
    with pytest.raises(ConnectionError, match="no longer this replica's"):
        await adapter.handle(ctx)
    assert plugin.creates == []
    changed, _, _ = ctx.plugin_state.written
    assert not changed  # the round decided nothing: the next one starts from the same state


async def test_before_create_is_not_called_while_a_quota_token_is_requested(load: Loader) -> None:
    plugin = ScriptedPlugin(config=config(resourceQuotas={"ns": 1}), create=[("abc", None)])
    calls: list[str] = []

    async def before(ctx: TaskExecutionContext) -> None:
        calls.append(ctx.metadata.task_execution_id.generated_name)

    adapter = await load(plugin, before)
    first = tctx("t-1")
    await adapter.handle(first)  # the token round: nothing is created, no intent
    assert calls == [] and plugin.creates == []
    state = persisted(first)
    assert state.phase is WebApiPhase.ALLOCATION_TOKEN_ACQUIRED
    await adapter.handle(tctx("t-1", state=state))
    assert calls == ["t-1"] and plugin.creates == ["t-1"]


async def test_without_a_hook_the_create_is_sent_as_before(load: Loader) -> None:
    plugin = ScriptedPlugin(config=config(), create=[("abc", None)])
    adapter = await load(plugin, None)
    ctx = tctx("t-1")
    await adapter.handle(ctx)
    assert plugin.creates == ["t-1"]
    assert persisted(ctx) == State(WebApiPhase.RESOURCES_CREATED, phase_version=2, resource_meta="abc")


# -- SyncPlugin: ``do`` is the create ---------------------------------------------------------------------


async def test_before_create_is_awaited_before_a_sync_plugins_do(load: Loader) -> None:
    plugin = ScriptedSyncPlugin(PhaseInfo.success(), config=config())
    seen: list[tuple[str, int]] = []

    async def before(ctx: TaskExecutionContext) -> None:
        seen.append((ctx.metadata.task_execution_id.generated_name, plugin.calls))  # do not called yet

    adapter = await load(plugin, before)
    assert isinstance(adapter, SyncPluginAdapter)
    ctx = tctx("t-1")
    assert (await adapter.handle(ctx)).info.phase is Phase.SUCCESS
    assert seen == [("t-1", 0)]
    assert plugin.calls == 1
    # The terminal state is re-reported without calling anything again, the hook included.
    await adapter.handle(tctx("t-1", state=persisted(ctx)))
    assert seen == [("t-1", 0)] and plugin.calls == 1


async def test_a_raising_before_create_errors_a_sync_round_and_do_is_not_called(load: Loader) -> None:
    plugin = ScriptedSyncPlugin(PhaseInfo.success(), config=config())

    async def refuse(ctx: TaskExecutionContext) -> None:
        raise ConnectionError("no longer this replica's execution")

    adapter = await load(plugin, refuse)
    ctx = tctx("t-1")
    with pytest.raises(ConnectionError, match="no longer this replica's"):
        await adapter.handle(ctx)
    assert plugin.calls == 0
    changed, _, _ = ctx.plugin_state.written
    assert not changed  # nothing decided: the next round starts from the same state
