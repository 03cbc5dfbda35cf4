"""Which case of a branch node runs: the condition evaluator and the primitive comparator.

Follows flytepropeller/pkg/controller/nodes/branch/evaluator.go (``DecideBranch``, ``EvaluateIfBlock``,
``EvaluateBooleanExpression``, ``EvaluateComparison``), comparator.go (``Evaluate`` and its per-type
comparators) and the error mapping of handler.go (``HandleBranchNode``). Pure: the branch handler reads the
node's inputs and passes them in; marking the untaken cases Skipped (without events) is its job, with
:func:`branch_children_not_taken` naming them.

Conditions compare primitives only, both of the same kind (an int never equals a float); both sides of
``and``/``or`` are evaluated, so an error on either side fails the branch; booleans support only ``==`` and
``!=``; datetimes and durations compare whole seconds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from flyteidl.core import condition_pb2, literals_pb2, workflow_pb2

from taskplug.core import ErrorKind, ExecutionError, TaskplugError

__all__ = [
    "ILLEGAL_STATE",
    "MALFORMED_BRANCH",
    "USER_PROVIDED_ERROR",
    "BranchError",
    "branch_children_not_taken",
    "compare",
    "evaluate_boolean_expression",
    "evaluate_branch",
    "evaluate_comparison",
]

USER_PROVIDED_ERROR: Final = "UserProvidedError"
MALFORMED_BRANCH: Final = "MalformedBranchUserError"
ILLEGAL_STATE: Final = "IllegalStateError"

_Operator = condition_pb2.ComparisonExpression
_GO_TYPES: Final = {
    "integer": "*core.Primitive_Integer",
    "float_value": "*core.Primitive_FloatValue",
    "string_value": "*core.Primitive_StringValue",
    "boolean": "*core.Primitive_Boolean",
    "datetime": "*core.Primitive_Datetime",
    "duration": "*core.Primitive_Duration",
}
# What each kind compares by: strings bytewise, datetimes and durations by whole seconds only.
_KEYS: Final[dict[str, Callable[[literals_pb2.Primitive], Any]]] = {
    "integer": lambda p: p.integer,
    "float_value": lambda p: p.float_value,
    "string_value": lambda p: p.string_value.encode(),
    "boolean": lambda p: p.boolean,
    "datetime": lambda p: p.datetime.seconds,
    "duration": lambda p: p.duration.seconds,
}
_ORDERING: Final = {_Operator.GT: "GT", _Operator.GTE: "GTE", _Operator.LT: "LT", _Operator.LTE: "LTE"}


class BranchError(TaskplugError):
    """The branch cannot choose a case: the branch node fails with ``{kind, code, message}`` exactly as Flyte
    reports it — ``USER`` for a ``fail()`` case (``UserProvidedError``) and for conditions that cannot be
    evaluated (``MalformedBranchUserError``), ``SYSTEM`` ``IllegalStateError`` for anything else."""

    def __init__(self, kind: ErrorKind, code: str, message: str) -> None:
        super().__init__(message, code=code)
        self.kind = kind

    @property
    def error(self) -> ExecutionError:
        """The branch node's error, as a phase carries it."""
        return ExecutionError(code=self.code, message=self.message, kind=self.kind)


class _CodedError(Exception):
    """flytestdlib's ``errors.Errorf``: prints as ``[<code>] <message>``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"[{code}] {message}")
        self.code = code


def _malformed(message: str) -> _CodedError:
    return _CodedError(MALFORMED_BRANCH, message)


def evaluate_branch(if_else: workflow_pb2.IfElseBlock, inputs: literals_pb2.LiteralMap | None) -> str:
    """``DecideBranch``: the id of the node to run — the first case whose condition holds (``if``, then each
    ``elif`` in order; once one holds the rest are not evaluated), else the ``else`` node. Raises
    :class:`BranchError` with Flyte's kind, code and message."""
    try:
        selected = _evaluate_if_block(if_else.case, inputs)
        for block in if_else.other:
            if selected is None:
                selected = _evaluate_if_block(block, inputs)
        if selected is None and if_else.HasField("else_node"):
            selected = if_else.else_node.id
    except (_CodedError, _ComparatorMissing) as e:
        raise _to_branch_error(e) from e
    if selected is None:
        if if_else.HasField("error"):
            raise BranchError(
                ErrorKind.USER, USER_PROVIDED_ERROR, f"[{USER_PROVIDED_ERROR}] {if_else.error.message}"
            )
        raise BranchError(ErrorKind.USER, MALFORMED_BRANCH, f"[{MALFORMED_BRANCH}] No branch satisfied")
    return selected


def branch_children_not_taken(if_else: workflow_pb2.IfElseBlock, taken: str | None) -> list[str]:
    """The case nodes that are set Skipped (silently) once the branch decided, in Flyte's order: every
    ``then`` node and the ``else`` node other than ``taken`` (all of them when no case was taken)."""
    children = [block.then_node.id for block in (if_else.case, *if_else.other) if block.HasField("then_node")]
    if if_else.HasField("else_node"):
        children.append(if_else.else_node.id)
    return [child for child in children if child != taken]


def _to_branch_error(e: Exception) -> BranchError:
    # handler.go: the branch's own codes are the user's fault; any other error is propeller's.
    if isinstance(e, _CodedError) and e.code in (MALFORMED_BRANCH, USER_PROVIDED_ERROR):
        return BranchError(ErrorKind.USER, e.code, str(e))
    return BranchError(ErrorKind.SYSTEM, ILLEGAL_STATE, f"Branch evaluation failed. Error [{e}]")


def _evaluate_if_block(block: workflow_pb2.IfBlock, inputs: literals_pb2.LiteralMap | None) -> str | None:
    if _boolean(block.condition, inputs) and block.HasField("then_node"):
        then: str = block.then_node.id
        return then
    return None


