"""What a person sees of a workflow execution's nodes: their tree, each node's phase, attempt and time, and
the errors of the nodes that failed — built from the events of a run as they arrive (the live view and the
event lines of ``taskplug run``) or from the node records of the state DB (``taskplug status``).

A node is known by its unique id (``n0``; ``n4-0-n0`` for node ``n0`` under sub-workflow or branch node
``n4`` at its attempt 0; ``f…`` when hashed), as flytepropeller's ``GenerateUniqueID``
(flytepropeller/pkg/controller/nodes/common/utils.go) makes it. The outline of a compiled workflow
(:func:`workflow_outline`) names each node and its kind and places it in the tree; a node the outline does
not know (a record read without its spec, a hashed id) is placed under the known node whose id its own
begins with (``n4`` for ``n4-0-n0``), at the top otherwise. Start and end nodes are never shown.

What is shown comes from tasks, errors and the cluster: it is set on :class:`~rich.text.Text`, never read
as Rich markup.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from flyteidl.core import compiler_pb2, workflow_pb2

from taskplug.cli._text import error_text
from taskplug.core import Phase
from taskplug.executor import Event, ExecutionSpec, NodeKind, NodePhase, NodeRecord
from taskplug.k8s import fixed_length_unique_id

if TYPE_CHECKING:
    # Rich is imported where something is drawn: a run with `-o json` or without a terminal draws nothing.
    from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
    from rich.text import Text

__all__ = [
    "NODE_PHASE_NAMES",
    "WORKFLOW_PHASE_NAMES",
    "NodeOutline",
    "NodeView",
    "WorkflowNodes",
    "failed_result_nodes",
    "node_phase_name",
    "walk_result_nodes",
    "workflow_outline",
    "workflow_phase_name",
]

NODE_PHASE_NAMES: Final = tuple(str(phase) for phase in NodePhase)
"""A node's phase by the number its record stores (propeller's ``v1alpha1.NodePhase``, plus taskplug's
Aborted = 13)."""

WORKFLOW_PHASE_NAMES: Final = (
    "Ready",
    "Running",
    "Succeeding",
    "Succeeded",
    "Failing",
    "Failed",
    "Aborted",
    "HandlingFailureNode",
)
"""A workflow's phase by the number its execution record stores (propeller's ``v1alpha1.WorkflowPhase``)."""

_MAX_UNIQUE_ID: Final = 20  # GenerateUniqueID's limit
_HIDDEN_NODES: Final = ("start-node", "end-node")
_LAUNCHED: Final = "launched "
"""How a launch plan node's Running event names its child execution."""
_HIDDEN_KIND: Final = "hidden"
"""The kind of a start or end node in an outline: known by its id, never shown."""
_NESTED: Final = re.compile(r"^-\d+-.")

_TASK_PHASES: Final = frozenset(int(p) for p in Phase)
_DONE: Final = frozenset({"Succeeded", "Skipped", "Recovered"})
_FAILED: Final = frozenset({"Failed", "TimedOut", "Aborted"})
_TERMINAL: Final = _DONE | _FAILED
_WORKFLOW_TERMINAL: Final = frozenset({"Succeeded", "Failed", "Aborted"})
_STYLES: Final = {
    "NotYetStarted": "dim",
    "Queued": "cyan",
    "Running": "blue",
    "DynamicRunning": "blue",
    "Succeeding": "green",
    "Succeeded": "green",
    "Recovered": "green",
    "Skipped": "dim",
    "Failing": "red",
    "Failed": "red",
    "TimingOut": "red",
    "TimedOut": "red",
    "Aborted": "red",
}


def node_phase_name(number: int) -> str:
    return NODE_PHASE_NAMES[number] if 0 <= number < len(NODE_PHASE_NAMES) else f"Phase{number}"


def workflow_phase_name(number: int) -> str:
    return WORKFLOW_PHASE_NAMES[number] if 0 <= number < len(WORKFLOW_PHASE_NAMES) else f"Phase{number}"


