"""Branch decisions (propeller nodes/branch: comparator_test.go, evaluator_test.go, handler.go's error mapping),
the rule book's vectors and a real flytekit ``conditional``."""

from __future__ import annotations

import datetime
import itertools
from collections import OrderedDict

import pytest
from flyteidl.core import condition_pb2, literals_pb2, types_pb2, workflow_pb2
from google.protobuf import duration_pb2, timestamp_pb2
from hypothesis import given
from hypothesis import strategies as st

from taskplug.core import ErrorKind
from taskplug.executor.nodes._branch_rules import (
    BranchError,
    branch_children_not_taken,
    compare,
    evaluate_boolean_expression,
    evaluate_branch,
    evaluate_comparison,
)

Op = condition_pb2.ComparisonExpression
And = condition_pb2.ConjunctionExpression.AND
Or = condition_pb2.ConjunctionExpression.OR
Primitive = literals_pb2.Primitive


def prim(value: object) -> Primitive:
    """coreutils.MustMakePrimitive."""
    if isinstance(value, bool):
        return Primitive(boolean=value)
    if isinstance(value, int):
        return Primitive(integer=value)
    if isinstance(value, float):
        return Primitive(float_value=value)
    if isinstance(value, str):
        return Primitive(string_value=value)
    if isinstance(value, datetime.datetime):
        ts = timestamp_pb2.Timestamp()
        ts.FromDatetime(value)
        return Primitive(datetime=ts)
    if isinstance(value, datetime.timedelta):
        d = duration_pb2.Duration()
        d.FromTimedelta(value)
        return Primitive(duration=d)
    raise TypeError(value)


def lit(value: object) -> literals_pb2.Literal:
    return literals_pb2.Literal(scalar=literals_pb2.Scalar(primitive=prim(value)))


def var(name: str) -> condition_pb2.Operand:
    return condition_pb2.Operand(var=name)


def const(value: object) -> condition_pb2.Operand:
    return condition_pb2.Operand(primitive=prim(value))


def comparison(left: condition_pb2.Operand, op: int, right: condition_pb2.Operand) -> Op:
    return Op(left_value=left, operator=op, right_value=right)


def literal_comparison(lv: object, op: int, rv: object) -> tuple[Op, literals_pb2.LiteralMap]:
    """evaluator_test.go getComparisonExpression: x <op> y with both in the inputs."""
    return comparison(var("x"), op, var("y")), literals_pb2.LiteralMap(literals={"x": lit(lv), "y": lit(rv)})


def cond(expression: Op | condition_pb2.ConjunctionExpression) -> condition_pb2.BooleanExpression:
    if isinstance(expression, Op):
        return condition_pb2.BooleanExpression(comparison=expression)
    return condition_pb2.BooleanExpression(conjunction=expression)


def conj(left: Op, op: int, right: Op) -> condition_pb2.BooleanExpression:
    return cond(
        condition_pb2.ConjunctionExpression(
            left_expression=cond(left), operator=op, right_expression=cond(right)
        )
    )


# -- comparator_test.go: every operator over every ordered type -----------------------------------------------

ORDERED_PAIRS = [
    (1, 2),
    (1.0, 2.0),
    ("a", "b"),
    (
        datetime.datetime(2018, 7, 4, 12, 0, 0, tzinfo=datetime.UTC),
        datetime.datetime(2018, 7, 4, 12, 0, 1, tzinfo=datetime.UTC),
    ),
    (datetime.timedelta(seconds=10), datetime.timedelta(seconds=11)),
]


@pytest.mark.parametrize(("small", "large"), ORDERED_PAIRS)
def test_every_operator_over_ordered_types(small: object, large: object) -> None:
    p1, p2 = prim(small), prim(large)
    table = [
        (p1, p2, Op.GT, False),
        (p2, p1, Op.GT, True),
        (p1, p2, Op.GTE, False),
        (p2, p1, Op.GTE, True),
        (p1, p2, Op.LT, True),
        (p2, p1, Op.LT, False),
        (p1, p2, Op.LTE, True),
        (p2, p1, Op.LTE, False),
        (p1, p2, Op.NEQ, True),
        (p2, p1, Op.EQ, False),
        (p1, p1, Op.EQ, True),
        (p1, p1, Op.NEQ, False),
        (p1, p1, Op.LTE, True),
        (p1, p1, Op.LT, False),
        (p1, p1, Op.GTE, True),
        (p1, p1, Op.GT, False),
    ]
    for left, right, op, expected in table:
        assert compare(left, right, op) is expected, (left, op, right)


