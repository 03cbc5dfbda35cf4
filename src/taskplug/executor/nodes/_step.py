"""The generic node step: one round of any node's attempt, written once for every node kind.

Follows flytepropeller/pkg/controller/nodes/executor.go — ``handleQueuedOrRunningNode`` / ``execute`` (call the
handler, then check the deadlines), ``isEligibleForRetry`` and ``handleRetryableFailure`` (retry budgets, the
next attempt), ``finalize`` before a node ends — over a :class:`NodeState` (what a node's status keeps) and a
:class:`NodeHandler` (what one node kind does: nodes/interfaces/handler.go).

A round of a node that has not decided its attempt's end is :meth:`NodeStep.evaluate`: it starts the node
and the attempt (their start times feed the deadlines), checks the deadlines, calls the handler, bounds a
handler that cannot decide (``executor.max-round-errors`` rounds in a row, then a system failure), and turns
the handler's phase into the node's decision: success, a retry while the budgets last (user failures get the
node's ``MinAttempts``, system failures ``max-node-retries-system-failures``), or a permanent failure
(``RetriesExhausted|<code>`` when the budget ran out). The decision is written into the node's ``closing``;
the caller **saves it before** :meth:`NodeStep.close` cleans up (abort when the handler asked for it, then
finalize), so a process stopped in between finishes the cleanup on resume and never decides twice. A cleanup
that keeps failing is retried for as many rounds, then given up (:class:`GivenUp`): what the caller does
with that — end the execution ``CleanupFailed``, fail a map task — is the container's business.
Deviation: propeller retries a failing finalize in every round until ``max-workflow-retries`` fails the
workflow ("Workflow abort failed"), then stops cleaning up; taskplug keeps the same bound per node and says
what may be left behind.

The step does not report events and does not save: it changes the node and says what changed; the node's
container (the executor for a root node, the array handler for an element) reports and persists, so an
element's changes can go out in one event per round, as propeller's ArrayNode reports them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Protocol

from flyteidl.core import literals_pb2

from taskplug.core import Clock, ErrorCode, ErrorKind, ExecutionError, Phase, PhaseInfo, PluginError
from taskplug.executor._store import Closing
from taskplug.executor.nodes._deadlines import deadline_passed, next_deadline
from taskplug.executor.nodes._phase import NodePhase
from taskplug.executor.nodes._retry import decide_retry, retries_exhausted, retry_delay
from taskplug.executor.nodes._settings import NodeSettings

__all__ = [
    "CLEANUP_FAILED",
    "Cleanup",
    "Evaluation",
    "GivenUp",
    "HandlerResult",
    "NodeHandler",
    "NodeRuntime",
    "NodeState",
    "NodeStep",
    "error_json",
]

log = logging.getLogger(__name__)

CLEANUP_FAILED = "CleanupFailed"
"""The error code of a node whose cleanup (abort, finalize) failed ``executor.max-round-errors`` times in a row
and was given up."""


def error_json(err: ExecutionError | None) -> dict[str, Any] | None:
    """An error as records, events and results carry it."""
    if err is None:
        return None
    return {"code": err.code, "message": err.message, "kind": str(err.kind)}


class NodeState(Protocol):
    """What the step reads and writes of a node's stored status (``NodeRecord``; ``ExecutionRecord``, which
    adds the execution's own fields, for a root node)."""

    node_phase: int  # NodePhase
    attempt: int  # the current retry attempt
    task_phase: int  # the Phase the handler last reported this attempt
    phase_version: int
    reason: str
    state_version: int
    plugin_state: dict[str, Any] | None
    system_failures: int
    started_at: float | None  # the current attempt's start (epoch seconds): the execution deadline's origin
    queued_at: float | None  # the node's first start: the active deadline's origin
    cleanup_on_failure: bool
    closing: Closing | None
    error: dict[str, Any] | None

    @property
    def first_attempt(self) -> int:
        """Where this node's attempt budget is counted from (a ``--rerun`` history starts after the old one)."""
        ...


@dataclass(frozen=True, slots=True)
class HandlerResult:
    """What a handler's round decided: the phase (a terminal one is final: the handler has already checked
    what a success produced), the outputs of a success, and whether the handler changed the node's state."""

    info: PhaseInfo
    outputs: literals_pb2.LiteralMap | None = None
    state_changed: bool = False


class NodeHandler(Protocol):
    """One node kind's part of a round (nodes/interfaces/handler.go), bound to one node's round. ``handle``
    raises when it cannot decide (an API that cannot be reached); ``abort`` and ``finalize`` raise when they
    fail (an object that may be left behind carries ``leftovers``)."""

    async def handle(self, node: NodeState) -> HandlerResult: ...

    async def abort(self) -> None: ...

    async def finalize(self) -> None: ...


@dataclass(slots=True)
class NodeRuntime:
    """What a node's rounds remember in memory only (a restart starts the counts afresh)."""

    round_errors: int = 0  # consecutive rounds whose handler could not decide
    cleanup_errors: int = 0  # consecutive rounds whose cleanup failed


