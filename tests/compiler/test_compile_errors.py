"""Compile errors, each with Flyte's exact text: cases from flytepropeller's compiler unit tables
(workflow_compiler_test.go, validators/*_test.go) and the rule book's test vectors, on hand-built templates."""

from __future__ import annotations

from collections.abc import Iterable

import pytest
from flyteidl.core import (
    condition_pb2,
    identifier_pb2,
    interface_pb2,
    literals_pb2,
    tasks_pb2,
    types_pb2,
    workflow_pb2,
)

from taskplug.compiler import CompileErrors, compile_workflow, requirements

S = types_pb2.SimpleType
INTEGER = types_pb2.LiteralType(simple=S.INTEGER)
STRING = types_pb2.LiteralType(simple=S.STRING)


def _variables(**types: types_pb2.LiteralType) -> interface_pb2.VariableMap:
    found = interface_pb2.VariableMap()
    for name, literal_type in types.items():
        found.variables[name].type.CopyFrom(literal_type)
    return found


def _task(
    name: str, inputs: dict[str, types_pb2.LiteralType], outputs: dict[str, types_pb2.LiteralType]
) -> tasks_pb2.TaskTemplate:
    return tasks_pb2.TaskTemplate(
        id=identifier_pb2.Identifier(resource_type=identifier_pb2.TASK, name=name),
        interface=interface_pb2.TypedInterface(inputs=_variables(**inputs), outputs=_variables(**outputs)),
        container=tasks_pb2.Container(image="image://", args=["run"]),
    )


def _promise(var: str, node_id: str, output: str) -> literals_pb2.Binding:
    binding = literals_pb2.Binding(var=var)
    binding.binding.promise.node_id = node_id
    binding.binding.promise.var = output
    return binding


def _integer(var: str, value: int) -> literals_pb2.Binding:
    binding = literals_pb2.Binding(var=var)
    binding.binding.scalar.primitive.integer = value
    return binding


def _string(var: str, value: str) -> literals_pb2.Binding:
    binding = literals_pb2.Binding(var=var)
    binding.binding.scalar.primitive.string_value = value
    return binding


def _task_node(
    node_id: str, task: str, inputs: Iterable[literals_pb2.Binding] = (), *, name: str | None = None
) -> workflow_pb2.Node:
    node = workflow_pb2.Node(id=node_id, inputs=list(inputs))
    node.task_node.reference_id.CopyFrom(
        identifier_pb2.Identifier(resource_type=identifier_pb2.TASK, name=task)
    )
    if name is not None:
        node.metadata.name = name
    return node


def _workflow(
    nodes: Iterable[workflow_pb2.Node],
    *,
    inputs: dict[str, types_pb2.LiteralType] | None = None,
    outputs: dict[str, types_pb2.LiteralType] | None = None,
    output_bindings: Iterable[literals_pb2.Binding] = (),
) -> workflow_pb2.WorkflowTemplate:
    return workflow_pb2.WorkflowTemplate(
        id=identifier_pb2.Identifier(resource_type=identifier_pb2.WORKFLOW, name="repo"),
        interface=interface_pb2.TypedInterface(
            inputs=_variables(**(inputs or {})), outputs=_variables(**(outputs or {}))
        ),
        nodes=list(nodes),
        outputs=list(output_bindings),
    )


def _errors(template: workflow_pb2.WorkflowTemplate, *tasks: tasks_pb2.TaskTemplate) -> str:
    with pytest.raises(CompileErrors) as caught:
        compile_workflow(template, tasks=tasks)
    return str(caught.value)


ADD = _task("add", {"a": INTEGER, "b": INTEGER}, {"o0": INTEGER})
ONE = _task("one", {"a": INTEGER}, {"o0": INTEGER})


# -- the rule book's vectors -----------------------------------------------------------------------------------