# -- the outline of a compiled workflow ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NodeOutline:
    """One node of a compiled workflow as the view places it: its unique id, name and kind, and the nodes
    under it (a sub-workflow's nodes; a branch's cases, shown only once taken)."""

    id: str
    name: str
    kind: str
    children: tuple[NodeOutline, ...] = ()
    case: bool = False
    """A branch's case: run only when taken (the others are skipped without events)."""


def _unique_id(parent: str | None, node_id: str, attempt: int = 0) -> str:
    """propeller's ``GenerateUniqueID`` (the parent's attempt is 0 for a sub-workflow and a branch; a
    ``@dynamic`` node's is its task's attempt)."""
    text = node_id if parent is None else f"{parent}-{attempt}-{node_id}"
    return fixed_length_unique_id(text, _MAX_UNIQUE_ID)


def _id_key(identifier: Any) -> tuple[str, str, str, str]:
    return (identifier.project, identifier.domain, identifier.name, identifier.version)


def _kind(node: workflow_pb2.Node) -> str:
    target = node.WhichOneof("target")
    if target == "workflow_node":
        return "launch plan" if node.workflow_node.HasField("launchplan_ref") else "sub-workflow"
    return {"task_node": "task", "array_node": "map", "branch_node": "branch", "gate_node": "gate"}.get(
        target or "", target or "node"
    )


def _cases(node: workflow_pb2.Node) -> Iterator[workflow_pb2.Node]:
    if_else = node.branch_node.if_else
    yield if_else.case.then_node
    for other in if_else.other:
        yield other.then_node
    if if_else.WhichOneof("default") == "else_node":
        yield if_else.else_node


def workflow_outline(spec: ExecutionSpec) -> tuple[NodeOutline, ...] | None:
    """The nodes of a workflow execution's compiled workflow, nested as they run; None for a task or map
    execution."""
    if spec.kind is not NodeKind.WORKFLOW or spec.workflow is None:
        return None
    closure = spec.workflow.closure
    sub_workflows = {_id_key(w.template.id): w for w in closure.sub_workflows}

    def outline(node: workflow_pb2.Node, parent: str | None, *, case: bool = False) -> NodeOutline:
        unique = _unique_id(parent, node.id)
        children: list[NodeOutline] = []
        if node.WhichOneof("target") == "branch_node":
            children = [outline(c, unique, case=True) for c in _cases(node)]
        elif node.WhichOneof("target") == "workflow_node" and node.workflow_node.HasField("sub_workflow_ref"):
            compiled = sub_workflows.get(_id_key(node.workflow_node.sub_workflow_ref))
            if compiled is not None:
                children = list(nodes(compiled, unique))
        return NodeOutline(unique, node.metadata.name or node.id, _kind(node), tuple(children), case)

    def nodes(compiled: compiler_pb2.CompiledWorkflow, parent: str | None) -> Iterator[NodeOutline]:
        for node in compiled.template.nodes:
            if node.id not in _HIDDEN_NODES:
                yield outline(node, parent)
        # Never shown, but known: a nested one's id may be hashed (``f…``), which its name would not tell.
        for hidden in _HIDDEN_NODES:
            yield NodeOutline(_unique_id(parent, hidden), hidden, _HIDDEN_KIND)

    primary = list(nodes(closure.primary, None))
    failure = closure.primary.template.failure_node
    if failure.id:
        # Run only when the workflow fails: shown once it starts. Its id is the node id as it is.
        primary.append(
            NodeOutline(failure.id, failure.metadata.name or failure.id, "failure node", case=True)
        )
    return tuple(primary)


def walk_result_nodes(nodes: Sequence[Mapping[str, Any]]) -> Iterator[Mapping[str, Any]]:
    """Every node of a result's ``nodes`` (``ExecutionResult.nodes``, ``-o json``), nested ones after
    their parent."""
    for node in nodes:
        yield node
        children = node.get("nodes")
        if isinstance(children, list):
            yield from walk_result_nodes(children)


