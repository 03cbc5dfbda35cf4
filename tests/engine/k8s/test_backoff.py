"""Back-off (flytepropeller/pkg/controller/nodes/task/backoff): Flyte's handler_test.go tables plus one case
per rule."""

from __future__ import annotations

import itertools
import re
from collections.abc import Awaitable, Mapping
from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from taskplug.core import ErrorCode, FakeClock, PluginError, Quantity
from taskplug.engine.k8s._backoff import (
    LIMITED_LIMITS_RE,
    REQUESTED_LIMITS_RE,
    REQUESTED_REQUESTS_RE,
    BackOffController,
    BackOffError,
    ComputeResourceAwareBackOffHandler,
    ComputeResourceCeilings,
    SimpleBackOffBlocker,
    get_compute_resource_and_quantity,
    is_back_off_error,
    is_etcd_error,
    is_resource_quota_exceeded,
    is_resource_requests_eligible,
)
from taskplug.k8s import KubeApiError

QUOTA_1GI = (
    'pods "p" is forbidden: exceeded quota: project-quota, requested: limits.memory=1Gi, '
    "used: limits.memory=7976Gi, limited: limits.memory=8000Gi"
)


def forbidden(message: str) -> KubeApiError:
    return KubeApiError(403, "Forbidden", message)


def q(text: str) -> Quantity:
    return Quantity(text)


def res(**kw: str) -> dict[str, Quantity]:
    return {k: Quantity(v) for k, v in kw.items()}


class Op:
    """An operation that counts its calls and fails with ``error`` (or returns "created")."""

    def __init__(self, error: BaseException | None = None) -> None:
        self.error = error
        self.calls = 0

    def __call__(self) -> Awaitable[str]:
        async def run() -> str:
            self.calls += 1
            if self.error is not None:
                raise self.error
            return "created"

        return run()


def handler(
    clock: FakeClock,
    *,
    exponent: int,
    eligible_in: float,
    ceilings: Mapping[str, str],
    base: int = 2,
    max_seconds: float = 10,
) -> ComputeResourceAwareBackOffHandler:
    blocker = SimpleBackOffBlocker(
        clock,
        base,
        timedelta(seconds=max_seconds),
        exponent=exponent,
        next_eligible_time=clock.now() + timedelta(seconds=eligible_in),
    )
    return ComputeResourceAwareBackOffHandler(blocker, ComputeResourceCeilings(ceilings))


# -- Flyte's TestComputeResourceAwareBackOffHandler_Handle -------------------------------------------------


@pytest.mark.parametrize(
    (
        "case",
        "exponent",
        "eligible_in",
        "ceilings",
        "fails",
        "requested",
        "want_exp",
        "want_eligible_in",
        "want_ceilings",
        "want_calls",
    ),
    [
        pytest.param(
            "blocked",
            1,
            7,
            {"cpu": "10", "memory": "64Gi"},
            False,
            {"cpu": "10", "memory": "64Gi"},
            1,
            7,
            {"cpu": "10", "memory": "64Gi"},
            0,
            id="request_gte_the_ceilings_before_the_block_expires_does_not_call_the_operation",
        ),
        pytest.param(
            "tried",
            1,
            7,
            {"cpu": "10", "memory": "64Gi"},
            True,
            {"cpu": "9", "memory": "1Gi"},
            1,
            7,
            {"cpu": "10", "memory": "1Gi"},
            1,
            id="smaller_request_before_the_block_expires_that_is_rejected_does_not_back_off_further",
        ),
        pytest.param(
            "expired",
            1,
            -2,
            {"cpu": "1Ei", "memory": "1Ei"},
            True,
            {"memory": "1Gi"},
            2,
            2,
            {"cpu": "1Ei", "memory": "1Gi"},
            1,
            id="request_after_the_block_expires_that_is_rejected_backs_off_and_lowers_the_named_ceiling",
        ),
    ],
)
async def test_handle_follows_flytes_table(
    case: str,
    exponent: int,
    eligible_in: float,
    ceilings: dict[str, str],
    fails: bool,
    requested: dict[str, str],
    want_exp: int,
    want_eligible_in: float,
    want_ceilings: dict[str, str],
    want_calls: int,
) -> None:
    clock = FakeClock()
    start = clock.now()
    h = handler(clock, exponent=exponent, eligible_in=eligible_in, ceilings=ceilings)
    op = Op(forbidden(QUOTA_1GI) if fails else None)
    with pytest.raises(BackOffError) as info:
        await h.handle(op, res(**requested))
    assert info.value.code == ErrorCode.BACK_OFF_ERROR
    assert h.blocker.exponent == want_exp
    assert h.blocker.next_eligible_time == start + timedelta(seconds=want_eligible_in)
    assert h.ceilings.ceilings == res(**want_ceilings)
    assert op.calls == want_calls