def test_an_input_left_unbound_is_parameter_not_bound() -> None:
    template = _workflow(
        [
            _task_node("n0", "one", [_promise("a", "", "x")]),
            _task_node("n1", "add", [_promise("a", "n0", "o0")]),
        ],
        inputs={"x": INTEGER},
    )
    assert (
        _errors(template, ADD, ONE)
        == "Code: ParameterNotBound, Node Id: n1, Description: Parameter not bound [b]."
    )


def test_a_string_output_into_an_integer_input_names_both_nodes_by_name() -> None:
    make_point = _task("mk_point", {}, {"o0": STRING})
    template = _workflow(
        [
            _task_node("n0", "mk_point", name="mk_point"),
            _task_node("n1", "one", [_promise("a", "n0", "o0")], name="double"),
        ]
    )
    assert _errors(template, make_point, ONE) == (
        "Code: MismatchingTypes, Node Id: n1, Description: The output variable 'mk_point.o0' has type "
        "[simple:STRING], but it's assigned to the input variable 'double.a' which has type type "
        "[simple:INTEGER]."
    )


CHAIN = _task("chain", {"x": INTEGER, "y": INTEGER}, {"o0": INTEGER})
LINK = _task("link", {"y": INTEGER}, {"o0": INTEGER})


def test_a_cycle_reached_from_start_is_reported_with_its_path() -> None:
    template = _workflow(
        [
            _task_node("a", "chain", [_promise("x", "", "x"), _promise("y", "b", "o0")]),
            _task_node("b", "link", [_promise("y", "a", "o0")]),
        ],
        inputs={"x": INTEGER},
    )
    assert _errors(template, CHAIN, LINK) == (
        "Code: CycleDetected, Node Id: start-node, Description: A cycle has been detected while traversing the "
        "Workflow [start-node>a>b>a]."
    )


def test_a_cycle_nothing_starts_is_reported_as_unreachable_nodes() -> None:
    template = _workflow(
        [
            _task_node("a", "link", [_promise("y", "b", "o0")]),
            _task_node("b", "link", [_promise("y", "a", "o0")]),
        ]
    )
    assert _errors(template, LINK) == (
        "Code: UnreachableNodes, Node Id: start-node, Description: The Workflow contain unreachable nodes [a,b]."
    )


# -- workflow_compiler_test.go -----------------------------------------------------------------------------------


def test_no_nodes_found_names_the_workflow() -> None:
    template = _workflow([], inputs={"x": INTEGER}, outputs={"x": INTEGER})
    assert _errors(template) == (
        'Code: NoNodesFound, Node Id: resource_type:WORKFLOW name:"repo", Description: Can\'t find any nodes in '
        'workflow [resource_type:WORKFLOW name:"repo"].'
    )


def test_explicit_upstream_ids_become_edges_both_ways() -> None:
    task = _task("task_123", {"x": INTEGER, "y": INTEGER}, {"x": INTEGER})
    template = _workflow(
        [
            _task_node("node_123", "task_123", [_integer("x", 123), _integer("y", 123)]),
            _task_node("node_456", "task_123", [_integer("y", 123), _promise("x", "node_123", "x")]),
        ],
        inputs={"x": INTEGER},
        outputs={"x": INTEGER},
        output_bindings=[_promise("x", "node_456", "x")],
    )
    template.nodes[1].upstream_node_ids.append("node_123")
    closure = compile_workflow(template, tasks=[task])
    assert list(closure.primary.connections.upstream["node_456"].ids) == ["node_123"]
    assert list(closure.primary.connections.upstream["node_123"].ids) == ["start-node"]


def test_the_failure_node_needs_its_task_and_keeps_its_id() -> None:
    task = _task("task_123", {}, {})
    cleanup = _task("cleanup", {}, {})
    template = _workflow([_task_node("FirstNode", "task_123")])
    template.failure_node.CopyFrom(_task_node("FailureNode", "cleanup"))
    assert [t.name for t in requirements(template).task_ids] == ["cleanup", "task_123"]
    closure = compile_workflow(template, tasks=[task, cleanup])
    assert closure.primary.template.failure_node.id == "FailureNode"
    # It reads nothing, so it waits on nothing (flytekit's failure nodes read the workflow's inputs).
    assert "FailureNode" not in closure.primary.connections.upstream
    assert [t.template.id.name for t in closure.tasks] == ["cleanup", "task_123"]


