"""Token-bucket arithmetic and the work-queue read limit of the status cache, on a fake clock."""

from __future__ import annotations

import asyncio
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from taskplug.core import FakeClock
from taskplug.engine.webapi._ratelimit import (
    BucketState,
    TokenBucket,
    TokenBucketSpec,
    WorkQueueRateLimiter,
    reserve,
    time_to_token,
    try_take,
)

EPS = 1e-6

specs = st.builds(
    TokenBucketSpec,
    qps=st.floats(min_value=0.1, max_value=1000, allow_nan=False, allow_infinity=False),
    burst=st.integers(min_value=1, max_value=50),
)
gaps = st.lists(st.floats(min_value=0, max_value=2, allow_nan=False), min_size=1, max_size=300)


def _assert_bucket_law(spec: TokenBucketSpec, grants: list[float]) -> None:
    grants = sorted(grants)
    for i in range(len(grants)):
        for j in range(i, len(grants)):
            count = j - i + 1
            window = grants[j] - grants[i]
            assert count <= spec.burst + spec.qps * window + EPS, (count, window, spec)


@settings(max_examples=200, deadline=None)
@given(spec=specs, gaps=gaps)
def test_try_take_never_grants_more_than_burst_plus_qps_times_t(
    spec: TokenBucketSpec, gaps: list[float]
) -> None:
    state, now, grants = BucketState.full(spec, 0.0), 0.0, []
    for gap in gaps:
        now += gap
        state, granted = try_take(spec, state, now)
        if granted:
            grants.append(now)
    _assert_bucket_law(spec, grants)


@settings(max_examples=200, deadline=None)
@given(spec=specs, gaps=gaps)
def test_reserved_grants_never_exceed_burst_plus_qps_times_t(
    spec: TokenBucketSpec, gaps: list[float]
) -> None:
    state, now, grants = BucketState.full(spec, 0.0), 0.0, []
    for gap in gaps:
        now += gap
        state, delay = reserve(spec, state, now)
        assert delay >= 0
        grants.append(now + delay)
    _assert_bucket_law(spec, grants)


@settings(max_examples=100, deadline=None)
@given(spec=specs, n=st.integers(min_value=1, max_value=500))
def test_reservations_at_one_instant_are_spaced_by_one_over_qps_after_the_burst(
    spec: TokenBucketSpec, n: int
) -> None:
    state, delays = BucketState.full(spec, 0.0), []
    for _ in range(n):
        state, delay = reserve(spec, state, 0.0)
        delays.append(delay)
    for k, delay in enumerate(delays):
        expected = max(0.0, (k + 1 - spec.burst) / spec.qps)
        assert math.isclose(delay, expected, rel_tol=1e-9, abs_tol=1e-9)


def test_a_full_bucket_grants_burst_tokens_then_refuses() -> None:
    spec = TokenBucketSpec(qps=1, burst=3)
    state = BucketState.full(spec, 0.0)
    results = []
    for _ in range(4):
        state, granted = try_take(spec, state, 0.0)
        results.append(granted)
    assert results == [True, True, True, False]
    state, granted = try_take(spec, state, 1.0)
    assert granted


def test_tokens_accrue_at_qps_and_are_capped_at_burst() -> None:
    spec = TokenBucketSpec(qps=2, burst=5)
    state = BucketState(0.0, 0.0)
    state, _ = try_take(spec, state, 100.0)
    assert state.tokens == 4.0


def test_an_unlimited_bucket_always_grants_without_delay() -> None:
    spec = TokenBucketSpec(qps=math.inf, burst=1)
    state = BucketState.full(spec, 0.0)
    for _ in range(1000):
        state, delay = reserve(spec, state, 0.0)
        assert delay == 0.0


@pytest.mark.parametrize(("qps", "burst"), [(0, 1), (-1, 1), (1, 0)])
def test_a_bucket_needs_a_positive_rate_and_burst(qps: float, burst: int) -> None:
    with pytest.raises(ValueError):
        TokenBucketSpec(qps=qps, burst=burst)


async def test_wait_sleeps_through_the_clock_until_a_token_is_due() -> None:
    clock = FakeClock()
    bucket = TokenBucket(TokenBucketSpec(qps=2, burst=1), clock)
    await bucket.wait()  # the burst token: no sleep
    waiter = asyncio.create_task(bucket.wait())
    await asyncio.sleep(0)
    assert not waiter.done()
    await clock.advance(0.4)
    assert not waiter.done()
    await clock.advance(0.1)
    assert waiter.done()
    await waiter


def test_work_queue_delay_is_at_least_five_milliseconds_per_item() -> None:
    clock = FakeClock()
    limiter = WorkQueueRateLimiter(TokenBucket(TokenBucketSpec(qps=1000, burst=100), clock))
    assert [limiter.when() for _ in range(3)] == [0.005, 0.005, 0.005]


def test_work_queue_delay_follows_the_bucket_once_the_burst_is_spent() -> None:
    clock = FakeClock()
    limiter = WorkQueueRateLimiter(TokenBucket(TokenBucketSpec(qps=10, burst=2), clock))
    delays = [limiter.when() for _ in range(5)]
    assert delays[:2] == [0.005, 0.005]
    assert [round(d, 9) for d in delays[2:]] == [0.1, 0.2, 0.3]


@settings(max_examples=30, deadline=None)
@given(spec=specs, waiters=st.integers(min_value=1, max_value=40), lag=st.floats(min_value=0, max_value=3))
async def test_concurrent_waiters_obey_the_bucket_law_even_after_a_stall(
    spec: TokenBucketSpec, waiters: int, lag: float
) -> None:
    # Tokens are taken when wait() returns, so a stall before the waiters run cannot bunch them beyond the law.
    clock = FakeClock()
    bucket = TokenBucket(spec, clock)
    times: list[float] = []

    async def one() -> None:
        await bucket.wait()
        times.append(clock.monotonic())

    await clock.advance(lag)
    tasks = [asyncio.create_task(one()) for _ in range(waiters)]
    while not all(t.done() for t in tasks):
        await clock.advance(0.05)
    _assert_bucket_law(spec, times)


def test_time_to_token_is_zero_when_one_is_there_and_the_refill_time_otherwise() -> None:
    spec = TokenBucketSpec(qps=4, burst=2)
    assert time_to_token(spec, BucketState(1.0, 0.0), 0.0) == 0.0
    assert time_to_token(spec, BucketState(0.5, 0.0), 0.0) == pytest.approx(0.125)
    assert time_to_token(spec, BucketState(-1.0, 0.0), 0.0) == pytest.approx(0.5)
