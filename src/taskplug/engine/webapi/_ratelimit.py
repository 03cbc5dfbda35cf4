"""Token buckets and the status cache's work-queue rate limit.

Follows golang.org/x/time/rate (the ``BucketRateLimiter`` client-go wraps) and the limiter flytestdlib's
AutoRefresh builds: ``MaxOf(ItemExponentialFailureRateLimiter(5ms, 1000s), BucketRateLimiter(qps, burst))``.
Because every batch is a new object and is forgotten as soon as a worker takes it, the per-item exponential
part never grows past its base, so the policy is: every item waits at least 5 ms **and** for a bucket token.

The arithmetic is pure (:func:`refill`, :func:`try_take`, :func:`reserve`, :func:`time_to_token` over a
:class:`BucketState`); :class:`TokenBucket` holds the state and reads an injected :class:`~taskplug.core.Clock`.

Deviation: client-go reserves the bucket token when an item is *queued* and the item waits for the
reservation. If the event loop (or a worker) lags, reserved tokens are then used late and back to back, so
the calls themselves can exceed ``burst + qps·t``. Here the 5 ms floor is applied when an item is queued and
the token is taken (:meth:`TokenBucket.wait`: take one if available now, else sleep until one accrues) when a
worker is about to call ``get``, so the law holds on the actual call times.

Deviation: Flyte validates ``writeRateLimiter`` but never applies it; here the web-API adapter passes every
create and delete through a write bucket built from it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from taskplug.core import Clock
from taskplug.webapi import RateLimiterConfig

__all__ = [
    "WORK_QUEUE_BASE_DELAY",
    "BucketState",
    "TokenBucket",
    "TokenBucketSpec",
    "WorkQueueRateLimiter",
    "refill",
    "reserve",
    "time_to_token",
    "try_take",
]

WORK_QUEUE_BASE_DELAY = 0.005
"""The per-item floor of the work queue's limiter (client-go's ItemExponentialFailureRateLimiter base)."""


@dataclass(frozen=True, slots=True)
class TokenBucketSpec:
    """``qps`` tokens are added per second up to ``burst``; ``qps = inf`` means no limit."""

    qps: float
    burst: int

    def __post_init__(self) -> None:
        if not self.qps > 0:
            raise ValueError(f"qps must be positive, got {self.qps}")
        if self.burst < 1:
            raise ValueError(f"burst must be at least 1, got {self.burst}")

    @classmethod
    def from_config(cls, cfg: RateLimiterConfig) -> TokenBucketSpec:
        return cls(cfg.qps, cfg.burst)

    @property
    def unlimited(self) -> bool:
        return math.isinf(self.qps)


@dataclass(frozen=True, slots=True)
class BucketState:
    """Tokens available at monotonic time ``at`` (negative when future grants are already promised)."""

    tokens: float
    at: float

    @classmethod
    def full(cls, spec: TokenBucketSpec, now: float) -> BucketState:
        return cls(float(spec.burst), now)


def refill(spec: TokenBucketSpec, state: BucketState, now: float) -> BucketState:
    """The state at ``now``: tokens accrued since ``state.at``, capped at ``burst``; time never runs back."""
    if now <= state.at:
        return state
    if spec.unlimited:
        return BucketState(float(spec.burst), now)
    return BucketState(min(float(spec.burst), state.tokens + (now - state.at) * spec.qps), now)


def try_take(spec: TokenBucketSpec, state: BucketState, now: float) -> tuple[BucketState, bool]:
    """Take a token if one is available now (``rate.Limiter.Allow``)."""
    current = refill(spec, state, now)
    if spec.unlimited:
        return current, True
    if current.tokens >= 1.0:
        return BucketState(current.tokens - 1.0, current.at), True
    return current, False


def reserve(spec: TokenBucketSpec, state: BucketState, now: float) -> tuple[BucketState, float]:
    """Promise a token and say how long to wait for it (``rate.Limiter.Reserve``; the bucket may go negative).

    The grant happens at ``now + delay``; over any interval of length t there are at most
    ``burst + qps * t`` grants.
    """
    current = refill(spec, state, now)
    if spec.unlimited:
        return current, 0.0
    tokens = current.tokens - 1.0
    delay = 0.0 if tokens >= 0 else -tokens / spec.qps
    return BucketState(tokens, current.at), delay


def time_to_token(spec: TokenBucketSpec, state: BucketState, now: float) -> float:
    """Seconds from ``now`` until one whole token is available (0 if one is)."""
    current = refill(spec, state, now)
    if spec.unlimited or current.tokens >= 1.0:
        return 0.0
    return (1.0 - current.tokens) / spec.qps


class TokenBucket:
    """A token bucket over an injected clock; starts full."""

    def __init__(self, spec: TokenBucketSpec, clock: Clock) -> None:
        self.spec = spec
        self._clock = clock
        self._state = BucketState.full(spec, clock.monotonic())

    def try_acquire(self) -> bool:
        self._state, granted = try_take(self.spec, self._state, self._clock.monotonic())
        return granted

    def reserve(self) -> float:
        """Promise a token; returns the seconds to wait before using it."""
        self._state, delay = reserve(self.spec, self._state, self._clock.monotonic())
        return delay

    async def wait(self) -> None:
        """Take a token, sleeping through the clock until one accrues; the token is taken at return time."""
        clock, spec = self._clock, self.spec
        while True:
            now = clock.monotonic()
            self._state, granted = try_take(spec, self._state, now)
            if granted:
                return
            # Waiters racing for the same token simply go round again.
            await clock.sleep(max(time_to_token(spec, self._state, now), 1e-9))


class WorkQueueRateLimiter:
    """The status cache's read limit: every item waits 5 ms after it is queued and for a bucket token.

    :meth:`when` is client-go's ``max(5 ms, reservation delay)`` (pure, kept for reference and tests); the
    cache applies :attr:`base_delay` when queuing and :meth:`TokenBucket.wait` before each sync.
    """

    def __init__(self, bucket: TokenBucket, base_delay: float = WORK_QUEUE_BASE_DELAY) -> None:
        self.bucket = bucket
        self.base_delay = base_delay

    def when(self) -> float:
        """The delay before the item being added may be processed (always reserves a bucket token)."""
        return max(self.base_delay, self.bucket.reserve())