def test_a_template_missing_is_a_value_required_of_the_root() -> None:
    with pytest.raises(CompileErrors) as caught:
        compile_workflow(None)
    assert str(caught.value) == "Code: ValueRequired, Node Id: root, Description: Value required [wf]."


def test_a_task_without_an_id_is_refused() -> None:
    template = _workflow([_task_node("n0", "one", [_integer("a", 1)])])
    with pytest.raises(CompileErrors) as caught:
        compile_workflow(template, tasks=[tasks_pb2.TaskTemplate()])
    assert (
        str(caught.value) == "Code: ValueRequired, Node Id: task, Description: Value required [Template.Id]."
    )


def test_two_sub_workflows_with_one_id_are_a_duplicate_id() -> None:
    sub = _workflow([_task_node("n0", "one", [_integer("a", 1)])])
    with pytest.raises(CompileErrors) as caught:
        compile_workflow(_workflow([_task_node("n0", "one", [_integer("a", 1)])]), sub_workflows=[sub, sub])
    assert str(caught.value) == (
        'Code: DuplicateId, Node Id: resource_type:WORKFLOW name:"repo", Description: Trying to insert two nodes '
        "with the same id."
    )


# -- nodes (validators/node_test.go, vars.go) -------------------------------------------------------------------


def test_upstream_ids_are_sorted_and_a_repeated_node_id_is_ignored() -> None:
    first = _task_node("n1", "one", [_integer("a", 1)])
    second = _task_node("n2", "one", [_integer("a", 2)])
    second.upstream_node_ids.extend(["n1", "n0"])
    again = _task_node("n1", "one", [_integer("a", 3)])
    closure = compile_workflow(
        _workflow([_task_node("n0", "one", [_integer("a", 0)]), first, second, again]), tasks=[ONE]
    )
    nodes = closure.primary.template.nodes
    assert [n.id for n in nodes] == ["start-node", "end-node", "n0", "n1", "n2"]
    assert list(nodes[4].upstream_node_ids) == ["n0", "n1"]
    assert nodes[3].inputs[0].binding.scalar.primitive.integer == 1


def test_a_binding_to_an_unknown_input_and_a_repeated_one() -> None:
    template = _workflow([_task_node("n1", "one", [_integer("a", 1), _integer("a", 2), _integer("x", 3)])])
    assert _errors(template, ONE) == (
        "Collected Errors: 2\n"
        "\tError 0: Code: ParameterBoundMoreThanOnce, Node Id: n1, Description: Input [a] is bound more than once.\n"
        "\tError 1: Code: VariableNameNotFound, Node Id: n1, Description: Variable [x] not found on node [n1]."
    )


def test_a_promise_on_a_missing_node_names_that_node_and_leaves_the_input_unbound() -> None:
    template = _workflow([_task_node("n1", "one", [_promise("a", "nX", "o0")])])
    assert _errors(template, ONE) == (
        "Collected Errors: 2\n"
        "\tError 0: Code: NodeReferenceNotFound, Node Id: nX, Description: Referenced node [nX] not found.\n"
        "\tError 1: Code: ParameterNotBound, Node Id: n1, Description: Parameter not bound [a]."
    )


def test_a_promise_variable_that_does_not_parse_is_a_syntax_error() -> None:
    template = _workflow(
        [_task_node("n0", "one", [_integer("a", 1)]), _task_node("n1", "one", [_promise("a", "n0", "o0.x")])]
    )
    assert _errors(template, ONE) == (
        "Code: SyntaxError, Node Id: n1, Description: Failed to parse element [o0.x]."
    )