@pytest.mark.parametrize(("op", "name"), [(Op.GT, "GT"), (Op.LT, "LT"), (Op.GTE, "GTE"), (Op.LTE, "LTE")])
def test_booleans_only_compare_for_equality(op: int, name: str) -> None:
    for left, right in itertools.product([True, False], repeat=2):
        with pytest.raises(BranchError) as caught:
            compare(prim(left), prim(right), op)
        assert (caught.value.kind, caught.value.code) == (ErrorKind.USER, "MalformedBranchUserError")
        assert (
            caught.value.message == f"[MalformedBranchUserError] [{name}] not defined for boolean operands."
        )
    assert compare(prim(True), prim(False), Op.NEQ) is True
    assert compare(prim(False), prim(True), Op.EQ) is False
    assert compare(prim(True), prim(True), Op.EQ) is True
    assert compare(prim(True), prim(True), Op.NEQ) is False


def test_five_is_greater_than_three() -> None:
    assert compare(prim(5), prim(3), Op.GT) is True


def test_an_int_is_never_compared_with_a_float() -> None:
    with pytest.raises(BranchError) as caught:
        compare(prim(1), prim(1.0), Op.EQ)
    assert caught.value.error.kind == ErrorKind.USER
    assert caught.value.message == (
        "[MalformedBranchUserError] Comparison between different primitives types. "
        "lVal[*core.Primitive_Integer]:rVal[*core.Primitive_FloatValue]"
    )


def test_datetimes_and_durations_compare_whole_seconds() -> None:
    base = datetime.datetime(2024, 1, 1, 10, 0, 0, tzinfo=datetime.UTC)
    early, late = base.replace(microsecond=100000), base.replace(microsecond=900000)
    assert compare(prim(early), prim(late), Op.EQ) is True
    assert compare(prim(late), prim(early), Op.GT) is False
    half, most = datetime.timedelta(milliseconds=100), datetime.timedelta(milliseconds=900)
    assert compare(prim(half), prim(most), Op.EQ) is True


def test_strings_compare_bytewise() -> None:
    assert compare(prim("Z"), prim("a"), Op.LT) is True
    assert compare(prim("é"), prim("z"), Op.GT) is True


def test_an_empty_primitive_is_a_system_error() -> None:
    with pytest.raises(BranchError) as caught:
        compare(Primitive(), Primitive(), Op.EQ)
    assert (caught.value.kind, caught.value.code) == (ErrorKind.SYSTEM, "IllegalStateError")
    assert (
        caught.value.message == "Branch evaluation failed. Error [comparator not defined for type: [<nil>]]"
    )
    with pytest.raises(BranchError, match=r"lVal\[<nil>\]:rVal\[\*core.Primitive_Integer\]"):
        compare(Primitive(), prim(1), Op.EQ)


def test_an_unknown_operator_is_malformed() -> None:
    with pytest.raises(BranchError, match=r"Unsupported operator type in Propeller\. System error\."):
        compare(prim(1), prim(1), 99)


# -- evaluator_test.go TestEvaluateComparison ---------------------------------------------------------------


def test_primitives_and_literals_compare_in_every_combination() -> None:
    assert evaluate_comparison(comparison(const(1), Op.GT, const(2)), None) is False
    inputs = literals_pb2.LiteralMap(literals={"x": lit(1), "y": lit(2)})
    assert evaluate_comparison(comparison(const(1), Op.GT, var("y")), inputs) is False
    assert evaluate_comparison(comparison(var("x"), Op.GT, const(2)), inputs) is False
    assert evaluate_comparison(*literal_comparison(1, Op.EQ, 1)) is True
    assert evaluate_comparison(*literal_comparison(1, Op.NEQ, 1)) is False


@pytest.mark.parametrize(
    ("expression", "inputs", "message"),
    [
        (
            comparison(const(1), Op.GT, var("y")),
            literals_pb2.LiteralMap(),
            "Failed to find Value for Variable [y]",
        ),
        # With no inputs at all Flyte names the left operand's variable (empty here).
        (comparison(const(1), Op.GT, var("y")), None, "Failed to find Value for Variable []"),
        (
            comparison(var("y"), Op.GT, const(1)),
            literals_pb2.LiteralMap(),
            "Failed to find Value for Variable [y]",
        ),
        (comparison(var("y"), Op.GT, const(1)), None, "Failed to find Value for Variable [y]"),
        (comparison(var("y"), Op.GT, var("z")), None, "Failed to find Value for Variable [y]"),
    ],
)
def test_a_missing_variable_is_malformed(
    expression: Op, inputs: literals_pb2.LiteralMap | None, message: str
) -> None:
    with pytest.raises(BranchError) as caught:
        evaluate_comparison(expression, inputs)
    assert caught.value.message == f"[MalformedBranchUserError] {message}"