async def test_blocked_operation_message_names_attempt_and_expiry() -> None:
    clock = FakeClock()
    h = handler(clock, exponent=1, eligible_in=7, ceilings={"cpu": "1"})
    with pytest.raises(
        BackOffError, match=r"blocked by back-off \[attempted at: .*\]\[the block expires at: "
    ):
        await h.handle(Op(), res(cpu="2"))


async def test_back_off_error_wraps_the_api_error_and_still_reads_as_quota_exceeded() -> None:
    clock = FakeClock()
    h = handler(clock, exponent=0, eligible_in=-1, ceilings={})
    cause = forbidden(QUOTA_1GI)
    with pytest.raises(BackOffError) as info:
        await h.handle(Op(cause), res(memory="1Gi"))
    err = info.value
    assert err.cause is cause
    assert err.message == "The operation was attempted but failed"
    assert err.has_code(ErrorCode.BACK_OFF_ERROR)
    assert is_resource_quota_exceeded(err)
    assert isinstance(err, PluginError)


async def test_success_resets_the_window_and_every_ceiling_to_infinity() -> None:
    clock = FakeClock()
    h = handler(clock, exponent=3, eligible_in=5, ceilings={"cpu": "4", "memory": "1Gi"})
    assert await h.handle(Op(), res(cpu="1")) == "created"
    assert h.blocker.exponent == 0
    assert h.blocker.next_eligible_time == clock.now()
    assert h.ceilings.ceilings == res(cpu="1Ei", memory="1Ei")


async def test_inactive_handler_with_base_zero_just_runs_the_operation_and_keeps_errors() -> None:
    clock = FakeClock()
    h = handler(clock, exponent=0, eligible_in=100, ceilings={"cpu": "1"}, base=0)
    cause = forbidden(QUOTA_1GI)
    op = Op(cause)
    with pytest.raises(KubeApiError) as info:
        await h.handle(op, res(cpu="8"))
    assert info.value is cause
    assert op.calls == 1
    assert h.ceilings.ceilings == res(cpu="1")


async def test_non_back_off_errors_propagate_unchanged_without_backing_off() -> None:
    clock = FakeClock()
    h = handler(clock, exponent=0, eligible_in=-1, ceilings={})
    cause = KubeApiError(422, "Invalid", "bad pod")
    with pytest.raises(KubeApiError) as info:
        await h.handle(Op(cause), res(cpu="1"))
    assert info.value is cause
    assert h.blocker.exponent == 0


@pytest.mark.parametrize(
    "error",
    [
        pytest.param(KubeApiError(429, "TooManyRequests", "slow down"), id="too_many_requests"),
        pytest.param(KubeApiError(504, "ServerTimeout", "try later"), id="server_timeout"),
        pytest.param(forbidden("etcdserver: request timed out"), id="etcd_error"),
    ],
)
async def test_overload_errors_back_off_without_touching_ceilings(error: KubeApiError) -> None:
    clock = FakeClock()
    h = handler(clock, exponent=0, eligible_in=-1, ceilings={"cpu": "4"})
    with pytest.raises(BackOffError):
        await h.handle(Op(error), res(cpu="1"))
    assert h.blocker.exponent == 1
    assert h.blocker.next_eligible_time == clock.now() + timedelta(seconds=1)
    assert h.ceilings.ceilings == res(cpu="4")


