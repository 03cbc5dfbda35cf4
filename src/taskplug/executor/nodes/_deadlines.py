"""A node's deadlines: when an attempt has run too long, and when the node has (pure rules).

Follows flytepropeller/pkg/controller/nodes/executor.go (``execute``, ``isTimeoutExpired``) and the node spec
flyteadmin compiles (``transformers/k8s/node.go computeDeadline``): a task's ``timeout`` becomes the node's
**execution deadline**, measured from the current attempt's start — past it the attempt fails
``RetryableFailure {USER, TimeoutExpired, "task execution timeout [<d>] expired"}`` and its object is
aborted, so a node with retries left runs again; and twice that is the node's **active deadline**, measured
from when the node was first queued — past it the node ends ``TimedOut``, whatever retries are left.
``<d>`` is Go's ``Duration.String()``.
"""

from __future__ import annotations

from datetime import timedelta

from taskplug.core import PhaseInfo, format_go_duration

__all__ = ["ACTIVE_DEADLINE_CODE", "EXECUTION_DEADLINE_CODE", "deadline_passed", "next_deadline"]

EXECUTION_DEADLINE_CODE = "TimeoutExpired"
ACTIVE_DEADLINE_CODE = "Timeout"


def _duration(seconds: float) -> str:
    return format_go_duration(timedelta(seconds=seconds))


def deadline_passed(
    now: float, *, timeout: float | None, started_at: float | None, queued_at: float | None
) -> PhaseInfo | None:
    """The failure a node's deadline makes of this round, or None while both hold.

    The active deadline (node, ``TimedOut``: the returned info is a permanent failure with code ``Timeout``;
    the caller ends the node ``TIMED_OUT``) is checked first: past it no retry is due, as in propeller, which
    checks it before the attempt's execution deadline."""
    if timeout is None or timeout <= 0:
        return None
    if queued_at is not None and now - queued_at >= 2 * timeout:
        return PhaseInfo.failure_with_cleanup(
            ACTIVE_DEADLINE_CODE, f"task active timeout [{_duration(2 * timeout)}] expired"
        )
    if started_at is not None and now - started_at >= timeout:
        return PhaseInfo.retryable_failure_with_cleanup(
            EXECUTION_DEADLINE_CODE, f"task execution timeout [{_duration(timeout)}] expired"
        )
    return None


def next_deadline(
    now: float, *, timeout: float | None, started_at: float | None, queued_at: float | None
) -> float | None:
    """Seconds until the nearer of the node's two deadlines (0 when one has passed); None without a timeout."""
    if timeout is None or timeout <= 0:
        return None
    waits = []
    if started_at is not None:
        waits.append(started_at + timeout - now)
    if queued_at is not None:
        waits.append(queued_at + 2 * timeout - now)
    return max(min(waits), 0.0) if waits else None
