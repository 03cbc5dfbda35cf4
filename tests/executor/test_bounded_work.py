"""One submission cannot start unbounded work: ceilings on attempts, elements, parallelism and a workflow's
nodes (nested ones counted) refuse a spec before anything runs, naming the field; an abort stops a map's launches within the round it arrives in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from flyteidl.core import compiler_pb2, identifier_pb2, workflow_pb2

from executor.test_arraynode_executor import MapPlugin, drive, map_spec, resolver, settings
from executor.test_executor import ScriptedPlugin, _resolver
from taskplug.core import FakeClock, PhaseInfo, SpecError, TaskExecutionContext, Transition
from taskplug.executor import parse_spec
from taskplug.executor._executor import Executor, ExecutorSettings
from taskplug.executor._limits import SubmissionLimits, workflow_nodes
from taskplug.executor._store import MemoryStateStore

LIMITS = SubmissionLimits(max_attempts=5, max_elements=10, max_parallelism=4)


def _task(**execution: Any) -> Any:
    return parse_spec(
        {
            "template": {
                "id": {"resourceType": "TASK", "project": "p", "domain": "d", "name": "t", "version": "v1"},
                "type": "scripted",
            },
            "execution": {"id": {"name": "b1"}, **execution},
        }
    )


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        pytest.param(lambda: _task(maxAttempts=4294967295), "execution.maxAttempts", id="max-attempts"),
        pytest.param(lambda: map_spec(list(range(11))), "inputs", id="elements"),
        pytest.param(
            lambda: map_spec([1, 2], array={"parallelism": 5}), "arrayNode.parallelism", id="parallelism"
        ),
        pytest.param(lambda: map_spec([1], array={"retries": 9}), "execution.maxAttempts", id="map-retries"),
    ],
)
async def test_a_spec_above_a_ceiling_is_refused_naming_the_field_and_nothing_runs(
    tmp_path: Path, spec: Any, field: str
) -> None:
    plugin = ScriptedPlugin([PhaseInfo.success()])
    store = MemoryStateStore()
    limited = ExecutorSettings(data_root=str(tmp_path), limits=LIMITS)
    async with Executor(resolver=_resolver(plugin), store=store, settings=limited) as ex:
        built = spec()
        built.template.type = "scripted"  # one plugin serves both kinds here
        with pytest.raises(SpecError) as caught:
            await ex.submit(built)
    assert caught.value.path == field
    assert "executor.limits" in str(caught.value)
    assert plugin.rounds == 0 and store.load(built.execution_key) is None


async def test_within_the_ceilings_a_spec_runs(tmp_path: Path) -> None:
    plugin = ScriptedPlugin([PhaseInfo.success()])
    limited = ExecutorSettings(data_root=str(tmp_path), limits=LIMITS)
    async with Executor(resolver=_resolver(plugin), store=MemoryStateStore(), settings=limited) as ex:
        result = await ex.run(_task(maxAttempts=5))
    assert result.phase == "Success"


class AbortingPlugin(MapPlugin):
    """Asks for the execution's abort while element ``at`` is created, as a request arriving mid-round."""

    def __init__(self, at: int) -> None:
        super().__init__(lambda index, attempt: [PhaseInfo.running(0)])
        self.at = at
        self.executor: Executor | None = None

    async def handle(self, tctx: TaskExecutionContext) -> Transition:
        transition = await super().handle(tctx)
        if int(tctx.metadata.environment_variables["FLYTE_K8S_ARRAY_INDEX"]) == self.at:
            assert self.executor is not None
            self.executor.abort("p/d/m1/n0")
        return transition


async def test_an_abort_stops_a_maps_launches_at_once_and_aborts_what_started(tmp_path: Path) -> None:
    plugin = AbortingPlugin(at=3)
    clock = FakeClock()
    # One element at a time within a round, every element in the window: without the check all 200 start.
    async with Executor(
        resolver=resolver(plugin),
        store=MemoryStateStore(),
        settings=settings(tmp_path, workers=1),
        clock=clock,
    ) as ex:
        plugin.executor = ex
        key = await ex.submit(map_spec(list(range(200)), array={"parallelism": 0}))
        result = await drive(clock, ex, key)
    assert result.phase == "Aborted"
    assert len(plugin.created) == 4
    assert sorted(plugin.aborted) == sorted(plugin.created)


def _workflow(name: str, nodes: list[workflow_pb2.Node]) -> workflow_pb2.WorkflowTemplate:
    template = workflow_pb2.WorkflowTemplate(nodes=[workflow_pb2.Node(id="start-node"), *nodes])
    template.id.CopyFrom(identifier_pb2.Identifier(resource_type=identifier_pb2.WORKFLOW, name=name))
    return template


def _calls(node_id: str, name: str) -> workflow_pb2.Node:
    node = workflow_pb2.Node(id=node_id)
    node.workflow_node.sub_workflow_ref.CopyFrom(
        identifier_pb2.Identifier(resource_type=identifier_pb2.WORKFLOW, name=name)
    )
    return node


def test_a_workflow_s_nodes_are_counted_nested_a_sub_workflow_each_time_it_is_called() -> None:
    branch = workflow_pb2.Node(id="b")
    branch.branch_node.if_else.case.then_node.CopyFrom(workflow_pb2.Node(id="b-then"))
    branch.branch_node.if_else.else_node.CopyFrom(_calls("b-else", "sub"))
    sub = _workflow("sub", [workflow_pb2.Node(id="s0"), workflow_pb2.Node(id="s1")])
    loop = _workflow("loop", [_calls("again", "loop")])  # a cycle: the compiler refuses it, counting ends
    primary = _workflow("wf", [_calls("c0", "sub"), _calls("c1", "sub"), branch, _calls("l", "loop")])
    closure = compiler_pb2.CompiledWorkflowClosure()
    closure.primary.template.CopyFrom(primary)
    for template in (sub, loop):
        closure.sub_workflows.add().template.CopyFrom(template)
    # c0 + 2, c1 + 2, b + b-then + b-else + 2, l + again (the loop's own call not followed again).
    assert workflow_nodes(closure, cap=100) == 3 + 3 + 5 + 2
    assert workflow_nodes(closure, cap=5) == 6  # counting stops past the cap
