"""Web-API phases, the persisted state and ToPluginPhase (internal/webapi/state.go and monitor.go; the
TestToPluginPhase and TestPhase_IsTerminal cases)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from taskplug.core import ErrorKind, ExecutionError, Phase, PluginError
from taskplug.engine.webapi._state import (
    RETURNED_UNKNOWN,
    ReportedPhase,
    State,
    WebApiPhase,
    decode_state,
    encode_state,
    to_plugin_phase,
)


@pytest.mark.parametrize(
    ("phase", "expected"),
    [
        (Phase.NOT_READY, WebApiPhase.NOT_STARTED),
        (Phase.UNDEFINED, WebApiPhase.NOT_STARTED),
        (Phase.INITIALIZING, WebApiPhase.RESOURCES_CREATED),
        (Phase.WAITING_FOR_RESOURCES, WebApiPhase.RESOURCES_CREATED),
        (Phase.QUEUED, WebApiPhase.RESOURCES_CREATED),
        (Phase.RUNNING, WebApiPhase.RESOURCES_CREATED),
        (Phase.SUCCESS, WebApiPhase.SUCCEEDED),
        (Phase.PERMANENT_FAILURE, WebApiPhase.USER_FAILURE),
        (Phase.RETRYABLE_FAILURE, WebApiPhase.USER_FAILURE),
    ],
)
def test_core_phases_map_to_webapi_phases(phase: Phase, expected: WebApiPhase) -> None:
    assert to_plugin_phase(phase) is expected


@pytest.mark.parametrize("phase", [Phase.WAITING_FOR_CACHE, Phase.ABORTED])
def test_a_phase_the_core_cannot_follow_is_returned_unknown(phase: Phase) -> None:
    with pytest.raises(PluginError) as info:
        to_plugin_phase(phase)
    assert info.value.code == RETURNED_UNKNOWN


@pytest.mark.parametrize(
    ("phase", "terminal"),
    [
        (WebApiPhase.NOT_STARTED, False),
        (WebApiPhase.ALLOCATION_TOKEN_ACQUIRED, False),
        (WebApiPhase.RESOURCES_CREATED, False),
        (WebApiPhase.SUCCEEDED, True),
        (WebApiPhase.SYSTEM_FAILURE, True),
        (WebApiPhase.USER_FAILURE, True),
    ],
)
def test_only_succeeded_and_the_failures_are_terminal(phase: WebApiPhase, terminal: bool) -> None:
    assert phase.is_terminal is terminal


def test_nothing_stored_decodes_to_the_zero_state() -> None:
    assert decode_state(None) == State()


@pytest.mark.parametrize(
    "state",
    [
        State(),
        State(WebApiPhase.RESOURCES_CREATED, 2, {"job": "j-1", "n": [1, 2]}, 3, None, "err"),
        State(
            WebApiPhase.NOT_STARTED, allocation_token_request_start_time=datetime(2026, 1, 1, 12, tzinfo=UTC)
        ),
        State(
            WebApiPhase.USER_FAILURE,
            reported_phase=ReportedPhase(
                Phase.PERMANENT_FAILURE, 0, "", ExecutionError("C", "m", ErrorKind.USER)
            ),
        ),
        State(WebApiPhase.SUCCEEDED, reported_phase=ReportedPhase(Phase.SUCCESS, 4, "done")),
    ],
)
def test_a_state_survives_encoding(state: State) -> None:
    assert decode_state(encode_state(state)) == state


def test_the_encoded_state_uses_flytes_field_names() -> None:
    assert set(encode_state(State())) == {
        "phase",
        "phaseVersion",
        "resourceMeta",
        "syncFailureCount",
        "allocationTokenRequestStartTime",
        "errorMessage",
    }


@pytest.mark.parametrize(
    "raw",
    [
        {"phase": 9},
        {"phase": "x"},
        {"phaseVersion": "2"},
        {"allocationTokenRequestStartTime": "yesterday"},
        ["x"],
    ],
)
def test_a_mapping_that_is_not_a_state_does_not_decode(raw: Any) -> None:
    with pytest.raises((ValueError, TypeError, KeyError)):
        decode_state(raw)