@dataclass(slots=True)
class Evaluation:
    """One evaluated round: the handler's phase (``observed``, None when it could not decide), the node's
    decided phase (``info``: the same, or the retry decision's), the outputs of a success, whether the node
    changed, and when the next round is due without an event (None: the caller's resync period)."""

    observed: PhaseInfo | None = None
    info: PhaseInfo | None = None
    outputs: literals_pb2.LiteralMap | None = None
    changed: bool = False
    next_round_in: float | None = None


@dataclass(frozen=True, slots=True)
class GivenUp:
    """A cleanup given up after ``executor.max-round-errors`` failures in a row."""

    step: str  # "abort" or "finalize"
    error: Exception
    count: int
    leftovers: list[dict[str, Any]] = field(default_factory=list)  # objects that may be left: kind, ns, name

    def describe(self, decided: str) -> str:
        """The sentence a given-up cleanup is reported with (``decided``: the attempt's decided end)."""
        return (
            f"the attempt ended ({decided}) but its cleanup failed {self.count} times in a row "
            f"(executor.max-round-errors) and was given up; last {self.step} error: {self.error}"
        )

    @staticmethod
    def listing(leftovers: list[dict[str, Any]]) -> str:
        return ", ".join(f"{o.get('kind')} {o.get('namespace')}/{o.get('name')}" for o in leftovers)


@dataclass(frozen=True, slots=True)
class Cleanup:
    """How a cleanup round went: ``done`` (the node moved on: ``retried`` into its next attempt, or ended in
    ``node_phase``), not yet (``next_round_in``), or ``given_up``."""

    done: bool
    retried: bool = False
    given_up: GivenUp | None = None
    next_round_in: float | None = None
    error: Exception | None = None  # why a cleanup not done yet failed this round


