"""A launch plan's inputs as flyteadmin computes them: the inputs it expects (fixed ones are not inputs, its
defaults fill what is left out) and an execution's inputs, every refusal with Admin's message and the input
named. The launch plans are flytekit's, serialized by pyflyte (``sub_lp = LaunchPlan.get_or_create(sub,
fixed_inputs={"a": 1})`` over ``sub(a: int, b: int = 5)``)."""

from __future__ import annotations

from typing import Any

import pytest
from flyteidl.admin import launch_plan_pb2
from flyteidl.core import interface_pb2, literals_pb2, types_pb2

from support.flytekit_workflows import Serialized
from taskplug.compiler import (
    WorkflowBundle,
    execution_inputs,
    expected_inputs,
    launch_inputs,
    read_bundle,
    workflow_inputs_from_plain,
)
from taskplug.compiler._launch_plans import _literal_type_of
from taskplug.core import SpecError, literal_map_to_plain

INT = types_pb2.LiteralType(simple=types_pb2.INTEGER)
STR = types_pb2.LiteralType(simple=types_pb2.STRING)


def _int(value: int) -> literals_pb2.Literal:
    return literals_pb2.Literal(scalar=literals_pb2.Scalar(primitive=literals_pb2.Primitive(integer=value)))


def _str(value: str) -> literals_pb2.Literal:
    return literals_pb2.Literal(
        scalar=literals_pb2.Scalar(primitive=literals_pb2.Primitive(string_value=value))
    )


def _given(**values: literals_pb2.Literal) -> literals_pb2.LiteralMap:
    return literals_pb2.LiteralMap(literals=values)


@pytest.fixture
def fixed_lp(demo: Serialized) -> WorkflowBundle:
    return read_bundle(demo.folder, workflow=None, launch_plan="sub_lp")


def test_a_fixed_input_is_not_expected_and_a_default_is(fixed_lp: WorkflowBundle) -> None:
    expected = expected_inputs(fixed_lp.launch_plan, fixed_lp.workflow.interface)
    assert set(expected.parameters) == {"b"}
    assert expected.parameters["b"].default.scalar.primitive.integer == 5
    assert not expected.parameters["b"].required


def test_the_default_launch_plan_expects_every_input_with_the_python_defaults(demo: Serialized) -> None:
    bundle = read_bundle(demo.folder, workflow="loader_demo.sub")
    expected = expected_inputs(bundle.launch_plan, bundle.workflow.interface)
    assert expected.parameters["a"].required
    assert expected.parameters["a"].var.type == INT
    assert expected.parameters["b"].default.scalar.primitive.integer == 5


@pytest.mark.parametrize(
    ("given", "merged"),
    [({}, {"a": 1, "b": 5}), ({"b": 3}, {"a": 1, "b": 3})],
)
def test_an_execution_gets_the_fixed_inputs_and_the_defaults_of_what_is_left_out(
    fixed_lp: WorkflowBundle, given: dict[str, int], merged: dict[str, int]
) -> None:
    assert literal_map_to_plain(launch_inputs(fixed_lp, given)) == merged


@pytest.mark.parametrize(
    ("workflow", "launch_plan", "given", "name", "message"),
    [
        # Admin checks a given input against the expected ones first: a fixed one is not expected.
        (None, "sub_lp", {"a": 2}, "a", "invalid input a"),
        (None, "sub_lp", {"c": 2}, "c", "invalid input c"),
        ("loader_demo.sub", None, {"b": 2}, "a", "expected_inputs a missing"),
        (
            "loader_demo.sub",
            None,
            {"a": 1, "b": "x"},
            "b",
            "invalid b input wrong type. Expected simple:INTEGER",
        ),
    ],
)
def test_an_execution_input_admin_refuses_is_named_with_admins_message(
    demo: Serialized,
    workflow: str | None,
    launch_plan: str | None,
    given: dict[str, Any],
    name: str,
    message: str,
) -> None:
    bundle = read_bundle(demo.folder, workflow=workflow, launch_plan=launch_plan)
    expected = expected_inputs(bundle.launch_plan, bundle.workflow.interface)
    literals = _given(**{k: _int(v) if isinstance(v, int) else _str(v) for k, v in given.items()})
    with pytest.raises(SpecError) as err:
        execution_inputs(bundle.launch_plan, expected, literals)
    assert err.value.path == f"inputs.{name}"
    assert err.value.reason.startswith(message)


def test_a_wrong_type_names_both_types_as_go_prints_them(demo: Serialized) -> None:
    bundle = read_bundle(demo.folder, workflow="loader_demo.sub")
    expected = expected_inputs(bundle.launch_plan, bundle.workflow.interface)
    with pytest.raises(SpecError) as err:
        execution_inputs(bundle.launch_plan, expected, _given(a=_str("one")))
    assert err.value.reason == "invalid a input wrong type. Expected simple:INTEGER, but got simple:STRING"


def test_plain_values_are_typed_by_the_workflow_and_an_unknown_name_is_admins_invalid_input(
    demo: Serialized,
) -> None:
    bundle = read_bundle(demo.folder, workflow=None)
    typed = workflow_inputs_from_plain({"x": 4}, bundle.workflow.interface)
    assert typed.literals["x"] == _int(4)
    with pytest.raises(SpecError) as err:
        workflow_inputs_from_plain({"z": 1}, bundle.workflow.interface)
    assert (err.value.path, err.value.reason) == ("inputs.z", "invalid input z")
    assert literal_map_to_plain(launch_inputs(bundle, {"x": 4})) == {"x": 4, "y": 3}