def test_an_indexed_promise_needs_a_list() -> None:
    template = _workflow(
        [
            _task_node("n0", "one", [_integer("a", 1)]),
            _task_node("n1", "one", [_promise("a", "n0", "[0].o0")], name="consumer"),
        ]
    )
    assert _errors(template, ONE) == (
        "Code: MismatchingTypes, Node Id: n1, Description: The output variable '[0].o0' has type [simple:INTEGER], "
        "but "
        "it's assigned to the input variable 'consumer.a' which has type type [simple:INTEGER]."
    )


def test_an_output_aliased_twice_is_a_duplicate_alias() -> None:
    node = _task_node("n0", "one", [_integer("a", 1)])
    node.output_aliases.add(var="o0", alias="first")
    node.output_aliases.add(var="o0", alias="second")
    unknown = _task_node("n1", "one", [_integer("a", 1)])
    unknown.output_aliases.add(var="nope", alias="third")
    assert _errors(_workflow([node, unknown]), ONE) == (
        "Collected Errors: 2\n"
        "\tError 0: Code: DuplicateAlias, Node Id: n0, Description: Duplicate alias [second] found. An output alias "
        "can only be used once in the Workflow.\n"
        "\tError 1: Code: ParameterNotBound, Node Id: n1, Description: Parameter not bound [third]."
    )


def test_an_end_node_output_left_unbound() -> None:
    template = _workflow([_task_node("n0", "one", [_integer("a", 1)])], outputs={"o0": INTEGER})
    assert (
        _errors(template, ONE)
        == "Code: ParameterNotBound, Node Id: end-node, Description: Parameter not bound [o0]."
    )


def test_an_optional_input_may_be_left_unbound() -> None:
    optional = types_pb2.LiteralType(
        union_type=types_pb2.UnionType(variants=[INTEGER, types_pb2.LiteralType(simple=S.NONE)])
    )
    task = _task("maybe", {"a": INTEGER, "b": optional}, {"o0": INTEGER})
    compile_workflow(_workflow([_task_node("n0", "maybe", [_integer("a", 1)])]), tasks=[task])


# -- bindings (validators/bindings_test.go) ---------------------------------------------------------------------


COLOURS = types_pb2.LiteralType(enum_type=types_pb2.EnumType(values=["red", "blue"]))


def test_an_enum_input_takes_one_of_its_values() -> None:
    task = _task("paint", {"colour": COLOURS}, {})
    compile_workflow(_workflow([_task_node("n0", "paint", [_string("colour", "red")])]), tasks=[task])
    assert _errors(_workflow([_task_node("n0", "paint", [_string("colour", "green")])]), task) == (
        "Code: IllegalEnumValue, Node Id: n0, Description: Input [colour] on node [n0] is an Enum and expects "
        "value to be one of [[red blue]].  Received [green]"
    )


def test_a_scalar_of_the_wrong_type() -> None:
    assert _errors(_workflow([_task_node("n0", "one", [_string("a", "x")])]), ONE) == (
        "Code: MismatchingTypes, Node Id: n0, Description: Variable [a] (type [simple:STRING]) doesn't match "
        "expected type [simple:INTEGER]."
    )


def _list_binding(var: str, *values: int) -> literals_pb2.Binding:
    binding = literals_pb2.Binding(var=var)
    binding.binding.collection.SetInParent()
    for value in values:
        binding.binding.collection.bindings.add().scalar.primitive.integer = value
    return binding


def test_a_list_bound_to_a_scalar_input_is_mismatching_bindings() -> None:
    assert _errors(_workflow([_task_node("n0", "one", [_list_binding("a", 5)])]), ONE) == (
        "Code: MismatchingBindings, Node Id: n0, Description: Input [a] on node [n0] expects bindings of type "
        "[simple:INTEGER].  Received [bindings:{scalar:{primitive:{integer:5}}}]"
    )


