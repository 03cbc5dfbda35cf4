"""Everything that runs plugins, wired together: informers, plugin managers, web-API adapters, quotas.

Follows Flyte's task handler ``Setup`` (flytepropeller/pkg/controller/nodes/task/handler.go) and
``WranglePluginsAndGenerateFinalList`` (task/plugin_config.go): the enabled entries are wrangled into core
plugins — Kubernetes entries behind plugin managers sharing one back-off controller and one informer
factory, web-API entries behind their adapter and status cache sharing one resource manager — each is loaded
with a setup context whose ``enqueue_owner`` wakes the owning executions, and a resolver picks the plugin for
each task type. The executor (``taskplug.executor.open_executor``) opens this around its own lifetime.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from prometheus_client import CollectorRegistry

from taskplug.core import (
    RESOURCE_MANAGER_SECTION,
    TASKS_SECTION,
    Clock,
    EntryLike,
    PlatformConfig,
    Plugin,
    PluginEntry,
    PluginKind,
    PluginRegistry,
    PluginResolver,
    PodTemplates,
    SetupContext,
    TaskExecutionContext,
    close_plugin,
    enabled_plugins,
    load_plugin,
    wrangle_plugins,
)
from taskplug.engine._core import core_plugin_entry
from taskplug.engine.k8s import InformerFactory, SharedK8sMachinery, k8s_core_entry
from taskplug.engine.webapi import build_resource_manager, webapi_plugin_entry
from taskplug.k8s import K8sPluginEntry, KubeClient, Operator, ResourceType
from taskplug.webapi import WebApiPluginEntry

__all__ = ["LocalOperator", "Wakeups", "local_operators", "open_plugins"]


class Wakeups(Protocol):
    """How the engine wakes executions (the executor implements it)."""

    def enqueue_owner(self, namespace: str, name: str) -> None:
        """Wake every execution whose objects carry this owner key (``taskplug.k8s.owner_key``)."""
        ...

    def enqueue_task_execution(self, generated_name: str) -> None:
        """Wake the execution whose current attempt has this generated name (web-API status caches)."""
        ...


@dataclass(frozen=True, slots=True)
class LocalOperator:
    """An enabled plugin's operator for the embedded cluster, and the resource type it runs for."""

    resource_type: ResourceType
    make: Callable[[], Operator]


def local_operators(config: PlatformConfig, registry: PluginRegistry) -> list[LocalOperator]:
    """The operators the enabled Kubernetes plugins bring for the embedded cluster (none are made here)."""
    enabled, _ = enabled_plugins(config.get(TASKS_SECTION).task_plugins)
    found: list[LocalOperator] = []
    for entry in registry.entries:
        if enabled and entry.id.lower() not in enabled:
            continue
        if isinstance(entry, K8sPluginEntry) and entry.local_operator is not None:
            found.append(LocalOperator(entry.resource_to_watch, entry.local_operator))
    return found


@contextlib.asynccontextmanager
async def open_plugins(
    config: PlatformConfig,
    registry: PluginRegistry,
    *,
    kube_client: KubeClient,
    wakeups: Wakeups,
    clock: Clock,
    pod_templates: PodTemplates | None = None,
    metrics_registry: CollectorRegistry | None = None,
    before_create: Callable[[TaskExecutionContext], Awaitable[None]] | None = None,
) -> AsyncIterator[PluginResolver]:
    """Every enabled plugin loaded and running until the block exits; yields the resolver over them.

    The plugin managers' and web-API adapters' metrics go to ``metrics_registry`` (an executor replica
    passes its own, to publish them as its own); without one they are counted and never exported.
    ``before_create`` is awaited by the web-API adapters right before every create and every sync plugin's
    ``do`` (the executor records its intent to create there; raising stops the call)."""
    informers = InformerFactory(kube_client, clock=clock)
    shared = SharedK8sMachinery(
        config=config,
        informers=informers,
        clock=clock,
        pod_templates=pod_templates,
        metrics_registry=metrics_registry,
    )
    resource_manager = await build_resource_manager(config.get(RESOURCE_MANAGER_SECTION))
    wrappers: dict[PluginKind, Callable[[EntryLike], PluginEntry]] = {
        PluginKind.K8S: lambda e: k8s_core_entry(_as_k8s(e), shared),
        PluginKind.WEBAPI: lambda e: webapi_plugin_entry(
            _as_webapi(e),
            clock=clock,
            resource_manager=resource_manager,
            metrics_registry=metrics_registry,
            enqueue=wakeups.enqueue_task_execution,
            before_create=before_create,
        ),
    }
    task_plugins = config.get(TASKS_SECTION).task_plugins
    entries, defaults = wrangle_plugins(task_plugins, registry, wrappers)
    entries = [core_plugin_entry(e, resource_manager) if e.kind == PluginKind.CORE else e for e in entries]
    # taskplug creates no owner object, so the owner-kind filter of Flyte's informer is off (owner_kind "").
    setup = SetupContext(
        enqueue_owner=wakeups.enqueue_owner,
        enqueue_object=getattr(wakeups, "enqueue_object", None),
        owner_kind="",
        kube_client=kube_client,
        clock=clock,
        config=config,
        pod_templates=pod_templates,
    )
    loaded: list[tuple[PluginEntry, Plugin]] = []
    async with informers:
        try:
            for entry in entries:
                loaded.append((entry, await load_plugin(entry, setup)))
            dynamic = [(handles, p) for _, p in loaded if (handles := _dynamic_task_types(p)) is not None]
            yield PluginResolver(
                loaded, defaults, fallback_to_default=task_plugins.fallback_to_default_plugin, dynamic=dynamic
            )
        finally:
            for _, plugin in loaded:
                await close_plugin(plugin)
            await close_plugin(resource_manager)


def _as_k8s(entry: EntryLike) -> K8sPluginEntry:
    if not isinstance(entry, K8sPluginEntry):
        raise TypeError(f"plugin entry [{entry.id}] says it is a k8s plugin but is a {type(entry).__name__}")
    return entry


def _as_webapi(entry: EntryLike) -> WebApiPluginEntry:
    if not isinstance(entry, WebApiPluginEntry):
        raise TypeError(
            f"plugin entry [{entry.id}] says it is a web-API plugin but is a {type(entry).__name__}"
        )
    return entry


def _dynamic_task_types(plugin: Plugin) -> Callable[[str], bool] | None:
    """A plugin whose task types are discovered at run time (the connector service) answers for them."""
    for candidate in (plugin, getattr(plugin, "plugin", None)):
        handles = getattr(candidate, "handles_task_type", None)
        if callable(handles):
            return handles  # type: ignore[no-any-return]
    return None
