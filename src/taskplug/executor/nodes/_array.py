"""Running an ArrayNode: one sub-execution per element through the sub-task's own plugin, as propeller's
array handler drives its sub-nodes (flytepropeller/pkg/controller/nodes/array/handler.go, with the element
side of nodes/executor.go and nodes/task/handler.go).

The rules are :mod:`taskplug.executor.nodes._array_rules`'s; this module does the I/O around them, one round at a
time (the executor calls :meth:`ArrayRun.round` whenever the execution is woken):

* **None** — validate the inputs and size the node (R1), write the node's ``inputs.pb`` (full lists), send the
  Queued event listing every element, move to Executing.
* **Executing** — choose the window (R4), evaluate its elements concurrently (bounded by
  ``node-execution-worker-count``): each element's plugin ``handle`` with a context built as propeller
  builds an element's (its generated name, paths, index variables, its slice of the inputs, the
  de-listed template); decide each element's end (success after its outputs are checked, a
  retry under separate user and system budgets, or a failure); save those decisions and flush them
  *before* any object is aborted or finalized, then clean up; count, and move on (R7–R10); send one event
  for the round listing the elements that changed.
* **Failing** — abort and finalize every element still running, fail with the elements' errors (R13).
* **Succeeding** — gather the outputs in element order, ``none`` where an element did not succeed.

Deviations from propeller, each for a reason:

* Deviation: An element's success or failure is finalized in the round it is decided (propeller spends
  one more round in Succeeding / Failing, and one in Queued before the first create); fewer rounds, the
  same outcome.
* Deviation: One element whose plugin cannot decide (raises) does not discard the round's other results
  (propeller persists nothing of such a round); it is evaluated again next round and, like a single task,
  fails its attempt after ``max-round-errors`` rounds in a row.
* Deviation: The node's error lists every failed element's error, each kept from the round it failed;
  propeller overwrites its message each round while an element is Failing and keeps only that round's
  messages, so the first error can be lost.
* Deviation: An element's cleanup (abort, finalize) that keeps failing is retried for
  ``executor.max-round-errors`` rounds in a row, then given up, as a single task's is: the node aborts what
  still runs (within the same bound) and ends PermanentFailure ``CleanupFailed`` (kind SYSTEM), naming every
  given-up element and listing under ``leftovers`` what may be left behind (propeller retries an element's
  failing cleanup every round until the workflow's own retries run out).
* Deviation: A succeeded element's outputs are checked when it succeeds (error.pb first, then every
  declared output), so the gather never meets a missing one; if one is gone by then the node fails rather
  than shifting later outputs down a place.
* Deviation: An element writes no ``inputs.pb`` of its own. Propeller writes an empty one into each element's
  data dir when the element first starts, and nothing ever reads it: an element's pod reads the node's
  ``inputs.pb`` (full lists) at its index, here as there.

A discoverable sub-task is cached per element (ArrayNode caching: the element's slice of the inputs, the
de-listed interface): an element found in the catalog succeeds without a pod, its kept outputs copied into
its output dir; an element that succeeds is kept; a serialized one waits on another's reservation
(:mod:`._cache`). A map re-run after elements were appended runs only the new ones.

(The element's kept plugin state is ``NodeRecord``'s deviation.)
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

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
    StaticTaskExecutionContext,
    TaskExecutionContext,
    literal_map_to_plain,
    rfc3339,
)
from taskplug.executor._catalog import CacheStatus
from taskplug.executor._paths import node_dirs
from taskplug.executor._spec import ArrayNodeSpec, ExecutionSpec
from taskplug.executor._store import Closing, Event, ExecutionRecord, NodeRecord
from taskplug.executor.nodes._array_context import ElementContext, array_paths, element_parts
from taskplug.executor.nodes._array_rules import (
    DEFAULT_GENERATED_NAME_MAX_LENGTH,
    ArrayNodePhase,
    ErrorCollector,
    array_size,
    count_phases,
    delisted_template,
    element_generated_name,
    element_inputs,
    element_unique_id,
    external_resource_id,
    gather_outputs,
    infer_parallelism,
    min_successes_for,
    next_array_phase,
    remaining_parallelism,
    task_phase_for_node_phase,
    window,
)
from taskplug.executor.nodes._cache import WAITING_ON_CACHE, NodeCache
from taskplug.executor.nodes._host import NodeHost, flush_store
from taskplug.executor.nodes._phase import NodePhase
from taskplug.executor.nodes._retry import max_attempts_for
from taskplug.executor.nodes._settings import RunSettings
from taskplug.executor.nodes._step import CLEANUP_FAILED, GivenUp, NodeRuntime, NodeState, error_json
from taskplug.executor.nodes._task import TaskHandler

__all__ = ["ArrayRun"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Step:
    """What one element's evaluation this round produced."""

    index: int
    changed: bool = False
    entry: dict[str, Any] | None = None  # its external-resource entry for the round's event
    error: bool = False  # the plugin could not decide (nothing changed)
    retried: bool = False  # its attempt ended and the next one is due
    next_round_in: float | None = None  # when the element wants its next round without an event


