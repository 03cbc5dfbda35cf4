"""The array state machine's pure rules (Flyte's array/core/state.go: ``ToArrayJob``, the
error summary; errorcollector)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from google.protobuf import struct_pb2

from taskplug.core import ErrorCode, ErrorKind, ExecutionError, ExternalResource, Phase, PluginError
from taskplug.plugins.array import (
    ArrayJob,
    ArrayPhase,
    ArrayState,
    ErrorMessageCollector,
    index_ranges,
    summary_to_phase,
    to_array_job,
    to_phase_info,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)
S, P, R, W, U, Q, RUN, A = (
    Phase.SUCCESS,
    Phase.PERMANENT_FAILURE,
    Phase.RETRYABLE_FAILURE,
    Phase.WAITING_FOR_RESOURCES,
    Phase.UNDEFINED,
    Phase.QUEUED,
    Phase.RUNNING,
    Phase.ABORTED,
)


def test_array_phases_keep_flytes_numbers_and_names() -> None:
    assert [int(p) for p in ArrayPhase] == list(range(13))
    assert [str(p) for p in ArrayPhase][:5] == [
        "PhaseStart",
        "PhasePreLaunch",
        "PhaseLaunch",
        "PhaseWaitingForResources",
        "PhaseCheckingSubTaskExecutions",
    ]
    assert str(ArrayPhase.ABORT_SUB_TASKS) == "PhaseAbortSubTasks"


@pytest.mark.parametrize(
    ("min_successes", "details", "expected"),
    [
        # fewer sub-tasks than the successes needed
        (3, (S, S), ArrayPhase.ABORT_SUB_TASKS),
        # no way left to reach the minimum: permanent failures leave too few
        (2, (S, P, P), ArrayPhase.ABORT_SUB_TASKS),
        # running, waiting and retryable all still count as possible successes
        (2, (P, RUN, P), ArrayPhase.ABORT_SUB_TASKS),
        (2, (P, RUN, R), ArrayPhase.CHECKING_SUB_TASK_EXECUTIONS),
        (2, (P, W, U), ArrayPhase.WAITING_FOR_RESOURCES),
        # waiting wins over being done enough
        (1, (S, W), ArrayPhase.WAITING_FOR_RESOURCES),
        # enough successes, every sub-task succeeded or failed for good
        (2, (S, S, P), ArrayPhase.WRITE_TO_DISCOVERY),
        (0, (P, P), ArrayPhase.WRITE_TO_DISCOVERY),
        # enough successes but one still running: keep checking
        (1, (S, RUN), ArrayPhase.CHECKING_SUB_TASK_EXECUTIONS),
        # a retryable failure is not done
        (1, (S, R), ArrayPhase.CHECKING_SUB_TASK_EXECUTIONS),
        # an aborted sub-task counts as running here (Flyte's default branch)
        (1, (S, A), ArrayPhase.CHECKING_SUB_TASK_EXECUTIONS),
        (3, (Q, Q, Q), ArrayPhase.CHECKING_SUB_TASK_EXECUTIONS),
    ],
)
def test_summary_to_phase(min_successes: int, details: tuple[Phase, ...], expected: ArrayPhase) -> None:
    assert summary_to_phase(min_successes, details) is expected


RUNNING_PHASES = [
    ArrayPhase.PRE_LAUNCH,
    ArrayPhase.LAUNCH,
    ArrayPhase.CHECKING_SUB_TASK_EXECUTIONS,
    ArrayPhase.ASSEMBLE_FINAL_OUTPUT,
    ArrayPhase.ASSEMBLE_FINAL_ERROR,
    ArrayPhase.ABORT_SUB_TASKS,
    ArrayPhase.WRITE_TO_DISCOVERY_THEN_FAIL,
    ArrayPhase.WRITE_TO_DISCOVERY,
]


@pytest.mark.parametrize("phase", RUNNING_PHASES)
def test_working_array_phases_report_running_at_the_state_version(phase: ArrayPhase) -> None:
    external = (ExternalResource("x-0", 0, 0, Phase.QUEUED),)
    info = to_phase_info(ArrayState(phase=phase, phase_version=6), now=NOW, external_resources=external)
    assert (info.phase, info.version) == (Phase.RUNNING, 6)
    assert info.info is not None
    assert (info.info.occurred_at, info.info.external_resources) == (NOW, external)


def test_start_reports_initializing_at_version_0_with_the_reason() -> None:
    info = to_phase_info(ArrayState(phase=ArrayPhase.START, phase_version=3, reason="r"), now=NOW)
    assert (info.phase, info.version, info.reason) == (Phase.INITIALIZING, 0, "r")


def test_waiting_for_resources_reports_waiting_at_the_state_version() -> None:
    info = to_phase_info(
        ArrayState(phase=ArrayPhase.WAITING_FOR_RESOURCES, phase_version=2, reason="r"), now=NOW
    )
    assert (info.phase, info.version, info.reason) == (Phase.WAITING_FOR_RESOURCES, 2, "r")


def test_success_reports_success() -> None:
    assert (
        to_phase_info(ArrayState(phase=ArrayPhase.SUCCESS, phase_version=9), now=NOW).phase is Phase.SUCCESS
    )


@pytest.mark.parametrize(
    ("phase", "core", "kind"),
    [
        (ArrayPhase.RETRYABLE_FAILURE, Phase.RETRYABLE_FAILURE, ErrorKind.USER),
        (ArrayPhase.PERMANENT_FAILURE, Phase.PERMANENT_FAILURE, ErrorKind.SYSTEM),
    ],
)
def test_failures_without_an_error_are_generic_array_failures(
    phase: ArrayPhase, core: Phase, kind: ErrorKind
) -> None:
    info = to_phase_info(ArrayState(phase=phase, reason="why"), now=NOW)
    assert info.phase is core
    assert info.err == ExecutionError("ARRAY_JOB_GENERIC_FAILURE", "why", kind)


@pytest.mark.parametrize(
    ("phase", "core"),
    [
        (ArrayPhase.RETRYABLE_FAILURE, Phase.RETRYABLE_FAILURE),
        (ArrayPhase.PERMANENT_FAILURE, Phase.PERMANENT_FAILURE),
    ],
)
def test_failures_with_an_error_report_that_error(phase: ArrayPhase, core: Phase) -> None:
    err = ExecutionError("", "[0]: boom\n", ErrorKind.USER)
    info = to_phase_info(ArrayState(phase=phase, reason="why", err=err), now=NOW)
    assert (info.phase, info.err) == (core, err)


def test_the_state_survives_its_json_form() -> None:
    state = ArrayState(
        phase=ArrayPhase.CHECKING_SUB_TASK_EXECUTIONS,
        phase_version=12,
        reason="Task is still running",
        err=ExecutionError("c", "m", ErrorKind.SYSTEM),
        array_size=11,
        original_array_size=11,
        min_success=6,
        details=(U, Q, RUN, S, R, P, A, W, S, S, S),
        retry_attempts=(0, 1, 2, 0, 0, 0, 0, 0, 0, 0, 3),
        system_failures=(0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0),
        assembly_failures=2,
    )
    document = state.to_json()
    # One hex digit per sub-task: the phase's number (Aborted is 10, "a").
    assert document["arrayStatus"]["details"] == "035678a2666"
    assert ArrayState.from_json(document) == state


def test_no_stored_state_is_the_start() -> None:
    assert ArrayState.from_json(None) == ArrayState()


@pytest.mark.parametrize(
    "document",
    [
        {"phase": 13},
        {"phase": "x"},
        {},
        {"phase": 4, "arrayStatus": {"details": "0z"}},
        {"phase": 4, "retryAttempts": [-1]},
        {"phase": 4, "err": {"code": "c"}},
    ],
)
def test_a_state_that_is_not_an_array_state_is_corrupted(document: dict[str, object]) -> None:
    with pytest.raises(PluginError) as raised:
        ArrayState.from_json(document)
    assert raised.value.code == ErrorCode.CORRUPTED_PLUGIN_STATE


def _struct(values: dict[str, object]) -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    s.update(values)
    return s


@pytest.mark.parametrize(
    ("custom", "version", "expected"),
    [
        (None, 0, ArrayJob(parallelism=0, size=1, min_successes=1)),
        (None, 1, ArrayJob(parallelism=0, size=1, min_success_ratio=1.0)),
        # flytekit 1.16's legacy map_task(concurrency=3): int64 as a string, the ratio as a number
        (
            {"parallelism": "3", "minSuccessRatio": 1.0},
            1,
            ArrayJob(parallelism=3, size=0, min_success_ratio=1.0),
        ),
        ({"minSuccessRatio": 0.5}, 1, ArrayJob(parallelism=0, size=0, min_success_ratio=0.5)),
        ({"size": 4.0, "minSuccesses": "2"}, 0, ArrayJob(parallelism=0, size=4, min_successes=2)),
        # unknown keys are ignored, as Go's jsonpb decoding here allows
        ({"parallelism": "2", "whatever": True}, 1, ArrayJob(parallelism=2, size=0)),
    ],
)
def test_to_array_job(custom: dict[str, object] | None, version: int, expected: ArrayJob) -> None:
    struct = _struct(custom) if custom is not None else struct_pb2.Struct()
    assert to_array_job(struct, custom is not None, version) == expected


def test_a_custom_that_is_not_an_array_job_is_a_bad_specification() -> None:
    with pytest.raises(PluginError) as raised:
        to_array_job(_struct({"parallelism": "many"}), True, 1)
    assert raised.value.code == ErrorCode.BAD_TASK_SPECIFICATION


# -- the error summary ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("indices", "expected"),
    [([0], "[0]"), ([0, 1], "[0-1]"), ([3, 0, 1], "[0-1][3]"), ([5, 2, 3, 4, 9, 7, 8], "[2-5][7-9]")],
)
def test_index_ranges_merge_adjacent_indices(indices: list[int], expected: str) -> None:
    assert index_ranges(indices) == expected


def test_the_summary_groups_indices_by_message_in_message_order() -> None:
    collector = ErrorMessageCollector()
    for index, message in [(3, "b"), (0, "b"), (1, "a"), (2, "b"), (5, "a")]:
        collector.collect(index, message)
    assert len(collector) == 2
    assert collector.summary(1000) == "[1][5]: a\n[0][2-3]: b\n"


def test_the_summary_stops_after_the_line_that_reaches_the_limit() -> None:
    collector = ErrorMessageCollector()
    collector.collect(0, "a" * 10)  # "[0]: aaaaaaaaaa\n" is 16 characters
    collector.collect(1, "b" * 10)
    collector.collect(2, "c" * 10)
    # limit 50 - 18 = 32: the second line makes 32, so it is followed by the marker and the third is dropped.
    assert collector.summary(50) == "[0]: aaaaaaaaaa\n[1]: bbbbbbbbbb\n... and many more."
    # limit 51 - 18 = 33: all three fit before the limit is reached (48 ≥ 33 after the third).
    assert collector.summary(51) == "[0]: aaaaaaaaaa\n[1]: bbbbbbbbbb\n[2]: cccccccccc\n... and many more."
    # The first line is always there.
    assert collector.summary(18) == "[0]: aaaaaaaaaa\n... and many more."


def test_a_limit_below_the_marker_gives_an_empty_summary() -> None:
    collector = ErrorMessageCollector()
    collector.collect(0, "x")
    assert collector.summary(17) == ""
