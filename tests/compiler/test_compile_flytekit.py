"""Real flytekit 1.16 workflows, serialized in-process, compiled as flyteadmin compiles them."""

from __future__ import annotations

from typing import Any

import pytest
from flyteidl.core import compiler_pb2, interface_pb2, types_pb2
from flyteidl.core import workflow_pb2 as core_workflow_pb2

from compiler import flytekit_workflows as wf
from compiler.serialized import Serialized, serialize
from taskplug.compiler import (
    CompileErrors,
    LaunchPlanInterface,
    compile_workflow,
    identifier_key,
    requirements,
)

INTEGER = types_pb2.LiteralType(simple=types_pb2.SimpleType.INTEGER)


def _connections(closure: compiler_pb2.CompiledWorkflowClosure | compiler_pb2.CompiledWorkflow) -> Any:
    compiled = closure.primary if isinstance(closure, compiler_pb2.CompiledWorkflowClosure) else closure
    return (
        {k: list(v.ids) for k, v in compiled.connections.downstream.items()},
        {k: list(v.ids) for k, v in compiled.connections.upstream.items()},
    )


def _node(closure: compiler_pb2.CompiledWorkflowClosure, node_id: str) -> core_workflow_pb2.Node:
    return next(n for n in closure.primary.template.nodes if n.id == node_id)


def _task_names(closure: compiler_pb2.CompiledWorkflowClosure) -> list[str]:
    return [t.template.id.name.rsplit(".", 1)[-1] for t in closure.tasks]


@pytest.fixture(scope="module")
def compiled() -> dict[str, tuple[Serialized, compiler_pb2.CompiledWorkflowClosure]]:
    found = {}
    for name in (
        "sequential",
        "fan_out_in",
        "branching",
        "nested_branching",
        "calls_sub_workflow",
        "calls_launch_plan",
        "maps",
        "gates",
        "attribute_access",
        "with_failure_node",
        "overridden",
        "interruptible_by_default",
    ):
        serialized = serialize(getattr(wf, name))
        found[name] = (serialized, serialized.compile())
    return found


def test_sequential_nodes_are_chained_between_start_and_end(compiled: Any) -> None:
    serialized, closure = compiled["sequential"]
    template = closure.primary.template
    assert [n.id for n in template.nodes] == ["start-node", "end-node", "n0", "n1"]
    assert _connections(closure) == (
        {"start-node": ["n0"], "n0": ["n1"], "n1": ["end-node"]},
        {"n0": ["start-node"], "n1": ["n0"], "end-node": ["n1"]},
    )
    # A promise on a workflow input names start-node, in the node and in the workflow's outputs alike.
    assert _node(closure, "n0").inputs[0].binding.promise.node_id == "start-node"
    assert list(_node(closure, "end-node").inputs) == list(template.outputs)
    assert serialized.template.nodes[0].inputs[0].binding.promise.node_id == ""  # the input is left alone
    assert _task_names(closure) == ["add_one", "double"]


def test_fan_out_and_in_lists_every_producer_sorted(compiled: Any) -> None:
    _, closure = compiled["fan_out_in"]
    downstream, upstream = _connections(closure)
    assert downstream == {
        "start-node": ["n0"],
        "n0": ["n1", "n2"],
        "n1": ["n3"],
        "n2": ["n3"],
        "n3": ["end-node"],
    }
    assert upstream["n3"] == ["n1", "n2"]
    assert list(_node(closure, "n3").upstream_node_ids) == ["n1", "n2"]


def test_branch_children_are_renamed_and_wait_only_upstream(compiled: Any) -> None:
    _, closure = compiled["branching"]
    branch = _node(closure, "n0").branch_node.if_else
    assert branch.case.then_node.id == "n0-n0"
    assert branch.other[0].then_node.id == "n0-n1"
    assert branch.error.message == "too small"
    downstream, upstream = _connections(closure)
    # The children read the workflow input: upstream entries only; nothing runs after them by edge.
    assert upstream == {
        "n0": ["start-node"],
        "n0-n0": ["start-node"],
        "n0-n1": ["start-node"],
        "end-node": ["n0"],
    }
    assert downstream == {"start-node": ["n0"], "n0": ["end-node"]}
    assert branch.case.then_node.inputs[0].binding.promise.node_id == "start-node"


def test_nested_branch_children_carry_every_parent_id(compiled: Any) -> None:
    _, closure = compiled["nested_branching"]
    outer = _node(closure, "n1").branch_node.if_else
    inner = outer.case.then_node
    assert inner.id == "n1-n0"
    assert inner.branch_node.if_else.case.then_node.id == "n1-n0-n0"
    assert inner.branch_node.if_else.else_node.id == "n1-n0-n1"
    assert outer.else_node.id == "n1-n1"
    downstream, upstream = _connections(closure)
    assert downstream == {"start-node": ["n0"], "n0": ["n1"], "n1": ["end-node"]}
    for child in ("n1-n0", "n1-n0-n0", "n1-n0-n1", "n1-n1"):
        assert upstream[child] == ["n0"]


