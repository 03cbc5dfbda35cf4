"""The ArrayNode's rules (flytekit's ``map_task`` as propeller runs it): pure decisions over data, no I/O.

Follows flytepropeller/pkg/controller/nodes/array/{handler.go, utils.go, event_recorder.go,
node_execution_context.go, execution_context.go} and plugins/array/errorcollector; the ids come from
``_ids.py`` (``GenerateUniqueID``, ``FixedLengthUniqueIDForParts``). ``_arrayrun.py`` does the I/O around
them (element contexts, plugin calls, the data store, the state store, events).

What an element is called, which elements a round evaluates, how many must succeed, whether a failure is
retried, what the node's error says and how outputs are gathered are all decided here, so each rule is a
small function a test can call with plain values.
"""

from __future__ import annotations

import enum
import math
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from flyteidl.core import interface_pb2, literals_pb2, tasks_pb2

from taskplug.core import ErrorKind, ExecutionError, Phase
from taskplug.executor.nodes._ids import fixed_length_unique_id_for_parts, unique_node_id
from taskplug.executor.nodes._phase import NodePhase
from taskplug.executor.nodes._settings import ParallelismBehavior

__all__ = [
    "ARRAY_INDEX_VAR",
    "ARRAY_INDEX_VAR_NAME",
    "DEFAULT_GENERATED_NAME_MAX_LENGTH",
    "MAX_ERROR_MESSAGE_LENGTH",
    "ArrayNodePhase",
    "Counts",
    "ErrorCollector",
    "array_size",
    "count_phases",
    "delisted_template",
    "element_generated_name",
    "element_inputs",
    "element_unique_id",
    "external_resource_id",
    "gather_outputs",
    "index_env",
    "infer_parallelism",
    "min_successes_for",
    "next_array_phase",
    "none_literal",
    "remaining_parallelism",
    "task_phase_for_node_phase",
    "window",
]

ARRAY_INDEX_VAR_NAME: Final = "BATCH_JOB_ARRAY_INDEX_VAR_NAME"
ARRAY_INDEX_VAR: Final = "FLYTE_K8S_ARRAY_INDEX"
DEFAULT_GENERATED_NAME_MAX_LENGTH: Final = 50  # propeller's task generated-name limit
MAX_ERROR_MESSAGE_LENGTH: Final = 102400  # flytepropeller/events MaxErrorMessageLength


class ArrayNodePhase(enum.IntEnum):
    """``v1alpha1.ArrayNodePhase``: there is no Succeeded/Failed; the node's end is a node transition."""

    NONE = 0
    EXECUTING = 1
    FAILING = 2
    SUCCEEDING = 3


# -- names ----------------------------------------------------------------------------------------------


def element_unique_id(array_unique_id: str, array_attempt: int, index: int, *, event_version: int = 2) -> str:
    """The element's unique node id ``U_i``: ``FLUIDP(20, [A, a, "n<i>"])``, or ``n<i>`` at workflow event
    version 0 (FlyteAdmin's default is 2)."""
    sub_node_id = f"n{index}"
    if event_version == 0:
        return sub_node_id
    return unique_node_id(array_unique_id, array_attempt, sub_node_id)


def element_generated_name(
    execution_name: str, unique_id: str, retry: int, max_length: int = DEFAULT_GENERATED_NAME_MAX_LENGTH
) -> str:
    """The element attempt's generated name, which names its pod: ``FLUIDP(L, [exec, U_i, retry])``
    (nodes/task/taskexec_context.go); a resumed executor finds the pod by it."""
    return fixed_length_unique_id_for_parts(max_length, (execution_name, unique_id, str(retry)))


def external_resource_id(
    execution_name: str, array_node_id: str, array_attempt: int, index: int, retry: int
) -> str:
    """The id an element has in the node's events (``generateExternalResourceID``):
    ``FLUIDP(50, [exec, A, a]) + "-n<i>-<retry>"``. Equal to the pod name while nothing is hashed."""
    prefix = fixed_length_unique_id_for_parts(
        DEFAULT_GENERATED_NAME_MAX_LENGTH, (execution_name, array_node_id, str(array_attempt))
    )
    return f"{prefix}-n{index}-{retry}"


