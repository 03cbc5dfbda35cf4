"""Which handler runs a root node of each kind: the one module that knows every node kind.

Follows flytepropeller/pkg/controller/nodes/factory/handler_factory.go (a handler per ``v1alpha1.NodeKind``).
Adding a kind is a handler module and one line in :func:`_root_nodes` (and, for ``taskplug render`` and the
submit-time check, one in :func:`first_context`).
"""

from __future__ import annotations

from collections.abc import Callable

from taskplug.core import Plugin, PluginResolver, StaticTaskExecutionContext
from taskplug.executor._spec import ExecutionSpec, NodeKind
from taskplug.executor._store import ExecutionRecord
from taskplug.executor._tasks import task_context_for
from taskplug.executor.nodes._host import NodeHost, RootNode
from taskplug.executor.nodes._settings import RunSettings
from taskplug.executor.nodes._task_node import TaskNode

__all__ = ["first_context", "root_node"]

RootNodeFactory = Callable[[NodeHost, ExecutionSpec, ExecutionRecord, Plugin, RunSettings], RootNode]


def _root_nodes() -> dict[NodeKind, RootNodeFactory]:
    """The handler of each kind a root node (or a workflow's task node) can be. The array handler and the
    workflow's load with the first execution that needs them: a single task's run never imports them."""
    from taskplug.executor.nodes._array import ArrayRun

    return {NodeKind.TASK: TaskNode, NodeKind.ARRAY: ArrayRun}


def root_node(
    host: NodeHost,
    spec: ExecutionSpec,
    record: ExecutionRecord,
    resolver: PluginResolver,
    settings: RunSettings,
) -> RootNode:
    """The root node of execution ``spec``, by its kind: a workflow runs its nodes (each kind's handler made
    here too, :func:`child_node`); a task or a map task runs through the plugin of its task type."""
    plugin_of = resolver.resolve
    if spec.kind is NodeKind.TASK:
        return TaskNode(host, spec, record, plugin_of(spec.template.type), settings)
    if spec.kind is NodeKind.WORKFLOW:
        from taskplug.executor.nodes._workflow import WorkflowRun

        return WorkflowRun(host, spec, record, settings, resolver=resolver, child_node=_root_nodes())
    return _root_nodes()[spec.kind](host, spec, record, plugin_of(spec.template.type), settings)


def first_context(
    spec: ExecutionSpec, data_root: str, *, generated_name_max_length: int | None = None
) -> StaticTaskExecutionContext:
    """The task context of the first task a spec's root node would run: the task's own, or a map task's
    element 0, whose template every element shares (what the submit-time check and ``render`` build)."""
    if spec.kind is NodeKind.ARRAY:
        from taskplug.executor.nodes._array_context import element_task_context

        return element_task_context(spec, data_root, 0, generated_name_max_length=generated_name_max_length)
    return task_context_for(spec, data_root, generated_name_max_length=generated_name_max_length)