class NodeStep:
    """The node step of one executor: its settings and clock."""

    def __init__(self, settings: NodeSettings, clock: Clock) -> None:
        self.settings = settings
        self.clock = clock

    def next_round_in(self, node: NodeState, timeout: float | None) -> float:
        """When a running node's next round is due without an event: the resync period, sooner for a
        deadline."""
        delay = self.settings.resync_period
        if not timeout:
            return delay
        deadline = next_deadline(
            self.clock.now().timestamp(),
            timeout=timeout,
            started_at=node.started_at,
            queued_at=node.queued_at,
        )
        return delay if deadline is None else min(delay, deadline)

    # -- deciding -------------------------------------------------------------------------------------------
    async def evaluate(
        self,
        node: NodeState,
        handler: NodeHandler,
        runtime: NodeRuntime,
        *,
        label: str,
        max_attempts: int,
        time_limit: float | None = None,
    ) -> Evaluation:
        """One round of ``node``, whose attempt's end is not decided yet (``node.closing`` is None).
        ``time_limit``: the node's timeout in seconds (its execution deadline; twice it, the active one)."""
        out = Evaluation()
        if node.node_phase == NodePhase.NOT_YET_STARTED:
            node.node_phase = int(NodePhase.RUNNING)
            out.changed = True
        info = None
        # The clock is read only when a start is recorded or a deadline checked: most rounds need neither.
        if node.queued_at is None or node.started_at is None or time_limit:
            now = self.clock.now().timestamp()
            if node.queued_at is None:
                node.queued_at = now
                out.changed = True
            if node.started_at is None:
                node.started_at = now
                out.changed = True
            info = deadline_passed(
                now, timeout=time_limit, started_at=node.started_at, queued_at=node.queued_at
            )
        timed_out = info is not None and info.phase is Phase.PERMANENT_FAILURE
        if info is None:
            try:
                result = await handler.handle(node)
            except Exception as e:  # the handler could not decide this round
                runtime.round_errors += 1
                log.warning("%s: round error %d: %s", label, runtime.round_errors, e)
                if runtime.round_errors < self.settings.max_round_errors:
                    out.next_round_in = retry_delay(runtime.round_errors, self.settings.resync_period)
                    return out
                code = e.code if isinstance(e, PluginError) else ErrorCode.SYSTEM_ERROR
                info = PhaseInfo.system_retryable_failure(
                    str(code), f"the plugin failed {runtime.round_errors} rounds in a row: {e}"
                )
                runtime.round_errors = 0
            else:
                runtime.round_errors = 0
                info, out.outputs = result.info, result.outputs
                out.changed = out.changed or result.state_changed
        out.observed = info
        node.cleanup_on_failure = node.cleanup_on_failure or info.cleanup_on_failure
        if info.phase is Phase.SUCCESS:
            node.closing = {"retry": False, "cleanup": False, "phase": int(NodePhase.SUCCEEDED)}
            node.node_phase = int(NodePhase.SUCCEEDING)
            node.error = None
        elif info.phase.is_failure or info.phase is Phase.ABORTED:
            info = self._decide_failure(node, info, max_attempts=max_attempts, timed_out=timed_out)
        else:
            out.next_round_in = self.next_round_in(node, time_limit)
        out.info = info
        return out

    def _decide_failure(
        self, node: NodeState, info: PhaseInfo, *, max_attempts: int, timed_out: bool
    ) -> PhaseInfo:
        """A failed attempt: retried while the budgets last (the failure counted as propeller counts it), else
        the node fails — ``RetriesExhausted|<code>`` when a budget ran out."""
        err = info.err or ExecutionError(
            ErrorCode.TASK_FAILED_UNKNOWN_ERROR, "the task failed with no error", ErrorKind.SYSTEM
        )
        cleanup = node.cleanup_on_failure
        if info.phase is Phase.RETRYABLE_FAILURE:
            s = self.settings
            decision = decide_retry(
                kind=err.kind,
                attempts=node.attempt - node.first_attempt,
                system_failures=node.system_failures,
                max_attempts=max_attempts,
                max_system_failures=s.max_system_failures,
                ignore_retry_cause=s.ignore_retry_cause,
            )
            if err.kind is ErrorKind.SYSTEM:
                node.system_failures += 1
            if decision.retry:
                node.error = error_json(err)
                node.closing = {"retry": True, "cleanup": cleanup, "phase": int(NodePhase.RUNNING)}
                node.node_phase = int(NodePhase.RETRYABLE_FAILURE)
                return PhaseInfo(Phase.RETRYABLE_FAILURE, 0, info.info, err, info.reason)
            err = retries_exhausted(err, decision)
        elif err.kind is ErrorKind.SYSTEM:
            # Deviation: propeller counts a permanent SYSTEM failure twice (and, for a map element, a count
            # past its compact array's width panics every round after); it is one failure, counted once.
            node.system_failures += 1
        node.error = error_json(err)
        end = NodePhase.TIMED_OUT if timed_out else NodePhase.FAILED
        node.closing = {"retry": False, "cleanup": cleanup, "phase": int(end)}
        node.node_phase = int(NodePhase.TIMING_OUT if timed_out else NodePhase.FAILING)
        phase = Phase.ABORTED if info.phase is Phase.ABORTED else Phase.PERMANENT_FAILURE
        return PhaseInfo(phase, 0, info.info, err, info.reason)

    # -- cleaning up ----------------------------------------------------------------------------------------
    async def close(
        self, node: NodeState, handler: NodeHandler, runtime: NodeRuntime, *, label: str
    ) -> Cleanup:
        """Clean up a decided attempt (its ``closing`` saved): abort when due, finalize, then start the next
        attempt or end the node."""
        closing = node.closing
        if closing is None:
            return Cleanup(done=True)
        cleaned = await self.clean_up(handler, runtime, label=label, abort=bool(closing.get("cleanup")))
        if not cleaned.done:
            return cleaned
        node.closing = None
        if closing.get("retry"):
            node.attempt += 1
            node.node_phase = int(NodePhase.RUNNING)
            node.task_phase, node.phase_version, node.reason = int(Phase.UNDEFINED), 0, ""
            node.state_version, node.plugin_state = 0, None
            node.started_at = None
            node.cleanup_on_failure = False
            return Cleanup(done=True, retried=True)
        phase = closing.get("phase")
        if phase is None:  # decided by a version that did not store it
            phase = int(NodePhase.SUCCEEDED if node.task_phase == Phase.SUCCESS else NodePhase.FAILED)
        node.node_phase = phase
        return Cleanup(done=True)

    async def clean_up(
        self, handler: NodeHandler, runtime: NodeRuntime, *, label: str, abort: bool
    ) -> Cleanup:
        """Abort (when ``abort``) and finalize. A failure is logged in one line and retried in a later round
        (the round-error back-off); after ``max-round-errors`` failures in a row it is given up."""
        step = "abort" if abort else "finalize"
        try:
            if abort:
                await handler.abort()
            step = "finalize"
            await handler.finalize()
        except Exception as e:
            runtime.cleanup_errors += 1
            count = runtime.cleanup_errors
            log.warning("%s: %s failed (%d in a row): %s", label, step, count, e)
            if count < self.settings.max_round_errors:
                return Cleanup(
                    done=False, next_round_in=retry_delay(count, self.settings.resync_period), error=e
                )
            runtime.cleanup_errors = 0
            leftovers = [dict(o) for o in getattr(e, "leftovers", ()) if isinstance(o, dict)]
            log.error("%s: cleanup given up: %s", label, e)
            for o in leftovers:
                log.error(
                    "%s: left behind: %s %s/%s", label, o.get("kind"), o.get("namespace"), o.get("name")
                )
            return Cleanup(done=False, given_up=GivenUp(step, e, count, leftovers), error=e)
        runtime.cleanup_errors = 0
        return Cleanup(done=True)