def _tagged_list(tag: str, element: types_pb2.LiteralType) -> types_pb2.LiteralType:
    return types_pb2.LiteralType(collection_type=element, structure=types_pb2.TypeStructure(tag=tag))


def test_a_list_matching_two_union_variants_is_ambiguous() -> None:
    union = types_pb2.LiteralType(
        union_type=types_pb2.UnionType(
            variants=[_tagged_list("list1", INTEGER), _tagged_list("list2", INTEGER)]
        )
    )
    task = _task("lists", {"x": union}, {})
    assert _errors(_workflow([_task_node("node1", "lists", [_list_binding("x", 5)])]), task) == (
        "Code: AmbiguousBindingUnionValue, Node Id: node1, Description: Input [x] on node [node1] expects bindings "
        'of union type [union_type:{variants:{collection_type:{simple:INTEGER} structure:{tag:"list1"}} '
        'variants:{collection_type:{simple:INTEGER} structure:{tag:"list2"}}}].  Received '
        "[collection:{bindings:{scalar:{primitive:{integer:5}}}}] which is ambiguous as both variants "
        '[collection_type:{simple:INTEGER} structure:{tag:"list1"}] and [collection_type:{simple:INTEGER} '
        'structure:{tag:"list2"}] match.'
    )


def test_a_list_matching_no_union_variant_is_incompatible() -> None:
    union = types_pb2.LiteralType(
        union_type=types_pb2.UnionType(variants=[_tagged_list("strings", STRING), STRING])
    )
    task = _task("lists", {"x": union}, {})
    assert _errors(_workflow([_task_node("node1", "lists", [_list_binding("x", 5)])]), task) == (
        "Code: IncompatibleBindingUnionValue, Node Id: node1, Description: Input [x] on node [node1] expects "
        'bindings of union type [union_type:{variants:{collection_type:{simple:STRING} structure:{tag:"strings"}} '
        "variants:{simple:STRING}}].  Received [collection:{bindings:{scalar:{primitive:{integer:5}}}}] which does "
        "not match any of the variants."
    )


def test_a_list_of_integers_binds_to_a_list_of_unions() -> None:
    union = types_pb2.LiteralType(union_type=types_pb2.UnionType(variants=[INTEGER, STRING]))
    task = _task("lists", {"x": types_pb2.LiteralType(collection_type=union)}, {})
    compile_workflow(_workflow([_task_node("n0", "lists", [_list_binding("x", 5, 6)])]), tasks=[task])


def test_a_blob_without_metadata_is_an_unrecognized_value() -> None:
    blob = types_pb2.LiteralType(blob=types_pb2.BlobType(format="csv"))
    task = _task("files", {"f": blob}, {})
    binding = literals_pb2.Binding(var="f")
    binding.binding.scalar.blob.uri = "s3://bucket/key"
    assert _errors(_workflow([_task_node("n0", "files", [binding])]), task) == (
        "Code: UnrecognizedValue, Node Id: n0, Description: Unrecognized value [*core.Scalar_Blob]."
    )


# -- branches and gates (validators/branch_test.go, condition.go, interface_test.go) ---------------------------


def _comparison(
    left: condition_pb2.Operand | None, right: condition_pb2.Operand | None
) -> condition_pb2.BooleanExpression:
    expression = condition_pb2.BooleanExpression()
    expression.comparison.operator = condition_pb2.ComparisonExpression.GT
    if left is not None:
        expression.comparison.left_value.CopyFrom(left)
    if right is not None:
        expression.comparison.right_value.CopyFrom(right)
    return expression


def _var(name: str) -> condition_pb2.Operand:
    return condition_pb2.Operand(var=name)


def _int(value: int) -> condition_pb2.Operand:
    return condition_pb2.Operand(primitive=literals_pb2.Primitive(integer=value))


