"""The ArrayNode's pure rules (flytepropeller nodes/array: handler.go, utils.go, event_recorder.go,
execution_context.go, node_execution_context.go; nodes/executor.go isEligibleForRetry; errorcollector),
with Flyte's own test cases as parametrized tables."""

from __future__ import annotations

import math

import pytest
from flyteidl.core import interface_pb2, literals_pb2, tasks_pb2, types_pb2
from hypothesis import given
from hypothesis import strategies as st

from taskplug.core import ErrorKind, ExecutionError, Phase
from taskplug.executor.nodes import NodePhase, decide_retry, retries_exhausted
from taskplug.executor.nodes._array_rules import (
    ArrayNodePhase,
    Counts,
    ErrorCollector,
    ParallelismBehavior,
    array_size,
    count_phases,
    delisted_template,
    element_generated_name,
    element_inputs,
    element_unique_id,
    external_resource_id,
    gather_outputs,
    index_env,
    infer_parallelism,
    min_successes_for,
    next_array_phase,
    remaining_parallelism,
    task_phase_for_node_phase,
    window,
)
from taskplug.executor.nodes._ids import fixed_length_unique_id_for_parts, unique_node_id


def ints(*values: int) -> literals_pb2.Literal:
    return literals_pb2.Literal(
        collection=literals_pb2.LiteralCollection(
            literals=[
                literals_pb2.Literal(scalar=literals_pb2.Scalar(primitive=literals_pb2.Primitive(integer=v)))
                for v in values
            ]
        )
    )


def scalar(value: int) -> literals_pb2.Literal:
    return literals_pb2.Literal(scalar=literals_pb2.Scalar(primitive=literals_pb2.Primitive(integer=value)))


def lmap(**literals: literals_pb2.Literal) -> literals_pb2.LiteralMap:
    return literals_pb2.LiteralMap(literals=literals)


# -- names (encoder_test.go, event_recorder_test.go) -------------------------------------------------


@pytest.mark.parametrize(
    ("parts", "max_length", "expected"),
    [
        (["x", "y", "z"], 10, "x-y-z"),
        (["x"], 2, "x"),
        (["x", "y", "z", "m", "n", "y", "z", "m", "n", "y", "z", "m", "n"], 15, "fe63sz6y"),
        (["", "", "n1"], 20, "n1"),  # a top-level node: no leading dashes
        (["n0", "0", "n1", "0", "n2", "0", "n3", "0", "n4"], 20, "fxzpz2jy"),
    ],
)
def test_fixed_length_unique_id_for_parts_joins_or_hashes_as_flyte_does(
    parts: list[str], max_length: int, expected: str
) -> None:
    assert fixed_length_unique_id_for_parts(max_length, parts) == expected


@pytest.mark.parametrize(("parts", "max_length"), [(["x", "y"], 1), (["x", "y", "z"], 4)])
def test_an_id_that_cannot_fit_even_hashed_is_refused(parts: list[str], max_length: int) -> None:
    # Flyte returns the hash (fz2jizji, fxzsoqrq) along with an error; the error is what matters.
    with pytest.raises(ValueError, match="too small"):
        fixed_length_unique_id_for_parts(max_length, parts)


def test_the_element_pod_name_is_execution_array_node_attempt_element_retry() -> None:
    # A top-level ArrayNode n1, element 7, first and second try.
    array = unique_node_id(None, 0, "n1")
    assert array == "n1"
    uid = element_unique_id(array, 0, 7)
    assert uid == "n1-0-n7"
    assert element_generated_name("f6f2d3a4b5c6d7e8f9a0", uid, 0) == "f6f2d3a4b5c6d7e8f9a0-n1-0-n7-0"
    assert element_generated_name("f6f2d3a4b5c6d7e8f9a0", uid, 1) == "f6f2d3a4b5c6d7e8f9a0-n1-0-n7-1"


def test_at_workflow_event_version_0_an_element_is_just_n_i() -> None:
    assert element_unique_id("n1", 0, 3, event_version=0) == "n3"


def test_a_long_element_unique_id_and_pod_name_are_hashed_to_their_limits() -> None:
    uid = element_unique_id("a-long-array-node-id", 0, 12)
    assert uid == fixed_length_unique_id_for_parts(20, ["a-long-array-node-id", "0", "n12"])
    assert len(uid) == 8 and uid.startswith("f")
    name = element_generated_name("e" * 45, uid, 0)
    assert len(name) == 8 and name.startswith("f")
    assert element_generated_name("e" * 45, uid, 0, max_length=63) == f"{'e' * 45}-{uid}-0"