def test_a_sub_workflow_is_compiled_into_the_closure_with_its_connections(compiled: Any) -> None:
    serialized, closure = compiled["calls_sub_workflow"]
    assert [s.template.id.name for s in closure.sub_workflows] == ["compiler.flytekit_workflows.inner"]
    sub = closure.sub_workflows[0]
    assert [n.id for n in sub.template.nodes] == ["start-node", "end-node", "n0", "n1"]
    assert _connections(sub) == (
        {"start-node": ["n0"], "n0": ["n1"], "n1": ["end-node"]},
        {"n0": ["start-node"], "n1": ["n0"], "end-node": ["n1"]},
    )
    # The tasks of the sub-workflow are needed too, in Flyte's order (by name here).
    assert _task_names(closure) == ["add_one", "double", "square"]
    assert [t.name for t in requirements(serialized.template, serialized.spec.sub_workflows).task_ids] == [
        t.template.id.name for t in closure.tasks
    ]


def test_a_launch_plan_node_shows_its_required_inputs_and_the_defaults_it_overrides(compiled: Any) -> None:
    serialized, closure = compiled["calls_launch_plan"]
    assert [t.name for t in requirements(serialized.template).launch_plan_ids] == ["pair_fixed"]
    # `a` is fixed by the launch plan and `b` has a default the node overrides: the node binds `b` only.
    assert [b.var for b in _node(closure, "n0").inputs] == ["b"]
    assert _connections(closure)[1]["n1"] == ["n0"]


def test_a_launch_plan_default_left_unbound_is_not_an_input_but_a_required_one_is(compiled: Any) -> None:
    serialized, _ = compiled["calls_launch_plan"]
    plan = serialized.launch_plan_interfaces()[0]
    template = core_workflow_pb2.WorkflowTemplate()
    template.CopyFrom(serialized.template)
    del template.nodes[0].inputs[:]
    # Without `b` the launch plan runs with its default: the node needs nothing, so it starts from start-node.
    closure = compile_workflow(template, tasks=serialized.tasks, launch_plans=[plan])
    assert _connections(closure)[1]["n0"] == ["start-node"]
    required = interface_pb2.ParameterMap()
    required.parameters["a"].CopyFrom(
        interface_pb2.Parameter(var=interface_pb2.Variable(type=INTEGER), required=True)
    )
    assert plan.expected_inputs is not None
    required.parameters["b"].CopyFrom(plan.expected_inputs.parameters["b"])
    with pytest.raises(CompileErrors) as caught:
        compile_workflow(
            serialized.template,
            tasks=serialized.tasks,
            launch_plans=[LaunchPlanInterface(plan.id, required, plan.expected_outputs)],
        )
    assert str(caught.value) == "Code: ParameterNotBound, Node Id: n0, Description: Parameter not bound [a]."


def test_a_map_task_node_takes_its_sub_node_interface(compiled: Any) -> None:
    _, closure = compiled["maps"]
    node = _node(closure, "n0")
    assert node.WhichOneof("target") == "array_node"
    assert _connections(closure) == (
        {"start-node": ["n0"], "n0": ["end-node"]},
        {"n0": ["start-node"], "end-node": ["n0"]},
    )
    assert len(closure.tasks) == 1
    assert closure.tasks[0].template.interface.inputs.variables["a"].type.collection_type == INTEGER


def test_gates_pass_through_wait_and_produce_their_signal(compiled: Any) -> None:
    _, closure = compiled["gates"]
    kinds = {
        n.id: n.gate_node.WhichOneof("condition")
        for n in closure.primary.template.nodes
        if n.HasField("gate_node")
    }
    assert kinds == {"n0": "sleep", "n2": "approve", "n3": "signal"}
    downstream, upstream = _connections(closure)
    # The approval passes add_one's output on; `nap >> given` is an explicit upstream edge.
    assert upstream["n2"] == ["n1"]
    assert upstream["n3"] == ["n0"]
    assert upstream["n4"] == ["n2", "n3"]
    assert downstream["n0"] == ["n3"]


def test_attribute_paths_reach_into_a_dataclass_and_its_list(compiled: Any) -> None:
    _, closure = compiled["attribute_access"]
    paths = [
        [a.WhichOneof("value") for a in b.binding.promise.attr_path] for b in _node(closure, "n1").inputs
    ]
    assert paths == [["string_value"], ["string_value", "int_value"]]
    assert _connections(closure)[1]["n1"] == ["n0"]


def test_attribute_path_to_a_missing_field_is_field_not_found(compiled: Any) -> None:
    serialized = serialize(wf.attribute_access)
    serialized.spec.template.nodes[1].inputs[0].binding.promise.attr_path[0].string_value = "z"
    with pytest.raises(CompileErrors) as caught:
        serialized.compile()
    [error] = caught.value.errors
    assert (error.code, error.node_id) == ("FieldNotFound", "n1")
    assert error.description.startswith("Variable [o0] (type [simple:STRUCT metadata:{")
    assert error.description.endswith("doesn't have field [z].")


