"""A single task's execution: its root node is one task node, run through the node step and the task handler.

Follows the task-node part of flytepropeller (nodes/executor.go over nodes/task/handler.go) for a node that is
the whole execution: every new phase or version the plugin reports becomes an event; the node's decision
(success with its outputs, a retry while the budgets last, a failure for good with propeller's
``RetriesExhausted|<code>``) is saved before the cleanup runs; an abort request aborts and finalizes; a
cleanup given up ends the execution ``CleanupFailed``, listing what may be left behind.

A cacheable task (``metadata.discoverable``) goes through the data catalog first (:mod:`._cache`, after
nodes/cache.go): a hit ends the node Succeeded with the kept outputs and one event, no plugin call; a
serialized one waits while another execution holds its key's reservation; a success is kept, the
reservation released. A workflow's task nodes are this node too, so they are cached the same way.

The inputs (and, for a task whose command line asks for ``{{.TaskTemplatePath}}``, the template) are written
to the data store in the first round, as part of the round, so a store that refuses them errors the round
within the same bound as an API that cannot be reached. A task written by Flyte 2's SDK gets its attempt's
output folder made first on a local data root (:mod:`taskplug.executor._flyte2`).
"""

from __future__ import annotations

from typing import Any

from flyteidl.core import literals_pb2

from taskplug.core import (
    ErrorCode,
    ErrorKind,
    ExecutionError,
    Phase,
    PhaseInfo,
    Plugin,
    PluginError,
    PluginStateHolder,
    StaticOutputWriter,
    StaticTaskExecutionContext,
    TaskExecutionContext,
    literal_map_to_plain,
)
from taskplug.executor._catalog import CacheStatus
from taskplug.executor._flyte2 import is_flyte2_task
from taskplug.executor._paths import ExecutionPaths
from taskplug.executor._spec import ExecutionSpec
from taskplug.executor._store import Closing, ExecutionRecord
from taskplug.executor._tasks import task_context_for
from taskplug.executor.nodes._cache import WAITING_ON_CACHE, NodeCache
from taskplug.executor.nodes._host import NodeHost, flush_store, phase_event
from taskplug.executor.nodes._phase import NodePhase
from taskplug.executor.nodes._retry import max_attempts_for
from taskplug.executor.nodes._settings import RunSettings
from taskplug.executor.nodes._step import CLEANUP_FAILED, GivenUp, NodeRuntime, NodeState
from taskplug.executor.nodes._task import FUTURES_FILE, TaskHandler, needs_template_file

__all__ = ["TaskNode", "end_record", "task_timeout"]


def task_timeout(template: Any) -> float | None:
    """A task's timeout in seconds (its ``metadata.timeout``, which flytekit also copies into the node's
    metadata: the node's execution deadline); None when unset or zero."""
    seconds = template.metadata.timeout.ToTimedelta().total_seconds() if template.HasField("metadata") else 0
    return float(seconds) if seconds > 0 else None