@pytest.mark.parametrize(
    ("node", "attempt", "index", "retry", "expected"),
    [("n2", 0, 0, 0, "exec_name-n2-0-n0-0"), ("n0", 1, 2, 3, "exec_name-n0-1-n2-3")],
)
def test_external_resource_ids_match_flytes_cases(
    node: str, attempt: int, index: int, retry: int, expected: str
) -> None:
    assert external_resource_id("exec_name", node, attempt, index, retry) == expected


def test_the_external_id_differs_from_the_pod_name_once_hashing_starts() -> None:
    # kept as Flyte computes both (services matching pods by external id miss hashed names).
    uid = element_unique_id("n0", 0, 5)
    execution = "x" * 48
    assert element_generated_name(execution, uid, 0) != external_resource_id(execution, "n0", 0, 5, 0)


# -- environment (execution_context_test.go) --------------------------------------------------------------


def test_the_index_env_adds_the_two_variables_and_leaves_the_parent_untouched() -> None:
    parent = {"EXISTING": "value"}
    env = index_env(parent, 3)
    assert env == {
        "EXISTING": "value",
        "BATCH_JOB_ARRAY_INDEX_VAR_NAME": "FLYTE_K8S_ARRAY_INDEX",
        "FLYTE_K8S_ARRAY_INDEX": "3",
    }
    assert parent == {"EXISTING": "value"}


# -- R1: size (handler_test.go TestHandleArrayNodePhaseNone, TestHandle_InvalidLiteralType) ---------------


@pytest.mark.parametrize(
    ("inputs", "bound", "expected"),
    [
        (lmap(foo=ints(1, 2)), (), 2),
        (lmap(foo=ints(1, 2, 3), bar=ints(4, 5, 6)), (), 3),
        (lmap(foo=ints(1, 2, 3), bar=scalar(1)), ("bar",), 3),
        (lmap(foo=ints(1, 2, 3), bar=scalar(1)), (), 3),  # an unbound scalar is broadcast
        (lmap(foo=ints(1, 2), bar=ints(3, 4, 5)), ("foo", "bar"), 1),  # every input bound
        (lmap(), (), 1),  # a task without inputs
        (lmap(foo=ints()), (), 0),
        (lmap(foo=ints(1, 2, 3), bar=ints(9)), ("bar",), 3),  # a bound list does not size the node
    ],
)
def test_the_node_size_is_the_length_of_its_unbound_lists(
    inputs: literals_pb2.LiteralMap, bound: tuple[str, ...], expected: int
) -> None:
    assert array_size(inputs, bound) == expected


def test_lists_of_different_lengths_fail_the_node() -> None:
    err = array_size(lmap(foo=ints(1, 2), bar=ints(3)), ())
    assert err == ExecutionError(
        "InvalidArrayLength", "input arrays have different lengths: expecting '1' found '2'", ErrorKind.USER
    )


def test_no_list_and_an_unbound_input_fails_the_node() -> None:
    assert array_size(lmap(foo=scalar(1)), ()) == ExecutionError(
        "InvalidArrayLength", "no input array provided", ErrorKind.USER
    )


@pytest.mark.parametrize(
    "literal",
    [
        literals_pb2.Literal(scalar=literals_pb2.Scalar()),
        literals_pb2.Literal(),
        literals_pb2.Literal(collection=literals_pb2.LiteralCollection(literals=[literals_pb2.Literal()])),
    ],
)
def test_a_literal_of_unknown_type_fails_with_idl_not_found(literal: literals_pb2.Literal) -> None:
    err = array_size(lmap(invalidInput=literal), ())
    assert isinstance(err, ExecutionError)
    assert err.code == "IDLNotFoundErr"
    assert err.message.startswith("Failed to validate literal type for [invalidInput]")


def test_a_bound_input_of_unknown_type_is_not_validated() -> None:
    assert array_size(lmap(foo=ints(1, 2), bad=literals_pb2.Literal()), ("bad",)) == 2


# -- inputs (node_execution_context_test.go constructLiteralMap) --------------------------------------------


def test_an_element_gets_its_item_of_each_list_and_every_other_input_whole() -> None:
    inputs = lmap(foo=ints(1, 2, 3), bar=ints(4, 5, 6), scalar=scalar(7), whole=ints(8, 9))
    element = element_inputs(inputs, 1, ("whole",))
    assert element.literals["foo"] == scalar(2)
    assert element.literals["bar"] == scalar(5)
    assert element.literals["scalar"] == scalar(7)
    assert element.literals["whole"] == ints(8, 9)


