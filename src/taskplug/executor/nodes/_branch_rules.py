"""A branch node's cases, evaluated (flytepropeller/pkg/controller/nodes/branch/evaluator.go, comparator.go).

Minimal: integer, float, string and boolean comparisons and conjunctions."""

from __future__ import annotations

from typing import Any

from flyteidl.core import condition_pb2, literals_pb2, workflow_pb2

from taskplug.core import TaskplugError

__all__ = ["BranchError", "evaluate_branch"]


class BranchError(TaskplugError):
    def __init__(self, kind: str, code: str, message: str) -> None:
        super().__init__(message, code=code)
        self.error = {"kind": kind, "code": code, "message": message}


def _operand(op: condition_pb2.Operand, inputs: literals_pb2.LiteralMap) -> Any:
    if op.WhichOneof("val") == "primitive":
        p = op.primitive
    else:
        literal = inputs.literals.get(op.var)
        if literal is None:
            raise BranchError(
                "USER", "MalformedBranchUserError", f"Failed to find Value for Variable [{op.var}]"
            )
        p = literal.scalar.primitive
    return getattr(p, p.WhichOneof("value"))


def _compare(c: condition_pb2.ComparisonExpression, inputs: literals_pb2.LiteralMap) -> bool:
    left, right = _operand(c.left_value, inputs), _operand(c.right_value, inputs)
    op = c.operator
    E = condition_pb2.ComparisonExpression
    if op == E.EQ:
        return bool(left == right)
    if op == E.NEQ:
        return bool(left != right)
    if op == E.GT:
        return bool(left > right)
    if op == E.GTE:
        return bool(left >= right)
    if op == E.LT:
        return bool(left < right)
    return bool(left <= right)


def _evaluate(b: condition_pb2.BooleanExpression, inputs: literals_pb2.LiteralMap) -> bool:
    if b.WhichOneof("expr") == "comparison":
        return _compare(b.comparison, inputs)
    left = _evaluate(b.conjunction.left_expression, inputs)
    right = _evaluate(b.conjunction.right_expression, inputs)
    if b.conjunction.operator == condition_pb2.ConjunctionExpression.AND:
        return left and right
    return left or right


def evaluate_branch(if_else: workflow_pb2.IfElseBlock, inputs: literals_pb2.LiteralMap) -> str:
    for case in [if_else.case, *if_else.other]:
        if _evaluate(case.condition, inputs):
            return str(case.then_node.id)
    if if_else.WhichOneof("default") == "else_node":
        return str(if_else.else_node.id)
    if if_else.WhichOneof("default") == "error":
        raise BranchError("USER", "UserProvidedError", f"[UserProvidedError] {if_else.error.message}")
    raise BranchError("USER", "MalformedBranchUserError", "[MalformedBranchUserError] No branch satisfied")