def _decided(node: NodeRecord) -> Closing | None:
    return node.closing


def _now_iso(clock: Clock) -> str:
    return rfc3339(clock.now())


class ArrayRun:
    """One ArrayNode execution: its state (in ``record.array``), its elements and their rounds."""

    def __init__(
        self,
        host: NodeHost,
        spec: ExecutionSpec,
        record: ExecutionRecord,
        plugin: Plugin,
        settings: RunSettings,
    ) -> None:
        assert spec.array is not None
        self.host = host
        self.spec = spec
        self.array: ArrayNodeSpec = spec.array
        self.record = record
        self.plugin = plugin
        self.settings = settings
        self.key = spec.execution_key
        state = record.array or {}
        self.phase = ArrayNodePhase(state.get("phase", 0))
        self.size: int = state.get("size", 0)
        self.version: int = state.get("version", 0)
        self.elements: list[NodeRecord] = []
        self.template = spec.template
        self.element_template = delisted_template(spec.template)
        self.output_names = (
            sorted(spec.template.interface.outputs.variables) if spec.template.HasField("interface") else []
        )
        target = self.element_template.WhichOneof("target")
        text = str(self.element_template.container) + str(self.element_template.k8s_pod) if target else ""
        # Only a task whose command line asks for {{.TaskTemplatePath}} needs its template in the store.
        self.needs_template_file = "tasktemplatepath" in text.lower()
        max_length = plugin.get_properties().generated_name_max_length
        self.name_max_length = max_length or DEFAULT_GENERATED_NAME_MAX_LENGTH
        tid = spec.metadata.task_execution_id.id
        self.execution_id = tid.node_execution_id.execution_id
        self.node_id = tid.node_execution_id.node_id or "n0"
        self.node_attempt = tid.retry_attempt
        self.data_dir, self.output_dir = array_paths(spec, settings.data_root)
        self.max_attempts = max_attempts_for(self.array.min_attempts, host.step.settings.default_max_attempts)
        self._contexts: dict[int, ElementContext] = {}
        self._runtimes: dict[int, NodeRuntime] = {}  # each element's in-memory counters
        # A cleanup given up (executor.max-round-errors): the message and what may be left behind.
        self._given_up: dict[str, Any] | None = state.get("cleanupFailed")
        self._names: dict[int, str] = {}
        cache = NodeCache(
            settings.cache,
            host.data,
            settings.data_root,
            self.element_template,
            self.execution_id.project,
            self.execution_id.domain,
            spec.overwrite_cache,
        )
        self.cache = cache if cache.active else None  # per-element lookup and write-back (None: off)
        if self.size:
            self._load_elements()

    # -- state ------------------------------------------------------------------------------------------
    def _load_elements(self) -> None:
        self.elements = self._fresh_elements(self.size)
        for element in self.host.store.load_nodes(self.key):
            parent, _, index = element.path.rpartition("/")
            if parent == self.record.path and index.isdigit() and int(index) < self.size:
                self.elements[int(index)] = element
        for element in self.elements:
            phase = NodePhase(element.node_phase)
            if phase is not NodePhase.NOT_YET_STARTED and not phase.is_terminal:
                self._index(element)

    def _fresh_elements(self, size: int) -> list[NodeRecord]:
        """Element records not started: child nodes ``<root>/<index>``."""
        root = self.record.path
        return [NodeRecord(path=f"{root}/{i}") for i in range(size)]

    def _save_state(self) -> None:
        self.record.array = {
            "phase": int(self.phase),
            "size": self.size,
            "version": self.version,
        }
        if self._given_up is not None:
            self.record.array["cleanupFailed"] = self._given_up
        self.host.store.save(self.record)

    def _cleanup_failed_error(self) -> dict[str, Any]:
        """The node's end when a cleanup was given up: ``CleanupFailed`` (SYSTEM), every given-up element in
        the message, what may be left behind under ``leftovers`` (the execution result's leftovers)."""
        assert self._given_up is not None
        leftovers: list[dict[str, str]] = self._given_up["leftovers"]
        listed = ", ".join(f"{o.get('kind')} {o.get('namespace')}/{o.get('name')}" for o in leftovers)
        message = "; ".join(self._given_up["messages"]) + (
            f"; may be left behind: {listed}" if listed else ""
        )
        return {
            "code": CLEANUP_FAILED,
            "message": message,
            "kind": str(ErrorKind.SYSTEM),
            "leftovers": leftovers,
        }

    @property
    def paths_output(self) -> str:
        return f"{self.output_dir}/outputs.pb"

    @property
    def input_path(self) -> str:
        return f"{self.data_dir}/inputs.pb"

    # -- names and contexts -----------------------------------------------------------------------------
    def unique_id(self, index: int) -> str:
        return element_unique_id(self.node_id, self.node_attempt, index)

    def generated_name(self, index: int, attempt: int) -> str:
        return element_generated_name(
            self.execution_id.name, self.unique_id(index), attempt, self.name_max_length
        )

    def _index(self, element: NodeRecord) -> None:
        name = self._element_context(element).metadata.task_execution_id.generated_name
        old = self._names.get(element.index)
        if old != name:
            if old is not None:
                self.host.unindex_generated_name(old)
            self._names[element.index] = name
            self.host.index_generated_name(name, self.key)

    def unindex_all(self) -> None:
        """Stop routing any element's events to this node (the executor forgets it)."""
        for index in list(self._names):
            self._unindex(index)

    def creating(self, tctx: TaskExecutionContext) -> tuple[str | None, int | None, int]:
        """(this node's path, index, retry attempt) of the element whose context ``tctx`` is: an element's context names its
        node ``n<index>`` and carries its retry attempt (``element_parts``), checked against the generated
        name the node gives that element's attempt, so a context of anything else is refused."""
        task = tctx.metadata.task_execution_id
        node_id = task.id.node_execution_id.node_id
        attempt = task.id.retry_attempt
        digits = node_id[1:]
        index = int(digits) if node_id.startswith("n") and digits.isdigit() else -1
        if not 0 <= index < self.size or self.generated_name(index, attempt) != task.generated_name:
            raise PluginError(
                ErrorCode.SYSTEM_ERROR,
                f"[{task.generated_name}] is no element of map task {self.key}: nothing is created",
            )
        return self.record.path, index, attempt

    def _unindex(self, index: int) -> None:
        old = self._names.pop(index, None)
        if old is not None:
            self.host.unindex_generated_name(old)

    def _element_context(self, element: NodeRecord) -> ElementContext:
        cached = self._contexts.get(element.index)
        if cached is not None and cached.attempt == element.attempt:
            return cached
        context = element_parts(
            self.spec,
            self.settings.data_root,
            element.index,
            attempt=element.attempt,
            name_max_length=self.name_max_length,
            max_attempts=self.max_attempts,
            element_template=self.element_template,
        )
        self._contexts[element.index] = context
        return context

    def task_context(self, element: NodeRecord) -> StaticTaskExecutionContext:
        """The element's context for this round (what its plugin sees)."""
        return self._element_context(element).context(
            element.state_version, element.plugin_state, self.host.resource_manager
        )

    # -- events -----------------------------------------------------------------------------------------
    def _entry(self, element: NodeRecord, phase: Phase, *, logs: Any = None) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "externalId": external_resource_id(
                self.execution_id.name, self.node_id, self.node_attempt, element.index, element.attempt
            ),
            "index": element.index,
            "retryAttempt": element.attempt,
            "phase": str(phase),
        }
        if logs:
            # Flyte names each element's links after its index (event_recorder.go process).
            entry["logs"] = [{**link, "name": f"{link.get('name', '')}-{element.index}"} for link in logs]
        if element.error is not None and phase.is_failure:
            entry["reason"] = element.error.get("message", "")
        elif element.reason:
            entry["reason"] = element.reason
        if element.cache is not None:
            entry["cacheStatus"] = element.cache.get("status")
        return entry

    def _all_entries(self, reported: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
        """A terminal event's list: what was reported this round, the stored phase of every other element."""
        out = []
        for element in self.elements:
            entry = reported.get(element.index)
            if entry is None:
                entry = self._entry(element, task_phase_for_node_phase(NodePhase(element.node_phase)))
            out.append(entry)
        return out

    def _emit(
        self,
        phase: Phase,
        version: int,
        entries: list[dict[str, Any]],
        *,
        reason: str = "",
        error: dict[str, Any] | None = None,
    ) -> None:
        self.record.task_phase, self.record.phase_version, self.record.reason = int(phase), version, reason
        event = Event(
            attempt=0,  # an ArrayNode is never retried as a whole
            phase=str(phase),
            version=version,
            reason=reason,
            occurred_at=_now_iso(self.host.clock),
            error=error,
            external_resources=entries,
        )
        self.host.emit(self.key, event)

    def _progress(self) -> str:
        counts = count_phases(NodePhase(e.node_phase) for e in self.elements)
        return (
            f"{counts.succeeded}/{self.size} elements succeeded, {counts.failed} failed, "
            f"{counts.running} running"
        )

    # -- the round --------------------------------------------------------------------------------------
    async def round(self) -> None:
        if self.record.abort_requested:
            await self._abort_all(reason="aborted by request", failing=False)
            return
        if self.phase is ArrayNodePhase.NONE:
            await self._start()
        elif self.phase is ArrayNodePhase.EXECUTING:
            await self._execute()
        elif self.phase is ArrayNodePhase.FAILING:
            await self._abort_all(reason="ArrayNodeFailing", failing=True)
        elif self.phase is ArrayNodePhase.SUCCEEDING:
            await self._succeed()

    async def _start(self) -> None:
        size = array_size(self.spec.inputs, self.array.bound_inputs)
        if isinstance(size, ExecutionError):
            # R1: returned without any state; the node fails.
            self._fail_terminal(error_json(size))
            return
        await self.host.data.write(self.input_path, self.spec.inputs.SerializeToString())
        self.size = size
        self.elements = self._fresh_elements(size)
        self.phase = ArrayNodePhase.EXECUTING
        self.version = 0
        self._emit(
            Phase.QUEUED,
            0,
            [self._entry(e, Phase.UNDEFINED) for e in self.elements],
            reason=f"{size} element(s) queued",
        )
        self._save_state()
        self.host.wake(self.key)

    async def _execute(self) -> None:
        behavior = self.settings.array.parallelism_behavior
        remaining = remaining_parallelism(self.settings.array.max_parallelism, 0, self.size)
        _, maximum = infer_parallelism(self.array.parallelism, behavior, remaining, self.size)
        chosen = window([NodePhase(e.node_phase) for e in self.elements], maximum)

        steps = await self._bounded(chosen, self._evaluate)
        # Every end decided this round is on disk before any object is aborted, finalized or deleted: a
        # process killed during the cleanup finishes it on resume instead of deciding again.
        changed = [self.elements[s.index] for s in steps if s.changed]
        closing = [self.elements[i] for i in chosen if self.elements[i].closing is not None]
        self.host.store.save_nodes(self.key, changed)
        closed: list[_Step] = []
        if closing:
            await flush_store(self.host.store)
            closed = await self._bounded([e.index for e in closing], self._close)
            self.host.store.save_nodes(self.key, [self.elements[s.index] for s in closed if s.changed])
        entries = {s.index: s.entry for s in steps if s.entry is not None}

        counts = count_phases(NodePhase(e.node_phase) for e in self.elements)
        needed = min_successes_for(self.size, self.array.min_successes, self.array.min_success_ratio)
        new_phase = next_array_phase(self.size, counts, needed)
        if self._given_up is not None:
            # A cleanup was given up: the node stops (aborting what still runs, within the same bound) and
            # ends CleanupFailed, as a single task does.
            new_phase = ArrayNodePhase.FAILING
        if entries:
            if any(s.changed for s in steps):
                self.version += 1
            self._emit(
                Phase.RUNNING, self.version, [entries[i] for i in sorted(entries)], reason=self._progress()
            )
        elif self.record.task_phase != int(Phase.RUNNING):
            self.record.task_phase, self.record.reason = int(Phase.RUNNING), self._progress()
        if new_phase is not ArrayNodePhase.EXECUTING:
            self.version = 0
        self.phase = new_phase
        self._save_state()
        if new_phase is not ArrayNodePhase.EXECUTING or self._next_round_now(chosen, closed, maximum):
            self.host.wake(self.key)
        else:
            self.host.wake_after(self.key, self._next_wake(steps, closed))

    def _next_round_now(self, chosen: Sequence[int], closed: Sequence[_Step], maximum: int) -> bool:
        """Whether the next round is due at once: a retry's next attempt is created then, and an element
        that ended frees its slot for one that has not started."""
        if any(s.retried for s in closed):
            return True
        if len(chosen) < maximum or not any(s.changed and not s.retried for s in closed):
            return False
        return any(NodePhase(e.node_phase) is NodePhase.NOT_YET_STARTED for e in self.elements)

    def _next_wake(self, steps: Sequence[_Step], closed: Sequence[_Step]) -> float:
        """When the next round is due without an event: the resync period, sooner for an element's deadline,
        a plugin that could not decide or a cleanup that failed (each backing off as a single task does)."""
        delay = self.settings.resync_period
        for step in (*steps, *closed):
            if step.next_round_in is not None:
                delay = min(delay, step.next_round_in)
        return delay

    async def _bounded(self, indices: Sequence[int], work: Callable[[int], Awaitable[_Step]]) -> list[_Step]:
        results: list[_Step] = []
        pending = iter(indices)

        async def worker() -> None:
            for index in pending:
                results.append(await work(index))

        workers = min(self.settings.array.workers, len(indices))
        if workers == 1:
            await worker()
        elif workers > 1:
            await asyncio.gather(*(worker() for _ in range(workers)))
        return results

    # -- one element ------------------------------------------------------------------------------------
    def _runtime(self, index: int) -> NodeRuntime:
        runtime = self._runtimes.get(index)
        if runtime is None:
            runtime = self._runtimes[index] = NodeRuntime()
        return runtime

    def _label(self, index: int) -> str:
        return f"{self.key}[{index}]"

    def _handler(self, element: NodeRecord) -> TaskHandler:
        """The element's task handler for this round: a child task node, run through the node step."""
        tctx = self.task_context(element)
        prepare = None
        if self.needs_template_file:

            async def prepare(node: NodeState) -> None:
                if node.task_phase == int(Phase.UNDEFINED):
                    await self.host.data.write(
                        tctx.task_reader.path, self.element_template.SerializeToString()
                    )

        return TaskHandler(
            plugin=self.plugin,
            tctx=tctx,
            data=self.host.data,
            max_plugin_phase_versions=self.settings.max_plugin_phase_versions,
            prepare=prepare,
        )

    async def _evaluate(self, index: int) -> _Step:
        element = self.elements[index]
        step = _Step(index)
        if element.closing is not None:
            return step  # decided, only its cleanup is left (below)
        if self.record.abort_requested and NodePhase(element.node_phase) is NodePhase.NOT_YET_STARTED:
            # An abort arrived while this round runs: start nothing more (the next round aborts what runs).
            return step
        if self.cache is not None and await self._element_cache(element, step):
            return step
        self._index(element)
        evaluation = await self.host.step.evaluate(
            element,
            self._handler(element),
            self._runtime(index),
            label=self._label(index),
            max_attempts=self.max_attempts,
            time_limit=self.array.timeout,
        )
        step.changed = evaluation.changed
        step.next_round_in = evaluation.next_round_in
        if element.cache is not None and element.cache.get("reservation") == "RESERVATION_ACQUIRED":
            # The holder comes back every heartbeat to extend its reservation.
            heartbeat = self.settings.cache.heartbeat
            step.next_round_in = min(step.next_round_in or heartbeat, heartbeat)
        if evaluation.info is None:  # the plugin could not decide: evaluated again after a back-off
            step.error = True
            return step
        closing = _decided(element)  # set by the step this round
        if self.cache is not None and element.cache is not None and closing and not closing.get("retry"):
            # The element's end is decided: a success is kept in the catalog; the reservation goes.
            if evaluation.info.phase is Phase.SUCCESS and evaluation.outputs is not None:
                inputs = element_inputs(self.spec.inputs, index, self.array.bound_inputs)
                source = f"{self.key}#{element.path}"
                await self.cache.write(element.cache, inputs, evaluation.outputs, source)
            self.cache.release(element.cache, self._owner(element))
        self._record(element, evaluation.info, step)
        return step

    # -- the catalog, per element (nodes/cache.go over the element's node) -------------------------------
    def _owner(self, element: NodeRecord) -> str:
        return f"{self.key}#{element.path}"

    async def _element_cache(self, element: NodeRecord, step: _Step) -> bool:
        """An element's lookup before it starts (a hit ends it Succeeded with the kept outputs, no task
        run), its reservation when serialized (waiting while another holds it), the holder's extension
        while it runs. Whether the element's round is over."""
        cache = self.cache
        assert cache is not None
        state = element.cache if element.cache is not None else {}
        if element.node_phase != NodePhase.NOT_YET_STARTED:
            if state.get("reservation") == "RESERVATION_ACQUIRED" and element.closing is None:
                cache.reserve(state, self._owner(element))
            return False
        waiting = state.get("reservation") == "RESERVATION_EXISTS"
        if element.cache is None or waiting:
            inputs = element_inputs(self.spec.inputs, element.index, self.array.bound_inputs)
            found = await cache.lookup(inputs)
            state.update(found.to_json())
            element.cache = state
            step.changed = True
            if found.status is CacheStatus.CACHE_HIT and found.outputs is not None:
                _, output_dir = node_dirs(
                    self.settings.data_root,
                    self.execution_id,
                    element.path,
                    (self.node_attempt, element.attempt),
                )
                await self.host.data.write(f"{output_dir}/outputs.pb", found.outputs.SerializeToString())
                element.node_phase = int(NodePhase.SUCCEEDED)
                element.task_phase, element.phase_version, element.reason = int(Phase.SUCCESS), 0, "cache hit"
                step.entry = self._entry(element, Phase.SUCCESS)
                return True
        if not cache.serialized or cache.key_of(state) is None or cache.reserve(state, self._owner(element)):
            return False
        if element.reason != WAITING_ON_CACHE:
            element.task_phase, element.reason = int(Phase.WAITING_FOR_CACHE), WAITING_ON_CACHE
            step.changed = True
            step.entry = self._entry(element, Phase.WAITING_FOR_CACHE)
        step.next_round_in = self.settings.cache.heartbeat
        return True

    def _record(self, element: NodeRecord, info: PhaseInfo, step: _Step) -> None:
        phase = info.phase
        if (
            int(phase) == element.task_phase
            and info.version <= element.phase_version
            and info.reason == element.reason
            and element.closing is None
        ):
            return
        element.task_phase, element.phase_version, element.reason = int(phase), info.version, info.reason
        logs = (
            [link.to_json() for link in info.info.logs] if info.info is not None and info.info.logs else None
        )
        if logs:
            element.logs = logs
        step.changed = True
        step.entry = self._entry(element, phase, logs=logs)

    def _given_up_cleanup(self, element: NodeRecord, given_up: GivenUp, decided: str) -> None:
        """Note an element whose cleanup was given up, for the node's ``CleanupFailed`` end (as a single
        task's): the element ends, what may be left behind is listed."""
        given = self._given_up or {"messages": [], "leftovers": []}
        given["messages"].append(f"element {element.index}: {given_up.describe(decided)}")
        given["leftovers"].extend(given_up.leftovers)
        self._given_up = given
        element.closing = None
        self._unindex(element.index)
        self._contexts.pop(element.index, None)

    async def _close(self, index: int) -> _Step:
        """Finish a decided element: abort its object when due, finalize, then retry or end it."""
        element = self.elements[index]
        step = _Step(index)
        if element.closing is None:
            return step
        decided = str(Phase(element.task_phase))
        cleanup = await self.host.step.close(
            element, self._handler(element), self._runtime(index), label=self._label(index)
        )
        if cleanup.given_up is not None:
            # Given up: the element ends failed (a retry is not started on top of what may be left).
            self._given_up_cleanup(element, cleanup.given_up, decided)
            element.node_phase = int(NodePhase.FAILED)
            step.changed = True
            return step
        if not cleanup.done:
            step.next_round_in = cleanup.next_round_in
            return step
        step.changed = True
        if cleanup.retried:
            step.retried = True
            element.logs = None
            self._index(element)
        else:
            self._unindex(index)
            self._contexts.pop(index, None)
        return step

    # -- the end ----------------------------------------------------------------------------------------
    def node_error(self) -> dict[str, Any]:
        """The node's error (R9, R13): every failed element's error, indices merged by message."""
        collector = ErrorCollector()
        for element in self.elements:
            if NodePhase(element.node_phase) in (NodePhase.FAILED, NodePhase.FAILING, NodePhase.TIMED_OUT):
                message = (element.error or {}).get("message") or "the element failed"
                collector.collect(element.index, message)
        if not len(collector):
            return {"code": "ArrayNodeFailing", "message": "Unknown reason", "kind": "UNKNOWN"}
        return {"code": "", "message": collector.summary(), "kind": "UNKNOWN"}

    async def _abort_all(self, *, reason: str, failing: bool) -> None:
        """Abort and finalize every element that started and is not done (Flyte's ``Abort``), then end:
        Failed with the node's error when failing, Aborted when asked to abort."""
        self._save_state()
        await flush_store(self.host.store)  # the decision to stop is on disk before anything is deleted
        started = [
            e.index
            for e in self.elements
            if NodePhase(e.node_phase) is not NodePhase.NOT_YET_STARTED
            and not NodePhase(e.node_phase).is_terminal
        ]
        errors = ErrorCollector()
        entries: dict[int, dict[str, Any]] = {}

        async def abort(index: int) -> _Step:
            element = self.elements[index]
            cleanup = await self.host.step.clean_up(
                self._handler(element), self._runtime(index), label=self._label(index), abort=True
            )
            if cleanup.given_up is not None:
                decided = "Aborted" if self.record.abort_requested else str(Phase(element.task_phase))
                self._given_up_cleanup(element, cleanup.given_up, decided)
                element.node_phase = int(
                    NodePhase.FAILED
                    if NodePhase(element.node_phase) is NodePhase.FAILING
                    else NodePhase.ABORTED
                )
                entries[index] = self._entry(
                    element, task_phase_for_node_phase(NodePhase(element.node_phase))
                )
                return _Step(index, changed=True)
            if not cleanup.done:
                errors.collect(index, str(cleanup.error))
                return _Step(index, error=True)
            element.closing = None
            if self.cache is not None and element.cache is not None:
                self.cache.release(element.cache, self._owner(element))  # a waiting execution goes on now
            if NodePhase(element.node_phase) is NodePhase.SUCCEEDING:
                # Its outputs are checked; only cleanup was left.
                element.node_phase = int(NodePhase.SUCCEEDED)
            elif NodePhase(element.node_phase) is NodePhase.FAILING:
                element.node_phase = int(NodePhase.FAILED)
            else:
                element.node_phase = int(NodePhase.ABORTED)
            self._unindex(index)
            entries[index] = self._entry(element, task_phase_for_node_phase(NodePhase(element.node_phase)))
            return _Step(index, changed=True)

        steps = await self._bounded(started, abort)
        self.host.store.save_nodes(self.key, [self.elements[s.index] for s in steps if s.changed])
        if len(errors):
            # Abort errors are returned (the round fails) and the abort is tried again.
            log.warning("%s: abort failed: %s", self.key, errors.summary())
            self._save_state()
            self.host.wake_after(self.key, min(1.0, self.settings.resync_period))
            return
        if self._given_up is not None:
            error = self._cleanup_failed_error()
            shown = {k: v for k, v in error.items() if k != "leftovers"}
            self._emit(
                Phase.PERMANENT_FAILURE, 0, self._all_entries(entries), reason=error["message"], error=shown
            )
            self.record.outcome = str(Phase.PERMANENT_FAILURE)
            self.record.error = error
        elif failing:
            error = self.node_error()
            self._emit(Phase.PERMANENT_FAILURE, 0, self._all_entries(entries), reason=reason, error=error)
            self.record.outcome = str(Phase.PERMANENT_FAILURE)
            self.record.error = error
        else:
            error = {"code": "Aborted", "message": reason, "kind": str(ErrorKind.USER)}
            self._emit(Phase.ABORTED, 0, self._all_entries(entries), reason=reason)
            self.record.outcome = str(Phase.ABORTED)
            self.record.error = error
        self._save_state()
        self.host.finish(self.key)

    async def _succeed(self) -> None:
        results: list[literals_pb2.LiteralMap | None] = []
        for element in self.elements:
            if NodePhase(element.node_phase) is not NodePhase.SUCCEEDED:
                results.append(None)
                continue
            _, output_dir = node_dirs(
                self.settings.data_root, self.execution_id, element.path, (self.node_attempt, element.attempt)
            )
            path = f"{output_dir}/outputs.pb"
            try:
                outputs = await self.host.data.read_outputs(path)
            except ValueError as e:
                outputs = None
                log.warning("%s: %s", self.key, e)
            if outputs is None and self.output_names:
                self._fail_terminal(
                    {
                        "code": "OutputsNotFound",
                        "message": f"element {element.index} succeeded but its outputs are gone ({path})",
                        "kind": str(ErrorKind.SYSTEM),
                    }
                )
                return
            results.append(outputs or literals_pb2.LiteralMap())
        try:
            gathered = gather_outputs(self.output_names, results)
        except ValueError as e:
            self._fail_terminal({"code": "OutputsNotFound", "message": str(e), "kind": str(ErrorKind.SYSTEM)})
            return
        await self.host.data.write(self.paths_output, gathered.SerializeToString())
        self.record.outputs = literal_map_to_plain(gathered)
        self.record.outcome = str(Phase.SUCCESS)
        self.record.error = None
        self._emit(Phase.SUCCESS, 0, self._all_entries({}), reason=self._progress())
        self._save_state()
        self.host.finish(self.key)

    def _fail_terminal(self, error: dict[str, Any] | None) -> None:
        self.record.outcome = str(Phase.PERMANENT_FAILURE)
        self.record.error = error
        self._emit(
            Phase.PERMANENT_FAILURE,
            0,
            self._all_entries({}),
            reason=(error or {}).get("message", ""),
            error=error,
        )
        self._save_state()
        self.host.finish(self.key)

    # -- what users see ---------------------------------------------------------------------------------
    def nodes_json(self) -> None:
        return None

    def elements_json(self) -> list[dict[str, Any]]:
        """Each element's phase, attempts, error and log links (``taskplug run -o json``)."""
        out = []
        for element in self.elements:
            phase = NodePhase(element.node_phase)
            started = phase is not NodePhase.NOT_YET_STARTED
            entry: dict[str, Any] = {
                "index": element.index,
                "node": element.path,
                "phase": str(phase),
                "taskPhase": str(Phase(element.task_phase)),
                "attempts": element.attempt + 1 if started else 0,
                "name": self.generated_name(element.index, element.attempt) if started else None,
                "error": element.error if phase in _FAILED_PHASES else None,
                "logs": [
                    {**link, "name": f"{link.get('name', '')}-{element.index}"} for link in element.logs or []
                ],
            }
            if element.cache is not None:
                entry["cacheStatus"] = element.cache.get("status")
            out.append(entry)
        return out


_FAILED_PHASES = frozenset(
    {NodePhase.FAILED, NodePhase.FAILING, NodePhase.TIMED_OUT, NodePhase.RETRYABLE_FAILURE}
)