def test_a_list_of_lists_gives_each_element_an_inner_list() -> None:
    nested = literals_pb2.Literal(collection=literals_pb2.LiteralCollection(literals=[ints(1, 2), ints(3)]))
    assert element_inputs(lmap(foo=nested), 1, ()).literals["foo"] == ints(3)


def test_an_index_past_a_list_is_flytes_out_of_bounds_error() -> None:
    with pytest.raises(IndexError, match="index 2 out of bounds for literal collection foo"):
        element_inputs(lmap(foo=ints(1, 2)), 2, ())


def _list_type(simple: int) -> types_pb2.LiteralType:
    return types_pb2.LiteralType(collection_type=types_pb2.LiteralType(simple=simple))


def test_the_element_template_has_its_outputs_delisted_and_its_inputs_unchanged() -> None:
    template = tasks_pb2.TaskTemplate(type="python-task")
    template.interface.inputs.variables["x"].type.CopyFrom(_list_type(types_pb2.INTEGER))
    template.interface.outputs.variables["o0"].CopyFrom(
        interface_pb2.Variable(type=_list_type(types_pb2.STRING), description="o0")
    )
    template.interface.outputs.variables["scalar"].type.simple = types_pb2.FLOAT
    out = delisted_template(template)
    assert out.interface.inputs == template.interface.inputs
    assert out.interface.outputs.variables["o0"] == interface_pb2.Variable(
        type=types_pb2.LiteralType(simple=types_pb2.STRING), description="o0"
    )
    assert out.interface.outputs.variables["scalar"].type.simple == types_pb2.FLOAT
    assert template.interface.outputs.variables["o0"].type.HasField("collection_type")  # a copy


# -- R4: parallelism (utils_test.go TestInferParallelism, handler_test.go Executing table) ------------------

U, W, H = ParallelismBehavior.UNLIMITED, ParallelismBehavior.WORKFLOW, ParallelismBehavior.HYBRID


@pytest.mark.parametrize(
    ("parallelism", "behavior", "expected"),
    [
        (None, W, (True, 2)),
        (None, H, (True, 2)),
        (None, U, (False, 3)),
        (0, W, (True, 2)),
        (0, H, (False, 3)),
        (0, U, (False, 3)),
        (1, W, (False, 1)),
        (1, H, (False, 1)),
        (1, U, (False, 1)),
    ],
)
def test_infer_parallelism_follows_flytes_table(
    parallelism: int | None, behavior: ParallelismBehavior, expected: tuple[bool, int]
) -> None:
    assert infer_parallelism(parallelism, behavior, 2, 3) == expected


@pytest.mark.parametrize(("current", "window_size"), [(0, 2), (9, 1), (10, 0)])
def test_an_unset_parallelism_uses_what_is_left_of_the_workflows(current: int, window_size: int) -> None:
    # UtilizeWfParallelism: workflow max parallelism 10, two elements.
    remaining = remaining_parallelism(10, current, 2)
    _, maximum = infer_parallelism(None, H, remaining, 2)
    assert len(window([NodePhase.QUEUED, NodePhase.QUEUED], maximum)) == window_size


def test_a_workflow_max_parallelism_of_0_is_no_limit_not_a_node_that_never_runs() -> None:
    # Deviation: Flyte's uint32 arithmetic leaves a window of 0 and the node hangs.
    assert remaining_parallelism(0, 0, 40) == 40
    assert infer_parallelism(None, W, remaining_parallelism(0, 0, 40), 40) == (True, 40)


def test_the_window_skips_terminal_elements_and_stops_at_the_maximum() -> None:
    phases = [
        NodePhase.SUCCEEDED,
        NodePhase.RUNNING,
        NodePhase.FAILED,
        NodePhase.NOT_YET_STARTED,
        NodePhase.RETRYABLE_FAILURE,
        NodePhase.NOT_YET_STARTED,
    ]
    assert window(phases, 2) == [1, 3]
    assert window(phases, 10) == [1, 3, 4, 5]
    assert window(phases, 0) == []


# -- R7–R10: counting and the node's transition ------------------------------------------------------------


