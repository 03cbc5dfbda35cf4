"""The executor: the scheduler that drives many executions at once, one round at a time.

Follows flytepropeller's workflow executor and work queue (pkg/controller/workqueue, workflow/executor.go): an
execution is its root node (a single task's task node, a map task's array node: ``nodes._factory``), and
this module decides *when* that node runs a round; the node machinery in :mod:`taskplug.executor.nodes`
decides *what* a round does (attempts, retries, timeouts, cleanup, events: ``docs/executor.md``).

Rounds are driven by wake-ups, not polling: a plugin's ``enqueue_owner`` (informer events) wakes the owning
executions at once, and ``enqueue_task_execution`` (web-API status caches) the execution whose current
attempt has a given generated name; a node's ``wake_after`` (its resync period, sooner for a deadline or a
back-off) runs it again without an event. One execution is never in two rounds at once; a wake-up during a
round runs another round after it.

At submit a spec is checked before anything runs: ``executor.limits``, then a plugin that can (the Kubernetes
plugin manager's ``check_task``) builds the object the first task would create without creating it, so a
task that cannot be built (a bad quantity) is refused — the refusal ``taskplug render`` gives.

A round that fails for a reason nobody expected (a bug) is logged with its traceback once, retried with a
back-off for ``executor.max-round-errors`` rounds in a row, then fails the execution with a system error.

A state store that can group concurrent flushes (``aflush``, :class:`AsyncFlush`; PostgreSQL's) is awaited
where the executor must flush — before a terminal execution's waiters are released, on closing — so that
rounds ending together share one commit. :meth:`Executor.forget` drops a finished (or no-longer-owned)
execution from memory: a long-running replica holds only what it drives.

Before a web-API create or a sync plugin's ``do`` (the adapters' ``before_create`` hook, wired by
``open_executor``), a state store that can record an intent to create (:class:`WritesCreateIntent`;
PostgreSQL's) writes it at once, fenced by its claim, for the attempt the root node names
(:meth:`RootNode.creating <taskplug.executor.nodes._host.RootNode.creating>`: a single task's attempt, a map
element's retry attempt, a workflow task node's attempt — named by the node's unique id, so that two nodes'
attempt 0 are two intents): a store that refuses (the execution is no longer this replica's) raises, and
nothing is created. The executor's next save of that execution (or element, or node) is the round that made
the call, carrying its result, which such a store commits at once as the intent's outcome. A store that
finds an earlier owner's intent of the same (node, element, attempt) with no outcome says so: the create is sent again
(at-least-once within one call's window: docs/service.md), counted by ``on_unknown_create``.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from taskplug.core import (
    Clock,
    ErrorCode,
    ErrorKind,
    ExecutionError,
    Phase,
    PluginError,
    PluginResolver,
    ResourceManager,
    SystemClock,
    TaskExecutionContext,
)
from taskplug.executor._catalog import Catalog
from taskplug.executor._datastore import DataStore
from taskplug.executor._limits import SubmissionLimits, check_limits
from taskplug.executor._spec import ExecutionSpec, NodeKind
from taskplug.executor._store import Event, ExecutionRecord, StateStore
from taskplug.executor.nodes._factory import first_context, root_node
from taskplug.executor.nodes._host import RootNode, async_flush, flush_store
from taskplug.executor.nodes._retry import retry_delay
from taskplug.executor.nodes._settings import ArrayNodeSettings, CacheSettings, NodeSettings, RunSettings
from taskplug.executor.nodes._step import NodeStep
from taskplug.executor.nodes._task_node import end_record
from taskplug.k8s import owner_key

__all__ = [
    "ChildExecutions",
    "ExecutionResult",
    "Executor",
    "ExecutorSettings",
    "OpenPlugins",
    "WritesCreateIntent",
]

log = logging.getLogger(__name__)


OpenPlugins = Callable[["Executor"], contextlib.AbstractAsyncContextManager[PluginResolver]]
"""Opens the executor's plugins (``taskplug.engine.open_plugins``), given the executor to wake."""