def failed_result_nodes(nodes: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The nodes of a result's ``nodes`` that failed (timed out, were aborted) themselves: none of the nodes
    under them did (a sub-workflow node fails with the node inside it that failed)."""
    out = []
    for node in walk_result_nodes(nodes):
        children = node.get("nodes")
        below = walk_result_nodes(children) if isinstance(children, list) else iter(())
        if node.get("phase") in _FAILED and not any(n.get("phase") in _FAILED for n in below):
            out.append(node)
    return out


# -- the nodes as they go ----------------------------------------------------------------------------------------


@dataclass(slots=True)
class NodeView:
    """One node as the view shows it."""

    id: str
    name: str = ""
    kind: str = ""
    phase: str = "NotYetStarted"
    attempt: int | None = None
    """The task attempt last reported (task and map nodes)."""
    task_phase: str = ""
    reason: str = ""
    error: dict[str, Any] | None = None
    started: float | None = None
    ended: float | None = None
    parent: str | None = None
    children: list[str] = field(default_factory=list)
    case: bool = False
    elements: dict[int, str] | None = None
    """A map node's elements by index: their latest reported phase."""
    child: str | None = None
    """A launch plan node's child execution (its key)."""

    @property
    def label(self) -> str:
        return f"{self.id} {self.name}" if self.name and self.name != self.id else self.id

    @property
    def done(self) -> bool:
        return self.phase in _TERMINAL

    def elapsed(self, now: float) -> float | None:
        if self.started is None:
            return None
        return (self.ended if self.ended is not None else now) - self.started


class WorkflowNodes:
    """A workflow execution's nodes and its own phase, updated event by event (:meth:`on_event`) or set from
    stored records (:meth:`from_records`)."""

    def __init__(
        self,
        outline: Sequence[NodeOutline] | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.clock = clock
        self.phase = "Submitting"
        self.error: dict[str, Any] | None = None
        self.nodes: dict[str, NodeView] = {}
        self.roots: list[str] = []
        self.hidden: set[str] = set()
        """Start and end nodes' ids (from the outline: nested ones may be hashed)."""
        for node in outline or ():
            self._add_outline(node, None)

    def _add_outline(self, node: NodeOutline, parent: str | None) -> None:
        if node.kind == _HIDDEN_KIND:
            self.hidden.add(node.id)
            return
        view = NodeView(node.id, node.name, node.kind, parent=parent, case=node.case)
        self.nodes[node.id] = view
        (self.nodes[parent].children if parent is not None else self.roots).append(node.id)
        for child in node.children:
            self._add_outline(child, node.id)

    def node(self, unique: str) -> NodeView:
        """The view of node ``unique``, placed in the tree the first time it is seen."""
        view = self.nodes.get(unique)
        if view is None:
            parent = self._parent_of(unique)
            view = NodeView(unique, parent=parent)
            self.nodes[unique] = view
            (self.nodes[parent].children if parent is not None else self.roots).append(unique)
            self._hide_below(unique, 0)
        return view

    def _hide_below(self, unique: str, attempt: int) -> None:
        """Know the ids the start and end nodes under node ``unique`` have (at its ``attempt``), were it a
        sub-workflow or a dynamic node: a long one is hashed, and would not be known by its name."""
        for hidden in _HIDDEN_NODES:
            self.hidden.add(_unique_id(unique, hidden, attempt))

    def _hidden(self, unique: str) -> bool:
        return unique in self.hidden or any(unique == h or unique.endswith(f"-{h}") for h in _HIDDEN_NODES)

    def _parent_of(self, unique: str) -> str | None:
        best: str | None = None
        for known in self.nodes:
            nested = unique.startswith(known) and _NESTED.match(unique[len(known) :])
            if nested and (best is None or len(known) > len(best)):
                best = known
        return best

    # -- from events ----------------------------------------------------------------------------------------
    def on_event(self, event: Event) -> NodeView | None:
        """Take one event of the execution; the node it is about (None for the workflow's own, and for a
        start or end node's)."""
        now = self.clock()
        if event.kind == "workflow":
            self.phase = event.phase
            if event.error is not None:
                self.error = event.error
            return None
        if event.node is None or self._hidden(event.node):
            return None
        view = self.node(event.node)
        if view.started is None:
            view.started = now
        if event.kind == "node":
            if event.name and not view.name:
                view.name = event.name  # a node the outline does not hold: a @dynamic node's
            view.phase = event.phase
            if event.phase in _TERMINAL:
                view.ended = now
            if event.error is not None:
                view.error = event.error
            if event.reason:
                view.reason = event.reason
                if event.reason.startswith(_LAUNCHED):
                    view.child = event.reason.removeprefix(_LAUNCHED)
        else:
            if view.phase == "NotYetStarted":
                view.phase = "Running"
            view.attempt = event.attempt
            if event.attempt:
                self._hide_below(view.id, event.attempt)
            view.task_phase = event.phase
            view.reason = event.reason
            if event.error is not None:
                view.error = event.error
            if event.external_resources is not None:
                elements = view.elements if view.elements is not None else {}
                for resource in event.external_resources:
                    elements[int(str(resource.get("index", 0)))] = str(resource.get("phase", "Undefined"))
                view.elements = elements
        return view

    # -- from the state DB ----------------------------------------------------------------------------------
    @classmethod
    def from_records(
        cls, records: Sequence[NodeRecord], *, workflow_state: Mapping[str, Any] | None
    ) -> WorkflowNodes:
        """The nodes as a workflow execution's stored node records hold them (those with a
        ``workflow_state``; a map node's elements ``<id>/<index>`` counted under it)."""
        nodes = cls()
        nodes.apply_records(records, workflow_state=workflow_state)
        return nodes

    def apply_records(
        self, records: Sequence[NodeRecord], *, workflow_state: Mapping[str, Any] | None
    ) -> None:
        """Take what stored records say of the workflow and its nodes: a resumed run's view starts from
        where the nodes were (finished nodes send no events again)."""
        if workflow_state is not None:
            self.phase = workflow_phase_name(int(workflow_state.get("phase", 0)))
            self.error = workflow_state.get("error")
        ours = [r for r in records if r.workflow_state is not None and "/" not in r.path]
        for record in ours:
            # First: a hashed start or end node's id is known from its parent's, whichever comes first.
            for attempt in {0, record.attempt}:
                self._hide_below(record.path, attempt)
        # Parents before their children: a child's id is its parent's and more.
        for record in sorted(ours, key=lambda r: (len(r.path), r.path)):
            if self._hidden(record.path) or record.workflow_state is None:
                continue
            view = self.node(record.path)
            view.phase = node_phase_name(int(record.workflow_state.get("phase", 0)))
            view.error = record.error
            view.reason = record.reason
            child = record.workflow_state.get("child")
            if child:
                view.child = str(child)
            if record.task_phase or record.plugin_state is not None or record.started_at is not None:
                # A task or map node: the attempt and the phase its task last reported.
                view.attempt = record.attempt
                view.task_phase = str(Phase(record.task_phase)) if record.task_phase in _TASK_PHASES else ""
        elements: dict[str, dict[int, str]] = {}
        for record in records:
            head, _, index = record.path.partition("/")
            if index.isdigit():
                elements.setdefault(head, {})[int(index)] = node_phase_name(record.node_phase)
        for head, found in elements.items():
            if head in self.nodes:
                self.nodes[head].elements = found

    def name_nodes(self, events: Iterable[Event]) -> None:
        """Name the nodes no outline named by what their node events call them (the names records do not
        hold)."""
        for event in events:
            view = self.nodes.get(event.node) if event.kind == "node" and event.name and event.node else None
            if view is not None and not view.name:
                view.name = str(event.name)

    # -- what to say ----------------------------------------------------------------------------------------
    def walk(self) -> Iterator[tuple[int, NodeView]]:
        """Every node in tree order with its depth; a branch's cases only once taken."""

        def visit(ids: list[str], depth: int) -> Iterator[tuple[int, NodeView]]:
            for unique in ids:
                view = self.nodes[unique]
                if view.case and view.phase == "NotYetStarted":
                    continue
                yield depth, view
                yield from visit(view.children, depth + 1)

        yield from visit(self.roots, 0)

    def failed(self) -> list[NodeView]:
        """The nodes that failed whose failure is their own: none of the nodes under them failed."""
        out = []
        for _, view in self.walk():
            if view.phase in _FAILED or (view.phase in ("Failing", "TimingOut")):
                below = any(self.nodes[c].phase in _FAILED for c in self._descendants(view.id))
                if not below:
                    out.append(view)
        return out

    def _descendants(self, unique: str) -> Iterator[str]:
        for child in self.nodes[unique].children:
            yield child
            yield from self._descendants(child)

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for _, view in self.walk():
            counts[view.phase] = counts.get(view.phase, 0) + 1
        return counts

    def summary(self) -> str:
        """``3/5 node(s) done: Succeeded 2, Failed 1, Running 2``."""
        counts = self.counts()
        total = sum(counts.values())
        done = sum(n for phase, n in counts.items() if phase in _TERMINAL)
        parts = ", ".join(f"{phase} {n}" for phase, n in sorted(counts.items(), key=_phase_order))
        return f"{done}/{total} node(s) done: {parts}" if parts else "no nodes yet"

    @property
    def ended(self) -> bool:
        return self.phase in _WORKFLOW_TERMINAL

    def end_line(self) -> str:
        """What the workflow ended as: its phase, and for a failure the nodes that failed and their errors."""
        line = f"workflow: {self.phase}"
        failed = self.failed()
        if failed:
            line += "  " + "; ".join(
                f"node {v.label} {v.phase.lower()}: {error_text(_message(v), 200)}" for v in failed[:3]
            )
            if len(failed) > 3:
                line += f"; and {len(failed) - 3} more node(s)"
        elif self.error is not None:
            line += f"  {error_text(str(self.error.get('message', '')), 300)}"
        return line

    def render(self, *, max_rows: int = 40, header: bool = True) -> RenderableType:
        """The workflow's phase, its nodes' tree (succeeded and not-started nodes collapsed into counts when
        there are more than ``max_rows``) and the failed nodes' errors."""
        from rich.console import Group
        from rich.text import Text

        now = self.clock()
        rows = list(self.walk())
        head = Text()
        head.append("workflow ", style="bold")
        head.append(self.phase, style=_WORKFLOW_STYLES.get(self.phase, "cyan"))
        head.append(f"  {self.summary()}")
        shown, notes = _collapse(rows, max_rows, self.nodes)
        table = _NodeTable([_cells(depth, view, now) for depth, view in shown])
        parts: list[RenderableType] = [head, table] if header else [table]
        parts.extend(Text(note, style="dim") for note in notes)
        for view in self.failed()[:5]:
            parts.append(
                Text(
                    f"node {view.label} {view.phase.lower()}: {error_text(_message(view), 200)}", style="red"
                )
            )
        return Group(*parts)


_WORKFLOW_STYLES: Final = {
    "Succeeding": "green",
    "Succeeded": "green",
    "Failing": "red",
    "Failed": "red",
    "Aborted": "red",
}

_ORDER: Final = (
    "Failed",
    "TimedOut",
    "Aborted",
    "Failing",
    "Running",
    "DynamicRunning",
    "Queued",
    "Succeeded",
    "Skipped",
    "NotYetStarted",
)


def _phase_order(item: tuple[str, int]) -> tuple[int, str]:
    phase = item[0]
    return (_ORDER.index(phase) if phase in _ORDER else len(_ORDER), phase)


def _message(view: NodeView) -> str:
    if view.error is not None:
        return str(view.error.get("message", "")) or view.reason
    return view.reason


def _last(view: NodeView) -> str:
    """The node's last word: its failure, its map elements' counts, or the reason its task gave last."""
    if view.phase in _FAILED:
        return error_text(_message(view), 160)
    parts = [f"execution {view.child}"] if view.child else []
    if view.elements:
        done = sum(1 for p in view.elements.values() if p in ("Success", "Succeeded"))
        failed = sum(1 for p in view.elements.values() if p in ("PermanentFailure", "Failed"))
        parts.append(
            f"{done}/{len(view.elements)} element(s) succeeded" + (f", {failed} failed" if failed else "")
        )
    if view.task_phase and not view.done:
        parts.append(view.task_phase)
    if view.reason and not view.done and not view.child:
        parts.append(error_text(view.reason, 120))
    return "  ".join(parts)


class _NodeTable:
    """The nodes' table, laid out for the width it is given: the columns that have something to show, each
    as wide as it needs (the node column up to 40), the last one taking what is left and cut there."""

    _COLUMNS: Final = ("node", "kind", "phase", "attempt", "elapsed", "last")

    def __init__(self, cells: list[tuple[Text, ...]]) -> None:
        self.cells = cells

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        columns = self._COLUMNS
        used = [i for i in range(len(columns)) if i in (0, 2) or any(row[i].plain for row in self.cells)]
        widths = {
            i: min(40, max([len(columns[i]), *(len(row[i].plain) for row in self.cells)]))
            for i in used
            if columns[i] != "last"
        }
        from rich.table import Table

        table = Table(box=None, show_header=True, header_style="bold", pad_edge=False)
        for i in used:
            if columns[i] == "last":
                rest = options.max_width - sum(widths.values()) - 2 * len(widths)
                table.add_column(columns[i], no_wrap=True, overflow="ellipsis", max_width=max(rest, 10))
            else:
                table.add_column(columns[i], no_wrap=True, overflow="ellipsis", width=widths[i])
        for row in self.cells:
            table.add_row(*(row[i] for i in used))
        yield table


def _cells(depth: int, view: NodeView, now: float) -> tuple[Text, ...]:
    from rich.text import Text

    elapsed = view.elapsed(now)
    return (
        Text("  " * depth + view.label),
        Text(view.kind, style="dim"),
        Text(view.phase, style=_STYLES.get(view.phase, "cyan")),
        Text("" if view.attempt is None else str(view.attempt)),
        Text("" if elapsed is None else f"{elapsed:5.1f}s"),
        Text(_last(view)[:160]),
    )


def _collapse(
    rows: list[tuple[int, NodeView]], max_rows: int, nodes: Mapping[str, NodeView]
) -> tuple[list[tuple[int, NodeView]], list[str]]:
    """The rows to show and what was left out: when there are more than ``max_rows``, succeeded (and
    skipped) nodes first, then nodes not started yet, are counted instead of listed; a shown node's
    parents stay. Past that the list is cut, failed and running nodes first."""
    if len(rows) <= max_rows:
        return rows, []
    notes: list[str] = []
    keep = {view.id for _, view in rows}
    for phases, words in ((_DONE, "succeeded or skipped"), (frozenset({"NotYetStarted"}), "not started")):
        if len(keep) <= max_rows:
            break
        dropped = {view.id for _, view in rows if view.id in keep and view.phase in phases}
        keep -= dropped
        if dropped:
            notes.append(f"{len(dropped)} node(s) {words} not shown")
    # A shown node's parents stay, whatever their phase.
    for unique in list(keep):
        parent = nodes[unique].parent
        while parent is not None:
            keep.add(parent)
            parent = nodes[parent].parent
    shown = [(depth, view) for depth, view in rows if view.id in keep]
    if len(shown) > max_rows:
        ranked = sorted(shown, key=lambda row: _phase_order((row[1].phase, 0)))
        first = {view.id for _, view in ranked[:max_rows]}
        notes.append(f"{len(shown) - len(first)} more node(s) not shown")
        shown = [row for row in shown if row[1].id in first]
    return shown, notes