def index_env(environment: Mapping[str, str], index: int) -> dict[str, str]:
    """``newArrayExecutionContext``: a copy of the execution's environment plus the two variables that tell
    ``pyflyte-map-execute`` its index; the parent's map is untouched."""
    env = dict(environment)
    env[ARRAY_INDEX_VAR_NAME] = ARRAY_INDEX_VAR
    env[ARRAY_INDEX_VAR] = str(index)
    return env


# -- inputs and the element's template -------------------------------------------------------------------


def _literal_type_known(literal: literals_pb2.Literal) -> bool:
    # validators.LiteralTypeForLiteral answers nil for a literal of unknown value; ValidateLiteralType then
    # fails, also inside collections and maps.
    which = literal.WhichOneof("value")
    if which == "scalar":
        return bool(literal.scalar.WhichOneof("value") is not None)
    if which == "collection":
        return all(_literal_type_known(item) for item in literal.collection.literals)
    if which == "map":
        return all(_literal_type_known(item) for item in literal.map.literals.values())
    return bool(which == "offloaded_metadata")


def array_size(inputs: literals_pb2.LiteralMap, bound_inputs: Sequence[str]) -> int | ExecutionError:
    """R1: the number of elements, or the failure the node ends with (``handler.go`` case None).

    Every unbound collection must have the same length; unbound scalars are broadcast; a node whose inputs
    are all bound (or that has none) has one element.

    Deviation: Flyte walks the inputs in Go map order, so which mismatch is reported varies from run to run;
    here they are walked in name order.
    """
    size = -1
    bound = set(bound_inputs)
    for name in sorted(inputs.literals):
        if name in bound:
            continue
        literal = inputs.literals[name]
        if not _literal_type_known(literal):
            return ExecutionError(
                "IDLNotFoundErr",
                f"Failed to validate literal type for [{name}] with err: got unknown literal type: [<nil>].\n"
                "Suggested solution: Please update all your Flyte deployment images to the latest version "
                "and try again",
                ErrorKind.USER,
            )
        if literal.WhichOneof("value") == "collection":
            length = len(literal.collection.literals)
            if size == -1:
                size = length
            elif size != length:
                return ExecutionError(
                    "InvalidArrayLength",
                    f"input arrays have different lengths: expecting '{size}' found '{length}'",
                    ErrorKind.USER,
                )
    if size == -1:
        if len(bound_inputs) == len(inputs.literals):
            return 1
        return ExecutionError("InvalidArrayLength", "no input array provided", ErrorKind.USER)
    return size


def element_inputs(
    inputs: literals_pb2.LiteralMap, index: int, bound_inputs: Sequence[str]
) -> literals_pb2.LiteralMap:
    """``constructLiteralMap``: element ``index`` of every unbound collection, every other input whole.

    Raises IndexError (Flyte's message) when a collection is too short.
    """
    bound = set(bound_inputs)
    out = literals_pb2.LiteralMap()
    for name, literal in inputs.literals.items():
        if literal.WhichOneof("value") == "collection" and name not in bound:
            items = literal.collection.literals
            if index >= len(items):
                raise IndexError(f"index {index} out of bounds for literal collection {name}")
            out.literals[name].CopyFrom(items[index])
        else:
            out.literals[name].CopyFrom(literal)
    return out


def delisted_template(template: tasks_pb2.TaskTemplate) -> tasks_pb2.TaskTemplate:
    """``arrayTaskReader.Read``: the sub-task template with every collection output replaced by its element
    type (description kept); the inputs stay list-typed."""
    out = tasks_pb2.TaskTemplate()
    out.CopyFrom(template)
    if not template.HasField("interface"):
        return out
    outputs = interface_pb2.VariableMap()
    for name, variable in template.interface.outputs.variables.items():
        if variable.type.WhichOneof("type") == "collection_type":
            outputs.variables[name].type.CopyFrom(variable.type.collection_type)
            outputs.variables[name].description = variable.description
        else:
            outputs.variables[name].CopyFrom(variable)
    out.interface.outputs.CopyFrom(outputs)
    return out


