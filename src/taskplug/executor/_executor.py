"""The executor: drives many task executions at once, one round at a time, through their plugins.

Follows the task-node part of flytepropeller (nodes/task/handler.go and the node executor): each round calls
the plugin's ``handle``; the plugin state it writes is persisted; every new phase or version becomes an event;
a success reads the outputs and finalizes; a retryable failure starts the next attempt while the budget lasts
(user failures spend ``maxAttempts - 1`` retries — the template's retries by default —, system failures their
own budget, as Flyte does), and an exhausted budget fails the execution for good with propeller's
``RetriesExhausted|<code>``; a task that wrote a dynamic workflow (``futures.pb``) fails with a message
saying so;
``cleanupOnFailure`` makes a failed attempt abort its resource before finalizing; an abort request aborts
and finalizes.

Rounds are driven by wake-ups, not polling: a plugin's ``enqueue_owner`` (informer events) wakes the owning
executions at once, and ``enqueue_task_execution`` (web-API status caches) the execution whose current
attempt has a given generated name; a resync timer runs every live execution at least every
``executor.resync-period``, so plugins without events (back-off waits, quota waits) still progress. One
execution is never in two rounds at once.

An execution whose spec is an ArrayNode (a flytekit map task) is driven by :class:`ArrayRun`
(``_arrayrun.py``), which runs one sub-execution per element through the sub-task's plugin; its pods carry
the execution's owner key, so their events wake the node's round.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC
from typing import Any

from flyteidl.core import dynamic_job_pb2
from google.protobuf.message import DecodeError

from taskplug.core import (
    Clock,
    ErrorCode,
    ErrorKind,
    ExecutionError,
    Phase,
    PhaseInfo,
    Plugin,
    PluginError,
    PluginResolver,
    ResourceManager,
    StaticTaskExecutionContext,
    SystemClock,
    literal_map_to_plain,
)
from taskplug.executor._arraynode import ArrayNodeSettings, decide_retry, retries_exhausted
from taskplug.executor._arrayrun import ArrayRun, ArrayRunSettings
from taskplug.executor._datastore import DataStore
from taskplug.executor._paths import ExecutionPaths
from taskplug.executor._spec import ExecutionSpec
from taskplug.executor._store import Event, ExecutionRecord, StateStore
from taskplug.executor._tasks import task_context_for
from taskplug.k8s import owner_key

__all__ = ["ExecutionResult", "Executor", "ExecutorSettings", "OpenPlugins"]

log = logging.getLogger(__name__)


OpenPlugins = Callable[["Executor"], contextlib.AbstractAsyncContextManager[PluginResolver]]
"""Opens the executor's plugins (``taskplug.engine.open_plugins``), given the executor to wake."""


@dataclass(frozen=True, slots=True)
class ExecutorSettings:
    """The executor's knobs, read from the ``executor`` and ``tasks`` config sections by
    ``executor_settings``: where data goes, how many rounds run at once, the resync period, the
    system-failure retry budget, how many rounds in a row a plugin may fail to decide, and Flyte's
    ``max-plugin-phase-versions``."""

    data_root: str = ".taskplug/data"
    workers: int = 64
    resync_period: float = 10.0
    max_system_failures: int = 3  # flytepropeller's max-node-retries-system-failures
    max_round_errors: int = 10  # consecutive rounds a plugin may fail to decide before the attempt fails
    max_plugin_phase_versions: int = 100000
    array: ArrayNodeSettings = field(default_factory=ArrayNodeSettings)  # how ArrayNodes (map tasks) run


@dataclass(frozen=True, slots=True)
class ExecutionResult:
    """How an execution ended, as ``Executor.run`` / ``wait`` return it and ``taskplug run -o json`` prints
    it: the final phase, the attempts made, the error, the outputs as plain values and every phase event."""

    key: str
    phase: str
    attempts: int
    error: dict[str, Any] | None
    outputs: dict[str, Any] | None
    events: list[dict[str, Any]]
    elements: list[dict[str, Any]] | None = None  # an ArrayNode's elements: phase, attempts, error, logs

    @property
    def succeeded(self) -> bool:
        return self.phase == str(Phase.SUCCESS)

    def to_json(self) -> dict[str, Any]:
        out = {
            "phase": self.phase,
            "attempts": self.attempts,
            "error": self.error,
            "outputs": self.outputs,
            "events": self.events,
        }
        if self.elements is not None:
            out["elements"] = self.elements
        return out


