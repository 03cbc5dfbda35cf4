"""Ceilings on the work one submission may start: attempts, map elements, parallelism, workflow nodes.

A spec is checked against them before anything runs (``taskplug run`` exits 2, the API answers 422, a replica
fails the execution), each refusal naming the field that asked for too much. Flyte has no such ceiling: its
admission is a cluster's quota and flyteadmin's authorization. Deviation: a single ``maxAttempts: 4294967295``
on a failing task, or a map over 100,000 elements, would otherwise have one client start unbounded work on a
shared service; the defaults sit well above what a pipeline asks for and are configurable
(``executor.limits``).
"""

from __future__ import annotations

from dataclasses import dataclass

from flyteidl.core import compiler_pb2, identifier_pb2, workflow_pb2

from taskplug.core import SpecError
from taskplug.executor._platform import EXECUTOR_SECTION, Platform
from taskplug.executor._spec import ExecutionSpec

__all__ = ["SubmissionLimits", "check_limits", "submission_limits", "workflow_nodes"]

_START_END = frozenset({"start-node", "end-node"})


@dataclass(frozen=True, slots=True)
class SubmissionLimits:
    """The most one submission may ask for (config ``executor.limits``)."""

    max_attempts: int = 100
    max_elements: int = 10_000
    max_parallelism: int = 10_000
    max_nodes: int = 1_000


def _array_elements(spec: ExecutionSpec) -> int:
    array = spec.array
    assert array is not None
    bound = set(array.bound_inputs)
    lengths = [
        len(literal.collection.literals)
        for name, literal in spec.inputs.literals.items()
        if name not in bound and literal.WhichOneof("value") == "collection"
    ]
    return max(lengths, default=1)


def workflow_nodes(closure: compiler_pb2.CompiledWorkflowClosure, *, cap: int) -> int:
    """How many nodes the closure's primary workflow runs, nested ones included (a branch's cases, an array
    node's sub-node, a sub-workflow's nodes each time a node calls it; start and end nodes not counted),
    counted up to ``cap`` + 1 (past the cap the exact number does not matter, and sub-workflows calling
    each other many times over could make it astronomical). A sub-workflow that calls itself is counted
    once (the compiler refuses the cycle)."""
    templates = {_key(sub.template.id): sub.template for sub in closure.sub_workflows}
    known: dict[str, int] = {}

    def in_workflow(template: workflow_pb2.WorkflowTemplate, calling: frozenset[str]) -> int:
        key = _key(template.id)
        if key in known:
            return known[key]
        total = 0
        for node in template.nodes:
            if node.id not in _START_END:
                total = min(total + in_node(node, calling | {key}), cap + 1)
        known[key] = total
        return total

    def in_node(node: workflow_pb2.Node, calling: frozenset[str]) -> int:
        count = 1
        target = node.WhichOneof("target")
        if target == "branch_node":
            if_else = node.branch_node.if_else
            cases = [if_else.case.then_node, *(other.then_node for other in if_else.other)]
            if if_else.WhichOneof("default") == "else_node":
                cases.append(if_else.else_node)
            count += sum(in_node(case, calling) for case in cases)
        elif target == "array_node":
            count += in_node(node.array_node.node, calling)
        elif target == "workflow_node" and node.workflow_node.HasField("sub_workflow_ref"):
            sub = templates.get(_key(node.workflow_node.sub_workflow_ref))
            if sub is not None and _key(sub.id) not in calling:
                count += in_workflow(sub, calling)
        return min(count, cap + 1)

    return in_workflow(closure.primary.template, frozenset())


def _key(identifier: identifier_pb2.Identifier) -> str:
    return str(identifier.SerializeToString(deterministic=True).hex())


def check_limits(spec: ExecutionSpec, limits: SubmissionLimits) -> None:
    """Refuse ``spec`` when it asks for more than ``limits``: a :class:`SpecError` naming the field."""
    if spec.workflow is not None:
        nodes = workflow_nodes(spec.workflow.closure, cap=limits.max_nodes)
        if nodes > limits.max_nodes:
            raise SpecError(
                "workflowClosure",
                f"the workflow runs more than {limits.max_nodes} nodes "
                "(nested ones counted: branch cases, map sub-nodes, a sub-workflow's nodes each time it is "
                f"called); at most {limits.max_nodes} are allowed (executor.limits.max-nodes)",
            )
        if spec.workflow.max_parallelism > limits.max_parallelism:
            raise SpecError(
                "execution.maxParallelism",
                f"is {spec.workflow.max_parallelism}; at most {limits.max_parallelism} are allowed "
                "(executor.limits.max-parallelism)",
            )
    attempts = spec.metadata.max_attempts
    if spec.array is not None and spec.array.min_attempts is not None:
        attempts = max(attempts, spec.array.min_attempts)
    if attempts > limits.max_attempts:
        from_template = spec.template.metadata.retries.retries + 1 == attempts
        raise SpecError(
            "template.metadata.retries" if from_template else "execution.maxAttempts",
            f"asks for {attempts} attempts; at most {limits.max_attempts} are allowed (executor.limits.max-attempts)",
        )
    if spec.array is None:
        return
    elements = _array_elements(spec)
    if elements > limits.max_elements:
        raise SpecError(
            "inputs",
            f"map over {elements} elements; at most {limits.max_elements} are allowed "
            "(executor.limits.max-elements)",
        )
    parallelism = spec.array.parallelism
    if parallelism is not None and parallelism > limits.max_parallelism:
        raise SpecError(
            "arrayNode.parallelism",
            f"is {parallelism}; at most {limits.max_parallelism} are allowed (executor.limits.max-parallelism)",
        )


def submission_limits(platform: Platform) -> SubmissionLimits:
    """The platform's ``executor.limits`` (what replicas, ``taskplug run`` and ``taskplug serve --config``
    check a spec against)."""
    limits = platform.config.get(EXECUTOR_SECTION).limits
    return SubmissionLimits(
        max_attempts=limits.max_attempts,
        max_elements=limits.max_elements,
        max_parallelism=limits.max_parallelism,
        max_nodes=limits.max_nodes,
    )
