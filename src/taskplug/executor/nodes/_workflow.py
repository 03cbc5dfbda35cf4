"""A workflow execution: its root node runs the workflow's nodes as propeller does.

Follows flytepropeller's workflow executor (pkg/controller/workflow/executor.go: the workflow phases Ready →
Running → Succeeding | Failing → HandlingFailureNode → Succeeded | Failed | Aborted) and its node executor's
``RecursiveNodeHandler`` (pkg/controller/nodes/executor.go): a round walks the compiled DAG from the start
node; a node that has not started is started when its upstream nodes are done (``CanExecute``: ready, or
skipped when one of them was skipped or failed), its inputs resolved once from its bindings and written as
its ``inputs.pb``; a node in progress runs its kind's handler; a finished node leads to its downstream nodes,
in the compiled (sorted) order. A failure ends the walk at once (``FAIL_IMMEDIATELY``) or lets independent
nodes finish first (``FAIL_AFTER_EXECUTABLE_NODES_COMPLETE``); the workflow then aborts what still runs,
runs its failure node, and fails with the failed node's error.

Node kinds: start and end; **task** and **array** (a ``map_task``) nodes run the task or map-task root node
(:mod:`._task_node`, :mod:`._array`) as a child — the same node step, task handler and plugin calls as a
single task, through a :class:`_ChildHost` that keeps the child's record among this execution's node
records and tags its events with the node; a cacheable task node is looked up in the catalog before it is
queued (``nodes/cache.go``); a task that writes a ``futures.pb`` is **@dynamic**: the workflow it describes
(:mod:`._dynamic`) runs under the node (``nodes/dynamic``); **branch** (evaluated once by
:mod:`._branch_rules`, the cases not taken Skipped without events, the taken node run as the branch's
child); **sub-workflow** (its nodes run under the node, its outputs copied up, its own failure node run when
it fails); **launch plan** (a child execution through ``NodeHost.launch``, named from this execution, the
node and its attempt: ``nodes/subworkflow/launchplan.go``); **gate** (a sleep, or the execution's signal:
:mod:`._gate_rules`).

Which running children get a round: propeller gives every running node a round on every evaluation; with
many running nodes that is a round of each for every event of one. Here a child gets one when an informer
event names its object (``woken``), when it asked (``wake`` / ``wake_after``), or when the workflow was woken
without knowing which object changed (``woken_all``, a restart).

Every node's status is an :class:`~taskplug.executor._store.ExecutionRecord` kept among the execution's node
records under the node's unique id (propeller's ``FixedLengthUniqueIDForParts`` of the parent's id, its
attempt and the node id: ``n1-0-n0``), its place in the workflow in ``workflow_state``. A round saves what
changed; a resumed execution continues from the records, never starting a finished node again.

Deviation: propeller lays a nested node's data under its parent's output directory; taskplug gives every node
its own directory named by its unique id beside the top-level nodes' (``…/<name>/<unique id>/<attempt>``), so
one rule places a node's data at any depth. The unique ids keep them apart as propeller's nesting does.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final, Protocol, TypeGuard, runtime_checkable

from flyteidl.core import compiler_pb2, identifier_pb2, literals_pb2, tasks_pb2, workflow_pb2

from taskplug.compiler import END_NODE_ID, START_NODE_ID, execution_inputs, id_key
from taskplug.core import (
    Clock,
    ErrorKind,
    ExecutionError,
    Phase,
    Plugin,
    PluginError,
    PluginResolver,
    ResourceManager,
    TaskExecutionContext,
    TaskplugError,
    format_go_duration,
    literal_map_to_plain,
    rfc3339,
)
from taskplug.executor._catalog import CacheStatus
from taskplug.executor._datastore import DataStore
from taskplug.executor._paths import node_dirs
from taskplug.executor._spec import (
    ExecutionSpec,
    NodeKind,
    child_workflow_spec,
    node_array_spec,
    node_task_spec,
)
from taskplug.executor._store import Event, ExecutionRecord, KeepsSignals, NodeRecord, StateStore
from taskplug.executor.nodes._bindings import (
    BindingError,
    failure_node_error_literal,
    output_of,
    resolve_inputs,
)
from taskplug.executor.nodes._branch_rules import BranchError, evaluate_branch
from taskplug.executor.nodes._cache import cached_outputs, populate
from taskplug.executor.nodes._deadlines import EXECUTION_DEADLINE_CODE
from taskplug.executor.nodes._dynamic import COMPILED_FUTURES_FILE, compile_dynamic
from taskplug.executor.nodes._gate_rules import GatePhase, evaluate_gate, signal_request
from taskplug.executor.nodes._host import NodeHost, RootNode, flush_store
from taskplug.executor.nodes._ids import child_execution_name, unique_node_id
from taskplug.executor.nodes._phase import NodePhase
from taskplug.executor.nodes._settings import RunSettings
from taskplug.executor.nodes._step import NodeStep, error_json
from taskplug.executor.nodes._task import FUTURES_FILE

__all__ = ["END_NODE", "START_NODE", "WorkflowRun"]

log = logging.getLogger(__name__)

START_NODE: Final = START_NODE_ID
END_NODE: Final = END_NODE_ID
_MAX_STREAK: Final = 8  # propeller's max-streak-length: rounds back to back while nodes make progress

ChildFactory = Mapping[
    NodeKind, Callable[[NodeHost, ExecutionSpec, ExecutionRecord, Plugin, RunSettings], RootNode]
]
"""How a workflow makes the root node of a task or map-task child (the factory's table of root kinds)."""


@runtime_checkable
class AllowsDynamic(Protocol):
    """A child that may end as a ``@dynamic`` task: its task's ``futures.pb`` is then no failure but the
    workflow this node runs next (a task root node: :class:`~taskplug.executor.nodes._task_node.TaskNode`)."""

    allow_dynamic: bool


_ALLOWS_DYNAMIC: dict[type, bool] = {}


def _allows_dynamic(child: object) -> TypeGuard[AllowsDynamic]:
    """Whether ``child`` is :class:`AllowsDynamic`, known once per class (an ``isinstance`` check against a
    runtime protocol walks the protocol's members every time, and a workflow starts many children)."""
    kind = type(child)
    known = _ALLOWS_DYNAMIC.get(kind)
    if known is None:
        known = _ALLOWS_DYNAMIC[kind] = isinstance(child, AllowsDynamic)
    return known


class WorkflowPhase(enum.IntEnum):
    """``v1alpha1.WorkflowPhase``, the values propeller stores."""

    READY = 0
    RUNNING = 1
    SUCCEEDING = 2
    SUCCESS = 3
    FAILING = 4
    FAILED = 5
    ABORTED = 6
    HANDLING_FAILURE_NODE = 7

    def __str__(self) -> str:
        # As its events name it (``WorkflowExecution.Phase``): Success is SUCCEEDED there.
        if self is WorkflowPhase.SUCCESS:
            return "Succeeded"
        return "".join(part.capitalize() for part in self.name.split("_"))


class _Outcome(enum.Enum):
    """What walking a node (and what lies below it) reports up (propeller's ``NodeStatus``)."""

    COMPLETE = "complete"  # done, and everything below it
    PROGRESS = "progress"  # something finished this round: walk again at once
    PENDING = "pending"  # waiting for something that runs
    FAILED = "failed"
    TIMED_OUT = "timed-out"


@dataclass(frozen=True, slots=True)
class _Report:
    outcome: _Outcome
    error: dict[str, Any] | None = None

    @property
    def failed(self) -> bool:
        return self.outcome in (_Outcome.FAILED, _Outcome.TIMED_OUT)


_COMPLETE: Final = _Report(_Outcome.COMPLETE)
_PROGRESS: Final = _Report(_Outcome.PROGRESS)
_PENDING: Final = _Report(_Outcome.PENDING)

_DONE_PHASES: Final = frozenset({NodePhase.SUCCEEDED, NodePhase.SKIPPED, NodePhase.RECOVERED})
_FAILED_PHASES: Final = frozenset({NodePhase.FAILED, NodePhase.TIMED_OUT})
_EXECUTION_PHASES: Final = {
    WorkflowPhase.SUCCESS: Phase.SUCCESS,
    WorkflowPhase.FAILED: Phase.PERMANENT_FAILURE,
    WorkflowPhase.ABORTED: Phase.ABORTED,
}
# A dict lookup is cheaper than NodePhase(value) (an enum's call), and a stored phase is an int.
_NODE_PHASES: Final = {int(p): p for p in NodePhase}
_WORKFLOW_PHASES: Final = {int(p): p for p in WorkflowPhase}
_QUEUED: Final = int(NodePhase.QUEUED)
_RUNNING: Final = int(NodePhase.RUNNING)
_ABORTED: Final = int(NodePhase.ABORTED)
_WF_RUNNING: Final = int(WorkflowPhase.RUNNING)
_TIMEOUT_ERROR: Final = {"kind": str(ErrorKind.USER), "code": "Timeout", "message": "Timeout in node"}


class _Dag:
    """One compiled workflow as the round walks it, at one place in the execution: its nodes (branch cases
    included) by id, the compiled connections, and the parent node's unique id and attempt that make its
    nodes' unique ids."""

    __slots__ = (
        "_unique",
        "done_run",
        "downstream",
        "nodes",
        "parent",
        "parent_attempt",
        "sub_workflows",
        "tasks",
        "template",
        "upstream",
    )

    def __init__(
        self,
        compiled: compiler_pb2.CompiledWorkflow,
        parent: str | None,
        parent_attempt: int,
        *,
        tasks: Mapping[str, tasks_pb2.TaskTemplate],
        sub_workflows: Mapping[str, compiler_pb2.CompiledWorkflow],
    ) -> None:
        self.template = compiled.template
        self.tasks = tasks
        self.sub_workflows = sub_workflows
        self.parent = parent
        self.parent_attempt = parent_attempt
        self.nodes: dict[str, workflow_pb2.Node] = {}
        for node in self.template.nodes:
            self.add(node)
        self.upstream = {k: list(v.ids) for k, v in compiled.connections.upstream.items()}
        self.downstream = {k: list(v.ids) for k, v in compiled.connections.downstream.items()}
        self._unique: dict[str, str] = {}
        # For a finished node: the last of the finished nodes that follow it one by one (each the only
        # downstream node of the one before), as far as the walk has seen them finished. A finished node
        # stays finished, so the walk goes on from there rather than through each of them every round: a
        # chain of n nodes costs O(n), not O(n²).
        self.done_run: dict[str, str] = {}

    def add(self, node: workflow_pb2.Node) -> None:
        """Know ``node`` by its id, and a branch's cases with it (nested branches too)."""
        self.nodes.setdefault(node.id, node)
        if node.WhichOneof("target") == "branch_node":
            for case in _cases(node.branch_node.if_else):
                self.add(case)

    def unique_id(self, node_id: str) -> str:
        # Asked for every node on every walk: computed (and maybe hashed) once per node.
        unique = self._unique.get(node_id)
        if unique is None:
            unique = self._unique[node_id] = unique_node_id(self.parent, self.parent_attempt, node_id)
        return unique

    def below(self, compiled: compiler_pb2.CompiledWorkflow, parent: str, attempt: int = 0) -> _Dag:
        """A workflow run under node ``parent`` of this one (a sub-workflow, a branch's case), with the same
        tasks and sub-workflows."""
        return _Dag(compiled, parent, attempt, tasks=self.tasks, sub_workflows=self.sub_workflows)

    @classmethod
    def of_closure(
        cls, closure: compiler_pb2.CompiledWorkflowClosure, parent: str | None, attempt: int
    ) -> _Dag:
        """A closure's primary workflow, with the closure's tasks and sub-workflows."""
        tasks = {_id_key(t.template.id): t.template for t in closure.tasks}
        subs = {_id_key(w.template.id): w for w in closure.sub_workflows}
        return cls(closure.primary, parent, attempt, tasks=tasks, sub_workflows=subs)


def _cases(if_else: workflow_pb2.IfElseBlock) -> Iterator[workflow_pb2.Node]:
    yield if_else.case.then_node
    for other in if_else.other:
        yield other.then_node
    if if_else.WhichOneof("default") == "else_node":
        yield if_else.else_node


class WorkflowRun:
    """A workflow execution's root node (its record is the execution's)."""

    def __init__(
        self,
        host: NodeHost,
        spec: ExecutionSpec,
        record: ExecutionRecord,
        settings: RunSettings,
        *,
        resolver: PluginResolver,
        child_node: ChildFactory,
    ) -> None:
        assert spec.workflow is not None
        self.host = host
        self.spec = spec
        self.workflow = spec.workflow
        self.record = record
        self.settings = settings
        self.resolver = resolver
        self.child_node = child_node
        self.key = spec.execution_key
        tid = spec.metadata.task_execution_id.id
        self.execution_id = tid.node_execution_id.execution_id
        self._key_prefix = self.key.rpartition("/")[0]
        self.dag = _Dag.of_closure(self.workflow.closure, None, 0)
        self._dynamic: dict[str, _Dag] = {}  # the workflows @dynamic nodes built, by the node's unique id
        self._elements: dict[str, list[dict[str, Any]]] = {}  # ended map nodes' elements, as results show
        self._nodes: dict[str, ExecutionRecord] = {}
        for node in host.store.load_nodes(self.key):
            if isinstance(node, ExecutionRecord) and node.workflow_state is not None:
                self._nodes[node.path] = node
        self._children: dict[str, RootNode] = {}  # running task and map nodes, by unique id
        self._names: dict[str, str] = {}  # generated name -> the child's unique id
        self._changed: set[str] = set()
        self._unsaved: dict[str, NodeRecord] = {}  # records children saved, written when their round ends
        self._dirty: set[str] = set()  # nodes modified in this walk (propeller's IsDirty)
        self._rounded: set[str] = set()  # children given a round in this call
        self._walked: dict[tuple[int, str], _Report] = {}
        self._parallelism = 0
        self._child_wake: float | None = None
        self._interruptible = spec.metadata.interruptible
        self._fail_after = self.workflow.fail_after_executable_nodes_complete
        # A finished node's outputs never change (each attempt has its own path): read and parsed once, not
        # once per consumer (a fan-in of 100 nodes, every node reading the workflow's inputs).
        self._outputs: dict[str, literals_pb2.LiteralMap] = {}
        # The inputs a node was queued with, until it starts (then read back from inputs.pb only on resume).
        self._inputs: dict[str, literals_pb2.LiteralMap] = {}
        # Which running children have something to look at: a child is given a round when its own object
        # changed (``woken``: the executor names the object an informer event was about), when it asked
        # (``wake``), or when the time it asked for (``wake_after``: its resync, a deadline, a back-off) has
        # come; not on every wake-up of the workflow, which with many running children costs a round of
        # each per event of one (propeller's behaviour, quadratic in a wide fan-out).
        self._woken: set[str] = set()
        self._due: dict[str, float] = {}
        self._all = True  # every running child gets a round: woken without knowing which object changed
        self._round_all = True
        self._in_round = False
        # Whether the last walk met only running task and map nodes (a @dynamic node's too) and finished
        # ones (``_polled``: it met a node that waits on something else: a gate, a launch plan, a branch, a
        # sub-workflow, an aborted node), and nothing changed since: a round then gives its children their
        # rounds and walks only if one ended or something else woke the workflow.
        self._quiet = False
        self._polled = False
        self._moved = False  # a node's phase changed in this walk, other than to Running

    # -- what the executor asks -------------------------------------------------------------------------
    def creating(self, tctx: TaskExecutionContext) -> tuple[str | None, int | None, int]:
        name = tctx.metadata.task_execution_id.generated_name
        unique = self._names.get(name)
        child = self._children.get(unique) if unique is not None else None
        if unique is None or child is None:
            raise PluginError("SystemError", f"[{name}] is no running node of {self.key}: nothing is created")
        node, element, attempt = child.creating(tctx)
        # A task node's own attempt is the node's (its unique id): two nodes' attempt 0 are two creates.
        return (unique if node is None else node), element, attempt

    def elements_json(self) -> None:
        return None

    def nodes_json(self) -> list[dict[str, Any]]:
        """The workflow's nodes as results show them: id, name, phase, attempts, error, and the nodes below a
        sub-workflow or branch node (``nodes``)."""
        return self._nodes_json(self.dag)

    def _nodes_json(self, dag: _Dag) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        nodes = list(dag.template.nodes)
        failure_node = dag.template.failure_node
        if failure_node.id and dag.unique_id(failure_node.id) in self._nodes:
            nodes.append(failure_node)  # listed once it ran
        for node in nodes:
            if node.id in (START_NODE, END_NODE):
                continue
            unique = dag.unique_id(node.id)
            status = self._nodes.get(unique)
            phase = NodePhase(status.workflow_state["phase"]) if status and status.workflow_state else None
            entry: dict[str, Any] = {
                "id": unique,
                "name": node.metadata.name or node.id,
                "kind": _kind(node, dynamic=unique in self._dynamic),
                "phase": str(phase or NodePhase.NOT_YET_STARTED),
                "attempts": (status.attempt + 1) if status is not None and phase is not None else 0,
                "error": status.error if status is not None else None,
            }
            children = self._child_dag(dag, node, unique)
            if status is not None and status.cache:
                entry["cacheStatus"] = status.cache.get("status")
            live = self._children.get(unique)
            elements = live.elements_json() if live is not None else self._elements.get(unique)
            if elements is not None:
                entry["elements"] = elements  # a map node's
            if status is not None and status.workflow_state and "child" in status.workflow_state:
                entry["execution"] = status.workflow_state["child"]  # a launch plan's child execution
            if children is not None:
                entry["nodes"] = self._nodes_json(children)
            elif status is not None and status.workflow_state and "taken" in status.workflow_state:
                # Every case: the one taken, and those not taken (Skipped, without events).
                leaf = dag.below(compiler_pb2.CompiledWorkflow(), unique)
                leaf.template.nodes.extend(_cases(node.branch_node.if_else))
                entry["nodes"] = self._nodes_json(leaf)
            elif unique in self._dynamic:
                entry["nodes"] = self._nodes_json(self._dynamic[unique])
            out.append(entry)
        return out

    def unindex_all(self) -> None:
        for name in list(self._names):
            self.host.unindex_generated_name(name)
        self._names.clear()

    # -- a round ----------------------------------------------------------------------------------------
    async def round(self) -> None:
        self._rounded.clear()
        self._round_all, self._all = self._all, False
        self._child_wake = None
        self._in_round = True
        try:
            if not self.record.abort_requested:
                await self._round_children()
            progressed = False
            if self._quiet and not self._round_all and not self.record.abort_requested:
                # The last walk found only task and map nodes running, and nothing has changed since but
                # their records (no node ended, nothing was asked): another walk would find the same.
                self._save()
            else:
                for _ in range(_MAX_STREAK):
                    progressed = await self._round_once()
                    self._save()
                    if self.record.terminal or not progressed:
                        break
                self._quiet = (
                    not progressed
                    and not self._polled
                    and not self._moved
                    and self._state.get("phase") == _WF_RUNNING
                )
        finally:
            self._in_round = False
        if self.record.terminal:
            return
        if progressed:
            # The streak ended while nodes still made progress: the next round at once (propeller requeues).
            self.host.wake(self.key)
        wake = self.settings.resync_period
        child_wake = self._next_child_wake()
        if child_wake is not None:
            wake = min(wake, child_wake)
        self.host.wake_after(self.key, wake)

    def _next_child_wake(self) -> float | None:
        for unique in [u for u in self._due if u not in self._children]:
            del self._due[unique]  # ended (or aborted) since it asked
        if not self._due:
            return self._child_wake
        due = max(0.0, min(self._due.values()) - self.host.clock.monotonic())
        return due if self._child_wake is None else min(due, self._child_wake)

    def _wake_in(self, seconds: float) -> None:
        """A node handled by the walk itself (a gate) wants a look in ``seconds``."""
        self._polled = True
        self._child_wake = seconds if self._child_wake is None else min(self._child_wake, seconds)
        self.host.wake_after(self.key, seconds)

    def woken(self, generated_name: str) -> None:
        """The executor saw an event about the object named ``generated_name``: its child gets a round."""
        unique = self._names.get(generated_name)
        if unique is not None:
            self._woken.add(unique)

    def woken_all(self) -> None:
        """The executor woke the workflow for its objects without naming one: every child gets a round."""
        self._all = True
        self._quiet = False

    def _needs_round(self, unique: str, started: bool) -> bool:
        if started or self._round_all or unique in self._woken:
            return True
        due = self._due.get(unique)
        return due is None or due <= self.host.clock.monotonic()

    async def _round_children(self) -> None:
        """Every running task and map node's round, before the walk and several at once (as the array node
        evaluates its elements: ``node-execution-worker-count``), so that plugins that answer slowly (a web
        API) are not waited for one after another; the walk then finds them done (``_rounded``)."""
        running = [
            u
            for u in self._children
            if not self._nodes[u].terminal and u not in self._rounded and self._needs_round(u, False)
        ]
        if not running:
            return
        self._rounded.update(running)
        pending = iter(running)

        async def worker() -> None:
            for unique in pending:
                # What woke the child is forgotten as its round starts, not when it was chosen: an event
                # that came in between (with a thousand children, rounds ago) is seen by this round and
                # needs no other.
                self._woken.discard(unique)
                self._due.pop(unique, None)
                await self._children[unique].round()
                if not self._nodes[unique].terminal:
                    # Saved as its round ends (a create's outcome reaches the store at once); an ended child
                    # is written once with its node's end, which the walk that follows records.
                    self._save_children()

        # As many workers as may run at once, each taking the next child (not a task per child's round).
        workers = min(max(1, self.settings.array.workers), len(running))
        if workers == 1:
            await worker()
            return
        async with asyncio.TaskGroup() as group:
            for _ in range(workers):
                group.create_task(worker())

    async def _round_once(self) -> bool:
        """One round of the workflow (``HandleFlyteWorkflow``); whether it made progress worth another."""
        self._dirty.clear()
        self._walked.clear()
        self._parallelism = 0
        self._polled = False
        self._moved = False
        state = self._state
        phase = _WORKFLOW_PHASES[state.get("phase", 0)]
        if self.record.abort_requested and phase not in (WorkflowPhase.FAILED, WorkflowPhase.SUCCESS):
            await self._abort("Workflow aborted.", end=True)
            return False
        if phase is WorkflowPhase.READY:
            _, output_dir = self._dirs(START_NODE, 0)
            await self.host.data.write(f"{output_dir}/outputs.pb", self.spec.inputs.SerializeToString())
            self._outputs[f"{output_dir}/outputs.pb"] = self.spec.inputs
            self._workflow_event(WorkflowPhase.RUNNING)
            return True
        if phase is WorkflowPhase.RUNNING:
            report = await self._walk(self.dag, START_NODE)
            if report.failed:
                error = report.error if report.outcome is _Outcome.FAILED else dict(_TIMEOUT_ERROR)
                state["error"] = error or _unknown_error("")
                self._workflow_event(WorkflowPhase.FAILING, error=state["error"])
                return True
            if report.outcome is _Outcome.COMPLETE:
                self._workflow_event(WorkflowPhase.SUCCEEDING)
                return True
            # Another walk when a node finished, was skipped or queued (what lets other nodes, or itself, go
            # on; a failure's skipped dependants report no progress): a node that only started running changes
            # nothing another walk would act on.
            return report.outcome is _Outcome.PROGRESS or self._moved
        if phase is WorkflowPhase.SUCCEEDING:
            await self._succeed()
            return False
        if phase is WorkflowPhase.FAILING:
            if not await self._abort("Some node execution failed, auto-abort."):
                return False
            if self.dag.template.HasField("failure_node") and self.dag.template.failure_node.id:
                self._workflow_event(WorkflowPhase.HANDLING_FAILURE_NODE, silent=True)
                return True
            self._fail(state.get("error"))
            return False
        if phase is WorkflowPhase.HANDLING_FAILURE_NODE:
            report = await self._failure_node(self.dag, state.get("error"))
            if report.outcome in (_Outcome.PENDING, _Outcome.PROGRESS) and not report.failed:
                return report.outcome is _Outcome.PROGRESS
            # The failure node's own failure masks the original error; its success keeps it.
            error = state.get("error")
            if report.outcome is _Outcome.FAILED:
                error = report.error or error
            elif report.outcome is _Outcome.TIMED_OUT:
                error = {"kind": str(ErrorKind.USER), "code": "TimedOut", "message": "FailureNode Timed-out"}
            self._fail(error)
            return False
        return False

    @property
    def _state(self) -> dict[str, Any]:
        if self.record.workflow_state is None:
            self.record.workflow_state = {"phase": int(WorkflowPhase.READY)}
        return self.record.workflow_state

    # -- the walk (RecursiveNodeHandler) -------------------------------------------------------------------
    async def _walk(self, dag: _Dag, node_id: str) -> _Report:
        """Walk ``node_id`` of ``dag`` and what lies below it. A node is handled at most once per round and a
        finished node's result does not change within one, so a node reached twice reports the same."""
        memo = (id(dag), node_id)
        report = self._walked.get(memo)
        if report is None:
            report = self._settled(dag, node_id)
            if report is None:
                report = await self._walk_uncached(dag, node_id)
            self._walked[memo] = report
        return report

    def _settled(self, dag: _Dag, node_id: str) -> _Report | None:
        """What walking ``node_id`` reports when there is nothing to do (no coroutine for it: a wide
        workflow's walk meets many such nodes every round), else None: modified in this walk, aborted, or a
        running task or map node that has had its round (or needs none), counted as running."""
        unique = dag.unique_id(node_id)
        if unique in self._dirty:
            return _PENDING
        status = self._nodes.get(unique)
        if status is None or status.workflow_state is None:
            return None
        phase = status.workflow_state.get("phase", 0)
        if phase == _ABORTED:
            self._polled = True
            return _PENDING
        if phase == _RUNNING and self._idle_child(unique):
            # What handling it reports (max parallelism first, as for any task node), without the layers.
            if not self._blocked("task_node"):
                self._parallelism += 1
            return _PENDING
        return None

    async def _walk_uncached(self, dag: _Dag, node_id: str) -> _Report:
        unique = dag.unique_id(node_id)
        phase = self._phase(unique)
        if phase in _DONE_PHASES:
            return await self._downstream(dag, self._last_done(dag, node_id))
        if phase in _FAILED_PHASES:
            await self._downstream(dag, node_id)
            status = self._nodes[unique]
            if phase is NodePhase.TIMED_OUT:
                return _Report(_Outcome.TIMED_OUT)
            return _Report(_Outcome.FAILED, status.error or _unknown_error(""))
        return await self._handle(dag, dag.nodes[node_id] if node_id in dag.nodes else _start_end(node_id))

    def _idle_child(self, unique: str) -> bool:
        """Whether ``unique`` is a task or map node whose child runs (not a @dynamic node's workflow) and has
        had its round, or needs none: handling it would only count it as running."""
        if unique not in self._children or unique in self._dynamic:
            return False
        status = self._nodes[unique]
        if status.terminal or (status.workflow_state or {}).get("dynamic"):
            return False
        return unique in self._rounded or not self._needs_round(unique, False)

    def _last_done(self, dag: _Dag, node_id: str) -> str:
        """The last finished node of the run that starts at finished node ``node_id`` and goes on while a node
        has one downstream node and that node is finished (not in this walk). Walking ``node_id`` reports what
        walking that node's downstream nodes reports: a node with one downstream node reports that node's
        report, and a finished node's report is its downstream nodes'."""
        last = dag.done_run.get(node_id, node_id)
        while True:
            below = dag.downstream.get(last)
            if below is None or len(below) != 1:
                break
            unique = dag.unique_id(below[0])
            if unique in self._dirty or self._phase(unique) not in _DONE_PHASES:
                break
            last = below[0]
        if last != node_id:
            dag.done_run[node_id] = last
        return last

    async def _downstream(self, dag: _Dag, node_id: str) -> _Report:
        """``handleDownstream``: every downstream node in the compiled order."""
        below = dag.downstream.get(node_id, [])
        if not below:
            return _COMPLETE
        fail_after = self._fail_after
        failure: _Report | None = None
        all_complete = True
        progress = False
        walked = self._walked
        dag_id = id(dag)
        for child in below:
            # _walk, inlined: a wide fan-out's walk meets its running nodes here every round.
            report = walked.get((dag_id, child))
            if report is None:
                report = self._settled(dag, child)
                if report is None:
                    report = await self._walk_uncached(dag, child)
                walked[(dag_id, child)] = report
            if report.failed:
                if not fail_after:
                    return report
                failure = report  # the last one seen is the one reported (as propeller does)
            elif report.outcome is not _Outcome.COMPLETE:
                all_complete = False
                progress = progress or report.outcome is _Outcome.PROGRESS
        if all_complete:
            return failure or _COMPLETE
        return _PROGRESS if progress else _PENDING

    def _ready(self, dag: _Dag, node_id: str) -> bool | None:
        """``CanExecute``: True when every upstream node succeeded, False when one was skipped or failed (the
        node is skipped), None while one has not finished (or was modified in this round)."""
        skip = False
        for up in dag.upstream.get(node_id, []):
            unique = dag.unique_id(up)
            if unique in self._dirty:
                return None
            phase = self._phase(unique) if up != START_NODE else NodePhase.SUCCEEDED
            if phase in (NodePhase.SKIPPED, NodePhase.FAILED, NodePhase.TIMED_OUT):
                skip = True
            elif phase not in (NodePhase.SUCCEEDED, NodePhase.RECOVERED):
                return None
        return not skip

    async def _handle(self, dag: _Dag, node: workflow_pb2.Node) -> _Report:
        unique = dag.unique_id(node.id)
        phase = self._phase(unique)
        kind = node.WhichOneof("target")
        if self._blocked(kind):
            return _PENDING
        if node.id == START_NODE:
            status = self._status(unique)
            self._set_phase(unique, status, NodePhase.SUCCEEDED)
            self._node_event(unique, node, "Succeeded")
            return _PROGRESS
        if phase is NodePhase.NOT_YET_STARTED:
            ready = self._ready(dag, node.id)
            if ready is None:
                return _PENDING
            status = self._status(unique)
            if not ready:
                self._set_phase(unique, status, NodePhase.SKIPPED)
                self._node_event(unique, node, "Skipped", reason="Node Skipped as parent node was skipped")
                return _PROGRESS
            return await self._queue(dag, node, unique, status)
        return await self._execute(dag, node, unique)

    def _blocked(self, kind: str | None) -> bool:
        """Max parallelism: a task, map or launch-plan node waits while as many run (propeller's
        ``IsMaxParallelismAchieved``); other kinds never wait."""
        limit = self.workflow.max_parallelism
        if limit <= 0 or kind not in ("task_node", "array_node", "workflow_node"):
            return False
        return self._parallelism >= limit

    async def _queue(
        self,
        dag: _Dag,
        node: workflow_pb2.Node,
        unique: str,
        status: ExecutionRecord,
        *,
        failure: dict[str, Any] | None = None,
    ) -> _Report:
        """``preExecute``: resolve the node's inputs once, write them as its ``inputs.pb``, queue it.
        ``failure``: the node is ``dag``'s failure node, and this the error it handles."""
        try:
            inputs = await self._resolve(dag, node, failure)
        except BindingError as e:
            return self._node_failed(unique, node, status, _error(e.error))
        data_dir, output_dir = self._dirs(unique, 0)
        await self.host.data.write(f"{data_dir}/inputs.pb", inputs.SerializeToString(), new_folder=True)
        if (
            self.settings.cache.catalog is not None
            and node.WhichOneof("target") == "task_node"
            and await self._cache_hit(dag, node, status, inputs, output_dir)
        ):
            # propeller's preExecute: a hit is Succeeded at once, one SUCCEEDED event, no task run.
            self._set_phase(unique, status, NodePhase.SUCCEEDED)
            self._node_event(unique, node, "Succeeded", cache=status.cache)
            return _PROGRESS
        self._inputs[unique] = inputs
        self._set_phase(unique, status, NodePhase.QUEUED)
        self._node_event(unique, node, "Queued")
        self._parallelism += 1
        return _PROGRESS

    async def _execute(self, dag: _Dag, node: workflow_pb2.Node, unique: str) -> _Report:
        kind = node.WhichOneof("target")
        if node.id == END_NODE:
            return await self._end(dag, node, unique)
        if kind in ("task_node", "array_node"):
            return await self._run_child(dag, node, unique)
        self._polled = True  # a kind the walk itself drives (or waits for): walked every round
        if kind == "branch_node":
            return await self._branch(dag, node, unique)
        if kind == "workflow_node" and node.workflow_node.HasField("sub_workflow_ref"):
            return await self._sub_workflow(dag, node, unique)
        if kind == "gate_node":
            return await self._gate(node, unique)
        if kind == "workflow_node" and node.workflow_node.HasField("launchplan_ref"):
            return await self._launch_plan(node, unique)
        status = self._nodes[unique]
        error = {
            "kind": str(ErrorKind.USER),
            "code": "UnsupportedNode",
            "message": f"node {node.id}: taskplug does not run {kind or 'empty'} nodes yet",
        }
        return self._node_failed(unique, node, status, error)

    # -- kinds ------------------------------------------------------------------------------------------------
    async def _end(self, dag: _Dag, node: workflow_pb2.Node, unique: str) -> _Report:
        """The end node's inputs are the workflow's outputs: written as its outputs."""
        status = self._nodes[unique]
        _, output_dir = self._dirs(unique, 0)
        inputs = await self._queued_inputs(unique)
        await self.host.data.write(f"{output_dir}/outputs.pb", inputs.SerializeToString())
        self._set_phase(unique, status, NodePhase.SUCCEEDED)
        self._node_event(unique, node, "Succeeded")
        return _PROGRESS

    async def _run_child(self, dag: _Dag, node: workflow_pb2.Node, unique: str) -> _Report:
        """A task or map node: its task's (or map task's) root node, given a round once per round of ours. A
        task that wrote a dynamic workflow (``@dynamic``) goes on as that workflow (:meth:`_dynamic_node`)."""
        status = self._nodes[unique]
        if unique in self._dynamic or (status.workflow_state or {}).get("dynamic"):
            return await self._dynamic_node(dag, node, unique)
        child = self._children.get(unique)
        started = rounded = False
        if child is None and not status.terminal:
            try:
                child = await self._start_child(dag, node, unique, status)
            except TaskplugError as e:
                error = {"kind": str(ErrorKind.USER), "code": e.code, "message": str(e)}
                return self._node_failed(unique, node, status, error)
            started = True
        if (
            child is not None
            and unique not in self._rounded
            and not status.terminal
            and self._needs_round(unique, started)
        ):
            self._rounded.add(unique)
            self._woken.discard(unique)
            self._due.pop(unique, None)
            await child.round()
            rounded = True
        if status.terminal:
            # Its record is written once, with the node's end, by the round's save.
            ended = self._children.pop(unique, None)
            elements = ended.elements_json() if ended is not None else None
            if elements is not None:
                self._elements[unique] = elements  # a map node's elements, for the result
            self._due.pop(unique, None)
            if status.outcome == str(Phase.SUCCESS) and node.WhichOneof("target") == "task_node":
                # The task node read its outputs.pb and futures.pb when it checked its success (unless it
                # was decided before a restart): not read twice (an attempt's outputs never change).
                futures = getattr(ended, "futures", None)
                known = getattr(ended, "futures_known", False)
                if not known:
                    _, output_dir = self._dirs(unique, status.attempt)
                    futures = await self.host.data.read(f"{output_dir}/{FUTURES_FILE}")
                if futures is not None:
                    return await self._build_dynamic(dag, node, unique, futures)
                outputs = getattr(ended, "outputs", None)
                if known and outputs is not None and outputs.literals:
                    # What the task wrote (an empty map may stand for no file at all: read as before); a
                    # @dynamic node's outputs are written when its workflow ends.
                    _, output_dir = self._dirs(unique, status.attempt)
                    self._outputs[f"{output_dir}/outputs.pb"] = outputs
            return self._child_ended(node, unique, status)
        if status.workflow_state["phase"] == _QUEUED:  # type: ignore[index]
            self._set_phase(unique, status, NodePhase.RUNNING)
            self._node_event(unique, node, "Running")
        if rounded:
            self._save_children()  # as its round ends, with the node's Running (one row)
        self._parallelism += 1
        return _PENDING

    async def _cache_hit(
        self,
        dag: _Dag,
        node: workflow_pb2.Node,
        status: ExecutionRecord,
        inputs: literals_pb2.LiteralMap,
        output_dir: str,
    ) -> bool:
        """The catalog's answer for a cacheable task node about to be queued (``nodes/cache.go``): on a hit
        its outputs are written where the task's would be (attempt 0) and True is returned."""
        catalog = self.settings.cache.catalog
        if catalog is None:
            return False
        task = dag.tasks.get(_id_key(node.task_node.reference_id))
        if task is None or not task.metadata.discoverable:
            return False
        lookup = await cached_outputs(
            catalog,
            self.host.data,
            task,
            inputs,
            project=self.execution_id.project,
            domain=self.execution_id.domain,
            overwrite=self.spec.overwrite_cache,
        )
        if lookup.status is not CacheStatus.CACHE_HIT or lookup.outputs is None:
            return False
        await self.host.data.write(f"{output_dir}/outputs.pb", lookup.outputs.SerializeToString())
        status.cache = lookup.to_json()
        return True

    async def _queued_inputs(self, unique: str) -> literals_pb2.LiteralMap:
        """The inputs node ``unique`` was queued with: kept from ``_queue``, or read back after a restart."""
        inputs = self._inputs.pop(unique, None)
        if inputs is None:
            data_dir, _ = self._dirs(unique, 0)
            inputs = literals_pb2.LiteralMap()
            inputs.ParseFromString(await self.host.data.read(f"{data_dir}/inputs.pb") or b"")
        return inputs

    async def _start_child(
        self, dag: _Dag, node: workflow_pb2.Node, unique: str, status: ExecutionRecord
    ) -> RootNode:
        inputs = await self._queued_inputs(unique)
        if node.WhichOneof("target") == "array_node":
            task = self._task(dag, node.array_node.node.task_node.reference_id, node.id)
            spec = node_array_spec(self.spec, node, task, inputs, unique, interruptible=self._interruptible)
            kind = NodeKind.ARRAY
        else:
            task = self._task(dag, node.task_node.reference_id, node.id)
            spec = node_task_spec(self.spec, node, task, inputs, unique, interruptible=self._interruptible)
            kind = NodeKind.TASK
        plugin = self.resolver.resolve(task.type)
        child = self.child_node[kind](_ChildHost(self, unique), spec, status, plugin, self.settings)
        if _allows_dynamic(child):
            child.allow_dynamic = True  # propeller runs every task node through its dynamic handler
        if kind is NodeKind.TASK and hasattr(child, "inputs_in_store"):
            child.inputs_in_store = True  # _queue wrote them, where the task node would: not twice
        self._children[unique] = child
        return child

    # -- @dynamic ---------------------------------------------------------------------------------------------
    async def _build_dynamic(
        self, dag: _Dag, node: workflow_pb2.Node, unique: str, futures: bytes
    ) -> _Report:
        """``ParentFinalized``: the task (finalized) wrote a ``DynamicJobSpec``; compile it as propeller builds
        a dynamic workflow, keep the compiled closure beside the task's outputs (``futures_compiled.pb``), and
        run it."""
        status = self._nodes[unique]
        parent_task = self._task(dag, node.task_node.reference_id, node.id)
        try:
            closure = compile_dynamic(
                futures, parent_task, unique, [run.interface for run in self.workflow.launch_plans.values()]
            )
        except TaskplugError as e:
            error = {"kind": str(ErrorKind.USER), "code": "DynamicWorkflowBuildFailed", "message": str(e)}
            return self._node_failed(unique, node, status, error)
        _, output_dir = self._dirs(unique, status.attempt)
        await self.host.data.write(f"{output_dir}/{COMPILED_FUTURES_FILE}", closure.SerializeToString())
        self._dynamic[unique] = _Dag.of_closure(closure, unique, status.attempt)
        assert status.workflow_state is not None
        status.workflow_state["dynamic"] = "executing"
        self._set_phase(unique, status, NodePhase.DYNAMIC_RUNNING)
        self._node_event(unique, node, "DynamicRunning")
        return _PROGRESS

    async def _dynamic_node(self, dag: _Dag, node: workflow_pb2.Node, unique: str) -> _Report:
        """``Executing``: the dynamic workflow's nodes run under the node; its end node's outputs are the
        node's (written where the task's would be: ``outputs.pb``)."""
        status = self._nodes[unique]
        sub = self._dynamic.get(unique)
        _, output_dir = self._dirs(unique, status.attempt)
        if sub is None:  # resumed: the compiled closure was kept
            closure = compiler_pb2.CompiledWorkflowClosure()
            closure.ParseFromString(await self.host.data.read(f"{output_dir}/{COMPILED_FUTURES_FILE}") or b"")
            sub = self._dynamic[unique] = _Dag.of_closure(closure, unique, status.attempt)
        report = await self._walk(sub, START_NODE)
        if report.failed:
            failure = report.error if report.outcome is _Outcome.FAILED else dict(_TIMEOUT_ERROR)
            await self._abort_dag(sub, "Dynamic workflow failed", emit=True)
            return self._node_failed(unique, node, status, failure or _unknown_error(""))
        if report.outcome is not _Outcome.COMPLETE:
            return report
        _, end_out = self._dirs(sub.unique_id(END_NODE), 0)
        outputs = await self.host.data.read(f"{end_out}/outputs.pb")
        if outputs is None and sub.template.outputs:
            error = {
                "kind": str(ErrorKind.SYSTEM),
                "code": "DynamicWorkflowOutputsNotFound",
                "message": f"the dynamic workflow's outputs were not written to {end_out}/outputs.pb",
            }
            return self._node_failed(unique, node, status, error)
        await self.host.data.write(f"{output_dir}/outputs.pb", outputs or b"")
        await self._populate_dynamic(dag, node, unique, status, outputs or b"")
        self._set_phase(unique, status, NodePhase.SUCCEEDED)
        self._node_event(unique, node, "Succeeded", cache=status.cache)
        return _PROGRESS

    async def _populate_dynamic(
        self, dag: _Dag, node: workflow_pb2.Node, unique: str, status: ExecutionRecord, outputs: bytes
    ) -> None:
        """A cacheable ``@dynamic`` task is cached on its final outputs (its dynamic workflow's), as propeller
        caches it; never raises."""
        catalog = self.settings.cache.catalog
        task = dag.tasks.get(_id_key(node.task_node.reference_id))
        if catalog is None or task is None or not task.metadata.discoverable:
            return
        data_dir, _ = self._dirs(unique, 0)
        inputs = literals_pb2.LiteralMap()
        inputs.ParseFromString(await self.host.data.read(f"{data_dir}/inputs.pb") or b"")
        final = literals_pb2.LiteralMap()
        final.ParseFromString(outputs)
        result = await populate(
            catalog,
            self.host.data,
            self.settings.data_root,
            task,
            inputs,
            final,
            project=self.execution_id.project,
            domain=self.execution_id.domain,
            source=f"{self.key}#{unique}",
        )
        status.cache = {**(status.cache or {}), "status": str(result)}

    # -- launch plans ------------------------------------------------------------------------------------------
    async def _launch_plan(self, node: workflow_pb2.Node, unique: str) -> _Report:
        """A launch-plan node: a child execution (its own record, events and data), named from this
        execution, the node and its attempt (so a resumed parent finds it), with the node's inputs merged
        with the launch plan's as flyteadmin merges them; its outputs become the node's. Its failure is the
        node's, never retried."""
        status = self._nodes[unique]
        state = status.workflow_state
        assert state is not None
        child_key = state.get("child")
        record = self.host.launched(child_key) if child_key else None
        if record is None:
            try:
                spec = await self._child_spec(node, unique)
            except TaskplugError as e:
                error = {"kind": str(ErrorKind.USER), "code": "RuntimeExecutionError", "message": str(e)}
                return self._node_failed(unique, node, status, error)
            child_key = await self.host.launch(spec, parent=self.key)
            record = self.host.launched(child_key)
            if state.get("child") != child_key:
                state["child"] = child_key
                self._changed.add(unique)
        if NodePhase(state["phase"]) is NodePhase.QUEUED:
            self._set_phase(unique, status, NodePhase.RUNNING)
            self._node_event(unique, node, "Running", reason=f"launched {child_key}")
        if record is None or not record.terminal:
            self._parallelism += 1
            return _PENDING
        assert child_key is not None
        name = child_key.split("/")[2]
        if record.outcome == str(Phase.SUCCESS):
            child_execution = identifier_pb2.WorkflowExecutionIdentifier(
                project=self.execution_id.project, domain=self.execution_id.domain, name=name
            )
            _, end_out = node_dirs(self.settings.data_root, child_execution, END_NODE, (0,))
            _, output_dir = self._dirs(unique, 0)
            await self.host.data.write(
                f"{output_dir}/outputs.pb", await self.host.data.read(f"{end_out}/outputs.pb") or b""
            )
            self._set_phase(unique, status, NodePhase.SUCCEEDED)
            self._node_event(unique, node, "Succeeded")
            return _PROGRESS
        if record.outcome == str(Phase.ABORTED):
            error = {
                "kind": str(ErrorKind.USER),
                "code": "RemoteChildWorkflowExecutionFailed",
                "message": f"failed at Node[{node.id}]. RemoteChildWorkflowExecutionFailed: launchplan "
                f"[{name}] aborted, caused by: launchplan execution aborted",
            }
            return self._node_failed(unique, node, status, error)
        error = record.error or {
            "kind": str(ErrorKind.USER),
            "code": "LaunchPlanExecutionFailed",
            "message": "Unknown Error",
        }
        return self._node_failed(unique, node, status, dict(error))

    async def _child_spec(self, node: workflow_pb2.Node, unique: str) -> ExecutionSpec:
        launched = self.workflow.launch_plans.get(id_key(node.workflow_node.launchplan_ref))
        if launched is None:
            raise TaskplugError(
                f"node {node.id}: launch plan {node.workflow_node.launchplan_ref.name} is not known",
                code="RuntimeExecutionError",
            )
        data_dir, _ = self._dirs(unique, 0)
        given = literals_pb2.LiteralMap()
        given.ParseFromString(await self.host.data.read(f"{data_dir}/inputs.pb") or b"")
        inputs = execution_inputs(launched.launch_plan, launched.expected_inputs, given)
        name = child_execution_name(self.execution_id.name, unique, 0)
        return child_workflow_spec(self.spec, launched, inputs, name, given=given)

    # -- gates -----------------------------------------------------------------------------------------------
    async def _gate(self, node: workflow_pb2.Node, unique: str) -> _Report:
        """A gate node (``sleep``, ``approve``, ``wait_for_input``): waits for its time or its signal (the
        execution's, set by ``taskplug signal`` or the API); its node timeout (flytekit's default is an hour)
        ends it as a task's execution deadline would."""
        status = self._nodes[unique]
        state = status.workflow_state
        assert state is not None
        now = self.host.clock.now().timestamp()
        if NodePhase(state["phase"]) is NodePhase.QUEUED:
            state["started"] = now
            self._set_phase(unique, status, NodePhase.RUNNING)
            self._node_event(unique, node, "Running")
        gate = node.gate_node
        value = None
        request = signal_request(gate)
        if request is not None:
            signal_id, literal_type = request
            if state.get("gate") != signal_id:
                state["gate"] = signal_id
                self._changed.add(unique)
            store = self.host.store
            if not isinstance(store, KeepsSignals):
                error = {
                    "kind": str(ErrorKind.SYSTEM),
                    "code": "SignalsNotKept",
                    "message": f"gate {node.id}: this state store keeps no signals to wait for",
                }
                return self._node_failed(unique, node, status, error)
            value = store.get_or_create_signal(self.key, signal_id, literal_type)
        data_dir, output_dir = self._dirs(unique, 0)
        inputs = literals_pb2.LiteralMap()
        inputs.ParseFromString(await self.host.data.read(f"{data_dir}/inputs.pb") or b"")
        outcome = evaluate_gate(
            gate, started_at=state.get("started"), now=now, signal_value=value, inputs=inputs
        )
        if outcome.phase is GatePhase.SUCCEEDED:
            await self.host.data.write(
                f"{output_dir}/outputs.pb", (outcome.outputs or literals_pb2.LiteralMap()).SerializeToString()
            )
            self._set_phase(unique, status, NodePhase.SUCCEEDED)
            self._node_event(unique, node, "Succeeded")
            return _PROGRESS
        if outcome.phase is GatePhase.FAILED:
            return self._node_failed(unique, node, status, dict(outcome.error or _unknown_error("")))
        timeout = (
            node.metadata.timeout.ToTimedelta().total_seconds() if node.metadata.HasField("timeout") else 0
        )
        started = float(state.get("started") or now)
        if timeout > 0 and now - started >= timeout:
            error = {
                "kind": str(ErrorKind.USER),
                "code": f"RetriesExhausted|{EXECUTION_DEADLINE_CODE}",
                "message": "[1/1] currentAttempt done. Last Error: USER::task execution timeout "
                f"[{format_go_duration(timedelta(seconds=timeout))}] expired",
            }
            return self._node_failed(unique, node, status, error)
        # A person's answer reaches a local run at its next look (SQLite has no notification); a replica is
        # woken by the store's NOTIFY. A sleep wakes the workflow exactly when it ends.
        wait = self.settings.resync_period if outcome.wake_in is None else outcome.wake_in
        if timeout > 0:
            wait = min(wait, max(0.0, started + timeout - now))
        self._wake_in(max(wait, 0.0))
        return _PENDING

    def _child_ended(self, node: workflow_pb2.Node, unique: str, status: ExecutionRecord) -> _Report:
        if status.outcome == str(Phase.SUCCESS):
            self._set_phase(unique, status, NodePhase.SUCCEEDED)
            self._node_event(unique, node, "Succeeded")
            return _PROGRESS
        if status.outcome == str(Phase.ABORTED):
            self._set_phase(unique, status, NodePhase.ABORTED)
            return _PENDING
        if NodePhase(status.node_phase) is NodePhase.TIMED_OUT:
            self._set_phase(unique, status, NodePhase.TIMED_OUT)
            self._node_event(unique, node, "TimedOut")
            return _Report(_Outcome.TIMED_OUT)
        error = status.error or _unknown_error(status.reason)
        return self._node_failed(unique, node, status, error)

    async def _branch(self, dag: _Dag, node: workflow_pb2.Node, unique: str) -> _Report:
        """A branch node: evaluate its cases once (the ones not taken are Skipped, silently), then run the
        taken node as its child; its end is the branch's."""
        status = self._nodes[unique]
        state = status.workflow_state
        assert state is not None
        if "taken" not in state:
            inputs = await self._queued_inputs(unique)
            try:
                taken = evaluate_branch(node.branch_node.if_else, inputs)
            except BranchError as e:
                return self._node_failed(unique, node, status, _error(e.error))
            state["taken"] = taken
            for case in _cases(node.branch_node.if_else):
                if case.id != taken:  # Skipped, silently: propeller never traverses them
                    untaken = unique_node_id(unique, 0, case.id)
                    self._set_phase(untaken, self._status(untaken), NodePhase.SKIPPED)
            self._set_phase(unique, status, NodePhase.RUNNING)
            self._node_event(unique, node, "Running")
            return _PROGRESS
        leaf = dag.below(compiler_pb2.CompiledWorkflow(), unique)
        taken_node = dag.nodes[state["taken"]]
        leaf.add(taken_node)
        child = leaf.unique_id(taken_node.id)
        phase = self._phase(child)
        if phase is NodePhase.NOT_YET_STARTED:
            # Its upstream nodes are its own (the compiled connections list what its bindings read) and the
            # branch, which has chosen it: one of its own may not have finished (the branch waited only for
            # what its conditions read), and the case waits for it as any node waits (``CanExecute``).
            ready = self._ready(dag, taken_node.id)
            if ready is None:
                return _PENDING
            if not ready:
                self._set_phase(child, self._status(child), NodePhase.SKIPPED)
                self._node_event(
                    child, taken_node, "Skipped", reason="Node Skipped as parent node was skipped"
                )
                return _PROGRESS
            return await self._queue(dag, taken_node, child, self._status(child))
        if phase in _DONE_PHASES:
            _, child_out = self._dirs(child, self._nodes[child].attempt)
            _, output_dir = self._dirs(unique, 0)
            await self.host.data.write(
                f"{output_dir}/outputs.pb", await self.host.data.read(f"{child_out}/outputs.pb") or b""
            )
            self._set_phase(unique, status, NodePhase.SUCCEEDED)
            self._node_event(unique, node, "Succeeded")
            return _PROGRESS
        if phase in _FAILED_PHASES:
            error = self._nodes[child].error or {
                "kind": "UNKNOWN",
                "code": "Unknown",
                "message": "Unknown error message",
            }
            return self._node_failed(unique, node, status, error)
        report = await self._execute(leaf, taken_node, child)
        return _PENDING if report.outcome is _Outcome.COMPLETE else report

    def _child_dag(self, dag: _Dag, node: workflow_pb2.Node, unique: str) -> _Dag | None:
        if node.WhichOneof("target") != "workflow_node" or not node.workflow_node.HasField(
            "sub_workflow_ref"
        ):
            return None
        compiled = dag.sub_workflows.get(_id_key(node.workflow_node.sub_workflow_ref))
        return dag.below(compiled, unique) if compiled is not None else None

    async def _sub_workflow(self, dag: _Dag, node: workflow_pb2.Node, unique: str) -> _Report:
        """A sub-workflow node: its workflow's nodes run under it, from the node's inputs (its start node's
        outputs) to its end node's outputs (the node's); a failure is the node's, never retried."""
        status = self._nodes[unique]
        sub = self._child_dag(dag, node, unique)
        if sub is None:
            error = {
                "kind": str(ErrorKind.USER),
                "code": "WorkflowReferenceNotFound",
                "message": f"node {node.id}: sub-workflow {node.workflow_node.sub_workflow_ref.name} not found",
            }
            return self._node_failed(unique, node, status, error)
        starting = NodePhase(status.workflow_state["phase"]) is NodePhase.QUEUED  # type: ignore[index]
        if starting:
            _, start_out = self._dirs(sub.unique_id(START_NODE), 0)
            inputs = await self._queued_inputs(unique)
            await self.host.data.write(f"{start_out}/outputs.pb", inputs.SerializeToString())
            self._outputs[f"{start_out}/outputs.pb"] = inputs
            self._set_phase(unique, status, NodePhase.RUNNING)
        state = status.workflow_state
        assert state is not None
        if "failing" in state:
            return await self._sub_workflow_failing(sub, node, unique, status, state["failing"])
        report = await self._walk(sub, START_NODE)
        if starting:  # after its start node's event, in the same round, as propeller reports it
            self._node_event(unique, node, "Running")
        if report.failed:
            failure = report.error if report.outcome is _Outcome.FAILED else dict(_TIMEOUT_ERROR)
            state["failing"] = failure or _unknown_error("")
            self._changed.add(unique)
            return await self._sub_workflow_failing(sub, node, unique, status, state["failing"])
        if report.outcome is _Outcome.COMPLETE:
            _, end_out = self._dirs(sub.unique_id(END_NODE), 0)
            _, output_dir = self._dirs(unique, 0)
            await self.host.data.write(
                f"{output_dir}/outputs.pb", await self.host.data.read(f"{end_out}/outputs.pb") or b""
            )
            self._set_phase(unique, status, NodePhase.SUCCEEDED)
            self._node_event(unique, node, "Succeeded")
            return _PROGRESS
        return report

    async def _sub_workflow_failing(
        self,
        sub: _Dag,
        node: workflow_pb2.Node,
        unique: str,
        status: ExecutionRecord,
        failure: dict[str, Any],
    ) -> _Report:
        """``Failing``: the sub-workflow's nodes aborted (``subworkflow failed``), then its own failure node
        run, if it has one; the node fails with the failure node's error when that fails, else the original."""
        if not await self._abort_dag(sub, "subworkflow failed", emit=True):
            return _PENDING
        if sub.template.HasField("failure_node") and sub.template.failure_node.id:
            report = await self._failure_node(sub, failure)
            if report.outcome in (_Outcome.PENDING, _Outcome.PROGRESS):
                return report
            if report.outcome is _Outcome.FAILED and report.error:
                failure = report.error
        return self._node_failed(unique, node, status, failure)

    async def _failure_node(self, dag: _Dag, error: dict[str, Any] | None) -> _Report:
        """``dag``'s failure node, run once the failing workflow's nodes are cleaned up: it may bind only the
        workflow's inputs (and ``err``, the failure: ``error``)."""
        node = dag.template.failure_node
        unique = dag.unique_id(node.id)
        phase = self._phase(unique)
        if phase in _DONE_PHASES:
            return _COMPLETE
        if phase in _FAILED_PHASES:
            status = self._nodes[unique]
            if phase is NodePhase.TIMED_OUT:
                return _Report(_Outcome.TIMED_OUT)
            return _Report(_Outcome.FAILED, status.error)
        if phase is NodePhase.NOT_YET_STARTED:
            return await self._queue(dag, node, unique, self._status(unique), failure=error or {})
        return await self._execute(dag, node, unique)

    # -- abort ----------------------------------------------------------------------------------------------
    async def _abort(self, reason: str, *, end: bool = False) -> bool:
        """Abort every node in progress (propeller's ``AbortHandler`` from the start node): True once all have
        ended; with ``end``, the workflow then ends Aborted."""
        done = await self._abort_dag(self.dag, reason, emit=True)
        if done and end:
            self._workflow_event(WorkflowPhase.ABORTED)
            self.record.outcome = str(Phase.ABORTED)
            self.record.error = {"code": "Aborted", "message": reason, "kind": str(ErrorKind.USER)}
            self._finish()
        elif not done:
            self._child_wake = min(self._child_wake or 1.0, 1.0)
        return done

    async def _abort_dag(self, dag: _Dag, reason: str, *, emit: bool) -> bool:
        done = True
        seen: set[str] = set()
        stack = [START_NODE]
        while stack:
            node_id = stack.pop()
            if node_id in seen:
                continue
            seen.add(node_id)
            unique = dag.unique_id(node_id)
            phase = self._phase(unique)
            if phase in _DONE_PHASES or node_id == START_NODE:
                stack.extend(dag.downstream.get(node_id, []))
                continue
            if phase is NodePhase.NOT_YET_STARTED or phase in _FAILED_PHASES or phase is NodePhase.ABORTED:
                continue
            node = dag.nodes.get(node_id)
            if node is None:
                continue
            done = await self._abort_node(dag, node, unique, reason, emit=emit) and done
        return done

    async def _abort_node(
        self, dag: _Dag, node: workflow_pb2.Node, unique: str, reason: str, *, emit: bool
    ) -> bool:
        status = self._nodes[unique]
        kind = node.WhichOneof("target")
        done = True
        if kind in ("task_node", "array_node") and not status.terminal:
            child = self._children.get(unique)
            if child is None:
                child = await self._start_child(dag, node, unique, status)
            status.abort_requested = True
            abort_reason = getattr(child, "abort_reason", None)
            if abort_reason is not None:
                child.abort_reason = reason  # type: ignore[attr-defined]
            await child.round()
            self._save_children()
            done = status.terminal
        elif kind == "branch_node" and status.workflow_state and "taken" in status.workflow_state:
            taken = dag.nodes[status.workflow_state["taken"]]
            child_id = unique_node_id(unique, 0, taken.id)
            if self._phase(child_id) not in _DONE_PHASES | _FAILED_PHASES | {NodePhase.NOT_YET_STARTED}:
                done = await self._abort_node(dag, taken, child_id, reason, emit=emit)
        elif kind == "workflow_node" and node.workflow_node.HasField("launchplan_ref"):
            child_key = (status.workflow_state or {}).get("child")
            record = self.host.launched(child_key) if child_key else None
            if record is not None and not record.terminal:
                # propeller terminates the child with a cause naming the parent (LPN3).
                self.host.abort(str(child_key))
                done = False
        elif kind == "workflow_node":
            sub = self._child_dag(dag, node, unique)
            if sub is not None:
                done = await self._abort_dag(sub, reason, emit=emit)
        if kind == "task_node" and unique in self._dynamic and done:
            done = await self._abort_dag(self._dynamic[unique], reason, emit=emit)
        if done:
            self._children.pop(unique, None)
            self._set_phase(unique, status, NodePhase.ABORTED)
            if emit:
                error = {"kind": str(ErrorKind.USER), "code": "NodeAborted", "message": reason}
                self._node_event(unique, node, "Aborted", error=error, reason=reason)
        return done

    # -- ends -------------------------------------------------------------------------------------------------
    async def _succeed(self) -> None:
        _, end_out = self._dirs(END_NODE, 0)
        outputs = literals_pb2.LiteralMap()
        outputs.ParseFromString(await self.host.data.read(f"{end_out}/outputs.pb") or b"")
        interface = self.dag.template.interface.outputs if self.dag.template.HasField("interface") else None
        self.record.outputs = literal_map_to_plain(outputs, interface)
        self.record.outcome = str(Phase.SUCCESS)
        self._workflow_event(WorkflowPhase.SUCCESS)
        self._finish()

    def _fail(self, error: dict[str, Any] | None) -> None:
        self.record.error = error or _unknown_error("")
        self.record.outcome = str(Phase.PERMANENT_FAILURE)
        self._workflow_event(WorkflowPhase.FAILED, error=self.record.error)
        self._finish()

    def _finish(self) -> None:
        self._save()
        self.unindex_all()
        self.host.finish(self.key)

    # -- node records --------------------------------------------------------------------------------------
    def _phase(self, unique: str) -> NodePhase:
        status = self._nodes.get(unique)
        if status is None or status.workflow_state is None:
            return NodePhase.NOT_YET_STARTED
        return _NODE_PHASES[status.workflow_state.get("phase", 0)]

    def _status(self, unique: str) -> ExecutionRecord:
        status = self._nodes.get(unique)
        if status is None:
            status = ExecutionRecord(key=f"{self._key_prefix}/{unique}", workflow_state={"phase": 0})
            self._nodes[unique] = status
        return status

    def _set_phase(self, unique: str, status: ExecutionRecord, phase: NodePhase) -> None:
        if status.workflow_state is None:
            status.workflow_state = {}
        status.workflow_state["phase"] = int(phase)
        self._dirty.add(unique)
        self._changed.add(unique)
        self._quiet = False
        if phase is not NodePhase.RUNNING:
            self._moved = True

    def _node_failed(
        self, unique: str, node: workflow_pb2.Node, status: ExecutionRecord, error: dict[str, Any]
    ) -> _Report:
        status.error = error
        self._set_phase(unique, status, NodePhase.FAILED)
        self._node_event(unique, node, "Failed", error=error)
        return _Report(_Outcome.FAILED, error)

    def _save_children(self) -> None:
        """What children saved in their rounds, written once each (a task node saves its record up to three
        times in the round that ends it). A child's record is its node's status: the row written carries
        whatever the walk changed in it too, so the node is no longer due in the round's save."""
        unsaved = self._unsaved
        if unsaved:
            self.host.store.save_nodes(self.key, list(unsaved.values()))
            self._unsaved = {}
            if self._changed:
                nodes = self._nodes
                self._changed.difference_update([u for u, r in unsaved.items() if nodes.get(u) is r])

    def _save(self) -> None:
        """What changed, one row per node (a node its child saved and the walk changed is written once), then
        the execution's record."""
        rows = self._unsaved
        if self._changed:
            nodes = self._nodes
            for unique in sorted(self._changed):
                rows.setdefault(unique, nodes[unique])
            self._changed.clear()
        if rows:
            self.host.store.save_nodes(self.key, list(rows.values()))
            self._unsaved = {}
        self.host.store.save(self.record)

    def _dirs(self, unique: str, attempt: int) -> tuple[str, str]:
        return node_dirs(self.settings.data_root, self.execution_id, unique, (attempt,))

    def _task(self, dag: _Dag, reference: Any, node_id: str) -> tasks_pb2.TaskTemplate:
        task = dag.tasks.get(_id_key(reference))
        if task is None:
            raise TaskplugError(
                f"node {node_id}: task {reference.name} is not in the compiled workflow",
                code="TaskReferenceNotFound",
            )
        return task

    # -- events -----------------------------------------------------------------------------------------------
    def _now(self) -> str:
        return rfc3339(self.host.clock.now())

    def _node_event(
        self,
        unique: str,
        node: workflow_pb2.Node,
        phase: str,
        *,
        error: dict[str, Any] | None = None,
        reason: str = "",
        cache: dict[str, Any] | None = None,
    ) -> None:
        event = Event(
            attempt=0,
            phase=phase,
            version=0,
            reason=reason or (error or {}).get("message", ""),
            occurred_at=self._now(),
            error=error,
            kind="node",
            node=unique,
            name=node.metadata.name or None,
            cache=cache,
        )
        self.host.emit(self.key, event)

    def _workflow_event(
        self, phase: WorkflowPhase, *, error: dict[str, Any] | None = None, silent: bool = False
    ) -> None:
        self._state["phase"] = int(phase)
        # The root's phase as every execution's is read (the service's lists, status): the workflow's.
        self.record.task_phase = int(_EXECUTION_PHASES.get(phase, Phase.RUNNING))
        if silent:
            return
        event = Event(
            attempt=0,
            phase=str(phase),
            version=0,
            reason=(error or {}).get("message", ""),
            occurred_at=self._now(),
            error=error,
            kind="workflow",
        )
        self.host.emit(self.key, event)

    # -- bindings -----------------------------------------------------------------------------------------------
    async def _resolve(
        self, dag: _Dag, node: workflow_pb2.Node, failure: dict[str, Any] | None = None
    ) -> literals_pb2.LiteralMap:
        """The node's inputs from its bindings (``nodes/resolve.go``): every producer's outputs read first,
        then resolved by the binding rules (attribute paths, aliases, Flyte's error texts). A failure node
        (``failure``: the error it handles) may read only the workflow's inputs; its ``err`` input is that
        failure, as ``FailureNodeLookup`` and ``ResolveErrorInputLiteralData`` give it."""
        failure_node = failure is not None
        outputs: dict[str, tuple[literals_pb2.LiteralMap | None, str]] = {}
        for producer in sorted(_producers(node.inputs)):
            if failure_node and producer != START_NODE:
                continue
            outputs[producer] = await self._outputs_of(dag, producer)

        def read_output(producer: str, var: str) -> literals_pb2.Literal:
            found, path = outputs.get(producer, (None, ""))
            aliases = dag.nodes[producer].output_aliases if producer in dag.nodes else ()
            return output_of(found, path, producer, var, aliases)

        bindings = [b for b in node.inputs if not (failure_node and b.var == "err")]
        inputs = resolve_inputs(bindings, read_output, node.id)
        if failure_node and any(b.var == "err" for b in node.inputs):
            message = (failure or {}).get("message", "")
            inputs.literals["err"].CopyFrom(failure_node_error_literal(message, node.id))
        return inputs

    async def _outputs_of(self, dag: _Dag, producer: str) -> tuple[literals_pb2.LiteralMap | None, str]:
        unique = dag.unique_id(producer)
        attempt = self._nodes[unique].attempt if unique in self._nodes else 0
        _, output_dir = self._dirs(unique, attempt)
        path = f"{output_dir}/outputs.pb"
        cached = self._outputs.get(path)
        if cached is not None:
            return cached, path
        data = await self.host.data.read(path)
        if data is None:
            return None, path
        outputs = literals_pb2.LiteralMap()
        outputs.ParseFromString(data)
        self._outputs[path] = outputs
        return outputs, path

    # -- what children reach through their host ------------------------------------------------------------
    def child_wake(self, unique: str) -> None:
        self._woken.add(unique)
        self.host.wake(self.key)

    def child_wake_after(self, unique: str, seconds: float) -> None:
        due = self.host.clock.monotonic() + seconds
        self._due[unique] = min(self._due.get(unique, due), due)
        self.host.wake_after(self.key, seconds)

    def child_finished(self, unique: str) -> None:
        """A child reached its end (as the executor ends an execution): unindexed, terminal, saved."""
        child = self._children.get(unique)
        if child is not None:
            child.unindex_all()
        status = self._nodes[unique]
        status.terminal = True
        self._quiet = False  # the walk records its end (and what it lets run)
        if self._in_round:
            # The walk looks at the child right after its round (children run only in rounds: before the
            # walk, in it, or in an abort) and the round's save writes it with the node's end; another round
            # would find nothing new.
            self._changed.add(unique)
            return
        self._unsaved[unique] = status
        self._save_children()
        self.host.wake(self.key)

    def child_saved(self, unique: str, record: NodeRecord) -> None:
        """Written when the child's round ends (or before any flush), so one round's saves are one write. An
        ended child's record waits for the round's save, which writes it once with its node's end (its
        decision was written before its cleanup began, so a process stopped in between finishes the cleanup)."""
        ended = isinstance(record, ExecutionRecord) and record.terminal
        if self._in_round and ended and self._nodes.get(unique) is record:
            self._unsaved.pop(unique, None)
            self._changed.add(unique)
            return
        self._unsaved[unique] = record

    def child_indexed(self, name: str, unique: str) -> None:
        self._names[name] = unique
        self.host.index_generated_name(name, self.key)

    def child_unindexed(self, name: str) -> None:
        self._names.pop(name, None)
        self.host.unindex_generated_name(name)


def _start_end(node_id: str) -> workflow_pb2.Node:
    return workflow_pb2.Node(id=node_id)


def _unknown_error(message: str) -> dict[str, Any]:
    return {
        "kind": "UNKNOWN",
        "code": "UnknownError",
        "message": f"Unknown error, last seen message [{message}]",
    }


def _id_key(identifier: Any) -> str:
    return f"{identifier.resource_type}/{identifier.project}/{identifier.domain}/{identifier.name}/{identifier.version}"


def _kind(node: workflow_pb2.Node, *, dynamic: bool) -> str:
    """A node's kind as results name it: task, dynamic, array, branch, subworkflow, launchplan, gate."""
    target = node.WhichOneof("target")
    if target == "workflow_node":
        return "launchplan" if node.workflow_node.HasField("launchplan_ref") else "subworkflow"
    if target == "task_node":
        return "dynamic" if dynamic else "task"
    return (target or "").removesuffix("_node")


def _producers(bindings: Any) -> set[str]:
    """The nodes whose outputs ``bindings`` read (promises, also inside collections and maps)."""
    found: set[str] = set()
    stack = [b.binding for b in bindings]
    while stack:
        data = stack.pop()
        which = data.WhichOneof("value")
        if which == "promise":
            found.add(data.promise.node_id or START_NODE)
        elif which == "collection":
            stack.extend(data.collection.bindings)
        elif which == "map":
            stack.extend(data.map.bindings.values())
    return found


def _error(error: ExecutionError) -> dict[str, Any]:
    return error_json(error) or _unknown_error("")


class _ChildStore:
    """The state store a workflow's child node sees: its record and its own children (a map's elements) are
    node records of the workflow's execution; its events are the workflow's, tagged with the node."""

    __slots__ = ("parent", "unique")  # one per running task or map node

    def __init__(self, parent: WorkflowRun, unique: str) -> None:
        self.parent = parent
        self.unique = unique

    @property
    def _store(self) -> StateStore:
        return self.parent.host.store

    def load(self, key: str) -> ExecutionRecord | None:
        return self.parent._nodes.get(self.unique)

    def save(self, record: ExecutionRecord) -> None:
        self.parent.child_saved(self.unique, record)

    def append_event(self, key: str, event: Event) -> None:
        event.node = self.unique
        self._store.append_event(self.parent.key, event)

    def events(self, key: str) -> list[Event]:
        return [e for e in self._store.events(self.parent.key) if e.node == self.unique]

    def save_nodes(self, key: str, nodes: list[NodeRecord]) -> None:
        self._store.save_nodes(self.parent.key, nodes)

    def load_nodes(self, key: str) -> list[NodeRecord]:
        prefix = f"{self.unique}/"
        return [n for n in self._store.load_nodes(self.parent.key) if n.path.startswith(prefix)]

    def flush(self) -> None:
        self.parent._save_children()
        self._store.flush()

    async def aflush(self) -> None:
        self.parent._save_children()
        await flush_store(self._store)

    def close(self) -> None:
        pass


class _ChildHost:
    """The :class:`NodeHost` a workflow gives a task or map node it runs: the workflow's data store, clock and
    step; its record among the workflow's node records; its events the workflow's, tagged with the node; its
    wake-ups and its end wake the workflow."""

    __slots__ = ("clock", "data", "parent", "resource_manager", "step", "store", "unique")

    def __init__(self, parent: WorkflowRun, unique: str) -> None:
        self.parent = parent
        self.unique = unique
        self.store: StateStore = _ChildStore(parent, unique)
        host = parent.host
        self.data: DataStore = host.data
        self.clock: Clock = host.clock
        self.resource_manager: ResourceManager | None = host.resource_manager
        self.step: NodeStep = host.step

    def emit(self, key: str, event: Event) -> None:
        event.node = self.unique
        self.parent.host.emit(self.parent.key, event)

    def index_generated_name(self, name: str, key: str) -> None:
        self.parent.child_indexed(name, self.unique)

    def unindex_generated_name(self, name: str) -> None:
        self.parent.child_unindexed(name)

    def wake(self, key: str) -> None:
        self.parent.child_wake(self.unique)

    def wake_after(self, key: str, seconds: float) -> None:
        self.parent.child_wake_after(self.unique, seconds)

    def finish(self, key: str) -> None:
        self.parent.child_finished(self.unique)

    async def launch(self, spec: ExecutionSpec, *, parent: str) -> str:
        return await self.parent.host.launch(spec, parent=parent)

    def launched(self, key: str) -> ExecutionRecord | None:
        return self.parent.host.launched(key)

    def abort(self, key: str) -> None:
        self.parent.host.abort(key)
