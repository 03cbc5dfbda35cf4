"""Which handler runs a root node of each kind: the one module that knows every node kind.

Follows flytepropeller/pkg/controller/nodes/factory/handler_factory.go (a handler per ``v1alpha1.NodeKind``).
Adding a kind is a handler module and one line in :data:`_ROOT_NODES` (and, for ``taskplug render`` and the
submit-time check, one in :func:`first_context`).
"""

from __future__ import annotations

from collections.abc import Callable

from taskplug.core import Plugin, StaticTaskExecutionContext
from taskplug.executor._spec import ExecutionSpec, NodeKind
from taskplug.executor._store import ExecutionRecord
from taskplug.executor._tasks import task_context_for
from taskplug.executor.nodes._array import ArrayRun
from taskplug.executor.nodes._array_context import element_task_context
from taskplug.executor.nodes._host import NodeHost, RootNode
from taskplug.executor.nodes._settings import RunSettings
from taskplug.executor.nodes._task_node import TaskNode

__all__ = ["first_context", "root_node"]

_ROOT_NODES: dict[
    NodeKind, Callable[[NodeHost, ExecutionSpec, ExecutionRecord, Plugin, RunSettings], RootNode]
] = {
    NodeKind.TASK: TaskNode,
    NodeKind.ARRAY: ArrayRun,
}


def root_node(
    host: NodeHost, spec: ExecutionSpec, record: ExecutionRecord, plugin: Plugin, settings: RunSettings
) -> RootNode:
    """The root node of execution ``spec``, by its kind."""
    return _ROOT_NODES[spec.kind](host, spec, record, plugin, settings)


def first_context(
    spec: ExecutionSpec, data_root: str, *, generated_name_max_length: int | None = None
) -> StaticTaskExecutionContext:
    """The task context of the first task a spec's root node would run: the task's own, or a map task's
    element 0, whose template every element shares (what the submit-time check and ``render`` build)."""
    if spec.kind is NodeKind.ARRAY:
        return element_task_context(spec, data_root, 0, generated_name_max_length=generated_name_max_length)
    return task_context_for(spec, data_root, generated_name_max_length=generated_name_max_length)