# -- the window ------------------------------------------------------------------------------------------


def remaining_parallelism(max_parallelism: int, current: int, size: int) -> int:
    """What is left of the workflow's parallelism for this round (R4).

    Deviation: Flyte computes ``MaxParallelism - CurrentParallelism`` in uint32, so a workflow
    ``MaxParallelism`` of 0 ("no limit") leaves 0 when nothing else runs, and an ArrayNode relying on the
    workflow's parallelism never evaluates an element and hangs; here 0 means no limit.
    """
    if max_parallelism <= 0:
        return size
    return max(max_parallelism - current, 0)


def infer_parallelism(
    parallelism: int | None, behavior: ParallelismBehavior | str, remaining: int, size: int
) -> tuple[bool, int]:
    """``inferParallelism``: (whether each dispatch counts against the workflow's parallelism, how many
    elements a round may evaluate)."""
    if parallelism is not None and parallelism > 0:
        return False, parallelism
    if behavior == ParallelismBehavior.WORKFLOW or (
        parallelism is None and behavior == ParallelismBehavior.HYBRID
    ):
        return True, remaining
    if behavior == ParallelismBehavior.UNLIMITED or (
        parallelism == 0 and behavior == ParallelismBehavior.HYBRID
    ):
        return False, size
    return False, size  # Flyte logs "unable to infer ArrayNode parallelism ..." and runs them all


def window(phases: Sequence[NodePhase], maximum: int) -> list[int]:
    """The elements a round evaluates, in index order: terminal ones are skipped and use no slot; at most
    ``maximum`` others (not-yet-started ones included)."""
    chosen: list[int] = []
    if maximum <= 0:
        return chosen
    for index, phase in enumerate(phases):
        if phase.is_terminal:
            continue
        chosen.append(index)
        if len(chosen) >= maximum:
            break
    return chosen


# -- success and failure ---------------------------------------------------------------------------------


def _float32(value: float) -> float:
    result: float = struct.unpack("f", struct.pack("f", value))[0]
    return result


def min_successes_for(size: int, min_successes: int | None, min_success_ratio: float | None) -> int:
    """R8: ``min_successes`` when set, else ``ceil(float64(float32(ratio)) * size)``, else every element.

    The ratio is a protobuf float (float32) in Flyte, so ``0.1 × 10`` needs 2 successes, not 1; taskplug
    does the same arithmetic so a map succeeds or fails exactly where it would on Flyte.
    """
    if min_successes is not None:
        return min_successes
    if min_success_ratio is not None:
        return math.ceil(_float32(min_success_ratio) * float(size))
    return size


@dataclass(frozen=True, slots=True)
class Counts:
    """R7's counts over every element."""

    succeeded: int = 0
    failing: int = 0
    failed: int = 0
    running: int = 0
    aborted: int = 0


def count_phases(phases: Iterable[NodePhase]) -> Counts:
    """R7: Succeeded, Recovered and Skipped count as successes; Failed and TimedOut as failures; Failing on
    its own; everything else (NotYetStarted, Queued, Running, Succeeding, RetryableFailure, …) is running."""
    succeeded = failing = failed = running = aborted = 0
    for phase in phases:
        if phase in (NodePhase.SUCCEEDED, NodePhase.RECOVERED, NodePhase.SKIPPED):
            succeeded += 1
        elif phase is NodePhase.FAILING:
            failing += 1
        elif phase in (NodePhase.FAILED, NodePhase.TIMED_OUT):
            failed += 1
        elif phase is NodePhase.ABORTED:
            aborted += 1
        else:
            running += 1
    return Counts(succeeded, failing, failed, running, aborted)


def next_array_phase(size: int, counts: Counts, min_successes: int) -> ArrayNodePhase:
    """R10: Failing as soon as the node can no longer reach ``min_successes``; Succeeding once it has and
    nothing is still running (reaching the minimum early stops nothing); else still Executing."""
    if size - counts.failed < min_successes:
        return ArrayNodePhase.FAILING
    if counts.succeeded >= min_successes and counts.running == 0:
        return ArrayNodePhase.SUCCEEDING
    return ArrayNodePhase.EXECUTING


