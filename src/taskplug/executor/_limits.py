"""Ceilings on the work one submission may start: attempts, map elements, parallelism.

A spec is checked against them before anything runs (``taskplug run`` exits 2, the API answers 422, a replica
fails the execution), each refusal naming the field that asked for too much. Flyte has no such ceiling: its
admission is a cluster's quota and flyteadmin's authorization. Deviation: a single ``maxAttempts: 4294967295``
on a failing task, or a map over 100,000 elements, would otherwise have one client start unbounded work on a
shared service; the defaults sit well above what a pipeline asks for and are configurable
(``executor.limits``).
"""

from __future__ import annotations

from dataclasses import dataclass

from taskplug.core import SpecError
from taskplug.executor._platform import EXECUTOR_SECTION, Platform
from taskplug.executor._spec import ExecutionSpec

__all__ = ["SubmissionLimits", "check_limits", "submission_limits"]


@dataclass(frozen=True, slots=True)
class SubmissionLimits:
    """The most one submission may ask for (config ``executor.limits``)."""

    max_attempts: int = 100
    max_elements: int = 10_000
    max_parallelism: int = 10_000


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


def check_limits(spec: ExecutionSpec, limits: SubmissionLimits) -> None:
    """Refuse ``spec`` when it asks for more than ``limits``: a :class:`SpecError` naming the field."""
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
    )
