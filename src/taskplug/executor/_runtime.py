"""Everything that runs tasks, wired together: informers, plugin managers, web-API adapters, quotas, executor.

Flyte's task handler Setup: the enabled entries are wrangled into core plugins (Kubernetes entries behind
plugin managers sharing one back-off controller and one informer factory; web-API entries behind their
adapter and status cache, sharing one resource manager), each is loaded with a setup context whose
``enqueue_owner`` wakes the executor (web-API adapters wake it by generated name, through
``enqueue_task_execution``, when their status cache sees a change), and a resolver picks the plugin for each
task type.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import AsyncIterator
from typing import Any

from taskplug.core import (
    TASKS_SECTION,
    Clock,
    Plugin,
    PluginEntry,
    PluginKind,
    PluginResolver,
    SetupContext,
    load_plugin,
    wrangle_plugins,
)
from taskplug.executor._executor import Executor, ExecutorSettings
from taskplug.executor._platform import EXECUTOR_SECTION, Platform
from taskplug.executor._store import StateStore
from taskplug.k8s import KubeClient
from taskplug.k8s._informer import InformerFactory
from taskplug.k8s._plugin_manager import SharedK8sMachinery, k8s_core_entry
from taskplug.webapi._adapter import webapi_plugin_entry
from taskplug.webapi._resourcemanager import RESOURCE_MANAGER_SECTION, build_resource_manager

__all__ = ["executor_settings", "open_executor"]


def executor_settings(platform: Platform) -> ExecutorSettings:
    cfg = platform.config.get(EXECUTOR_SECTION)
    return ExecutorSettings(
        data_root=cfg.data_root,
        workers=cfg.workers,
        resync_period=cfg.resync_period.total_seconds(),
        max_system_failures=cfg.max_system_failures,
        max_round_errors=cfg.max_round_errors,
        max_plugin_phase_versions=platform.config.get(TASKS_SECTION).max_plugin_phase_versions,
    )


@contextlib.asynccontextmanager
async def open_executor(
    platform: Platform,
    *,
    kube_client: KubeClient,
    store: StateStore,
    settings: ExecutorSettings | None = None,
    clock: Clock | None = None,
) -> AsyncIterator[Executor]:
    """An executor with every enabled plugin loaded, running until the block exits."""
    clock = clock or platform.clock
    config = platform.config
    informers = InformerFactory(kube_client, clock=clock)
    shared = SharedK8sMachinery(
        config=config, informers=informers, clock=clock, pod_templates=platform.pod_templates
    )
    resource_manager = await build_resource_manager(config.get(RESOURCE_MANAGER_SECTION))
    executor = Executor(
        resolver=PluginResolver([], {}),
        store=store,
        settings=settings or executor_settings(platform),
        clock=clock,
    )
    wrappers = {
        PluginKind.K8S: lambda e: k8s_core_entry(e, shared),
        PluginKind.WEBAPI: lambda e: webapi_plugin_entry(
            e, clock=clock, resource_manager=resource_manager, enqueue=executor.enqueue_task_execution
        ),
    }
    task_plugins = config.get(TASKS_SECTION).task_plugins
    entries, defaults = wrangle_plugins(task_plugins, platform.registry, wrappers)
    # taskplug creates no owner object, so the owner-kind filter of Flyte's informer is off (owner_kind "").
    # Loaders read their own config sections (and the pod templates, for pod specs) from ``extras``.
    setup = SetupContext(
        enqueue_owner=executor.enqueue_owner,
        owner_kind="",
        kube_client=kube_client,
        clock=clock,
        extras={"config": config, "pod_templates": platform.pod_templates},
    )
    loaded: list[tuple[PluginEntry, Plugin]] = []
    async with informers:
        try:
            for entry in entries:
                loaded.append((entry, await load_plugin(entry, setup)))
            dynamic = [(handles, p) for _, p in loaded if (handles := _dynamic_task_types(p)) is not None]
            executor.resolver = PluginResolver(
                loaded, defaults, fallback_to_default=task_plugins.fallback_to_default_plugin, dynamic=dynamic
            )
            async with executor:
                yield executor
        finally:
            for _, plugin in loaded:
                await _close(plugin)
            await _close(resource_manager)


def _dynamic_task_types(plugin: Plugin) -> Any:
    """A plugin whose task types are discovered at run time (the connector service) answers for them."""
    candidates: tuple[Any, ...] = (plugin, getattr(plugin, "plugin", None))
    for candidate in candidates:
        handles = getattr(candidate, "handles_task_type", None)
        if callable(handles):
            return handles
    return None


async def _close(thing: Any) -> None:
    close = getattr(thing, "aclose", None) or getattr(thing, "close", None)
    if close is None:
        return
    result = close()
    if inspect.isawaitable(result):
        await result
