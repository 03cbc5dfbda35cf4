"""A web-API task's job beyond its phase: the logs and metrics its service keeps, read through its plugin.

A connector task has no pod: its job runs on a connector, which answers ``GetTaskLogs`` and ``GetTaskMetrics``
for the job its resource meta names. The executor keeps that meta in the attempt's plugin state
(``plugin_state["resourceMeta"]``, written by the web-API adapter as Flyte's ``webapi.State``), in the execution's
record (a workflow's task node: the node's record). :func:`web_api_log_lines` and :func:`web_api_metrics` load
the enabled web-API plugins as ``taskplug run`` loads them (a connector plugin runs its discovery first), ask
the one that reads such jobs (``task_log_lines`` / ``task_metrics``: the connector plugin), and close them.
``taskplug logs`` and ``taskplug metrics`` print what they give; the web view can stream
:func:`web_api_log_lines` the same way.

Not in Flyte's backend: Flyte's UI asks a connector for a job's logs and metrics itself.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from contextlib import aclosing
from datetime import datetime, timedelta
from typing import Any

from taskplug.core import ErrorCode, PluginError, PluginKind, SetupContext
from taskplug.core import close_plugin as _close
from taskplug.executor._platform import Platform
from taskplug.webapi import WebApiPluginEntry

__all__ = ["web_api_log_lines", "web_api_metrics", "web_api_resource_meta"]


def web_api_resource_meta(plugin_state: Mapping[str, Any] | None) -> Any | None:
    """The resource meta a web-API attempt's plugin state keeps (None before its job was created, or for a
    Kubernetes task's state)."""
    if not isinstance(plugin_state, Mapping):
        return None
    return plugin_state.get("resourceMeta")


async def _plugins(platform: Platform, capability: str) -> AsyncGenerator[Any, None]:
    """Each enabled web-API plugin that has ``capability``, loaded (closed once the caller moves on)."""
    setup = SetupContext(
        enqueue_owner=lambda namespace, name: None,
        owner_kind="",
        clock=platform.clock,
        config=platform.config,
        pod_templates=platform.pod_templates,
    )
    for entry in platform.enabled_entries():
        if entry.kind != PluginKind.WEBAPI or not isinstance(entry, WebApiPluginEntry):
            continue
        loaded = entry.plugin_loader(setup)
        plugin = await loaded if inspect.isawaitable(loaded) else loaded
        try:
            if callable(getattr(plugin, capability, None)):
                yield plugin
        finally:
            await _close(plugin)


def _no_reader(what: str) -> PluginError:
    return PluginError(
        ErrorCode.UNSUPPORTED_TASK_TYPE,
        f"no enabled web-API plugin reads this job's {what} (the connector-service plugin reads a connector "
        "task's)",
    )


def _not_its_job(e: PluginError) -> bool:
    return e.code == ErrorCode.CORRUPTED_PLUGIN_STATE


async def web_api_log_lines(platform: Platform, plugin_state: Mapping[str, Any] | None) -> AsyncIterator[str]:
    """The log lines of the job a web-API attempt's plugin state names, in the order its service gives them
    (a connector: ``GetTaskLogs``' pages in order). Raises PluginError when no plugin reads them, or when the
    call fails (the message names the connector deployment for an unreachable or wrong-protocol one)."""
    meta = web_api_resource_meta(plugin_state)
    if meta is None:
        raise PluginError(ErrorCode.SPEC_ERROR, "the attempt has no job (nothing was created on a service)")
    # aclosing: leaving the loop early must close the plugin it is on now, not when the generator is collected.
    async with aclosing(_plugins(platform, "task_log_lines")) as plugins:
        async for plugin in plugins:
            async with aclosing(plugin.task_log_lines(meta)) as lines:
                try:
                    first = await anext(lines)
                except StopAsyncIteration:
                    return
                except PluginError as e:
                    if _not_its_job(e):
                        continue
                    raise
                yield first
                async for line in lines:
                    yield line
            return
    raise _no_reader("logs")


async def web_api_metrics(
    platform: Platform,
    plugin_state: Mapping[str, Any] | None,
    queries: Sequence[str],
    *,
    start: datetime | None = None,
    end: datetime | None = None,
    step: timedelta | None = None,
) -> Any:
    """The metrics answer (a connector: the ``GetTaskMetricsResponse``) for the job a web-API attempt's
    plugin state names."""
    meta = web_api_resource_meta(plugin_state)
    if meta is None:
        raise PluginError(ErrorCode.SPEC_ERROR, "the attempt has no job (nothing was created on a service)")
    async with aclosing(_plugins(platform, "task_metrics")) as plugins:
        async for plugin in plugins:
            try:
                return await plugin.task_metrics(meta, queries, start=start, end=end, step=step)
            except PluginError as e:
                if _not_its_job(e):
                    continue
                raise
    raise _no_reader("metrics")