@runtime_checkable
class WritesCreateIntent(Protocol):
    """An optional capability of a state store: record, durably and at once, that the web-API create of
    ``key``'s ``attempt`` — of map element ``element`` of the map node at path ``node`` (None: the
    execution's own map), of a workflow's task node ``node`` (``element`` None), or of the execution's own
    task when both are None — is about to be sent as ``resource_name``; the next save of that execution
    (``save``), element or node (``save_nodes``) carries the create's result, the intent's outcome. Raises
    when the execution may no longer be written by this process (nothing may be created then). Returns True
    when an earlier owner's intent of the same (node, element, attempt) has no outcome recorded: an earlier
    create's outcome is unknown and this one may duplicate it."""

    def write_create_intent(
        self,
        key: str,
        attempt: int,
        resource_name: str,
        *,
        element: int | None = None,
        node: str | None = None,
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
    default_max_attempts: int = 1  # node-config.default-max-attempts: every node's, when its task sets none
    ignore_retry_cause: bool = False  # node-config.ignore-retry-cause
    limits: SubmissionLimits = field(default_factory=SubmissionLimits)  # the most one submission may ask
    array: ArrayNodeSettings = field(default_factory=ArrayNodeSettings)  # how ArrayNodes (map tasks) run
    cache_heartbeat: float = 10.0  # executor.cache.reservation-heartbeat: a serialized holder's extensions
    cache_grace_multiplier: int = 3  # executor.cache.reservation-grace-multiplier: expiry in heartbeats

    def node_settings(self) -> NodeSettings:
        """What every node's rounds follow."""
        return NodeSettings(
            resync_period=self.resync_period,
            max_system_failures=self.max_system_failures,
            max_round_errors=self.max_round_errors,
            default_max_attempts=self.default_max_attempts,
            ignore_retry_cause=self.ignore_retry_cause,
        )


@dataclass(frozen=True, slots=True)
class ExecutionResult:
    """How an execution ended, as ``Executor.run`` / ``wait`` return it and ``taskplug run -o json`` prints
    it: the final phase, the attempts made, the error, the outputs as plain values and every phase event, and
    the path of the execution's root node (``node``: ``n0``; a map element's is ``n0/<index>``)."""

    key: str
    phase: str
    attempts: int
    error: dict[str, Any] | None
    outputs: dict[str, Any] | None
    events: list[dict[str, Any]]
    elements: list[dict[str, Any]] | None = None  # an ArrayNode's elements: phase, attempts, error, logs
    nodes: list[dict[str, Any]] | None = None  # a workflow's nodes: id, name, phase, attempts, error, nodes
    leftovers: list[dict[str, str]] | None = None  # objects a given-up cleanup may have left: kind, ns, name
    node: str = ""  # the root node's path
    cache_status: str | None = None  # a cacheable task's catalog status (CACHE_HIT, CACHE_POPULATED …)

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
            "node": self.node,
        }
        if self.elements is not None:
            out["elements"] = self.elements
        if self.nodes is not None:
            out["nodes"] = self.nodes
        if self.leftovers is not None:
            out["leftovers"] = self.leftovers
        if self.cache_status is not None:
            out["cacheStatus"] = self.cache_status
        return out


@dataclass(eq=False)
class _Execution:
    spec: ExecutionSpec
    record: ExecutionRecord
    node: RootNode  # its root node's handler, by kind (nodes._factory)
    done: asyncio.Event = field(default_factory=asyncio.Event)
    parent: str | None = None  # the execution whose launch-plan node launched it: woken when it ends
    unexpected_errors: int = 0  # consecutive rounds that failed for a reason nobody expected
    flush_due: bool = False  # terminal, its waiters released once the store's async flush has committed it