def evaluate_boolean_expression(
    expression: condition_pb2.BooleanExpression, inputs: literals_pb2.LiteralMap | None
) -> bool:
    """``EvaluateBooleanExpression``; raises :class:`BranchError` as :func:`evaluate_branch` does."""
    try:
        return _boolean(expression, inputs)
    except (_CodedError, _ComparatorMissing) as e:
        raise _to_branch_error(e) from e


def evaluate_comparison(
    expression: condition_pb2.ComparisonExpression, inputs: literals_pb2.LiteralMap | None
) -> bool:
    """``EvaluateComparison``; raises :class:`BranchError` as :func:`evaluate_branch` does."""
    try:
        return _comparison(expression, inputs)
    except (_CodedError, _ComparatorMissing) as e:
        raise _to_branch_error(e) from e


def compare(
    left: literals_pb2.Primitive,
    right: literals_pb2.Primitive,
    operator: condition_pb2.ComparisonExpression.Operator,
) -> bool:
    """The comparator (``Evaluate``); raises :class:`BranchError` as :func:`evaluate_branch` does."""
    try:
        return _compare(left, right, operator)
    except (_CodedError, _ComparatorMissing) as e:
        raise _to_branch_error(e) from e


def _boolean(expression: condition_pb2.BooleanExpression, inputs: literals_pb2.LiteralMap | None) -> bool:
    which = expression.WhichOneof("expr")
    if which == "comparison":
        return _comparison(expression.comparison, inputs)
    if which != "conjunction":
        raise _malformed("No Comparison or Conjunction found in Branch node expression.")
    conjunction = expression.conjunction
    # Both sides are always evaluated: an error on the right fails the branch even when the left decides.
    left = _boolean(conjunction.left_expression, inputs)
    right = _boolean(conjunction.right_expression, inputs)
    if conjunction.operator == condition_pb2.ConjunctionExpression.OR:
        return left or right
    return left and right


def _comparison(
    expression: condition_pb2.ComparisonExpression, inputs: literals_pb2.LiteralMap | None
) -> bool:
    left_var: str = expression.left_value.var
    right_var: str = expression.right_value.var
    left = _operand(expression.left_value, inputs, missing_name=left_var)
    # Flyte names the left variable when there are no inputs at all, whichever side is missing.
    right = _operand(expression.right_value, inputs, missing_name=left_var if inputs is None else right_var)
    operator = expression.operator
    if isinstance(left, literals_pb2.Literal) and isinstance(right, literals_pb2.Literal):
        if not _is_primitive(left):
            raise _malformed("Only primitives can be compared. LHS Variable is non primitive.")
        if not _is_primitive(right):
            raise _malformed("Only primitives can be compared. RHS Variable is non primitive")
        return _compare(left.scalar.primitive, right.scalar.primitive, operator)
    if isinstance(left, literals_pb2.Literal):
        if not _is_primitive(left):
            raise _malformed("Only primitives can be compared. LHS Variable is non primitive.")
        return _compare(left.scalar.primitive, right, operator)
    if isinstance(right, literals_pb2.Literal):
        if not _is_primitive(right):
            raise _malformed("Only primitives can be compared. RHS Variable is non primitive.")
        return _compare(left, right.scalar.primitive, operator)
    return _compare(left, right, operator)


def _operand(
    operand: condition_pb2.Operand, inputs: literals_pb2.LiteralMap | None, *, missing_name: str
) -> literals_pb2.Primitive | literals_pb2.Literal:
    if operand.HasField("primitive"):
        primitive: literals_pb2.Primitive = operand.primitive
        return primitive
    # A variable (or an operand propeller does not know, such as ``scalar``, read as the variable "").
    name = operand.var
    if inputs is None or name not in inputs.literals:
        raise _malformed(f"Failed to find Value for Variable [{missing_name}]")
    literal: literals_pb2.Literal = inputs.literals[name]
    return literal


def _is_primitive(literal: literals_pb2.Literal) -> bool:
    return bool(literal.HasField("scalar") and literal.scalar.HasField("primitive"))


class _ComparatorMissing(Exception):
    """``comparator not defined for type`` (a plain Go error: the handler reports it as a system error)."""


def _compare(
    left: literals_pb2.Primitive,
    right: literals_pb2.Primitive,
    operator: condition_pb2.ComparisonExpression.Operator,
) -> bool:
    left_kind = left.WhichOneof("value")
    right_kind = right.WhichOneof("value")
    if left_kind != right_kind:
        raise _malformed(
            "Comparison between different primitives types. "
            f"lVal[{_GO_TYPES.get(left_kind, '<nil>')}]:rVal[{_GO_TYPES.get(right_kind, '<nil>')}]"
        )
    if left_kind is None:
        # Deviation: Flyte dereferences a nil type here and panics; an empty primitive is a system error.
        raise _ComparatorMissing("comparator not defined for type: [<nil>]")
    key = _KEYS[left_kind]
    lv, rv = key(left), key(right)
    if operator in _ORDERING and left_kind == "boolean":
        raise _malformed(f"[{_ORDERING[operator]}] not defined for boolean operands.")
    # Flyte derives every operator from its per-type gt and eq (so a NaN is "less than" everything).
    if operator == _Operator.GT:
        return bool(lv > rv)
    if operator == _Operator.GTE:
        return bool(lv == rv or lv > rv)
    if operator == _Operator.LT:
        return not (lv > rv or lv == rv)
    if operator == _Operator.LTE:
        return not lv > rv
    if operator == _Operator.EQ:
        return bool(lv == rv)
    if operator == _Operator.NEQ:
        return bool(lv != rv)
    raise _malformed("Unsupported operator type in Propeller. System error.")