class ErrorCollector:
    """flyteplugins' ``ErrorMessageCollector``: messages deduplicated, each with the indices that reported
    it merged into ranges (``[0-2][5]: message``)."""

    def __init__(self) -> None:
        self._messages: dict[str, set[int]] = {}

    def collect(self, index: int, message: str) -> None:
        self._messages.setdefault(message, set()).add(index)

    def __len__(self) -> int:
        return len(self._messages)

    def summary(self, char_limit: int = MAX_ERROR_MESSAGE_LENGTH) -> str:
        more = "... and many more."
        char_limit -= len(more)
        if char_limit < 0:
            return ""
        out = ""
        for message in sorted(self._messages):
            out += f"{_ranges(self._messages[message])}: {message}\n"
            if len(out) >= char_limit:
                out += more
                break
        return out


def _ranges(indices: Iterable[int]) -> str:
    out = ""
    start = end = None
    for index in sorted(indices):
        if start is None or end is None:
            start = end = index
        elif index == end + 1:
            end = index
        else:
            out += f"[{start}]" if start == end else f"[{start}-{end}]"
            start = end = index
    if start is not None and end is not None:
        out += f"[{start}]" if start == end else f"[{start}-{end}]"
    return out


# -- events ----------------------------------------------------------------------------------------------


def task_phase_for_node_phase(phase: NodePhase) -> Phase:
    """The phase an element gets in the node's terminal event when it reported nothing that round
    (``updateExternalResourceSubnodePhases``: node phase → node execution phase → task execution phase)."""
    return _TASK_PHASE_FOR_NODE_PHASE.get(phase, Phase.UNDEFINED)


_TASK_PHASE_FOR_NODE_PHASE: Final = {
    NodePhase.QUEUED: Phase.QUEUED,
    NodePhase.RUNNING: Phase.RUNNING,
    NodePhase.DYNAMIC_RUNNING: Phase.RUNNING,
    NodePhase.SUCCEEDING: Phase.SUCCESS,
    NodePhase.SUCCEEDED: Phase.SUCCESS,
    NodePhase.RECOVERED: Phase.SUCCESS,
    NodePhase.FAILING: Phase.PERMANENT_FAILURE,
    NodePhase.FAILED: Phase.PERMANENT_FAILURE,
    NodePhase.RETRYABLE_FAILURE: Phase.RETRYABLE_FAILURE,
    NodePhase.TIMING_OUT: Phase.PERMANENT_FAILURE,
    NodePhase.TIMED_OUT: Phase.PERMANENT_FAILURE,
    NodePhase.ABORTED: Phase.ABORTED,
}


# -- outputs ---------------------------------------------------------------------------------------------


def none_literal() -> literals_pb2.Literal:
    return literals_pb2.Literal(scalar=literals_pb2.Scalar(none_type=literals_pb2.Void()))


def gather_outputs(
    output_names: Sequence[str], results: Sequence[literals_pb2.LiteralMap | None]
) -> literals_pb2.LiteralMap:
    """one collection per declared output, element ``i`` at position ``i``; an element that did not
    succeed (``None``) contributes a ``none`` literal to every output.

    Deviation: Flyte's gather swallows an element's unreadable outputs and appends only the literals it
    found, so a later element's value lands at an earlier index. Here a succeeded element that lacks
    a declared output is an error (ValueError naming it), never a shorter list.
    """
    collections: dict[str, list[literals_pb2.Literal]] = {name: [] for name in output_names}
    for index, result in enumerate(results):
        for name in output_names:
            if result is None:
                collections[name].append(none_literal())
                continue
            if name not in result.literals:
                raise ValueError(f"element {index} succeeded without its output {name!r}")
            collections[name].append(result.literals[name])
    out = literals_pb2.LiteralMap()
    for name, items in collections.items():
        out.literals[name].collection.literals.extend(items)
    return out