class ChildExecutions(Protocol):
    """Where a launch-plan node's child executions live when the process is one of several: replicas write a
    child down as its own execution, for any of them to claim, and read its state back from there. The
    single process runs its children itself (an executor given none).

    Flyte's counterpart: propeller asks flyteadmin to create the child execution (``CreateExecution``) and
    follows it by ``GetExecution``; whichever propeller shard the child lands on runs it."""

    async def launch(self, spec: ExecutionSpec, *, parent: str) -> None:
        """Write child execution ``spec`` of execution ``parent`` down (a child already written is left as it
        is: a resumed parent launches again) and learn its state."""
        ...

    def record(self, key: str) -> ExecutionRecord | None:
        """The latest known record of child execution ``key`` (None: not launched through here)."""
        ...

    def abort(self, key: str) -> None:
        """Ask child execution ``key`` to abort, whichever process drives it."""
        ...


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
        catalog: Catalog | None = None,
        children: ChildExecutions | None = None,
    ) -> None:
        if (resolver is None) == (plugins is None):
            raise ValueError("give the executor either a resolver or a way to open its plugins, not both")
        self._resolver = resolver
        self._open_plugins = plugins
        self._plugins_stack = contextlib.AsyncExitStack()
        self.store = store
        # The store's capabilities, looked up once (an isinstance check against a runtime protocol walks
        # its members every time; these are asked every round and before every create).
        self._async_flush = async_flush(store)
        self._writes_intents = isinstance(store, WritesCreateIntent)
        self.data = data_store or DataStore()
        self.settings = settings or ExecutorSettings()
        self.clock: Clock = clock or SystemClock()
        self.step = NodeStep(self.settings.node_settings(), self.clock)
        self.resource_manager = resource_manager
        self.on_event = on_event
        self.on_unknown_create = on_unknown_create
        self.catalog = catalog  # where cacheable tasks' results are kept (None: caching off)
        # Where launch-plan nodes' child executions run: here (None), or as rows any replica claims.
        self.children = children
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
        self._made_run_settings: tuple[ExecutorSettings, Catalog | None, RunSettings] | None = None

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
        # One turn of the loop: the workers wait on the queue before anything is submitted. Otherwise each
        # starts by draining the queue, ahead of everything a submit scheduled (a plugin's informer starting
        # to watch before the first create: it would list every object the first submits created instead).
        await asyncio.sleep(0)
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
            execution = self._executions.get(key)
            woken_all = getattr(execution.node, "woken_all", None) if execution is not None else None
            if woken_all is not None:
                woken_all()
            self.wake(key)

    def enqueue_object(self, namespace: str, name: str) -> bool:
        """Wake the execution running the object ``name`` (its current attempt's generated name), telling its
        root node which object changed; False when no execution here runs it."""
        key = self._by_generated_name.get(name)
        execution = self._executions.get(key) if key is not None else None
        if key is None or execution is None:
            return False
        woken = getattr(execution.node, "woken", None)
        if woken is not None:
            woken(name)
        self.wake(key)
        return True

    def enqueue_task_execution(self, generated_name: str) -> None:
        """Wake the execution whose current attempt is ``generated_name`` (unknown names are ignored)."""
        self.enqueue_object("", generated_name)

    async def before_create(self, tctx: TaskExecutionContext) -> None:
        """The web-API adapters' hook, awaited right before a create (or a sync plugin's ``do``): the store's
        intent write, for the execution's attempt or the map element's retry attempt (see the module doc).
        Raises the store's error when the execution is no longer this process's to drive."""
        if not self._writes_intents:
            return
        name = tctx.metadata.task_execution_id.generated_name
        key = self._by_generated_name.get(name)
        execution = self._executions.get(key) if key is not None else None
        if execution is None:
            raise PluginError(
                ErrorCode.SYSTEM_ERROR, f"no execution is driven here for [{name}]: nothing is created"
            )
        node, element, attempt = execution.node.creating(tctx)
        assert isinstance(self.store, WritesCreateIntent)
        if self.store.write_create_intent(execution.record.key, attempt, name, element=element, node=node):
            self.unknown_creates += 1
            log.warning(
                "%s: %s %d was being created when its owner stopped; its outcome is unknown and it is "
                "created again",
                execution.record.key,
                ("" if node is None else f"node {node}, ")
                + ("attempt" if element is None else f"element {element}, attempt"),
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

    # -- what a root node asks of its executor (NodeHost) -----------------------------------------------
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

    async def launch(self, spec: ExecutionSpec, *, parent: str) -> str:
        if self.children is not None:
            # Replicas: the child is written down for any of them to claim; its end wakes ``parent``.
            await self.children.launch(spec, parent=parent)
            return spec.execution_key
        key = await self.submit(spec)
        self._executions[key].parent = parent
        return key

    def launched(self, key: str) -> ExecutionRecord | None:
        execution = self._executions.get(key)
        if execution is not None:
            return execution.record
        return self.children.record(key) if self.children is not None else None

    def _run_settings(self) -> RunSettings:
        # One for every root node (built once: thousands of executions in flight share it). Rebuilt when the
        # settings or the catalog it is made of were replaced.
        made = self._made_run_settings
        if made is not None and made[0] is self.settings and made[1] is self.catalog:
            return made[2]
        s = self.settings
        run_settings = RunSettings(
            data_root=s.data_root,
            resync_period=s.resync_period,
            max_plugin_phase_versions=s.max_plugin_phase_versions,
            array=s.array,
            cache=CacheSettings(self.catalog, s.cache_heartbeat, s.cache_grace_multiplier),
        )
        self._made_run_settings = (s, self.catalog, run_settings)
        return run_settings

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
        """Refuse, before anything is created, a spec this executor could not start: it asks for no more than
        ``executor.limits`` allows (a SpecError naming the field), its task type has a plugin, and a plugin
        that can check a task (the Kubernetes plugin manager builds the exact object it would create) accepts
        its first attempt — for a map, element 0, whose template every element shares. Raises the
        TaskplugError (``taskplug run`` exits 2)."""
        check_limits(spec, self.settings.limits)
        if spec.kind is NodeKind.WORKFLOW:
            return  # each task node is checked by its plugin when it starts
        plugin = self.resolver.resolve(spec.template.type)
        if not isinstance(plugin, _ChecksTasks):
            return
        max_length = plugin.get_properties().generated_name_max_length
        plugin.check_task(first_context(spec, self.settings.data_root, generated_name_max_length=max_length))

    async def submit(self, spec: ExecutionSpec) -> str:
        """Start (or resume, when the store knows it) an execution; returns its key. A spec the plugin
        cannot start is refused first (:meth:`check`), before anything is saved or created."""
        key = spec.execution_key
        if key in self._executions:
            return key
        record = self.store.load(key) or ExecutionRecord(
            key=key, attempt=spec.metadata.task_execution_id.id.retry_attempt
        )
        if not record.terminal:
            self.check(spec)
        execution = _Execution(
            spec, record, root_node(self, spec, record, self.resolver, self._run_settings())
        )
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
        if execution is None and self.children is not None and self.children.record(key) is not None:
            self.children.abort(key)  # a launch-plan child another replica may drive
            return
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
            phase=record.outcome or str(Phase(record.task_phase)),
            attempts=record.attempt + 1 - record.first_attempt,
            error=error,
            outputs=record.outputs,
            events=[e.to_json() for e in self.store.events(key)],
            elements=execution.node.elements_json(),
            nodes=execution.node.nodes_json(),
            leftovers=leftovers,
            node=record.path,
            cache_status=(record.cache or {}).get("status"),
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
        execution.node.unindex_all()
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
            elif self._queue.empty() and not self._running and not self._async_flush:
                # Idle: commit the batch now rather than at the next round's write, so that another process
                # sharing the state file (a second `taskplug run` waiting on a serialized cache) is not
                # kept waiting on this one's open transaction.
                self.store.flush()
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

    def _end(self, execution: _Execution, err: ExecutionError) -> None:
        """End the execution now, PermanentFailure with ``err`` (no more rounds, no more cleanup)."""
        end_record(self, execution.record, err)

    # -- one round of one execution -----------------------------------------------------------------------
    async def _round(self, execution: _Execution) -> None:
        self.rounds += 1
        await execution.node.round()

    def _terminal(self, execution: _Execution) -> None:
        execution.node.unindex_all()
        execution.record.terminal = True
        self.store.save(execution.record)
        if execution.parent is not None:
            self.wake(execution.parent)
        if self._async_flush:
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
