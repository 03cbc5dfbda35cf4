"""What compiled nodes of real flytekit workflows mean for running them (propeller's node spec)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from flyteidl.core import tasks_pb2, workflow_pb2

from compiler import flytekit_workflows as wf
from compiler.serialized import serialize
from taskplug.compiler import (
    CompileErrors,
    active_deadline,
    execution_deadline,
    interruptible,
    retry_strategy_min_attempts,
    task_overrides,
)
from taskplug.core import Quantity


def _user_node(
    name: str,
) -> tuple[workflow_pb2.Node, dict[str, tasks_pb2.TaskTemplate], workflow_pb2.WorkflowMetadataDefaults]:
    """The workflow's first user node, the closure's tasks by short name, and the workflow's node defaults."""
    closure = serialize(getattr(wf, name)).compile()
    tasks = {t.template.id.name.rsplit(".", 1)[-1]: t.template for t in closure.tasks}
    return closure.primary.template.nodes[2], tasks, closure.primary.template.metadata_defaults


def test_a_task_nodes_attempts_and_deadlines_come_from_the_task_through_flytekit() -> None:
    node, tasks, _ = _user_node("sequential")
    task = tasks["add_one"]
    assert retry_strategy_min_attempts(node, task) == 3
    assert execution_deadline(node) == timedelta(minutes=3)
    assert active_deadline(node) == timedelta(minutes=6)


def test_node_overrides_win_and_reach_the_plugin_as_task_overrides() -> None:
    node, tasks, _ = _user_node("overridden")
    task = tasks["double"]
    assert retry_strategy_min_attempts(node, task) == 5
    assert execution_deadline(node) == timedelta(minutes=10)
    assert active_deadline(node) == timedelta(minutes=20)
    assert interruptible(node) is True
    overrides = task_overrides(node)
    assert overrides.container_image == "ghcr.io/example/other:v2"
    assert overrides.resources is not None
    assert dict(overrides.resources.requests) == {"cpu": Quantity("2"), "memory": Quantity("1Gi")}
    # A zero quantity is no override (flytek8s drops it).
    assert dict(overrides.resources.limits) == {"cpu": Quantity("4")}
    assert overrides.pod_template is None


def test_zero_retries_cannot_lower_the_tasks_and_no_timeout_is_no_deadline() -> None:
    node, tasks, _ = _user_node("no_retries")
    task = tasks["add_one"]
    assert retry_strategy_min_attempts(node, task) == 3
    assert execution_deadline(node) is None
    assert active_deadline(node) is None
    assert retry_strategy_min_attempts(node) is None


def test_interruptible_is_the_nodes_then_the_executions_then_the_workflows() -> None:
    node, _, defaults = _user_node("interruptible_by_default")
    assert defaults.interruptible is True
    assert interruptible(node, metadata_defaults=defaults) is False
    unset = workflow_pb2.Node(id="n0")
    assert interruptible(unset, metadata_defaults=defaults) is True
    assert interruptible(unset, metadata_defaults=defaults, execution_interruptible=False) is False
    assert interruptible(unset) is False


def test_a_node_without_overrides_gets_empty_ones() -> None:
    node, _, _ = _user_node("sequential")
    overrides = task_overrides(node)
    assert overrides.resources is not None
    assert not overrides.resources.requests and not overrides.resources.limits
    assert overrides.container_image == ""


def test_an_override_quantity_that_does_not_parse_is_a_workflow_build_error() -> None:
    node = workflow_pb2.Node(id="n0")
    node.task_node.overrides.resources.requests.add(name=1, value="two")
    with pytest.raises(CompileErrors) as caught:
        task_overrides(node)
    [error] = caught.value.errors
    assert (error.code, error.node_id) == ("WorkflowBuildError", "")
    assert error.description.startswith("Failed to parse resource as a valid quantity.: ")