def _plan(
    defaults: dict[str, interface_pb2.Parameter] | None = None,
    fixed: dict[str, literals_pb2.Literal] | None = None,
) -> launch_plan_pb2.LaunchPlan:
    plan = launch_plan_pb2.LaunchPlan()
    for name, parameter in (defaults or {}).items():
        plan.spec.default_inputs.parameters[name].CopyFrom(parameter)
    for name, literal in (fixed or {}).items():
        plan.spec.fixed_inputs.literals[name].CopyFrom(literal)
    return plan


def _interface(**types: types_pb2.LiteralType) -> interface_pb2.TypedInterface:
    interface = interface_pb2.TypedInterface()
    for name, literal_type in types.items():
        interface.inputs.variables[name].CopyFrom(interface_pb2.Variable(type=literal_type, description=name))
    return interface


def _default(literal_type: types_pb2.LiteralType, value: literals_pb2.Literal) -> interface_pb2.Parameter:
    return interface_pb2.Parameter(var=interface_pb2.Variable(type=literal_type), default=value)


@pytest.mark.parametrize(
    ("plan", "interface", "path", "message"),
    [
        (
            _plan({"z": _default(INT, _int(1))}),
            _interface(a=INT),
            "launchPlan.defaultInputs.z",
            "unexpected default_input z",
        ),
        (
            _plan(fixed={"z": _int(1)}),
            _interface(a=INT),
            "launchPlan.fixedInputs.z",
            "unexpected fixed_input z",
        ),
        (
            _plan({"a": _default(STR, _str("x"))}),
            _interface(a=INT),
            "launchPlan.defaultInputs.a",
            "invalid default_input wrong type a, expected simple:STRING, got simple:INTEGER instead",
        ),
        (
            _plan(fixed={"a": _str("x")}),
            _interface(a=INT),
            "launchPlan.fixedInputs.a",
            "invalid fixed_input wrong type a, expected simple:INTEGER, got simple:STRING instead",
        ),
        (
            _plan({"a": _default(INT, _int(1)), "b": _default(INT, _int(2))}),
            _interface(),
            "launchPlan.defaultInputs",
            "invalid launch plan default inputs, expected none but found 2",
        ),
        (
            _plan(fixed={"a": _int(1)}),
            _interface(),
            "launchPlan.fixedInputs",
            "invalid launch plan fixed inputs, expected none but found 1",
        ),
    ],
)
def test_a_launch_plan_admin_would_not_register_is_refused_with_its_message(
    plan: launch_plan_pb2.LaunchPlan, interface: interface_pb2.TypedInterface, path: str, message: str
) -> None:
    with pytest.raises(SpecError) as err:
        expected_inputs(plan, interface)
    assert (err.value.path, err.value.reason) == (path, message)


def test_an_input_both_defaulted_and_fixed_cannot_be_overridden_even_when_left_out() -> None:
    # Admin keeps the default as expected, fills it in when left out, then meets the fixed value.
    plan = _plan({"a": _default(INT, _int(1))}, fixed={"a": _int(2)})
    expected = expected_inputs(plan, _interface(a=INT))
    assert set(expected.parameters) == {"a"}
    for given in (_given(), _given(a=_int(3))):
        with pytest.raises(SpecError) as err:
            execution_inputs(plan, expected, given)
        assert (err.value.path, err.value.reason) == ("inputs.a", "fixed_inputs a cannot be overridden")


def test_a_parameter_neither_required_nor_defaulted_is_refused_when_left_out() -> None:
    plan = _plan({"a": interface_pb2.Parameter(var=interface_pb2.Variable(type=INT))})
    expected = expected_inputs(plan, _interface(a=INT))
    with pytest.raises(SpecError) as err:
        execution_inputs(plan, expected, _given())
    assert err.value.reason.startswith("expected_inputs a missing")


def test_the_type_of_a_literal_is_inferred_as_admin_does() -> None:
    mixed = literals_pb2.Literal(
        collection=literals_pb2.LiteralCollection(literals=[_int(1), _str("x"), _int(2)])
    )
    assert _literal_type_of(mixed) == types_pb2.LiteralType(
        collection_type=types_pb2.LiteralType(union_type=types_pb2.UnionType(variants=[INT, STR]))
    )
    empty = literals_pb2.Literal(collection=literals_pb2.LiteralCollection())
    assert _literal_type_of(empty).collection_type.simple == types_pb2.NONE
    one_kind = literals_pb2.Literal(map=literals_pb2.LiteralMap(literals={"k": _int(1), "j": _int(2)}))
    assert _literal_type_of(one_kind) == types_pb2.LiteralType(map_value_type=INT)


@pytest.mark.parametrize(
    ("literal", "declared", "fits"),
    [
        (
            literals_pb2.Literal(collection=literals_pb2.LiteralCollection()),
            types_pb2.LiteralType(collection_type=INT),
            True,
        ),
        (
            literals_pb2.Literal(collection=literals_pb2.LiteralCollection(literals=[_int(1)])),
            types_pb2.LiteralType(collection_type=STR),
            False,
        ),
        (_int(1), types_pb2.LiteralType(union_type=types_pb2.UnionType(variants=[STR, INT])), True),
        (_str("red"), types_pb2.LiteralType(enum_type=types_pb2.EnumType(values=["red", "blue"])), True),
        (
            literals_pb2.Literal(scalar=literals_pb2.Scalar(none_type=literals_pb2.Void())),
            INT,
            False,
        ),
    ],
)
def test_a_given_input_must_fit_its_declared_type(
    literal: literals_pb2.Literal, declared: types_pb2.LiteralType, fits: bool
) -> None:
    plan = _plan()
    expected = expected_inputs(plan, _interface(v=declared))
    if fits:
        assert execution_inputs(plan, expected, _given(v=literal)).literals["v"] == literal
    else:
        with pytest.raises(SpecError, match="invalid v input wrong type"):
            execution_inputs(plan, expected, _given(v=literal))