async def test_quota_exceeded_blocks_same_key_until_backoff_expires() -> None:
    clock = FakeClock()
    controller = BackOffController(clock)
    h = controller.get_or_create_handler("/v1, Kind=Pod,ns", 2, timedelta(seconds=20))
    # A new handler's window ends "now", and equal times block; real clocks have moved on by the first call.
    await clock.advance(0.001)
    op = Op(forbidden(QUOTA_1GI))
    with pytest.raises(BackOffError):
        await h.handle(op, res(memory="1Gi"))
    assert op.calls == 1
    # Within the 1 s window, the same request reaches the 1Gi ceiling: blocked locally.
    with pytest.raises(BackOffError, match="blocked"):
        await h.handle(op, res(memory="1Gi"))
    assert op.calls == 1
    # Exactly at expiry it is still blocked (equal times block).
    await clock.advance(1)
    with pytest.raises(BackOffError, match="blocked"):
        await h.handle(op, res(memory="1Gi"))
    assert op.calls == 1
    await clock.advance(0.001)
    op.error = None
    assert await h.handle(op, res(memory="1Gi")) == "created"
    assert op.calls == 2


async def test_smaller_request_is_tried_while_the_window_is_open() -> None:
    clock = FakeClock()
    h = handler(clock, exponent=1, eligible_in=10, ceilings={"memory": "1Gi"})
    op = Op()
    assert await h.handle(op, res(memory="512Mi")) == "created"
    assert op.calls == 1


# -- blocker -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("exponent", "want_exponent", "want_seconds"),
    [
        pytest.param(0, 1, 1, id="backoff_increases_the_exponent_and_starts_at_one_second"),
        pytest.param(9, 10, 512, id="backoff_does_not_saturate_below_the_cap"),
        pytest.param(10, 10, 600, id="backoff_saturates_at_the_cap_and_keeps_the_exponent"),
    ],
)
def test_blocker_back_off_follows_flytes_table(exponent: int, want_exponent: int, want_seconds: int) -> None:
    clock = FakeClock()
    b = SimpleBackOffBlocker(clock, 2, timedelta(minutes=10), exponent=exponent)
    assert b.back_off() == timedelta(seconds=want_seconds)
    assert b.exponent == want_exponent
    assert b.next_eligible_time == clock.now() + timedelta(seconds=want_seconds)


def test_blocker_stays_at_the_cap_after_many_back_offs() -> None:
    b = SimpleBackOffBlocker(FakeClock(), 2, timedelta(minutes=10), exponent=10)
    for _ in range(10):
        assert b.back_off() == timedelta(minutes=10)
        assert b.exponent == 10


def test_blocker_blocks_at_and_before_the_eligible_time_only() -> None:
    clock = FakeClock()
    b = SimpleBackOffBlocker(clock, 2, timedelta(seconds=20))
    assert b.is_blocking(clock.now())
    assert not b.is_blocking(clock.now() + timedelta(microseconds=1))


def test_blocker_reset_clears_the_exponent_and_opens_now() -> None:
    clock = FakeClock()
    b = SimpleBackOffBlocker(clock, 2, timedelta(seconds=20), exponent=4)
    b.back_off()
    b.reset()
    assert b.exponent == 0
    assert b.next_eligible_time == clock.now()


@given(
    base=st.integers(min_value=1, max_value=10),
    max_ms=st.integers(min_value=1, max_value=10_000_000),
    steps=st.integers(min_value=1, max_value=40),
)
def test_blocking_durations_are_monotone_non_decreasing_and_capped(
    base: int, max_ms: int, steps: int
) -> None:
    cap = timedelta(milliseconds=max_ms)
    b = SimpleBackOffBlocker(FakeClock(), base, cap)
    durations = [b.back_off() for _ in range(steps)]
    assert all(d <= cap for d in durations)
    assert all(a <= b_ for a, b_ in itertools.pairwise(durations))


# -- ceilings ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ceilings", "requested", "eligible"),
    [
        pytest.param({"cpu": "0.7m"}, {"cpu": "0.5m"}, True, id="smaller_request_is_accepted"),
        pytest.param({"memory": "32Gi"}, {"memory": "33Gi"}, False, id="larger_request_is_rejected"),
        pytest.param(
            {"cpu": "0.7m", "memory": "32Gi"},
            {"cpu": "0.69m", "memory": "33Gi"},
            False,
            id="one_larger_resource_rejects_the_request",
        ),
        pytest.param(
            {"cpu": "0.7m", "memory": "32Gi"},
            {"cpu": "0.7m", "memory": "32Gi"},
            False,
            id="equal_to_the_ceiling_is_rejected",
        ),
        pytest.param(
            {"cpu": "0.8m", "memory": "34Gi"},
            {"cpu": "0.7m", "memory": "32Gi"},
            True,
            id="all_smaller_is_accepted",
        ),
        pytest.param({"cpu": "1"}, {"memory": "100Gi"}, True, id="resources_without_a_ceiling_do_not_matter"),
    ],
)
def test_ceiling_eligibility(ceilings: dict[str, str], requested: dict[str, str], eligible: bool) -> None:
    assert ComputeResourceCeilings(ceilings).is_eligible(res(**requested)) is eligible