def _branch(
    node_id: str,
    condition: condition_pb2.BooleanExpression | None,
    then: workflow_pb2.Node,
    *,
    otherwise: workflow_pb2.Node | None = None,
    error: str | None = None,
    inputs: Iterable[literals_pb2.Binding] = (),
) -> workflow_pb2.Node:
    node = workflow_pb2.Node(id=node_id, inputs=list(inputs))
    if_else = node.branch_node.if_else
    if condition is not None:
        if_else.case.condition.CopyFrom(condition)
    if_else.case.then_node.CopyFrom(then)
    if otherwise is not None:
        if_else.else_node.CopyFrom(otherwise)
    if error is not None:
        if_else.error.message = error
    return node


def test_a_branch_without_else_or_error_has_no_default() -> None:
    branch = _branch(
        "n0",
        _comparison(_var("x"), _int(3)),
        _task_node("n0", "one", [_integer("a", 1)]),
        inputs=[_promise("x", "", "x")],
    )
    assert _errors(_workflow([branch], inputs={"x": INTEGER}), ONE) == (
        "Code: BranchNodeHasNoDefault, Node Id: n0, Description: Branch Node must have either the else case set "
        "or a default error."
    )


def test_a_branch_condition_on_a_variable_it_does_not_bind() -> None:
    branch = _branch(
        "n0", _comparison(_var("y"), _int(3)), _task_node("n0", "one", [_integer("a", 1)]), error="no"
    )
    assert _errors(_workflow([branch]), ONE) == (
        "Code: VariableNameNotFound, Node Id: n0, Description: Variable [y] not found on node [n0]."
    )


def test_a_branch_comparison_of_two_types_is_mismatching() -> None:
    hello = condition_pb2.Operand(primitive=literals_pb2.Primitive(string_value="hello"))
    branch = _branch(
        "n0", _comparison(_int(123), hello), _task_node("n0", "one", [_integer("a", 1)]), error="no"
    )
    assert _errors(_workflow([branch]), ONE) == (
        "Code: MismatchingTypes, Node Id: n0, Description: Variable [RightValue] (type [simple:STRING]) doesn't "
        "match expected type [simple:INTEGER]."
    )


def test_a_branch_comparison_missing_both_sides() -> None:
    branch = _branch("n0", _comparison(None, None), _task_node("n0", "one", [_integer("a", 1)]), error="no")
    assert _errors(_workflow([branch]), ONE) == (
        "Collected Errors: 2\n"
        "\tError 0: Code: ValueRequired, Node Id: n0, Description: Value required [LeftValue].\n"
        "\tError 1: Code: ValueRequired, Node Id: n0, Description: Value required [RightValue]."
    )


def test_a_conjunction_missing_a_side_has_no_condition() -> None:
    expression = condition_pb2.BooleanExpression()
    expression.conjunction.right_expression.CopyFrom(_comparison(_int(123), _int(345)))
    branch = _branch("n0", expression, _task_node("n0", "one", [_integer("a", 1)]), error="no")
    assert _errors(_workflow([branch]), ONE) == (
        "Code: BranchNodeHasNoCondition, Node Id: n0, Description: One of the branches on the node doesn't have a "
        "condition."
    )


def test_branch_cases_whose_outputs_differ_in_type() -> None:
    words = _task("words", {"a": INTEGER}, {"o0": STRING})
    branch = _branch(
        "n0",
        _comparison(_int(1), _int(2)),
        _task_node("n0", "one", [_integer("a", 1)]),
        otherwise=_task_node("n1", "words", [_integer("a", 1)]),
    )
    assert _errors(_workflow([branch]), ONE, words) == (
        "Code: MismatchingTypes, Node Id: n0-n1, Description: Variable [o0] (type [simple:INTEGER]) doesn't match "
        "expected type [simple:STRING]."
    )


