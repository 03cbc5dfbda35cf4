"""Phases, PhaseInfo constructors and Transition (Flyte's pluginmachinery/core/{phase,transition}.go)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from taskplug.core import (
    DEFAULT_PHASE_VERSION,
    PHASE_INFO_UNDEFINED,
    SYSTEM_ERROR_CODE,
    UNKNOWN_TRANSITION,
    ErrorKind,
    ExecutionError,
    Phase,
    PhaseInfo,
    TaskInfo,
    Transition,
    TransitionType,
)

T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)

# -- Phase -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("phase", "value", "name"),
    [
        (Phase.UNDEFINED, 0, "Undefined"),
        (Phase.NOT_READY, 1, "NotReady"),
        (Phase.WAITING_FOR_RESOURCES, 2, "WaitingForResources"),
        (Phase.QUEUED, 3, "Queued"),
        (Phase.INITIALIZING, 4, "Initializing"),
        (Phase.RUNNING, 5, "Running"),
        (Phase.SUCCESS, 6, "Success"),
        (Phase.RETRYABLE_FAILURE, 7, "RetryableFailure"),
        (Phase.PERMANENT_FAILURE, 8, "PermanentFailure"),
        (Phase.WAITING_FOR_CACHE, 9, "WaitingForCache"),
        (Phase.ABORTED, 10, "Aborted"),
    ],
)
def test_phase_has_flytes_number_and_go_name_without_prefix(phase: Phase, value: int, name: str) -> None:
    assert int(phase) == value
    assert str(phase) == name
    assert Phase.from_name(name) is phase
    assert Phase.from_name("Phase" + name) is phase


def test_phase_from_an_unknown_name_is_an_error() -> None:
    with pytest.raises(ValueError):
        Phase.from_name("Exploded")


def test_constants_match_flyte() -> None:
    assert DEFAULT_PHASE_VERSION == 0
    assert SYSTEM_ERROR_CODE == "SystemError"


@pytest.mark.parametrize(
    ("phase", "failure", "success", "aborted", "terminal", "waiting"),
    [
        (Phase.UNDEFINED, False, False, False, False, False),
        (Phase.NOT_READY, False, False, False, False, False),
        (Phase.WAITING_FOR_RESOURCES, False, False, False, False, True),
        (Phase.QUEUED, False, False, False, False, False),
        (Phase.INITIALIZING, False, False, False, False, False),
        (Phase.RUNNING, False, False, False, False, False),
        (Phase.SUCCESS, False, True, False, True, False),
        (Phase.RETRYABLE_FAILURE, True, False, False, True, False),
        (Phase.PERMANENT_FAILURE, True, False, False, True, False),
        (Phase.WAITING_FOR_CACHE, False, False, False, False, False),
        (Phase.ABORTED, False, False, True, True, False),
    ],
)
def test_phase_predicates(
    phase: Phase, failure: bool, success: bool, aborted: bool, terminal: bool, waiting: bool
) -> None:
    assert phase.is_failure is failure
    assert phase.is_success is success
    assert phase.is_aborted is aborted
    assert phase.is_terminal is terminal
    assert phase.is_waiting_for_resources is waiting


# -- non-terminal constructors ---------------------------------------------------------------------------


def test_not_ready_uses_the_given_time_version_and_reason() -> None:
    info = PhaseInfo.not_ready(T0, 3, "not yet")
    assert (info.phase, info.version, info.reason) == (Phase.NOT_READY, 3, "not yet")
    assert info.info is not None and info.info.occurred_at == T0
    assert info.err is None and not info.cleanup_on_failure


def test_queued_uses_the_given_time_version_and_reason() -> None:
    info = PhaseInfo.queued(T0, 2, "task submitted to K8s")
    assert (info.phase, info.version, info.reason) == (Phase.QUEUED, 2, "task submitted to K8s")
    assert info.info is not None and info.info.occurred_at == T0
    assert info.err is None and not info.cleanup_on_failure


def test_queued_without_a_time_is_stamped_now() -> None:
    info = PhaseInfo.queued(None, 0, "r")
    assert info.info is not None and info.info.occurred_at is not None
    assert info.info.occurred_at.tzinfo is not None


@pytest.mark.parametrize(
    ("build", "phase", "version", "reason"),
    [
        (lambda i: PhaseInfo.waiting_for_resources(4, "quota", i), Phase.WAITING_FOR_RESOURCES, 4, "quota"),
        (lambda i: PhaseInfo.queued_with_task_info(5, "queued", i), Phase.QUEUED, 5, "queued"),
        (lambda i: PhaseInfo.initializing(6, "pulling", i), Phase.INITIALIZING, 6, "pulling"),
        (lambda i: PhaseInfo.running(7, i), Phase.RUNNING, 7, ""),
        (lambda i: PhaseInfo.waiting_for_cache(8, i), Phase.WAITING_FOR_CACHE, 8, ""),
        (lambda i: PhaseInfo.success(i), Phase.SUCCESS, 0, ""),
        (lambda i: PhaseInfo.aborted(i), Phase.ABORTED, 0, ""),
    ],
)
def test_info_constructors_set_phase_version_reason_and_keep_a_given_occurred_at(
    build, phase: Phase, version: int, reason: str
) -> None:
    given = TaskInfo(occurred_at=T0, custom_info={"k": "v"})
    info = build(given)
    assert (info.phase, info.version, info.reason) == (phase, version, reason)
    assert info.err is None and not info.cleanup_on_failure
    assert info.info == given


@pytest.mark.parametrize(
    "build",
    [
        lambda i: PhaseInfo.waiting_for_resources(0, "r", i),
        lambda i: PhaseInfo.queued_with_task_info(0, "r", i),
        lambda i: PhaseInfo.initializing(0, "r", i),
        lambda i: PhaseInfo.running(0, i),
        lambda i: PhaseInfo.waiting_for_cache(0, i),
        lambda i: PhaseInfo.success(i),
        lambda i: PhaseInfo.failed(Phase.PERMANENT_FAILURE, None, i),
        lambda i: PhaseInfo.failure("c", "m", i),
        lambda i: PhaseInfo.retryable_failure("c", "m", i),
    ],
)
def test_a_missing_occurred_at_is_filled_and_the_rest_of_the_info_kept(build) -> None:
    given = TaskInfo(custom_info={"k": "v"})
    info = build(given)
    assert info.info is not None
    assert info.info.occurred_at is not None
    assert info.info.custom_info == {"k": "v"}
    assert given.occurred_at is None  # the caller's TaskInfo is not mutated (it is frozen)


@pytest.mark.parametrize(
    "build",
    [
        lambda: PhaseInfo.running(1),
        lambda: PhaseInfo.success(),
        lambda: PhaseInfo.initializing(1, "r"),
        lambda: PhaseInfo.failure("c", "m"),
    ],
)
def test_a_missing_task_info_is_created_with_occurred_at(build) -> None:
    info = build()
    assert info.info is not None and info.info.occurred_at is not None


# -- failures --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "phase", "kind", "cleanup"),
    [
        (PhaseInfo.failure, Phase.PERMANENT_FAILURE, ErrorKind.USER, False),
        (PhaseInfo.failure_with_cleanup, Phase.PERMANENT_FAILURE, ErrorKind.USER, True),
        (PhaseInfo.system_failure, Phase.PERMANENT_FAILURE, ErrorKind.SYSTEM, False),
        (PhaseInfo.system_failure_with_cleanup, Phase.PERMANENT_FAILURE, ErrorKind.SYSTEM, True),
        (PhaseInfo.retryable_failure, Phase.RETRYABLE_FAILURE, ErrorKind.USER, False),
        (PhaseInfo.retryable_failure_with_cleanup, Phase.RETRYABLE_FAILURE, ErrorKind.USER, True),
        (PhaseInfo.system_retryable_failure, Phase.RETRYABLE_FAILURE, ErrorKind.SYSTEM, False),
        (PhaseInfo.system_retryable_failure_with_cleanup, Phase.RETRYABLE_FAILURE, ErrorKind.SYSTEM, True),
    ],
)
def test_failure_constructors_set_phase_error_kind_and_cleanup_with_version_zero_and_no_reason(
    build, phase: Phase, kind: ErrorKind, cleanup: bool
) -> None:
    info = build("ImagePullBackOff", "cannot pull", TaskInfo(occurred_at=T0))
    assert info.phase is phase
    assert info.version == 0
    assert info.err == ExecutionError("ImagePullBackOff", "cannot pull", kind)
    assert info.cleanup_on_failure is cleanup
    assert info.reason == ""
    assert info.info is not None and info.info.occurred_at == T0


def test_failure_keeps_an_empty_code_and_message_as_given() -> None:
    # Flyte substitutes "Unknown" only for a nil error; the code/message helpers never pass nil.
    info = PhaseInfo.failure("", "")
    assert info.err == ExecutionError("", "", ErrorKind.USER)


def test_failed_keeps_the_error_as_given() -> None:
    err = ExecutionError("Boom", "it broke", ErrorKind.SYSTEM)
    info = PhaseInfo.failed(Phase.RETRYABLE_FAILURE, err, None)
    assert (info.phase, info.version, info.err, info.reason) == (Phase.RETRYABLE_FAILURE, 0, err, "")
    assert not info.cleanup_on_failure


def test_failed_keeps_a_none_error() -> None:
    info = PhaseInfo.failed(Phase.PERMANENT_FAILURE, None, None)
    assert info.phase is Phase.PERMANENT_FAILURE
    assert info.err is None


def test_undefined_is_the_zero_value() -> None:
    assert PHASE_INFO_UNDEFINED.phase is Phase.UNDEFINED
    assert PHASE_INFO_UNDEFINED.version == 0
    assert PHASE_INFO_UNDEFINED.info is None
    assert PHASE_INFO_UNDEFINED.err is None
    assert PHASE_INFO_UNDEFINED.reason == ""
    assert not PHASE_INFO_UNDEFINED.cleanup_on_failure


# -- with_version ----------------------------------------------------------------------------------------


def test_with_version_drops_the_cleanup_flag() -> None:
    info = PhaseInfo.retryable_failure_with_cleanup("c", "m")
    bumped = info.with_version(4)
    assert bumped.version == 4
    assert bumped.cleanup_on_failure is False
    assert info.cleanup_on_failure is True  # the original is untouched


def test_with_version_keeps_phase_info_error_and_reason() -> None:
    info = PhaseInfo.initializing(1, "pulling image", TaskInfo(occurred_at=T0))
    bumped = info.with_version(2)
    assert (bumped.phase, bumped.info, bumped.err, bumped.reason) == (
        info.phase,
        info.info,
        info.err,
        info.reason,
    )
    failed = PhaseInfo.system_failure("c", "m").with_version(9)
    assert failed.err == ExecutionError("c", "m", ErrorKind.SYSTEM)


def test_phase_info_is_immutable() -> None:
    info = PhaseInfo.running(1)
    with pytest.raises(AttributeError):
        info.version = 2  # type: ignore[misc]


# -- string forms ----------------------------------------------------------------------------------------


def test_str_of_a_phase_info_without_info() -> None:
    assert str(PHASE_INFO_UNDEFINED) == "Phase<Undefined:0 <nil> Reason:>"


def test_str_of_a_phase_info_with_info_and_reason() -> None:
    info = PhaseInfo.queued(T0, 2, "submitted")
    assert str(info) == f"Phase<Queued:2 Info<@{T0.isoformat()}> Reason:submitted>"


def test_str_of_a_phase_info_with_an_error_shows_the_error_not_the_info() -> None:
    info = PhaseInfo.failure("Code", "msg", TaskInfo(occurred_at=T0))
    text = str(info)
    assert text.startswith("Phase<PermanentFailure:0 Error:")
    assert "Code" in text and "msg" in text
    assert "Info<" not in text


def test_task_info_str_names_occurred_at() -> None:
    assert str(TaskInfo(occurred_at=T0)) == f"Info<@{T0.isoformat()}>"


# -- Transition ------------------------------------------------------------------------------------------


def test_transition_type_names() -> None:
    assert int(TransitionType.EPHEMERAL) == 0
    assert int(TransitionType.BARRIER) == 1
    assert str(TransitionType.EPHEMERAL) == "TransitionTypeEphemeral"
    assert str(TransitionType.BARRIER) == "TransitionTypeBarrier"


def test_transition_string_form() -> None:
    assert str(Transition(PHASE_INFO_UNDEFINED, TransitionType.BARRIER)) == (
        "TransitionTypeBarrier,Phase<Undefined:0 <nil> Reason:>"
    )


def test_unknown_transition_is_ephemeral_and_undefined() -> None:
    assert UNKNOWN_TRANSITION.type is TransitionType.EPHEMERAL
    assert UNKNOWN_TRANSITION.info == PHASE_INFO_UNDEFINED
    assert str(UNKNOWN_TRANSITION) == "TransitionTypeEphemeral,Phase<Undefined:0 <nil> Reason:>"


def test_transition_to_is_ephemeral() -> None:
    info = PhaseInfo.running(3)
    transition = Transition.to(info)
    assert transition.type is TransitionType.EPHEMERAL
    assert transition.info is info


# -- JSON form (taskplug status) -------------------------------------------------------------------------


def test_to_json_has_the_status_command_shape() -> None:
    info = PhaseInfo.failure_with_cleanup("ErrImagePull", "no such image", TaskInfo(occurred_at=T0))
    doc = info.to_json()
    assert doc["phase"] == "PermanentFailure"
    assert doc["version"] == 0
    assert doc["reason"] == ""
    assert doc["error"] == {"code": "ErrImagePull", "message": "no such image", "kind": "USER"}
    assert doc["cleanupOnFailure"] is True
    assert doc["info"]["occurredAt"] == "2026-01-02T03:04:05Z"


def test_to_json_error_is_null_without_an_error() -> None:
    assert PhaseInfo.running(1).to_json()["error"] is None
