"""Core plugins behind the engine: their quotas registered, their allocation tokens scoped to the task.

Follows flytepropeller/pkg/controller/nodes/task/handler.go: propeller hands every plugin's loader a
resource registrar namespaced by the plugin's id (``ResourceRegistrarProxy``), and every round a resource
manager scoped to the plugin and the execution (``resourcemanager.GetTaskResourceManager``). Kubernetes and
web-API plugins get theirs from their own engines; a core plugin (the k8s array plugin's quota tokens, a
plugin author's core plugin) gets them here.
"""

from __future__ import annotations

from dataclasses import replace

from taskplug.core import (
    Plugin,
    PluginEntry,
    PluginProperties,
    SetupContext,
    TaskExecutionContext,
    Transition,
    close_plugin,
    load_plugin,
)
from taskplug.engine.webapi import BaseResourceManager, ResourceRegistrarProxy, TaskResourceManager
from taskplug.k8s import PluginTaskExecutionContext

__all__ = ["core_plugin_entry"]


class _TaskScopedPlugin:
    """The plugin, each call given a context whose resource manager is scoped to the plugin and the task."""

    def __init__(self, plugin: Plugin, manager: BaseResourceManager) -> None:
        self.plugin = plugin  # the engine's dynamic-task-type lookup reads ``plugin`` too
        self._manager = manager

    @property
    def id(self) -> str:
        return self.plugin.id

    def get_properties(self) -> PluginProperties:
        return self.plugin.get_properties()

    def _scoped(self, tctx: TaskExecutionContext) -> TaskExecutionContext:
        execution = tctx.metadata.task_execution_id.id.node_execution_id.execution_id
        manager = TaskResourceManager(
            self._manager, self.plugin.id, execution.project, execution.domain, execution.name
        )
        return PluginTaskExecutionContext(tctx, task_resource_manager=manager)

    async def handle(self, tctx: TaskExecutionContext) -> Transition:
        return await self.plugin.handle(self._scoped(tctx))

    async def abort(self, tctx: TaskExecutionContext) -> None:
        await self.plugin.abort(self._scoped(tctx))

    async def finalize(self, tctx: TaskExecutionContext) -> None:
        await self.plugin.finalize(self._scoped(tctx))

    async def aclose(self) -> None:
        await close_plugin(self.plugin)


def core_plugin_entry(entry: PluginEntry, manager: BaseResourceManager) -> PluginEntry:
    """``entry`` with a loader that registers quotas through ``manager`` and scopes the plugin's tokens."""

    async def load(setup: SetupContext) -> Plugin:
        scoped = replace(setup, resource_registrar=ResourceRegistrarProxy(manager, entry.id))
        return _TaskScopedPlugin(await load_plugin(entry, scoped), manager)

    return replace(entry, load_plugin=load)