def test_the_failure_node_waits_on_start_and_is_outside_the_graph(compiled: Any) -> None:
    _, closure = compiled["with_failure_node"]
    downstream, upstream = _connections(closure)
    assert upstream["fn0"] == ["start-node"]
    assert "fn0" not in downstream["start-node"]
    assert closure.primary.template.failure_node.inputs[1].binding.promise.node_id == "start-node"
    assert _task_names(closure) == ["cleanup", "double"]


def test_overrides_stay_on_the_node(compiled: Any) -> None:
    _, closure = compiled["overridden"]
    node = _node(closure, "n0")
    assert node.metadata.name == "twice"
    assert node.task_node.overrides.container_image == "ghcr.io/example/other:v2"


def test_an_alias_renames_the_output_its_consumers_must_use(compiled: Any) -> None:
    serialized = serialize(wf.aliased)
    closure = serialized.compile()
    assert [(a.var, a.alias) for a in _node(closure, "n0").output_aliases] == [("o0", "doubled")]
    # A workflow output reading the aliased node under its original name no longer finds it.
    template = serialized.spec.template
    template.interface.outputs.variables["o0"].type.CopyFrom(INTEGER)
    output = template.outputs.add(var="o0")
    output.binding.promise.node_id = "n0"
    output.binding.promise.var = "o0"
    with pytest.raises(CompileErrors) as caught:
        serialized.compile()
    assert str(caught.value) == (
        "Collected Errors: 2\n"
        "\tError 0: Code: ParameterNotBound, Node Id: end-node, Description: Parameter not bound [o0].\n"
        "\tError 1: Code: VariableNameNotFound, Node Id: n0, Description: Variable [o0] not found on node [n0]."
    )
    output.binding.promise.var = "doubled"
    closure = serialized.compile()
    assert _connections(closure)[1]["end-node"] == ["n0"]


def test_is_none_conditions_do_not_compile() -> None:
    with pytest.raises(CompileErrors) as caught:
        serialize(wf.none_check).compile()
    assert (
        str(caught.value) == "Code: ValueRequired, Node Id: n0, Description: Value required [RightValue.Val]."
    )
    assert caught.value.code == "CompileError"


def test_more_top_level_nodes_than_the_limit_are_refused(compiled: Any) -> None:
    from taskplug.core import SpecError

    serialized, _ = compiled["fan_out_in"]
    serialized.compile(max_nodes=4)
    with pytest.raises(SpecError) as caught:
        serialized.compile(max_nodes=3)
    assert str(caught.value) == (
        'number of nodes in workflow [resource_type:WORKFLOW name:"compiler.flytekit_workflows.fan_out_in"] '
        "exceeds limit (4 > 3)"
    )


def test_missing_tasks_and_launch_plans_are_named_before_anything_else(compiled: Any) -> None:
    serialized, _ = compiled["calls_launch_plan"]
    with pytest.raises(CompileErrors) as caught:
        compile_workflow(serialized.template)
    assert str(caught.value) == (
        "Collected Errors: 2\n"
        "\tError 0: Code: TaskReferenceNotFound, Node Id: start-node, Description: Referenced Task "
        '[resource_type:TASK name:"compiler.flytekit_workflows.double"] not found.\n'
        "\tError 1: Code: WorkflowReferenceNotFound, Node Id: start-node, Description: Referenced Workflow "
        '[resource_type:LAUNCH_PLAN name:"pair_fixed"] not found.'
    )


def test_a_missing_sub_workflow_is_named_with_the_node_that_calls_it(compiled: Any) -> None:
    serialized, _ = compiled["calls_sub_workflow"]
    with pytest.raises(CompileErrors) as caught:
        requirements(serialized.template)
    assert str(caught.value) == (
        "Code: WorkflowReferenceNotFound, Node Id: n0, Description: Referenced Workflow "
        '[resource_type:WORKFLOW name:"compiler.flytekit_workflows.inner"] not found.'
    )
    with pytest.raises(CompileErrors):
        compile_workflow(serialized.template, tasks=serialized.tasks)


def test_identifiers_compare_whole(compiled: Any) -> None:
    serialized, _ = compiled["sequential"]
    hydrated = [type(t)() for t in serialized.tasks]
    for copy, task in zip(hydrated, serialized.tasks, strict=True):
        copy.CopyFrom(task)
        copy.id.version = "v1"
    with pytest.raises(CompileErrors) as caught:
        compile_workflow(serialized.template, tasks=hydrated)
    assert {e.code for e in caught.value.errors} == {"TaskReferenceNotFound"}
    assert identifier_key(hydrated[0].id) != identifier_key(serialized.tasks[0].id)


def test_files_directories_datasets_enums_maps_lists_and_optionals_bind() -> None:
    closure = serialize(wf.many_types).compile()
    downstream, upstream = _connections(closure)
    assert upstream["n1"] == ["n0", "start-node"]
    consumer = _node(closure, "n1")
    kinds = {b.var: b.binding.WhichOneof("value") for b in consumer.inputs}
    assert kinds["label"] == "scalar"  # the default flytekit binds as a literal
    assert kinds["maybe"] == "promise"  # an int into Optional[int]: one union variant takes it
    assert downstream["start-node"] == ["n0", "n1"]