def test_only_primitive_values_compare() -> None:
    blob = literals_pb2.Literal(collection=literals_pb2.LiteralCollection(literals=[lit(1)]))
    inputs = literals_pb2.LiteralMap(literals={"c": blob, "x": lit(1)})
    cases = [
        (
            comparison(var("c"), Op.EQ, var("x")),
            "Only primitives can be compared. LHS Variable is non primitive.",
        ),
        (
            comparison(var("x"), Op.EQ, var("c")),
            "Only primitives can be compared. RHS Variable is non primitive",
        ),
        (
            comparison(var("c"), Op.EQ, const(1)),
            "Only primitives can be compared. LHS Variable is non primitive.",
        ),
        (
            comparison(const(1), Op.EQ, var("c")),
            "Only primitives can be compared. RHS Variable is non primitive.",
        ),
    ]
    for expression, message in cases:
        with pytest.raises(BranchError) as caught:
            evaluate_comparison(expression, inputs)
        assert caught.value.message == f"[MalformedBranchUserError] {message}"


# -- TestEvaluateBooleanExpression ---------------------------------------------------------------------------


def test_conjunctions() -> None:
    eq, inputs = literal_comparison(1, Op.EQ, 1)
    neq, _ = literal_comparison(1, Op.NEQ, 1)
    assert evaluate_boolean_expression(cond(eq), inputs) is True
    assert evaluate_boolean_expression(conj(eq, And, neq), inputs) is False
    assert evaluate_boolean_expression(conj(eq, Or, neq), inputs) is True
    outer = comparison(var("a"), Op.GT, var("b"))
    nested = cond(
        condition_pb2.ConjunctionExpression(
            left_expression=cond(outer), operator=And, right_expression=conj(eq, Or, neq)
        )
    )
    all_inputs = literals_pb2.LiteralMap(literals={**inputs.literals, "a": lit(5), "b": lit(4)})
    assert evaluate_boolean_expression(nested, all_inputs) is True


def test_both_sides_of_a_conjunction_are_evaluated() -> None:
    true, inputs = literal_comparison(1, Op.EQ, 1)
    broken = comparison(var("missing"), Op.EQ, const(1))
    with pytest.raises(BranchError, match=r"Failed to find Value for Variable \[missing\]"):
        evaluate_boolean_expression(conj(true, Or, broken), inputs)


def test_an_empty_condition_is_malformed() -> None:
    with pytest.raises(BranchError) as caught:
        evaluate_branch(workflow_pb2.IfElseBlock(), None)
    assert caught.value.message == (
        "[MalformedBranchUserError] No Comparison or Conjunction found in Branch node expression."
    )


# -- TestDecideBranch ---------------------------------------------------------------------------------------


def node(node_id: str) -> workflow_pb2.Node:
    return workflow_pb2.Node(id=node_id)


def block(expression: condition_pb2.BooleanExpression, then: str | None) -> workflow_pb2.IfBlock:
    if then is None:
        return workflow_pb2.IfBlock(condition=expression)
    return workflow_pb2.IfBlock(condition=expression, then_node=node(then))


TRUE, INPUTS = literal_comparison(1.0, Op.EQ, 1.0)
FALSE, _ = literal_comparison(1.0, Op.NEQ, 1.0)


def test_a_true_case_without_a_then_node_is_no_case() -> None:
    with pytest.raises(BranchError) as caught:
        evaluate_branch(workflow_pb2.IfElseBlock(case=block(cond(TRUE), None)), INPUTS)
    assert caught.value.error.code == "MalformedBranchUserError"
    assert caught.value.message == "[MalformedBranchUserError] No branch satisfied"


def test_the_first_true_case_wins_and_the_others_are_skipped() -> None:
    if_else = workflow_pb2.IfElseBlock(case=block(cond(TRUE), "n1"), other=[block(cond(TRUE), "n2")])
    assert evaluate_branch(if_else, INPUTS) == "n1"
    assert branch_children_not_taken(if_else, "n1") == ["n2"]


def test_a_later_case_and_the_else_case() -> None:
    second = workflow_pb2.IfElseBlock(case=block(cond(FALSE), "n1"), other=[block(cond(TRUE), "n2")])
    assert evaluate_branch(second, INPUTS) == "n2"
    assert branch_children_not_taken(second, "n2") == ["n1"]
    otherwise = workflow_pb2.IfElseBlock(
        case=block(cond(FALSE), "n1"), other=[block(cond(FALSE), "n2")], else_node=node("n3")
    )
    assert evaluate_branch(otherwise, INPUTS) == "n3"
    assert branch_children_not_taken(otherwise, "n3") == ["n1", "n2"]
    taken_if = workflow_pb2.IfElseBlock(case=block(cond(TRUE), "n1"), else_node=node("n3"))
    assert branch_children_not_taken(taken_if, evaluate_branch(taken_if, INPUTS)) == ["n3"]