def test_a_branch_exposes_only_the_outputs_every_case_has() -> None:
    two = _task("two", {"a": INTEGER}, {"o0": INTEGER, "o1": INTEGER})
    branch = _branch(
        "n0",
        _comparison(_int(1), _int(2)),
        _task_node("n0", "two", [_integer("a", 1)]),
        otherwise=_task_node("n1", "one", [_integer("a", 1)]),
    )
    consumer = _task_node("n1", "one", [_promise("a", "n0", "o1")])
    assert _errors(_workflow([branch, consumer]), ONE, two) == (
        "Collected Errors: 2\n"
        "\tError 0: Code: ParameterNotBound, Node Id: n1, Description: Parameter not bound [a].\n"
        "\tError 1: Code: VariableNameNotFound, Node Id: n0, Description: Variable [o1] not found on node [n0]."
    )


def test_gate_without_a_condition_and_signal_without_a_type() -> None:
    empty = workflow_pb2.Node(id="n0")
    empty.gate_node.SetInParent()
    signal = workflow_pb2.Node(id="n1")
    signal.gate_node.signal.signal_id = "go"
    assert _errors(_workflow([empty, signal])) == (
        "Collected Errors: 2\n"
        "\tError 0: Code: NoConditionFound, Node Id: n0, Description: Can't find any condition in gate node [n0].\n"
        "\tError 1: Code: ValueRequired, Node Id: n1, Description: Value required [GateNode.Signal.Type]."
    )


def test_a_node_without_a_target() -> None:
    assert _errors(_workflow([workflow_pb2.Node(id="n0")])) == (
        "Code: ValueRequired, Node Id: n0, Description: Value required [Target]."
    )


def test_sub_workflows_nested_beyond_the_stack_are_refused_not_crashing() -> None:
    depth = 2000
    subs = []
    for level in range(depth):
        sub = _workflow([_task_node("n0", "one", [_integer("a", 1)])])
        sub.id.name = f"level{level}"
        if level + 1 < depth:
            call = workflow_pb2.Node(id="n1")
            call.workflow_node.sub_workflow_ref.CopyFrom(
                identifier_pb2.Identifier(resource_type=identifier_pb2.WORKFLOW, name=f"level{level + 1}")
            )
            sub.nodes.append(call)
        subs.append(sub)
    top = workflow_pb2.Node(id="n0")
    top.workflow_node.sub_workflow_ref.CopyFrom(subs[0].id)
    with pytest.raises(CompileErrors) as caught:
        compile_workflow(_workflow([top]), sub_workflows=subs, tasks=[ONE])
    assert str(caught.value) == (
        "Code: WorkflowBuildError, Node Id: , Description: The workflow nests sub-workflows too deeply to be compiled."
    )


def test_a_launch_plan_node_naming_the_workflow_itself_uses_the_workflows_interface() -> None:
    from taskplug.compiler import LaunchPlanInterface

    template = _workflow([_task_node("n0", "one", [_integer("a", 1)])], inputs={"x": INTEGER})
    call = workflow_pb2.Node(id="n1", inputs=[_integer("x", 2)])
    call.workflow_node.launchplan_ref.CopyFrom(template.id)
    template.nodes.append(call)
    # The launch plan given says it takes nothing: the workflow's own interface (x) is used instead.
    plan = LaunchPlanInterface(template.id, interface_pb2.ParameterMap(), interface_pb2.VariableMap())
    closure = compile_workflow(template, tasks=[ONE], launch_plans=[plan])
    assert [n.id for n in closure.primary.template.nodes] == ["start-node", "end-node", "n0", "n1"]
    other = workflow_pb2.Node(id="n1", inputs=[_integer("x", 2)])
    other.workflow_node.launchplan_ref.name = "elsewhere"
    plan = LaunchPlanInterface(other.workflow_node.launchplan_ref, interface_pb2.ParameterMap(), None)
    with pytest.raises(CompileErrors) as caught:
        compile_workflow(_workflow([other]), launch_plans=[plan])
    # A node whose interface cannot be made has its bindings left unchecked: one error only.
    assert str(caught.value) == (
        "Code: ValueRequired, Node Id: n1, Description: Value required [WorkflowNode.ExpectedOutputs]."
    )
