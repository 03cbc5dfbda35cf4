"""A task context with some execution values replaced (Flyte's flytek8s ``NewPluginTaskExecutionContext``).

Follows flyteplugins/go/tasks/pluginmachinery/flytek8s/plugin_exec_context.go. The plugin manager hands
plugins one carrying the launch metadata (secret annotations, identity label: ``k8s_task_execution_metadata``);
the Spark plugin builds its driver pod through one with ``interruptible=False``: a driver on a spot node takes
the whole job down with it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from flyteidl.core import tasks_pb2

from taskplug.core import (
    InputReader,
    OutputWriter,
    PluginStateReader,
    PluginStateWriter,
    ResourceManager,
    ResourceRequirements,
    SecretManager,
    TaskExecutionContext,
    TaskExecutionMetadata,
    TaskReader,
)

__all__ = ["PluginTaskExecutionContext"]


@dataclass(frozen=True, slots=True)
class PluginTaskExecutionContext:
    """Delegates to ``inner``; the execution metadata reports the given values where they are not None.

    ``task_resource_manager`` replaces the resource manager (the engine scopes one to each task, as
    propeller's task handler does); ``base_metadata`` replaces the inner context's metadata as a whole (the others then apply on top of it);
    ``interruptible`` replaces the execution's interruptibility; ``resources`` and ``extended_resources``
    replace the task overrides of the same name (Flyte's ``WithInterruptible``, ``WithResources``,
    ``WithExtendedResources``).
    """

    inner: TaskExecutionContext
    base_metadata: TaskExecutionMetadata | None = None
    interruptible: bool | None = None
    resources: ResourceRequirements | None = None
    task_resource_manager: ResourceManager | None = None
    extended_resources: tasks_pb2.ExtendedResources | None = None

    @property
    def metadata(self) -> TaskExecutionMetadata:
        meta = self.base_metadata if self.base_metadata is not None else self.inner.metadata
        if self.interruptible is None and self.resources is None and self.extended_resources is None:
            return meta  # (the plugin manager's own context: read on every step of a build)
        changes: dict[str, Any] = {}
        if self.interruptible is not None:
            changes["interruptible"] = self.interruptible
        overrides: dict[str, Any] = {}
        if self.resources is not None:
            overrides["resources"] = self.resources
        if self.extended_resources is not None:
            overrides["extended_resources"] = self.extended_resources
        if overrides:
            changes["overrides"] = replace(meta.overrides, **overrides)
        return replace(meta, **changes) if changes else meta

    @property
    def task_reader(self) -> TaskReader:
        return self.inner.task_reader

    @property
    def input_reader(self) -> InputReader:
        return self.inner.input_reader

    @property
    def output_writer(self) -> OutputWriter:
        return self.inner.output_writer

    @property
    def plugin_state_reader(self) -> PluginStateReader:
        return self.inner.plugin_state_reader

    @property
    def plugin_state_writer(self) -> PluginStateWriter:
        return self.inner.plugin_state_writer

    @property
    def resource_manager(self) -> ResourceManager | None:
        if self.task_resource_manager is not None:
            return self.task_resource_manager
        return self.inner.resource_manager

    @property
    def secret_manager(self) -> SecretManager | None:
        return self.inner.secret_manager