def test_cases_after_the_taken_one_are_not_evaluated() -> None:
    broken = cond(comparison(var("missing"), Op.EQ, const(1)))
    if_else = workflow_pb2.IfElseBlock(case=block(cond(TRUE), "n1"), other=[block(broken, "n2")])
    assert evaluate_branch(if_else, INPUTS) == "n1"


def test_a_fail_case_is_the_user_s_error_and_every_case_is_skipped() -> None:
    if_else = workflow_pb2.IfElseBlock(
        case=block(cond(FALSE), "n1"),
        other=[block(cond(FALSE), "n2")],
        error=types_pb2.Error(failed_node_id="n", message="too small"),
    )
    with pytest.raises(BranchError) as caught:
        evaluate_branch(if_else, INPUTS)
    err = caught.value.error
    assert (err.kind, err.code, err.message) == (
        ErrorKind.USER,
        "UserProvidedError",
        "[UserProvidedError] too small",
    )
    assert branch_children_not_taken(if_else, None) == ["n1", "n2"]


# -- a real flytekit conditional ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def flytekit_branch() -> workflow_pb2.IfElseBlock:
    from flytekit import conditional, task, workflow
    from flytekit.configuration import ImageConfig, SerializationSettings
    from flytekit.tools.translator import get_serializable

    @task
    def small(a: int) -> str:
        return "small"

    @task
    def big(a: int) -> str:
        return "big"

    @workflow
    def sized(a: int) -> str:
        return (
            conditional("size")
            .if_((a < 5) & (a > 0))
            .then(small(a=a))
            .elif_(a >= 100)
            .then(big(a=a))
            .else_()
            .fail("too small")
        )

    settings = SerializationSettings(
        image_config=ImageConfig.auto_default_image(), project="p", domain="d", version="v"
    )
    template = get_serializable(OrderedDict(), settings, sized).template.to_flyte_idl()
    (branch,) = [n for n in template.nodes if n.HasField("branch_node")]
    # flytekit binds the branch's inputs as ".a" and its conditions read that name.
    assert [b.var for b in branch.inputs] == [".a"]
    if_else: workflow_pb2.IfElseBlock = branch.branch_node.if_else
    return if_else


@pytest.mark.parametrize(("a", "taken"), [(3, "n0"), (100, "n1"), (250, "n1")])
def test_a_flytekit_conditional_picks_its_case(
    flytekit_branch: workflow_pb2.IfElseBlock, a: int, taken: str
) -> None:
    inputs = literals_pb2.LiteralMap(literals={".a": lit(a)})
    assert evaluate_branch(flytekit_branch, inputs) == taken
    assert branch_children_not_taken(flytekit_branch, taken) == [c for c in ("n0", "n1") if c != taken]


@pytest.mark.parametrize("a", [0, 5, 99, -3])
def test_a_flytekit_conditional_fails_with_its_message(
    flytekit_branch: workflow_pb2.IfElseBlock, a: int
) -> None:
    with pytest.raises(BranchError) as caught:
        evaluate_branch(flytekit_branch, literals_pb2.LiteralMap(literals={".a": lit(a)}))
    assert (caught.value.kind, caught.value.message) == (ErrorKind.USER, "[UserProvidedError] too small")


def test_a_float_input_against_flytekit_s_int_constant_is_malformed(
    flytekit_branch: workflow_pb2.IfElseBlock,
) -> None:
    with pytest.raises(BranchError) as caught:
        evaluate_branch(flytekit_branch, literals_pb2.LiteralMap(literals={".a": lit(3.0)}))
    assert caught.value.message == (
        "[MalformedBranchUserError] Comparison between different primitives types. "
        "lVal[*core.Primitive_FloatValue]:rVal[*core.Primitive_Integer]"
    )


@given(
    st.integers(min_value=-(2**63), max_value=2**63 - 1), st.integers(min_value=-(2**63), max_value=2**63 - 1)
)
def test_exactly_one_of_lt_eq_gt_holds_and_the_rest_follow(a: int, b: int) -> None:
    lt, eq, gt = (compare(prim(a), prim(b), op) for op in (Op.LT, Op.EQ, Op.GT))
    assert [lt, eq, gt].count(True) == 1
    assert compare(prim(a), prim(b), Op.GTE) is (not lt)
    assert compare(prim(a), prim(b), Op.LTE) is (not gt)
    assert compare(prim(a), prim(b), Op.NEQ) is (not eq)