def test_counting_puts_each_node_phase_where_flyte_does() -> None:
    phases = [
        NodePhase.SUCCEEDED,
        NodePhase.RECOVERED,
        NodePhase.SKIPPED,
        NodePhase.FAILING,
        NodePhase.FAILED,
        NodePhase.TIMED_OUT,
        NodePhase.NOT_YET_STARTED,
        NodePhase.QUEUED,
        NodePhase.RUNNING,
        NodePhase.SUCCEEDING,
        NodePhase.RETRYABLE_FAILURE,
        NodePhase.TIMING_OUT,
        NodePhase.DYNAMIC_RUNNING,
    ]
    assert count_phases(phases) == Counts(succeeded=3, failing=1, failed=2, running=7)


@pytest.mark.parametrize(
    ("size", "min_successes", "ratio", "expected"),
    [
        (10, None, 0.1, 2),  # float32(0.1) * 10 = 1.0000000149 → 2 (float64 arithmetic gives 1)
        (10, None, 0.2, 3),
        (10, None, 0.6, 7),
        (100, None, 0.99, 100),
        (2, None, 0.5, 1),
        (4, None, 1.0, 4),
        (10, None, 0.0, 0),
        (10, 3, None, 3),
        (10, None, None, 10),
        (0, None, 0.5, 0),
    ],
)
def test_min_successes_use_the_float32_ratio_rounded_up(
    size: int, min_successes: int | None, ratio: float | None, expected: int
) -> None:
    assert min_successes_for(size, min_successes, ratio) == expected


@given(st.integers(min_value=0, max_value=5000), st.floats(min_value=0.0, max_value=1.0))
def test_the_ratio_never_asks_for_fewer_than_its_real_share_nor_more_than_every_element(
    size: int, ratio: float
) -> None:
    needed = min_successes_for(size, None, ratio)
    assert needed <= size
    assert needed >= math.floor(ratio * size) - 1


@pytest.mark.parametrize(
    ("phases", "minimum", "expected"),
    [
        ([NodePhase.SUCCEEDED, NodePhase.SUCCEEDED], 2, ArrayNodePhase.SUCCEEDING),
        ([NodePhase.SUCCEEDED, NodePhase.FAILED], 1, ArrayNodePhase.SUCCEEDING),  # ratio 0.5
        ([NodePhase.FAILED, NodePhase.SUCCEEDED], 2, ArrayNodePhase.FAILING),  # no ratio
        ([NodePhase.FAILED, NodePhase.RUNNING], 2, ArrayNodePhase.FAILING),  # fails at once
        ([NodePhase.SUCCEEDED, NodePhase.RUNNING], 1, ArrayNodePhase.EXECUTING),  # waits for every element
        ([NodePhase.SUCCEEDED, NodePhase.FAILING], 1, ArrayNodePhase.SUCCEEDING),  # Failing does not block
        ([], 0, ArrayNodePhase.SUCCEEDING),
    ],
)
def test_the_node_fails_as_soon_as_it_cannot_succeed_and_succeeds_only_when_nothing_runs(
    phases: list[NodePhase], minimum: int, expected: ArrayNodePhase
) -> None:
    assert next_array_phase(len(phases), count_phases(phases), minimum) is expected


# -- retries (executor.go isEligibleForRetry, handler_test.go SubNodeFailures) ------------------------------


def _attempts_until_exhausted(kind: ErrorKind, max_attempts: int, max_system: int, ignore: bool) -> int:
    attempts = system = 0
    while True:
        decision = decide_retry(
            kind=kind,
            attempts=attempts,
            system_failures=system,
            max_attempts=max_attempts,
            max_system_failures=max_system,
            ignore_retry_cause=ignore,
        )
        if kind is ErrorKind.SYSTEM:
            system += 1
        if not decision.retry:
            return attempts + 1
        attempts += 1


@pytest.mark.parametrize(
    ("kind", "ignore", "expected"),
    [
        (ErrorKind.USER, False, 3),
        (ErrorKind.SYSTEM, False, 11),
        (ErrorKind.USER, True, 3),
        (ErrorKind.SYSTEM, True, 3),
    ],
)
def test_user_and_system_failures_have_separate_budgets_unless_the_cause_is_ignored(
    kind: ErrorKind, ignore: bool, expected: int
) -> None:
    # SubNodeFailures: default-max-attempts 3, a system budget of 10.
    assert _attempts_until_exhausted(kind, 3, 10, ignore) == expected