@pytest.mark.parametrize(
    ("ceilings", "resource", "quantity", "want"),
    [
        pytest.param(
            {"cpu": "1", "memory": "1Gi"}, "cpu", "0", {"cpu": "0", "memory": "1Gi"}, id="lower_cpu"
        ),
        pytest.param(
            {"cpu": "1", "memory": "1Gi"},
            "memory",
            "500Mi",
            {"cpu": "1", "memory": "500Mi"},
            id="lower_memory",
        ),
        pytest.param({}, "cpu", "1", {"cpu": "1"}, id="cpu_without_existing_ceiling"),
        pytest.param({}, "memory", "500Mi", {"memory": "500Mi"}, id="memory_without_existing_ceiling"),
        pytest.param(
            {"cpu": "1"}, "cpu", "500m", {"cpu": "1"}, id="sub_unit_difference_does_not_lower_by_value"
        ),
        pytest.param({"cpu": "2"}, "cpu", "1500m", {"cpu": "2"}, id="value_rounds_up_so_1500m_equals_2"),
        pytest.param({"cpu": "1"}, "cpu", "4", {"cpu": "1"}, id="larger_quantity_never_raises_a_ceiling"),
    ],
)
def test_ceiling_update_uses_whole_unit_values(
    ceilings: dict[str, str], resource: str, quantity: str, want: dict[str, str]
) -> None:
    c = ComputeResourceCeilings(ceilings)
    c.update(resource, q(quantity))
    assert c.ceilings == res(**want)
    assert {k: str(v) for k, v in c.ceilings.items()} == {k: str(q(v)) for k, v in want.items()}


def test_reset_all_keeps_keys_and_sets_them_to_one_exbibyte() -> None:
    c = ComputeResourceCeilings({"cpu": "1", "memory": "1Gi"})
    c.reset_all()
    assert c.ceilings == {"cpu": q("1Ei"), "memory": q("1Ei")}
    assert c.inf() == q("1Ei")
    c.reset("gpu")
    assert set(c.ceilings) == {"cpu", "memory", "gpu"}


def test_ceilings_string_lists_keys_in_order_with_trailing_separator() -> None:
    assert str(ComputeResourceCeilings({"memory": "1Gi", "cpu": "2"})) == "cpu:2, memory:1Gi, "


# -- controller --------------------------------------------------------------------------------------------


def test_get_or_create_handler_does_not_update_parameters_of_an_existing_handler() -> None:
    controller = BackOffController(FakeClock())
    first = controller.get_or_create_handler("k", 2, timedelta(seconds=20))
    again = controller.get_or_create_handler("k", 5, timedelta(seconds=99))
    assert again is first
    assert (first.blocker.base_second, first.blocker.max_duration) == (2, timedelta(seconds=20))
    assert first.blocker.exponent == 0
    assert controller.get_handler("k") is first
    assert controller.get_handler("other") is None


