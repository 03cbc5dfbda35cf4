"""What a compiled node means for running it: its attempts, deadlines, whether it is interruptible, and the
overrides its task gets.

Follows flytepropeller/pkg/compiler/transformers/k8s (``node.go buildNodeSpec``, ``utils.go
computeRetryStrategy`` / ``computeDeadline``) and, for the interruptible choice, ``nodes/node_exec_context.go
BuildNodeExecutionContext``. Propeller never rewrites a task template for a node: the node's
``task_node.overrides`` reach the plugin beside the template, as the task execution metadata's overrides
(``TaskOverrides``: resources, extended resources, container image, pod template), and the plugin applies
them as it builds the pod. :func:`task_overrides` gives exactly that value. Of the node's metadata, the cache
fields (``cacheable``, ``cache_version``, ``cache_serializable``) and ``config`` are dropped, so
``with_overrides(cache=…)`` changes nothing, as in Flyte 1.
"""

from __future__ import annotations

from datetime import timedelta

from flyteidl.core import tasks_pb2, workflow_pb2

from taskplug.compiler._errors import CompileError, CompileErrors
from taskplug.core import Quantity, QuantityError, ResourceRequirements, TaskOverrides

__all__ = [
    "active_deadline",
    "execution_deadline",
    "interruptible",
    "retry_strategy_min_attempts",
    "task_overrides",
]

# flytek8s ToK8sResourceList: the resource names a node may override; others are dropped.
_RESOURCE_NAMES = {
    tasks_pb2.Resources.CPU: "cpu",
    tasks_pb2.Resources.MEMORY: "memory",
    tasks_pb2.Resources.GPU: "nvidia.com/gpu",
    tasks_pb2.Resources.EPHEMERAL_STORAGE: "ephemeral-storage",
}


def retry_strategy_min_attempts(
    node: workflow_pb2.Node, task: tasks_pb2.TaskTemplate | None = None
) -> int | None:
    """``RetryStrategy.MinAttempts``: the node's retries + 1, else the task's retries + 1, else None (the
    executor's default applies). Zero retries count as unset, so ``with_overrides(retries=0)`` cannot lower a
    task's retries."""
    if node.HasField("metadata") and node.metadata.HasField("retries") and node.metadata.retries.retries != 0:
        return int(node.metadata.retries.retries) + 1
    if (
        task is not None
        and task.HasField("metadata")
        and task.metadata.HasField("retries")
        and task.metadata.retries.retries != 0
    ):
        return int(task.metadata.retries.retries) + 1
    return None


def execution_deadline(node: workflow_pb2.Node) -> timedelta | None:
    """How long one attempt may run: the node's ``metadata.timeout``. None when unset or zero (propeller then
    uses its default, which is no limit). The task template's own timeout is not read: flytekit copies it
    into the node's metadata."""
    if not node.HasField("metadata") or not node.metadata.HasField("timeout"):
        return None
    deadline = node.metadata.timeout.ToTimedelta()
    return deadline if deadline > timedelta(0) else None


def active_deadline(node: workflow_pb2.Node) -> timedelta | None:
    """How long the node may take across all its attempts: twice its timeout (``computeDeadline``)."""
    deadline = execution_deadline(node)
    return None if deadline is None else 2 * deadline


def interruptible(
    node: workflow_pb2.Node,
    *,
    metadata_defaults: workflow_pb2.WorkflowMetadataDefaults | None = None,
    execution_interruptible: bool | None = None,
) -> bool:
    """Whether the node's attempts may run on interruptible machines: the node's own setting when it has
    one, else the execution's (``execution_interruptible``, from the launch's execution config), else the
    workflow's ``metadata_defaults``."""
    if node.HasField("metadata") and node.metadata.WhichOneof("interruptible_value") is not None:
        return bool(node.metadata.interruptible)
    if execution_interruptible is not None:
        return execution_interruptible
    return bool(metadata_defaults.interruptible) if metadata_defaults is not None else False


def task_overrides(node: workflow_pb2.Node) -> TaskOverrides:
    """What the plugin gets as the task execution's overrides for a task node (``TaskOverrides``).

    Resource quantities of zero are left out and names other than cpu, memory, gpu and ephemeral storage
    dropped, as ``flytek8s.ToK8sResourceRequirements`` does; an empty container image is no override. A
    quantity that does not parse fails like Flyte's CRD build (``WorkflowBuildError``).
    """
    if node.WhichOneof("target") != "task_node" or not node.task_node.HasField("overrides"):
        return TaskOverrides(resources=ResourceRequirements())
    overrides = node.task_node.overrides
    requirements: dict[str, dict[str, Quantity]] = {"requests": {}, "limits": {}}
    for kind in ("requests", "limits"):
        for entry in getattr(overrides.resources, kind):
            try:
                quantity = Quantity.parse(entry.value)
            except QuantityError as e:
                raise CompileErrors(
                    [
                        CompileError(
                            "WorkflowBuildError", "", f"Failed to parse resource as a valid quantity.: {e}"
                        )
                    ]
                ) from e
            name = _RESOURCE_NAMES.get(entry.name)
            if name is not None and not quantity.is_zero():
                requirements[kind][name] = quantity
    return TaskOverrides(
        resources=ResourceRequirements(requests=requirements["requests"], limits=requirements["limits"]),
        extended_resources=overrides.extended_resources if overrides.HasField("extended_resources") else None,
        container_image=overrides.container_image,
        pod_template=overrides.pod_template if overrides.HasField("pod_template") else None,
    )