def test_system_failures_do_not_spend_the_user_budget() -> None:
    # Two system failures happened; a user failure at attempt 2 is the user's first.
    decision = decide_retry(
        kind=ErrorKind.USER, attempts=2, system_failures=2, max_attempts=2, max_system_failures=3
    )
    assert decision.retry and (decision.current, decision.maximum) == (1, 2)


def test_exhausted_retries_end_with_flytes_message() -> None:
    decision = decide_retry(
        kind=ErrorKind.USER, attempts=1, system_failures=0, max_attempts=2, max_system_failures=3
    )
    assert not decision.retry
    err = retries_exhausted(ExecutionError("USER:ValueError", "boom", ErrorKind.USER), decision)
    assert err == ExecutionError(
        "RetriesExhausted|USER:ValueError",
        "[2/2] currentAttempt done. Last Error: USER::boom",
        ErrorKind.USER,
    )


# -- the error summary (errorcollector) --------------------------------------------------------------------


def test_the_error_summary_merges_indices_into_ranges_and_sorts_messages() -> None:
    collector = ErrorCollector()
    for index in (0, 1, 3, 7, 8, 9):
        collector.collect(index, "b failed")
    collector.collect(2, "a failed")
    assert collector.summary() == "[2]: a failed\n[0-1][3][7-9]: b failed\n"


def test_the_error_summary_stops_at_its_limit() -> None:
    collector = ErrorCollector()
    for index in range(50):
        collector.collect(index, f"message {index:02d} " + "x" * 20)
    summary = collector.summary(200)
    assert summary.endswith("... and many more.")
    assert summary.count("\n") < 50


# -- outputs (handler_test.go Succeeding, utils_test.go appendLiteral) -------------------------------------


def test_outputs_are_gathered_in_element_order_with_none_for_elements_that_did_not_succeed() -> None:
    gathered = gather_outputs(["foo"], [lmap(foo=scalar(1)), None, lmap(foo=scalar(3))])
    none = literals_pb2.Literal(scalar=literals_pb2.Scalar(none_type=literals_pb2.Void()))
    assert list(gathered.literals["foo"].collection.literals) == [scalar(1), none, scalar(3)]


def test_two_elements_without_outputs_give_lists_of_two_nones() -> None:
    gathered = gather_outputs(["a", "b"], [None, None])
    assert [len(gathered.literals[n].collection.literals) for n in ("a", "b")] == [2, 2]


def test_zero_elements_give_empty_lists() -> None:
    gathered = gather_outputs(["foo"], [])
    assert gathered.literals["foo"].collection.literals == []
    assert gather_outputs([], []).literals == {}


def test_a_succeeded_element_without_its_output_is_an_error_not_a_shorter_list() -> None:
    # Deviation: Flyte swallows it and every later value moves one index down.
    with pytest.raises(ValueError, match="element 1 succeeded without its output 'foo'"):
        gather_outputs(["foo"], [lmap(foo=scalar(1)), lmap(), lmap(foo=scalar(3))])


# -- events (event_recorder.go) ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("node_phase", "task_phase"),
    [
        (NodePhase.NOT_YET_STARTED, Phase.UNDEFINED),
        (NodePhase.SKIPPED, Phase.UNDEFINED),
        (NodePhase.QUEUED, Phase.QUEUED),
        (NodePhase.RUNNING, Phase.RUNNING),
        (NodePhase.DYNAMIC_RUNNING, Phase.RUNNING),
        (NodePhase.SUCCEEDING, Phase.SUCCESS),
        (NodePhase.SUCCEEDED, Phase.SUCCESS),
        (NodePhase.RECOVERED, Phase.SUCCESS),
        (NodePhase.FAILING, Phase.PERMANENT_FAILURE),
        (NodePhase.FAILED, Phase.PERMANENT_FAILURE),
        (NodePhase.TIMED_OUT, Phase.PERMANENT_FAILURE),
        (NodePhase.RETRYABLE_FAILURE, Phase.RETRYABLE_FAILURE),
        (NodePhase.ABORTED, Phase.ABORTED),
    ],
)
def test_a_terminal_event_reports_each_silent_element_by_its_stored_phase(
    node_phase: NodePhase, task_phase: Phase
) -> None:
    assert task_phase_for_node_phase(node_phase) is task_phase


def test_node_phase_names_are_flytes() -> None:
    assert [
        str(p) for p in (NodePhase.NOT_YET_STARTED, NodePhase.RETRYABLE_FAILURE, NodePhase.TIMED_OUT)
    ] == [
        "NotYetStarted",
        "RetryableFailure",
        "TimedOut",
    ]