# -- error helpers -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "regex", "want"),
    [
        pytest.param(
            "exceeded quota: q, requested: limits.memory=3Gi,"
            "used: limits.memory=7976Gi, limited: limits.memory=8000Gi",
            REQUESTED_LIMITS_RE,
            {"memory": "3Gi"},
            id="memory_requested",
        ),
        pytest.param(
            "exceeded quota: q, requested: limits.cpu=3640m,"
            "used: limits.cpu=6000m, limited: limits.cpu=8000m",
            REQUESTED_LIMITS_RE,
            {"cpu": "3640m"},
            id="cpu_requested",
        ),
        pytest.param(
            "exceeded quota: q, requested: limits.cpu=7,limits.memory=64Gi, used: limits.cpu=249,"
            "limits.memory=2012730Mi, limited: limits.cpu=250,limits.memory=2000Gi",
            REQUESTED_LIMITS_RE,
            {"cpu": "7", "memory": "64Gi"},
            id="multiple_resources",
        ),
        pytest.param(
            "exceeded quota: q, requested: limits.cpu=7,limits.memory=64Gi, used: limits.cpu=249, "
            "limited: limits.cpu=250,limits.memory=2000Gi",
            LIMITED_LIMITS_RE,
            {"cpu": "250", "memory": "2000Gi"},
            id="limited_limits",
        ),
        pytest.param(
            "exceeded quota: q, requested: limits.memory=1.5Gi, used: x",
            REQUESTED_LIMITS_RE,
            {"memory": "1"},
            id="value_with_a_dot_is_truncated_as_in_flyte",
        ),
        pytest.param(
            "exceeded quota: q, requested: limits.nvidia.com/gpu=1, used: x",
            REQUESTED_LIMITS_RE,
            {},
            id="resource_name_with_dots_is_not_captured",
        ),
        pytest.param(
            "exceeded quota: q, requested: limits.cpu=1,limits.nvidia.com/gpu=1",
            REQUESTED_LIMITS_RE,
            {"cpu": "1"},
            id="capture_stops_at_a_dotted_resource_name",
        ),
        pytest.param("exceeded quota: q", REQUESTED_LIMITS_RE, {}, id="no_match_is_empty"),
        pytest.param(
            "exceeded quota: q, requested: requests.cpu=2, used: requests.cpu=1, limited: requests.cpu=2",
            REQUESTED_REQUESTS_RE,
            {"cpu": "2"},
            id="requests_list",
        ),
    ],
)
def test_get_compute_resource_and_quantity_parses_flytes_regexes(
    message: str, regex: re.Pattern[str], want: dict[str, str]
) -> None:
    assert get_compute_resource_and_quantity(forbidden(message), regex) == res(**want)


@pytest.mark.parametrize(
    ("message", "eligible"),
    [
        pytest.param(QUOTA_1GI, True, id="fits_under_the_hard_limit"),
        pytest.param(
            "exceeded quota: q, requested: limits.memory=9000Gi,"
            "used: limits.memory=0, limited: limits.memory=8000Gi",
            False,
            id="limits_above_the_hard_limit",
        ),
        pytest.param(
            "exceeded quota: q, requested: limits.memory=8000Gi,"
            "used: limits.memory=0, limited: limits.memory=8000Gi",
            False,
            id="limits_equal_to_the_hard_limit",
        ),
        pytest.param(
            "exceeded quota: q, requested: requests.cpu=3, used: requests.cpu=0, limited: requests.cpu=2",
            False,
            id="requests_above_the_hard_limit",
        ),
        pytest.param("exceeded quota: q", True, id="nothing_parsed_is_eligible"),
    ],
)
def test_is_resource_requests_eligible(message: str, eligible: bool) -> None:
    assert is_resource_requests_eligible(forbidden(message)) is eligible


@pytest.mark.parametrize(
    ("error", "quota", "etcd", "back_off"),
    [
        pytest.param(forbidden(QUOTA_1GI), True, False, True, id="quota_exceeded"),
        pytest.param(
            forbidden(QUOTA_1GI.replace("exceeded", "exxxceed")), False, False, False, id="other_forbidden"
        ),
        pytest.param(
            KubeApiError(409, "Conflict", "exceeded quota"), False, False, False, id="not_forbidden"
        ),
        pytest.param(
            KubeApiError(403, "", "exceeded quota"), True, False, True, id="unknown_reason_with_403"
        ),
        pytest.param(forbidden("etcdserver: leader changed"), False, True, True, id="etcd"),
        pytest.param(KubeApiError(429, "TooManyRequests", "x"), False, False, True, id="too_many_requests"),
        pytest.param(KubeApiError(429, "", "x"), False, False, True, id="429_with_unknown_reason"),
        pytest.param(KubeApiError(504, "ServerTimeout", "x"), False, False, True, id="server_timeout"),
        pytest.param(KubeApiError(500, "InternalError", "x"), False, False, False, id="internal_error"),
        pytest.param(
            PluginError(ErrorCode.BAD_TASK_SPECIFICATION, "x"), False, False, False, id="plugin_error"
        ),
        pytest.param(ValueError("exceeded quota"), False, False, False, id="foreign_error"),
    ],
)
def test_error_helpers_classify_api_errors(error: Exception, quota: bool, etcd: bool, back_off: bool) -> None:
    assert is_resource_quota_exceeded(error) is quota
    assert is_etcd_error(error) is etcd
    assert is_back_off_error(error) is back_off
