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

Every kind of trouble is bounded, so that a session ends (issue 13): a plugin that cannot decide (an
unreachable API) errors for at most ``executor.max-round-errors`` rounds in a row, then the attempt fails
with a system error, which the system-retry budget may retry; a cleanup (abort, finalize) that keeps failing
is retried as many rounds, then given up: the execution ends PermanentFailure ``CleanupFailed`` (kind
SYSTEM), its error naming the cause (an API error names the API address) and listing, under ``leftovers``,
the objects that may be left behind, which are also logged one line each. Deviation: propeller retries a
failing finalize in every round until ``max-workflow-retries`` fails the workflow ("Workflow abort
failed"), then stops cleaning up; taskplug keeps the same bound per execution. A round that fails for a
reason nobody expected (a bug) is logged with its traceback once, retried as many rounds, then fails the
execution the same way.

At submit, a plugin that can (the Kubernetes plugin manager's ``check_task``) builds the object it would
create without creating it, so a task that cannot be built (a bad quantity) is refused before anything runs
— the refusal ``taskplug render`` gives, from the same ``build_object``; a map task checks its elements'
shared template once, through element 0.

Rounds are driven by wake-ups, not polling: a plugin's ``enqueue_owner`` (informer events) wakes the owning
executions at once, and ``enqueue_task_execution`` (web-API status caches) the execution whose current
attempt has a given generated name; a resync timer runs every live execution at least every
``executor.resync-period``, so plugins without events (back-off waits, quota waits) still progress. One
execution is never in two rounds at once.

A state store that can group concurrent flushes (``aflush``, :class:`AsyncFlush`; PostgreSQL's) is awaited
where the executor must flush — before a cleanup deletes anything, before a terminal execution's waiters
are released, on closing — so that rounds ending together share one commit. :meth:`Executor.forget` drops
a finished (or no-longer-owned) execution from memory: a long-running replica holds only what it drives.

Before a web-API create or a sync plugin's ``do`` (the adapters' ``before_create`` hook, wired by
``open_executor``), a state store that can record an intent to create (:class:`WritesCreateIntent`;
PostgreSQL's) writes it at once, fenced by its claim — for a single task's attempt, and for a map task's
element's retry attempt (read from the element's context, checked against its generated name) alike: a store
that refuses (the execution is no longer this replica's) raises, and nothing is created. The executor's next
save of that execution (or element) is the round that made the call, carrying its result, which such a store
commits at once as the intent's outcome. A store that finds an earlier owner's intent of the same (element,
attempt) with no outcome (its owner died between the intent and the commit of the create's result) says so:
the create is sent again (at-least-once within one call's window, service notes §3.4, 6), counted by
``on_unknown_create``.

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
from typing import Any, Protocol, runtime_checkable

from flyteidl.core import literals_pb2

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
    TaskExecutionContext,
    literal_map_to_plain,
)
from taskplug.executor._arraynode import ArrayNodeSettings
from taskplug.executor._arrayrun import ArrayRun, ArrayRunSettings, AsyncFlush, flush_store
from taskplug.executor._arraytasks import element_task_context
from taskplug.executor._datastore import DataStore
from taskplug.executor._paths import ExecutionPaths
from taskplug.executor._spec import ExecutionSpec
from taskplug.executor._store import Event, ExecutionRecord, StateStore
from taskplug.executor._tasks import task_context_for
from taskplug.executor.nodes import (
    CLEANUP_FAILED,
    Closing,
    GivenUp,
    NodePhase,
    NodeRuntime,
    NodeSettings,
    NodeState,
    NodeStep,
    TaskHandler,
    error_json,
    max_attempts_for,
    needs_template_file,
    retry_delay,
)
from taskplug.k8s import owner_key

__all__ = ["ExecutionResult", "Executor", "ExecutorSettings", "OpenPlugins", "WritesCreateIntent"]

log = logging.getLogger(__name__)


OpenPlugins = Callable[["Executor"], contextlib.AbstractAsyncContextManager[PluginResolver]]
"""Opens the executor's plugins (``taskplug.engine.open_plugins``), given the executor to wake."""


@runtime_checkable
class WritesCreateIntent(Protocol):
    """An optional capability of a state store: record, durably and at once, that the web-API create of
    ``key``'s ``attempt`` — of map element ``element``, or of the execution's own task when None — is about
    to be sent as ``resource_name``; the next save of that execution (``save``) or element
    (``save_elements``) carries the create's result, the intent's outcome. Raises when the execution may no
    longer be written by this process (nothing may be created then). Returns True when an earlier owner's
    intent of the same (element, attempt) has no outcome recorded: an earlier create's outcome is unknown
    and this one may duplicate it."""

    def write_create_intent(
        self, key: str, attempt: int, resource_name: str, *, element: int | None = None
    ) -> bool: ...


@runtime_checkable
class _ChecksTasks(Protocol):
    """An optional capability of a plugin: refuse, before anything runs, a task it could not start
    (raising a TaskplugError, e.g. ``BadTaskSpecification``)."""

    def check_task(self, tctx: TaskExecutionContext) -> None: ...


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

    def node_settings(self) -> NodeSettings:
        """What every node's rounds follow (the retry keys live under ``array`` for their Flyte names)."""
        return NodeSettings(
            resync_period=self.resync_period,
            max_system_failures=self.max_system_failures,
            max_round_errors=self.max_round_errors,
            default_max_attempts=self.array.default_max_attempts,
            ignore_retry_cause=self.array.ignore_retry_cause,
        )


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
    leftovers: list[dict[str, str]] | None = None  # objects a given-up cleanup may have left: kind, ns, name

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
        if self.leftovers is not None:
            out["leftovers"] = self.leftovers
        return out


@dataclass(eq=False)
class _Execution:
    spec: ExecutionSpec
    record: ExecutionRecord
    plugin: Plugin
    done: asyncio.Event = field(default_factory=asyncio.Event)
    runtime: NodeRuntime = field(default_factory=NodeRuntime)  # the root node's in-memory counters
    timeout: float | None = None  # the task's timeout: the root node's execution deadline
    unexpected_errors: int = 0  # consecutive rounds that failed for a reason nobody expected
    inputs_written: bool = False
    generated_name: str = ""
    array: ArrayRun | None = None  # set when the spec is an ArrayNode
    flush_due: bool = False  # terminal, its waiters released once the store's async flush has committed it


def _decided(record: ExecutionRecord) -> Closing | None:
    return record.closing


def task_timeout(template: Any) -> float | None:
    """A task's timeout in seconds (its ``metadata.timeout``, which flytekit also copies into the node's
    metadata: the node's execution deadline); None when unset or zero."""
    seconds = (
        float(template.metadata.timeout.ToTimedelta().total_seconds()) if template.HasField("metadata") else 0
    )
    return seconds if seconds > 0 else None


def _element_of(array: ArrayRun, tctx: TaskExecutionContext) -> tuple[int, int]:
    """(index, retry attempt) of the map element whose context ``tctx`` is: an element's context names its
    node ``n<index>`` and carries its retry attempt (``element_parts``), checked against the generated name
    the node gives that element's attempt, so a context of anything else is refused."""
    task = tctx.metadata.task_execution_id
    node_id = task.id.node_execution_id.node_id
    attempt = task.id.retry_attempt
    digits = node_id[1:]
    index = int(digits) if node_id.startswith("n") and digits.isdigit() else -1
    if not 0 <= index < array.size or array.generated_name(index, attempt) != task.generated_name:
        raise PluginError(
            ErrorCode.SYSTEM_ERROR,
            f"[{task.generated_name}] is no element of map task {array.key}: nothing is created",
        )
    return index, attempt


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
        on_unknown_create: Callable[[], None] | None = None,
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
        self.step = NodeStep(self.settings.node_settings(), self.clock)
        self.resource_manager = resource_manager
        self.on_event = on_event
        self.on_unknown_create = on_unknown_create
        self.unknown_creates = 0  # creates sent again after an earlier one's outcome was lost
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
        await flush_store(self.store)
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

    async def before_create(self, tctx: TaskExecutionContext) -> None:
        """The web-API adapters' hook, awaited right before a create (or a sync plugin's ``do``): the store's
        intent write, for the execution's attempt or the map element's retry attempt (see the module doc).
        Raises the store's error when the execution is no longer this process's to drive."""
        if not isinstance(self.store, WritesCreateIntent):
            return
        name = tctx.metadata.task_execution_id.generated_name
        key = self._by_generated_name.get(name)
        execution = self._executions.get(key) if key is not None else None
        if execution is None:
            raise PluginError(
                ErrorCode.SYSTEM_ERROR, f"no execution is driven here for [{name}]: nothing is created"
            )
        element: int | None = None
        attempt = execution.record.attempt
        if execution.array is not None:
            element, attempt = _element_of(execution.array, tctx)
        if self.store.write_create_intent(execution.record.key, attempt, name, element=element):
            self.unknown_creates += 1
            log.warning(
                "%s: %s %d was being created when its owner stopped; its outcome is unknown and it is "
                "created again",
                execution.record.key,
                "attempt" if element is None else f"element {element}, attempt",
                attempt,
            )
            if self.on_unknown_create is not None:
                self.on_unknown_create()

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
        if key in self._executions:
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
            max_plugin_phase_versions=s.max_plugin_phase_versions,
            array=s.array,
        )

    def _wake_after(self, key: str, seconds: float) -> None:
        # One pending wake-up per execution: every round asks for a resync, and an execution woken many times
        # by events must not collect a timer (and later a round) for each of them.
        if key not in self._executions:
            return  # forgotten
        deadline = self.clock.monotonic() + seconds
        pending = self._deadlines.get(key)
        if pending is not None and pending <= deadline:
            return
        self._deadlines[key] = deadline
        heapq.heappush(self._timers, (deadline, next(self._timer_seq), key))
        self._timer_wake.set()

    # -- submitting and waiting ------------------------------------------------------------------------------
    def check(self, spec: ExecutionSpec) -> None:
        """Refuse, before anything is created, a spec this executor could not start: its task type has a
        plugin, and a plugin that can check a task (the Kubernetes plugin manager builds the exact object it
        would create) accepts its first attempt — for a map, element 0, whose template every element shares.
        Raises the plugin's TaskplugError (``BadTaskSpecification``: ``taskplug run`` exits 2)."""
        self._check(self.resolver.resolve(spec.template.type), spec)

    def _check(self, plugin: Plugin, spec: ExecutionSpec) -> None:
        if not isinstance(plugin, _ChecksTasks):
            return
        max_length = plugin.get_properties().generated_name_max_length
        data_root = self.settings.data_root
        tctx = (
            element_task_context(spec, data_root, 0, generated_name_max_length=max_length)
            if spec.array is not None
            else task_context_for(spec, data_root, generated_name_max_length=max_length)
        )
        plugin.check_task(tctx)

    async def submit(self, spec: ExecutionSpec) -> str:
        """Start (or resume, when the store knows it) an execution; returns its key. A spec the plugin
        cannot start is refused first (:meth:`check`), before anything is saved or created."""
        key = spec.execution_key
        if key in self._executions:
            return key
        record = self.store.load(key) or ExecutionRecord(
            key=key, attempt=spec.metadata.task_execution_id.id.retry_attempt
        )
        plugin = self.resolver.resolve(spec.template.type)
        if not record.terminal:
            self._check(plugin, spec)
        execution = _Execution(spec, record, plugin, timeout=task_timeout(spec.template))
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
        return self._result(execution)

    async def run(self, spec: ExecutionSpec) -> ExecutionResult:
        return await self.wait(await self.submit(spec))

    def abort(self, key: str) -> None:
        execution = self._executions.get(key)
        if execution is None or execution.record.terminal:
            return
        execution.record.abort_requested = True
        self.wake(key)

    def result(self, key: str) -> ExecutionResult:
        return self._result(self._executions[key])

    def _result(self, execution: _Execution) -> ExecutionResult:
        record = execution.record
        key = record.key
        error = dict(record.error) if record.error is not None else None
        leftovers = error.pop("leftovers", None) if error is not None else None
        return ExecutionResult(
            key=key,
            phase=record.outcome or str(Phase(record.phase)),
            attempts=record.attempt + 1 - record.first_attempt,
            error=error,
            outputs=record.outputs,
            events=[e.to_json() for e in self.store.events(key)],
            elements=execution.array.elements_json() if execution.array is not None else None,
            leftovers=leftovers,
        )

    def status(self, key: str) -> ExecutionRecord:
        return self._executions[key].record

    def forget(self, key: str) -> None:
        """Drop execution ``key`` from memory without any cleanup or write: a terminal execution whose end is
        stored, or one this process no longer owns (a replica that lost it). Its waiters are released;
        wake-ups, timers and plugin events for it are ignored from now on; :meth:`submit` may load it again.
        A round of it already running finishes on its own (its writes are the store's to fence)."""
        execution = self._executions.pop(key, None)
        if execution is None:
            return
        owner = owner_key(execution.spec.metadata)
        keys = self._owners.get(owner)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._owners[owner]
        if self._by_generated_name.get(execution.generated_name) == key:
            del self._by_generated_name[execution.generated_name]
        if execution.array is not None:
            execution.array.unindex_all()
        self._queued.discard(key)  # a queued wake-up finds no execution and is skipped
        self._dirty.discard(key)
        self._deadlines.pop(key, None)  # its timer entry is stale now, dropped when it comes due
        execution.done.set()

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
                execution.unexpected_errors = 0
            except asyncio.CancelledError:
                raise
            except Exception as e:  # a bug in a round must not kill a worker, nor loop for ever
                self._unexpected(execution, e)
            finally:
                self._running.discard(key)
            if execution.flush_due:
                await self._flush_terminal(execution)
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

    def _unexpected(self, execution: _Execution, error: Exception) -> None:
        key = execution.record.key
        execution.unexpected_errors += 1
        count = execution.unexpected_errors
        if count == 1:
            log.exception("round of %s failed", key)  # a bug: its traceback, once
        else:
            log.warning("round of %s failed (%d in a row): %s", key, count, error)
        if count < self.settings.max_round_errors or execution.record.terminal:
            self._wake_after(key, retry_delay(count, self.settings.resync_period))
            return
        err = ExecutionError(
            str(ErrorCode.SYSTEM_ERROR),
            f"taskplug failed {count} rounds in a row (executor.max-round-errors) and stopped: "
            f"{type(error).__name__}: {error}; what the attempt created may be left behind",
            ErrorKind.SYSTEM,
        )
        self._end(execution, err)

    def _end(self, execution: _Execution, err: ExecutionError, leftovers: list[Any] | None = None) -> None:
        """End the execution now, PermanentFailure with ``err`` (no more rounds, no more cleanup)."""
        record = execution.record
        self._record_phase(execution, PhaseInfo(Phase.PERMANENT_FAILURE, 0, None, err))
        error = error_json(err)
        assert error is not None
        if leftovers is not None:
            error["leftovers"] = leftovers
        record.error = error
        record.outcome = str(Phase.PERMANENT_FAILURE)
        record.closing = None
        self._terminal(execution)

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

    async def _ensure_inputs(self, execution: _Execution, tctx: StaticTaskExecutionContext) -> None:
        if execution.inputs_written:
            return
        paths = ExecutionPaths.for_attempt(self.settings.data_root, tctx.metadata)
        await self.data.write(paths.input_path, execution.spec.inputs.SerializeToString())
        if needs_template_file(execution.spec.template):
            await self.data.write(
                f"{paths.input_prefix}/task.pb", execution.spec.template.SerializeToString()
            )
        execution.inputs_written = True

    async def _round(self, execution: _Execution) -> None:
        self.rounds += 1
        if execution.array is not None:
            await execution.array.round()
            return
        await self._task_round(execution)

    def _task_handler(self, execution: _Execution) -> TaskHandler:
        tctx = self._context(execution)
        self._index_generated_name(execution, tctx.metadata.task_execution_id.generated_name)

        async def prepare(_: NodeState) -> None:
            await self._ensure_inputs(execution, tctx)

        return TaskHandler(
            plugin=execution.plugin,
            tctx=tctx,
            data=self.data,
            max_plugin_phase_versions=self.settings.max_plugin_phase_versions,
            prepare=prepare,
        )

    async def _task_round(self, execution: _Execution) -> None:
        """One round of a single task: the root task node through the node step."""
        record = execution.record
        handler = self._task_handler(execution)
        if record.closing is not None:
            # The attempt's end was decided and saved, its cleanup not finished (stopped in between, or
            # finalize failed): finish the cleanup, never decide again.
            await self._finish_closing(execution, handler)
            return
        if record.abort_requested:
            await self._abort_and_finalize(execution, handler, reason="aborted by request")
            return
        evaluation = await self.step.evaluate(
            record,
            handler,
            execution.runtime,
            label=record.key,
            max_attempts=self._max_attempts(execution),
            time_limit=execution.timeout,
        )
        info = evaluation.info
        if info is None or evaluation.observed is None:  # the plugin could not decide this round
            if evaluation.changed:
                self._save(record)
            self._wake_after(record.key, evaluation.next_round_in or self.settings.resync_period)
            return
        # The plugin's phase, then the node's decision when it differs (a retry budget spent:
        # RetriesExhausted), each an event as they are for Flyte's task and node.
        self._record_phase(execution, evaluation.observed)
        self._record_phase(execution, info)
        closing = _decided(record)  # set by the step this round
        if closing is None:
            self._wake_after(record.key, evaluation.next_round_in or self.settings.resync_period)
            self._save(record)
            return
        if closing.get("retry"):
            record.error = None  # the execution's error is its end's; an attempt's is in its events
        elif info.phase is Phase.SUCCESS:
            record.outputs = self._plain_outputs(execution, evaluation.outputs)
            record.outcome = str(Phase.SUCCESS)
        else:
            record.outcome = str(info.phase)
        await self._close(execution, handler)
        self._save(record)

    def _plain_outputs(
        self, execution: _Execution, outputs: literals_pb2.LiteralMap | None
    ) -> dict[str, Any]:
        # Shown by the declared types (a dataclass's fields as the values they are, a duration as one).
        template = execution.spec.template
        interface = template.interface.outputs if template.HasField("interface") else None
        return literal_map_to_plain(outputs or literals_pb2.LiteralMap(), interface)

    def _index_generated_name(self, execution: _Execution, name: str) -> None:
        if execution.generated_name != name and execution.record.key in self._executions:
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
            error=error_json(info.err),
            logs=[log.to_json() for log in info.info.logs]
            if info.info is not None and info.info.logs
            else None,
        )
        self.store.append_event(record.key, event)
        if self.on_event is not None:
            self.on_event(record.key, event)

    def _max_attempts(self, execution: _Execution) -> int:
        """The user-failure budget: the spec's (the template's retries + 1 unless ``maxAttempts`` is given),
        or ``default-max-attempts`` when that is 1, as propeller reads the node's retry strategy."""
        return max_attempts_for(execution.spec.metadata.max_attempts, self.step.settings.default_max_attempts)

    async def _close(self, execution: _Execution, handler: TaskHandler) -> None:
        """End the attempt: save the decision first, then abort (when cleanup is due) and finalize.

        The decision is on disk before anything is deleted, so a process stopped in between finishes the
        cleanup on resume (see ``_task_round``) instead of finding the object gone, reading that as an
        external deletion and charging a failure that did not happen.
        """
        self._save(execution.record)
        await flush_store(self.store)
        await self._finish_closing(execution, handler)

    async def _finish_closing(self, execution: _Execution, handler: TaskHandler) -> None:
        record = execution.record
        retry_due = bool((record.closing or {}).get("retry"))
        cleanup = await self.step.close(record, handler, execution.runtime, label=record.key)
        if cleanup.given_up is not None:
            self._give_up_cleanup(execution, cleanup.given_up, retry_due=retry_due)
        elif not cleanup.done:
            self._wake_after(record.key, cleanup.next_round_in or self.settings.resync_period)
        elif cleanup.retried:
            self.store.save(record)
            self.wake(record.key)
        else:
            self._terminal(execution)

    def _terminal(self, execution: _Execution) -> None:
        self._by_generated_name.pop(execution.generated_name, None)
        execution.record.terminal = True
        self.store.save(execution.record)
        if isinstance(self.store, AsyncFlush):
            # The round's worker awaits the flush (it may share one commit with other rounds' flushes),
            # then releases the waiters.
            execution.flush_due = True
            return
        self.store.flush()
        execution.done.set()

    async def _flush_terminal(self, execution: _Execution) -> None:
        execution.flush_due = False
        try:
            await flush_store(self.store)
        except Exception as e:  # the store keeps the batch and writes it with its next flush
            log.warning("%s: its end is not stored yet: %s", execution.record.key, e)
        finally:
            execution.done.set()

    def _give_up_cleanup(self, execution: _Execution, given_up: GivenUp, *, retry_due: bool) -> None:
        record = execution.record
        decided = record.outcome or (
            "Aborted"
            if record.abort_requested
            else ("RetryableFailure" if retry_due else str(Phase(record.phase)))
        )
        listed = GivenUp.listing(given_up.leftovers)
        message = given_up.describe(decided) + (f"; may be left behind: {listed}" if listed else "")
        self._end(execution, ExecutionError(CLEANUP_FAILED, message, ErrorKind.SYSTEM), given_up.leftovers)

    async def _abort_and_finalize(self, execution: _Execution, handler: TaskHandler, *, reason: str) -> None:
        record = execution.record
        cleanup = await self.step.clean_up(handler, execution.runtime, label=record.key, abort=True)
        if cleanup.given_up is not None:
            self._give_up_cleanup(execution, cleanup.given_up, retry_due=False)
            return
        if not cleanup.done:
            self._wake_after(record.key, cleanup.next_round_in or self.settings.resync_period)
            return
        record.node_phase = int(NodePhase.ABORTED)
        self._record_phase(execution, PhaseInfo(Phase.ABORTED, 0, None, None, reason))
        record.outcome = str(Phase.ABORTED)
        record.error = {"code": "Aborted", "message": reason, "kind": str(ErrorKind.USER)}
        self._terminal(execution)