@dataclass(eq=False)
class _Execution:
    spec: ExecutionSpec
    record: ExecutionRecord
    plugin: Plugin
    done: asyncio.Event = field(default_factory=asyncio.Event)
    round_errors: int = 0
    inputs_written: bool = False
    generated_name: str = ""
    array: ArrayRun | None = None  # set when the spec is an ArrayNode


def _error_json(err: ExecutionError | None) -> dict[str, Any] | None:
    if err is None:
        return None
    return {"code": err.code, "message": err.message, "kind": str(err.kind)}


class Executor:
    """Runs executions to a terminal phase. Use as ``async with Executor(...) as ex: await ex.run(spec)``."""

    def __init__(
        self,
        *,
        resolver: PluginResolver | None = None,
        plugins: OpenPlugins | None = None,
        store: StateStore,
        data_store: DataStore | None = None,
        settings: ExecutorSettings | None = None,
        clock: Clock | None = None,
        resource_manager: ResourceManager | None = None,
        on_event: Callable[[str, Event], None] | None = None,
    ) -> None:
        if (resolver is None) == (plugins is None):
            raise ValueError("give the executor either a resolver or a way to open its plugins, not both")
        self._resolver = resolver
        self._open_plugins = plugins
        self._plugins_stack = contextlib.AsyncExitStack()
        self.store = store
        self.data = data_store or DataStore()
        self.settings = settings or ExecutorSettings()
        self.clock: Clock = clock or SystemClock()
        self.resource_manager = resource_manager
        self.on_event = on_event
        self._executions: dict[str, _Execution] = {}
        self._owners: dict[tuple[str, str], set[str]] = {}
        self._by_generated_name: dict[str, str] = {}
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._queued: set[str] = set()
        self._running: set[str] = set()
        self._dirty: set[str] = set()
        self._timers: list[tuple[float, int, str]] = []
        self._deadlines: dict[
            str, float
        ] = {}  # each execution's one pending wake-up (the earliest asked for)
        self._timer_seq = itertools.count()
        self._timer_wake = asyncio.Event()
        self._group: asyncio.TaskGroup | None = None
        self._loops: list[asyncio.Task[None]] = []
        self.rounds = 0

    # -- lifecycle ------------------------------------------------------------------------------------------
    @property
    def resolver(self) -> PluginResolver:
        """Which plugin runs a task type (the plugins are loaded while the executor runs)."""
        if self._resolver is None:
            raise RuntimeError("the executor's plugins are loaded when it starts: use it as `async with`")
        return self._resolver

    async def __aenter__(self) -> Executor:
        if self._open_plugins is not None:
            # The plugins wake executions through this executor, so they are opened by it, and closed after
            # its workers have stopped.
            self._resolver = await self._plugins_stack.enter_async_context(self._open_plugins(self))
        # The workers and the timer run until the block exits; the TaskGroup owns them, so none can outlive
        # the executor or fail unseen.
        self._group = asyncio.TaskGroup()
        await self._group.__aenter__()
        self._loops = [self._group.create_task(self._worker()) for _ in range(self.settings.workers)]
        self._loops.append(self._group.create_task(self._timer_loop()))
        return self

    async def __aexit__(self, *exc: object) -> None:
        group, self._group = self._group, None
        if group is not None:
            for task in self._loops:
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await group.__aexit__(None, None, None)
            self._loops = []
        self.store.flush()
        await self._plugins_stack.aclose()

    # -- the owner hook plugins use to wake executions -------------------------------------------------------
    def enqueue_owner(self, namespace: str, name: str) -> None:
        for key in self._owners.get((namespace, name), ()):
            self.wake(key)

    def enqueue_task_execution(self, generated_name: str) -> None:
        """Wake the execution whose current attempt is ``generated_name`` (unknown names are ignored)."""
        key = self._by_generated_name.get(generated_name)
        if key is not None:
            self.wake(key)

    def wake(self, key: str) -> None:
        if key in self._running:
            self._dirty.add(key)
            return
        if key in self._queued or key not in self._executions:
            return
        self._queued.add(key)
        self._queue.put_nowait(key)

    # -- what an ArrayRun asks of its executor (ArrayHost) -----------------------------------------------
    def emit(self, key: str, event: Event) -> None:
        self.store.append_event(key, event)
        if self.on_event is not None:
            self.on_event(key, event)

    def index_generated_name(self, name: str, key: str) -> None:
        self._by_generated_name[name] = key

    def unindex_generated_name(self, name: str) -> None:
        self._by_generated_name.pop(name, None)

    def wake_after(self, key: str, seconds: float) -> None:
        self._wake_after(key, seconds)

    def finish(self, key: str) -> None:
        execution = self._executions.get(key)
        if execution is not None:
            self._terminal(execution)

    def _array_settings(self) -> ArrayRunSettings:
        s = self.settings
        return ArrayRunSettings(
            data_root=s.data_root,
            resync_period=s.resync_period,
            max_system_failures=s.max_system_failures,
            max_round_errors=s.max_round_errors,
            max_plugin_phase_versions=s.max_plugin_phase_versions,
            array=s.array,
        )

    def _wake_after(self, key: str, seconds: float) -> None:
        # One pending wake-up per execution: every round asks for a resync, and an execution woken many times
        # by events must not collect a timer (and later a round) for each of them.
        deadline = self.clock.monotonic() + seconds
        pending = self._deadlines.get(key)
        if pending is not None and pending <= deadline:
            return
        self._deadlines[key] = deadline
        heapq.heappush(self._timers, (deadline, next(self._timer_seq), key))
        self._timer_wake.set()

    # -- submitting and waiting ------------------------------------------------------------------------------
    async def submit(self, spec: ExecutionSpec) -> str:
        """Start (or resume, when the store knows it) an execution; returns its key."""
        key = spec.execution_key
        if key in self._executions:
            return key
        record = self.store.load(key) or ExecutionRecord(
            key=key, attempt=spec.metadata.task_execution_id.id.retry_attempt
        )
        plugin = self.resolver.resolve(spec.template.type)
        execution = _Execution(spec, record, plugin)
        if spec.array is not None:
            execution.array = ArrayRun(self, spec, record, plugin, self._array_settings())
        self._executions[key] = execution
        self._owners.setdefault(owner_key(spec.metadata), set()).add(key)
        if record.terminal:
            execution.done.set()
            return key
        self.store.save(record)
        self.wake(key)
        return key

    async def wait(self, key: str) -> ExecutionResult:
        execution = self._executions[key]
        await execution.done.wait()
        return self.result(key)

    async def run(self, spec: ExecutionSpec) -> ExecutionResult:
        return await self.wait(await self.submit(spec))

    def abort(self, key: str) -> None:
        execution = self._executions.get(key)
        if execution is None or execution.record.terminal:
            return
        execution.record.abort_requested = True
        self.wake(key)

    def result(self, key: str) -> ExecutionResult:
        execution = self._executions[key]
        record = execution.record
        return ExecutionResult(
            key=key,
            phase=record.outcome or str(Phase(record.phase)),
            attempts=record.attempt + 1 - record.first_attempt,
            error=record.error,
            outputs=record.outputs,
            events=[e.to_json() for e in self.store.events(key)],
            elements=execution.array.elements_json() if execution.array is not None else None,
        )

    def status(self, key: str) -> ExecutionRecord:
        return self._executions[key].record

    @property
    def keys(self) -> Iterable[str]:
        return self._executions.keys()

    # -- the loop ---------------------------------------------------------------------------------------------
    async def _worker(self) -> None:
        while True:
            key = await self._queue.get()
            self._queued.discard(key)
            execution = self._executions.get(key)
            if execution is None or execution.record.terminal:
                continue
            self._running.add(key)
            try:
                await self._round(execution)
            except asyncio.CancelledError:
                raise
            except Exception:  # a bug in a round must not kill a worker
                log.exception("round of %s failed", key)
                self._wake_after(key, self.settings.resync_period)
            finally:
                self._running.discard(key)
            if key in self._dirty:
                self._dirty.discard(key)
                self.wake(key)

    async def _timer_loop(self) -> None:
        while True:
            now = self.clock.monotonic()
            while self._timers and self._timers[0][0] <= now:
                deadline, _, key = heapq.heappop(self._timers)
                if self._deadlines.get(key) == deadline:  # else replaced by an earlier one: stale
                    del self._deadlines[key]
                    self.wake(key)
            if self._timers:
                delay = self._timers[0][0] - now
                self._timer_wake.clear()
                sleeper = asyncio.ensure_future(self.clock.sleep(delay))
                waker = asyncio.ensure_future(self._timer_wake.wait())
                try:
                    await asyncio.wait({sleeper, waker}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    sleeper.cancel()
                    waker.cancel()
            else:
                self._timer_wake.clear()
                await self._timer_wake.wait()

    # -- one round of one execution -----------------------------------------------------------------------
    def _context(self, execution: _Execution) -> StaticTaskExecutionContext:
        record = execution.record
        spec = execution.spec.for_attempt(record.attempt)
        return task_context_for(
            spec,
            self.settings.data_root,
            state_version=record.state_version,
            state=record.plugin_state,
            resource_manager=self.resource_manager,
            generated_name_max_length=execution.plugin.get_properties().generated_name_max_length,
        )

    async def _ensure_inputs(self, execution: _Execution, paths: ExecutionPaths) -> None:
        if execution.inputs_written:
            return
        await self.data.write(paths.input_path, execution.spec.inputs.SerializeToString())
        if _mentions_task_template_path(execution.spec.template):
            await self.data.write(
                f"{paths.input_prefix}/task.pb", execution.spec.template.SerializeToString()
            )
        execution.inputs_written = True

    async def _round(self, execution: _Execution) -> None:
        self.rounds += 1
        if execution.array is not None:
            await execution.array.round()
            return
        record = execution.record
        tctx = self._context(execution)
        self._index_generated_name(execution, tctx.metadata.task_execution_id.generated_name)
        if record.closing is not None:
            # The attempt's end was decided and saved, its cleanup not finished (stopped in between, or
            # finalize failed): finish the cleanup, never decide again.
            await self._finish_closing(execution, tctx)
            return
        if record.abort_requested:
            await self._abort_and_finalize(execution, tctx, reason="aborted by request")
            return
        paths = ExecutionPaths.for_attempt(self.settings.data_root, tctx.metadata)
        await self._ensure_inputs(execution, paths)
        try:
            transition = await execution.plugin.handle(tctx)
        except Exception as e:  # the plugin could not decide this round
            execution.round_errors += 1
            log.warning("%s: round error %d: %s", record.key, execution.round_errors, e)
            if execution.round_errors >= self.settings.max_round_errors:
                code = e.code if isinstance(e, PluginError) else ErrorCode.SYSTEM_ERROR
                info = PhaseInfo.system_retryable_failure(
                    str(code), f"the plugin failed {execution.round_errors} rounds in a row: {e}"
                )
                execution.round_errors = 0
                await self._failed(execution, tctx, info, paths)
                self._save(record)
                return
            self._wake_after(record.key, min(2.0**execution.round_errors * 0.05, self.settings.resync_period))
            return
        execution.round_errors = 0
        info = transition.info

        changed, version, state = tctx.plugin_state.written
        if changed:
            record.state_version, record.plugin_state = version, dict(state) if state is not None else None
        if info.phase == Phase(record.phase) and info.version > self.settings.max_plugin_phase_versions:
            info = PhaseInfo.system_failure(
                ErrorCode.TOO_MANY_PLUGIN_PHASE_VERSIONS,
                f"plugin phase version {info.version} exceeds tasks.max-plugin-phase-versions "
                f"({self.settings.max_plugin_phase_versions})",
            )
        self._record_phase(execution, info)
        record.cleanup_on_failure = record.cleanup_on_failure or info.cleanup_on_failure

        if info.phase is Phase.SUCCESS:
            await self._succeeded(execution, tctx, paths)
        elif info.phase.is_failure or info.phase is Phase.ABORTED:
            await self._failed(execution, tctx, info, paths)
        else:
            self._wake_after(record.key, self.settings.resync_period)
        self._save(record)

    def _index_generated_name(self, execution: _Execution, name: str) -> None:
        if execution.generated_name != name:
            self._by_generated_name.pop(execution.generated_name, None)
            execution.generated_name = name
            self._by_generated_name[name] = execution.record.key

    def _save(self, record: ExecutionRecord) -> None:
        self.store.save(record)

    def _record_phase(self, execution: _Execution, info: PhaseInfo) -> None:
        record = execution.record
        if (
            info.phase == record.phase
            and info.version <= record.phase_version
            and info.reason == record.reason
            and info.phase is not Phase.UNDEFINED
        ):
            # Nothing new: same phase, no newer version, same reason. (A plugin may report a lower version
            # after a bump, as MaybeUpdatePhaseVersion allows; that alone is no news.) Deviation: FlyteAdmin
            # also drops a same-phase event whose version is not newer even when its reason changed, which
            # hides a connector's progress messages (they all come at version 0); they are kept here.
            return
        record.phase, record.phase_version, record.reason = int(info.phase), info.version, info.reason
        occurred = info.info.occurred_at if info.info is not None else None
        event = Event(
            attempt=record.attempt,
            phase=str(info.phase),
            version=info.version,
            reason=info.reason or (info.err.message if info.err else ""),
            occurred_at=(occurred.astimezone(UTC).isoformat().replace("+00:00", "Z") if occurred else None),
            error=_error_json(info.err),
            logs=[log.to_json() for log in info.info.logs]
            if info.info is not None and info.info.logs
            else None,
        )
        self.store.append_event(record.key, event)
        if self.on_event is not None:
            self.on_event(record.key, event)

    async def _read_outputs(
        self, tctx: StaticTaskExecutionContext, paths: ExecutionPaths
    ) -> tuple[dict[str, Any] | None, ExecutionError | None]:
        writer = tctx.output_writer
        declared = execution_outputs_declared(tctx.task_reader.read())
        if writer.reader is not None:
            literal_map = await writer.reader.read()
        else:
            try:
                literal_map = await self.data.read_outputs(paths.outputs_path)
            except ValueError as e:
                return None, ExecutionError("OutputsNotFound", str(e), ErrorKind.USER)
        if literal_map is None:
            if declared:
                return None, ExecutionError(
                    "OutputsNotFound",
                    f"Outputs not generated by task execution (expected {paths.outputs_path})",
                    ErrorKind.USER,
                )
            return {}, None
        return literal_map_to_plain(literal_map), None

    async def _succeeded(
        self, execution: _Execution, tctx: StaticTaskExecutionContext, paths: ExecutionPaths
    ) -> None:
        record = execution.record
        # flytekit catches the task's own exception, writes error.pb and exits 0: as Flyte's output reader
        # does, look for that document before the outputs; a pod that succeeded may be a task that failed.
        found = await self._read_error(execution, paths)
        if found is not None:
            error, recoverable = found
            phase = Phase.RETRYABLE_FAILURE if recoverable else Phase.PERMANENT_FAILURE
            info = PhaseInfo(phase, 0, None, error)
            self._record_phase(execution, info)
            await self._failed(execution, tctx, info, paths)
            return
        futures_path = f"{paths.output_prefix}/{FUTURES_FILE}"
        futures = await self.data.read(futures_path)
        err: ExecutionError | None
        if futures is not None:
            outputs, err = None, dynamic_workflow_error(futures, futures_path)
        else:
            outputs, err = await self._read_outputs(tctx, paths)
        if err is not None:
            record.error = _error_json(err)
            record.outcome = str(Phase.PERMANENT_FAILURE)
            self._record_phase(execution, PhaseInfo(Phase.PERMANENT_FAILURE, 0, None, err))
        else:
            record.outputs = outputs
            record.outcome = str(Phase.SUCCESS)
        await self._close(execution, tctx, retry=False, cleanup=False)

    async def _read_error(
        self, execution: _Execution, paths: ExecutionPaths
    ) -> tuple[ExecutionError, bool] | None:
        """The task's error document, as the plugin's error aggregation strategy reads it: ``error.pb``, or
        the earliest of ``error*.pb`` (propeller hands the plugin's strategy to the output reader)."""
        if execution.plugin.get_properties().earliest_error_aggregation:
            return await self.data.read_earliest_error_recoverable(paths.output_prefix)
        return await self.data.read_error_recoverable(paths.error_path)

    async def _failed(
        self, execution: _Execution, tctx: StaticTaskExecutionContext, info: PhaseInfo, paths: ExecutionPaths
    ) -> None:
        record = execution.record
        err = info.err or ExecutionError(
            ErrorCode.TASK_FAILED_UNKNOWN_ERROR, "the task failed with no error", ErrorKind.SYSTEM
        )
        found = await self._read_error(execution, paths)
        document = found[0] if found is not None else None
        if document is not None and err.kind is ErrorKind.USER:
            # flytekit writes the user's exception here; it says more than the pod's exit code.
            err = ExecutionError(document.code or err.code, document.message, document.kind)
        retryable = info.phase is Phase.RETRYABLE_FAILURE
        outcome = info.phase
        if retryable:
            decision = decide_retry(
                kind=err.kind,
                # A --rerun history numbers its attempts after the earlier ones; its budget starts afresh.
                attempts=record.attempt - record.first_attempt,
                system_failures=record.system_failures,
                max_attempts=self._max_attempts(execution),
                max_system_failures=self.settings.max_system_failures,
                ignore_retry_cause=self.settings.array.ignore_retry_cause,
            )
            if err.kind is ErrorKind.SYSTEM:
                record.system_failures += 1
            else:
                record.user_failures += 1
            retryable = decision.retry
            if not retryable:
                # The attempt's own RetryableFailure stays in the events; the execution then fails for good,
                # as propeller fails the node: RetriesExhausted|<code>, "[n/n] currentAttempt done. …".
                err = retries_exhausted(err, decision)
                outcome = Phase.PERMANENT_FAILURE
                self._record_phase(execution, PhaseInfo(outcome, 0, info.info, err))
        if not retryable:
            record.error = _error_json(err)
            record.outcome = str(outcome)
        await self._close(execution, tctx, retry=retryable, cleanup=record.cleanup_on_failure)

    def _max_attempts(self, execution: _Execution) -> int:
        """The user-failure budget: the spec's (the template's retries + 1 unless ``maxAttempts`` is given),
        or ``default-max-attempts`` when that is 1, as propeller reads the node's retry strategy."""
        attempts = execution.spec.metadata.max_attempts
        return attempts if attempts != 1 else self.settings.array.default_max_attempts

    async def _close(
        self, execution: _Execution, tctx: StaticTaskExecutionContext, *, retry: bool, cleanup: bool
    ) -> None:
        """End the attempt: save the decision first, then abort (when cleanup is due) and finalize.

        The decision is on disk before anything is deleted, so a process stopped in between finishes the
        cleanup on resume (see ``_round``) instead of finding the object gone, reading that as an external
        deletion and charging a failure that did not happen.
        """
        execution.record.closing = {"retry": retry, "cleanup": cleanup}
        self._save(execution.record)
        self.store.flush()
        await self._finish_closing(execution, tctx)

    async def _finish_closing(self, execution: _Execution, tctx: StaticTaskExecutionContext) -> None:
        record = execution.record
        closing = record.closing or {"retry": False, "cleanup": False}
        if closing["cleanup"]:
            await self._abort(execution, tctx)
        await self._finalize(execution, tctx)
        record.closing = None
        if closing["retry"]:
            self._next_attempt(execution)
        else:
            self._terminal(execution)

    def _next_attempt(self, execution: _Execution) -> None:
        record = execution.record
        record.attempt += 1
        record.phase, record.phase_version, record.reason = int(Phase.UNDEFINED), 0, ""
        record.state_version, record.plugin_state = 0, None
        record.cleanup_on_failure = False
        self.store.save(record)
        self.wake(record.key)

    def _terminal(self, execution: _Execution) -> None:
        self._by_generated_name.pop(execution.generated_name, None)
        execution.record.terminal = True
        self.store.save(execution.record)
        self.store.flush()
        execution.done.set()

    async def _abort(self, execution: _Execution, tctx: StaticTaskExecutionContext) -> None:
        try:
            await execution.plugin.abort(tctx)
        except Exception as e:
            log.warning("%s: abort failed: %s", execution.record.key, e)
            raise

    async def _finalize(self, execution: _Execution, tctx: StaticTaskExecutionContext) -> None:
        try:
            await execution.plugin.finalize(tctx)
        except Exception as e:
            log.warning("%s: finalize failed: %s", execution.record.key, e)
            raise

    async def _abort_and_finalize(
        self, execution: _Execution, tctx: StaticTaskExecutionContext, *, reason: str
    ) -> None:
        record = execution.record
        await self._abort(execution, tctx)
        await self._finalize(execution, tctx)
        self._record_phase(execution, PhaseInfo(Phase.ABORTED, 0, None, None, reason))
        record.outcome = str(Phase.ABORTED)
        record.error = {"code": "Aborted", "message": reason, "kind": str(ErrorKind.USER)}
        self._terminal(execution)


FUTURES_FILE = "futures.pb"
"""What a flytekit ``@dynamic`` task writes in its output prefix instead of ``outputs.pb``: the sub-workflow
(a ``flyteidl.core.DynamicJobSpec``) propeller's dynamic node handler would run next."""


def dynamic_workflow_error(data: bytes, path: str) -> ExecutionError:
    """The permanent failure of a task that produced a dynamic workflow, saying what it produced.

    Deviation: Flyte runs the sub-workflow (nodes/dynamic/handler.go); taskplug does not run workflows yet,
    so the execution ends here, with this message rather than a misleading OutputsNotFound.
    """
    spec = dynamic_job_pb2.DynamicJobSpec()
    try:
        spec.ParseFromString(data)
    except DecodeError:
        produced = "a file that is not a DynamicJobSpec"
    else:
        tasks = sorted({t.id.name for t in spec.tasks if t.id.name})
        produced = (
            f"a dynamic workflow of {len(spec.nodes)} node(s)"
            + (f" running task(s) {', '.join(tasks)}" if tasks else "")
            + (f" and {len(spec.subworkflows)} sub-workflow(s)" if spec.subworkflows else "")
        )
    return ExecutionError(
        "DynamicWorkflowNotSupported",
        f"the task is a dynamic workflow (flytekit @dynamic): it wrote {produced} to {path} instead of "
        "outputs; taskplug runs single tasks and map tasks, and does not run dynamic workflows yet",
        ErrorKind.SYSTEM,
    )


def _mentions_task_template_path(template: Any) -> bool:
    """Only a task whose command line asks for ``{{.TaskTemplatePath}}`` needs the template in the store."""
    text = str(template.container) + str(template.k8s_pod) if template.WhichOneof("target") else ""
    return "tasktemplatepath" in text.lower()


def execution_outputs_declared(template: Any) -> bool:
    return bool(template.HasField("interface") and template.interface.outputs.variables)
