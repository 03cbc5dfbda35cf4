"""Retry budgets and back-off: pure rules every node kind's attempts follow.

Follows flytepropeller/pkg/controller/nodes/executor.go (``isEligibleForRetry``, the ``RetriesExhausted``
error of ``handleRetryableFailure``) and the node's retry strategy (``node-config.default-max-attempts``,
``ignore-retry-cause``, ``max-node-retries-system-failures``).
"""

from __future__ import annotations

from dataclasses import dataclass

from taskplug.core import ErrorKind, ExecutionError

__all__ = ["RetryDecision", "decide_retry", "max_attempts_for", "retries_exhausted", "retry_delay"]


@dataclass(frozen=True, slots=True)
class RetryDecision:
    """Whether a retryable failure gets another attempt, and the ``[current/max]`` propeller reports."""

    retry: bool
    current: int
    maximum: int


def decide_retry(
    *,
    kind: ErrorKind | str,
    attempts: int,
    system_failures: int,
    max_attempts: int,
    max_system_failures: int,
    ignore_retry_cause: bool = False,
) -> RetryDecision:
    """``isEligibleForRetry`` for a node's retryable failure (before the failure is counted).

    A SYSTEM failure is retried while fewer than ``max_system_failures`` happened; any other while
    ``attempts + 1 - system_failures < max_attempts``; with ``ignore_retry_cause`` while
    ``attempts + 1 < max_attempts``.
    """
    if ignore_retry_cause:
        current = attempts + 1
    elif str(kind) == ErrorKind.SYSTEM:
        return RetryDecision(system_failures < max_system_failures, system_failures, max_system_failures)
    else:
        current = attempts + 1 - system_failures
    return RetryDecision(current < max_attempts, current, max_attempts)


def retries_exhausted(err: ExecutionError, decision: RetryDecision) -> ExecutionError:
    """The permanent failure a node ends with when its retries are spent."""
    return ExecutionError(
        f"RetriesExhausted|{err.code}",
        f"[{decision.current}/{decision.maximum}] currentAttempt done. Last Error: {err.kind}::{err.message}",
        ErrorKind.USER,
    )


def max_attempts_for(min_attempts: int | None, default_max_attempts: int) -> int:
    """The user-failure budget of a node: its retry strategy's ``MinAttempts`` (retries + 1), or
    ``default-max-attempts`` when that is unset or 1, as propeller reads ``GetRetryStrategy``."""
    return min_attempts if min_attempts is not None and min_attempts != 1 else default_max_attempts


def retry_delay(errors: int, cap: float) -> float:
    """How long to wait before the next round after ``errors`` consecutive failed ones (a plugin that could
    not decide, a cleanup that failed, a round that raised): 0.1 s, doubling, at most ``cap``. The exponent
    is bounded, so no count overflows it."""
    return min(2.0 ** min(max(errors, 0), 60) * 0.05, cap)