class TaskNode:
    """One single-task execution's root node (its state is the execution's record)."""

    # An executor holds one per execution in flight (thousands): no per-instance dict.
    __slots__ = (
        "_attempt_context",
        "_flyte2",
        "_generated_name",
        "_inputs_written",
        "_output_folder",
        "abort_reason",
        "allow_dynamic",
        "cache",
        "futures",
        "futures_known",
        "host",
        "inputs_in_store",
        "key",
        "max_attempts",
        "outputs",
        "plugin",
        "record",
        "runtime",
        "settings",
        "spec",
        "timeout",
    )

    def __init__(
        self,
        host: NodeHost,
        spec: ExecutionSpec,
        record: ExecutionRecord,
        plugin: Plugin,
        settings: RunSettings,
    ) -> None:
        self.host = host
        self.spec = spec
        self.record = record
        self.plugin = plugin
        self.settings = settings
        self.key = spec.execution_key
        self.runtime = NodeRuntime()
        self.timeout = task_timeout(spec.template)
        self.max_attempts = max_attempts_for(
            spec.metadata.max_attempts, host.step.settings.default_max_attempts
        )
        self._inputs_written = False
        self._output_folder = ""  # the attempt's output folder made on a local data root (Flyte 2 tasks)
        self._flyte2 = is_flyte2_task(spec.template)  # the template is the spec's: it does not change
        # A workflow that wrote the node's inputs.pb when it queued the node (the same file) sets this.
        self.inputs_in_store = False
        self._generated_name = ""
        # The context of the current attempt without its round's parts (plugin state, output writer): built
        # once per attempt, not once per round.
        self._attempt_context: tuple[int, StaticTaskExecutionContext] | None = None
        self.abort_reason = "aborted by request"  # a workflow aborting its nodes gives its own reason
        self.allow_dynamic = False  # a workflow's task node may be @dynamic: its futures.pb is no failure
        # What the round that decided the attempt's success found of a futures.pb (its workflow reads it
        # from here rather than from the store again); not known when decided before a restart.
        self.futures_known = False
        self.futures: bytes | None = None
        # The outputs that round read (outputs.pb, parsed): the workflow's consumers of the node read them
        # from here rather than from the store again. None when not read (decided before a restart).
        self.outputs: literals_pb2.LiteralMap | None = None
        execution = spec.metadata.task_execution_id.id.node_execution_id.execution_id
        cache = NodeCache(
            settings.cache,
            host.data,
            settings.data_root,
            spec.template,
            execution.project,
            execution.domain,
            spec.overwrite_cache,
        )
        self.cache = cache if cache.active else None  # the catalog's lookup and write-back (None: off)

    # -- what the executor asks -------------------------------------------------------------------------
    def creating(self, tctx: TaskExecutionContext) -> tuple[str | None, int | None, int]:
        name = tctx.metadata.task_execution_id.generated_name
        if name != self._generated_name:
            raise PluginError(
                ErrorCode.SYSTEM_ERROR,
                f"[{name}] is not the current attempt of {self.key}: nothing is created",
            )
        return None, None, self.record.attempt

    def nodes_json(self) -> None:
        return None

    def elements_json(self) -> None:
        return None

    def unindex_all(self) -> None:
        # Called when the node ends (or is forgotten): its attempt's context is not needed any more, and the
        # ended node may be held for a long time.
        self._attempt_context = None
        self._unindex_name()

    def _unindex_name(self) -> None:
        if self._generated_name:
            self.host.unindex_generated_name(self._generated_name)
            self._generated_name = ""

    # -- a round ----------------------------------------------------------------------------------------
    def _context(self) -> StaticTaskExecutionContext:
        """This round's context: the attempt's parts, this round's plugin state and a fresh output writer."""
        record = self.record
        cached = self._attempt_context
        if cached is None or cached[0] != record.attempt:
            base = task_context_for(
                self.spec.for_attempt(record.attempt),
                self.settings.data_root,
                generated_name_max_length=self.plugin.get_properties().generated_name_max_length,
            )
            cached = self._attempt_context = (record.attempt, base)
        base = cached[1]
        writer = base.output_writer
        return StaticTaskExecutionContext(
            metadata=base.metadata,
            task_reader=base.task_reader,
            input_reader=base.input_reader,
            output_writer=StaticOutputWriter(
                output_prefix=writer.output_prefix,
                raw_output_prefix=writer.raw_output_prefix,
                checkpoint_prefix=writer.checkpoint_prefix,
                prev_checkpoint_prefix=writer.prev_checkpoint_prefix,
            ),
            plugin_state=PluginStateHolder(record.state_version, record.plugin_state),
            resource_manager=self.host.resource_manager,
        )

    def _handler(self) -> TaskHandler:
        tctx = self._context()
        name = tctx.metadata.task_execution_id.generated_name
        if name != self._generated_name:
            self._unindex_name()
            self._generated_name = name
            self.host.index_generated_name(name, self.key)

        async def prepare(_: NodeState) -> None:
            output_prefix = tctx.output_writer.output_prefix
            if self._flyte2 and self._output_folder != output_prefix:
                # Before the pod starts: Flyte 2's a0 writes outputs.pb or error.pb into it with plain file
                # writes, which fail on a local data root when the folder is missing.
                await self.host.data.make_folder(output_prefix)
                self._output_folder = output_prefix
            if self._inputs_written:
                return
            paths = ExecutionPaths.for_attempt(self.settings.data_root, tctx.metadata)
            # The node's data folder is new with its first attempt: the first file written makes it first,
            # not after a failed open.
            if not self.inputs_in_store:
                await self.host.data.write(
                    paths.input_path, self.spec.inputs.SerializeToString(), new_folder=True
                )
            if needs_template_file(self.spec.template):
                await self.host.data.write(
                    f"{paths.input_prefix}/task.pb",
                    self.spec.template.SerializeToString(),
                    new_folder=self.inputs_in_store,
                )
            self._inputs_written = True

        return TaskHandler(
            plugin=self.plugin,
            tctx=tctx,
            data=self.host.data,
            max_plugin_phase_versions=self.settings.max_plugin_phase_versions,
            prepare=prepare,
            allow_dynamic=self.allow_dynamic,
        )

    async def round(self) -> None:
        record = self.record
        handler = self._handler()
        if record.closing is not None:
            # The attempt's end was decided and saved, its cleanup not finished (stopped in between, or
            # finalize failed): finish the cleanup, never decide again.
            await self._finish_closing(handler)
            return
        if record.abort_requested:
            await self._abort(handler, reason=self.abort_reason)
            return
        if self.cache is not None and await self._cache_round(handler):
            return
        evaluation = await self.host.step.evaluate(
            record,
            handler,
            self.runtime,
            label=self.key,
            max_attempts=self.max_attempts,
            time_limit=self.timeout,
        )
        info = evaluation.info
        if info is None or evaluation.observed is None:  # the plugin could not decide this round
            if evaluation.changed:
                self.host.store.save(record)
            self.host.wake_after(self.key, self._due(evaluation.next_round_in or self.settings.resync_period))
            return
        decided = _decided(record)  # set by the step this round
        if self.cache is not None and decided is not None and not decided.get("retry"):
            # The attempt's end is decided: a success is kept in the catalog (its status on the success
            # event), and the reservation goes either way.
            await self._cache_end(handler, evaluation.outputs if info.phase is Phase.SUCCESS else None)
        # The plugin's phase, then the node's decision when it differs (a retry budget spent:
        # RetriesExhausted), each an event as they are for Flyte's task and node.
        self._report(evaluation.observed)
        self._report(info)
        closing = _decided(record)  # set by the step this round
        if closing is None:
            self.host.wake_after(self.key, self._due(evaluation.next_round_in or self.settings.resync_period))
            self.host.store.save(record)
            return
        if closing.get("retry"):
            record.error = None  # the execution's error is its end's; an attempt's is in its events
        elif info.phase is Phase.SUCCESS:
            record.outputs = self._plain_outputs(evaluation.outputs)
            record.outcome = str(Phase.SUCCESS)
            self.futures_known, self.futures = handler.futures_known, handler.futures
            self.outputs = evaluation.outputs
        else:
            record.outcome = str(info.phase)
        # The decision is on disk before anything is deleted, so a process stopped in between finishes the
        # cleanup on resume (above) instead of finding the object gone, reading that as an external deletion
        # and charging a failure that did not happen.
        self.host.store.save(record)
        await flush_store(self.host.store)
        await self._finish_closing(handler)
        self.host.store.save(record)

    def _report(self, info: PhaseInfo) -> None:
        event = phase_event(self.record, info)
        if event is not None:
            if self.record.cache is not None:
                event.cache = {k: v for k, v in self.record.cache.items() if k in ("status", "key", "source")}
            self.host.emit(self.key, event)

    # -- the catalog (nodes/cache.go) -----------------------------------------------------------------------
    def _due(self, delay: float) -> float:
        """When the next round is due: a reservation's holder comes back every heartbeat to extend it."""
        held = (
            self.record.cache is not None and self.record.cache.get("reservation") == "RESERVATION_ACQUIRED"
        )
        return min(delay, self.settings.cache.heartbeat) if held else delay

    def _owner(self) -> str:
        # Deviation: propeller's owner also names the attempt; a retry here keeps the reservation its first
        # attempt took (it is released when the node ends), so the owner is the node's execution key.
        return self.key

    async def _cache_round(self, handler: TaskHandler) -> bool:
        """Before the task starts (and while it waits on another's reservation): look up, then reserve a
        serialized task's key; while it runs, extend the reservation. Whether the round is over."""
        record = self.record
        cache = self.cache
        assert cache is not None
        state = record.cache if record.cache is not None else {}
        if record.node_phase != NodePhase.NOT_YET_STARTED:
            if state.get("reservation") == "RESERVATION_ACQUIRED":
                cache.reserve(state, self._owner())  # the holder's heartbeat
            return False
        waiting = state.get("reservation") == "RESERVATION_EXISTS"
        if record.cache is None or waiting:
            found = await cache.lookup(self.spec.inputs)
            state.update(found.to_json())
            record.cache = state
            if found.status is CacheStatus.CACHE_HIT and found.outputs is not None:
                await self._cache_hit(handler, found.outputs)
                return True
        if not cache.serialized or cache.key_of(state) is None or cache.reserve(state, self._owner()):
            return False
        self._report(PhaseInfo(Phase.WAITING_FOR_CACHE, 0, None, None, WAITING_ON_CACHE))
        self.host.store.save(record)
        self.host.wake_after(self.key, self.settings.cache.heartbeat)
        return True

    async def _cache_hit(self, handler: TaskHandler, outputs: literals_pb2.LiteralMap) -> None:
        """A hit: the kept outputs where the task's would be, the node Succeeded, no task run (one event)."""
        record = self.record
        paths = ExecutionPaths.for_attempt(self.settings.data_root, handler.tctx.metadata)
        await self.host.data.write(paths.input_path, self.spec.inputs.SerializeToString())
        await self.host.data.write(paths.outputs_path, outputs.SerializeToString())
        record.outputs = self._plain_outputs(outputs)
        record.node_phase = int(NodePhase.SUCCEEDED)
        record.outcome = str(Phase.SUCCESS)
        record.error = None
        self._report(PhaseInfo(Phase.SUCCESS, 0, None, None, "cache hit"))
        self.host.finish(self.key)

    async def _cache_end(self, handler: TaskHandler, outputs: literals_pb2.LiteralMap | None) -> None:
        record = self.record
        cache = self.cache
        if cache is None or record.cache is None:  # started before caching was on: nothing to keep
            return
        if outputs is not None:
            prefix = handler.tctx.output_writer.output_prefix
            if self.allow_dynamic and await self.host.data.read(f"{prefix}/{FUTURES_FILE}") is not None:
                pass  # a @dynamic task is cached on its workflow's outputs (the workflow node writes them)
            else:
                await cache.write(record.cache, self.spec.inputs, outputs, self.key)
        cache.release(record.cache, self._owner())

    def _plain_outputs(self, outputs: literals_pb2.LiteralMap | None) -> dict[str, Any]:
        # Shown by the declared types (a dataclass's fields as the values they are, a duration as one).
        template = self.spec.template
        interface = template.interface.outputs if template.HasField("interface") else None
        return literal_map_to_plain(outputs or literals_pb2.LiteralMap(), interface)

    async def _finish_closing(self, handler: TaskHandler) -> None:
        record = self.record
        retry_due = bool((record.closing or {}).get("retry"))
        cleanup = await self.host.step.close(record, handler, self.runtime, label=self.key)
        if cleanup.given_up is not None:
            self._give_up(cleanup.given_up, retry_due=retry_due)
        elif not cleanup.done:
            self.host.wake_after(self.key, cleanup.next_round_in or self.settings.resync_period)
        elif cleanup.retried:
            self.host.store.save(record)
            self.host.wake(self.key)
        else:
            self.host.finish(self.key)

    async def _abort(self, handler: TaskHandler, *, reason: str) -> None:
        record = self.record
        cleanup = await self.host.step.clean_up(handler, self.runtime, label=self.key, abort=True)
        if cleanup.given_up is not None:
            self._give_up(cleanup.given_up, retry_due=False)
            return
        if not cleanup.done:
            self.host.wake_after(self.key, cleanup.next_round_in or self.settings.resync_period)
            return
        record.node_phase = int(NodePhase.ABORTED)
        if self.cache is not None and record.cache is not None:
            self.cache.release(record.cache, self._owner())
        self._report(PhaseInfo(Phase.ABORTED, 0, None, None, reason))
        record.outcome = str(Phase.ABORTED)
        record.error = {"code": "Aborted", "message": reason, "kind": str(ErrorKind.USER)}
        self.host.finish(self.key)

    def _give_up(self, given_up: GivenUp, *, retry_due: bool) -> None:
        record = self.record
        decided = record.outcome or (
            "Aborted"
            if record.abort_requested
            else ("RetryableFailure" if retry_due else str(Phase(record.task_phase)))
        )
        listed = GivenUp.listing(given_up.leftovers)
        message = given_up.describe(decided) + (f"; may be left behind: {listed}" if listed else "")
        end_record(
            self.host, record, ExecutionError(CLEANUP_FAILED, message, ErrorKind.SYSTEM), given_up.leftovers
        )


def _decided(record: ExecutionRecord) -> Closing | None:
    return record.closing


def end_record(
    host: NodeHost,
    record: ExecutionRecord,
    err: ExecutionError,
    leftovers: list[dict[str, Any]] | None = None,
) -> None:
    """End an execution now, PermanentFailure with ``err`` (no more rounds, no more cleanup); ``leftovers``:
    what a given-up cleanup may have left behind, kept with the error for the result."""
    event = phase_event(record, PhaseInfo(Phase.PERMANENT_FAILURE, 0, None, err))
    if event is not None:
        host.emit(record.key, event)
    error: dict[str, Any] = {"code": err.code, "message": err.message, "kind": str(err.kind)}
    if leftovers is not None:
        error["leftovers"] = leftovers
    record.error = error
    record.outcome = str(Phase.PERMANENT_FAILURE)
    record.closing = None
    host.finish(record.key)
