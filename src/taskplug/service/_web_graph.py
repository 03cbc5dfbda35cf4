"""The workflow graph of an execution page: the compiled workflow's nodes laid out in layers, with no I/O.

A workflow execution's page draws its compiled closure (``CompiledWorkflowClosure``): the primary workflow's
nodes and the edges of its ``connections``, each node coloured by the phase its node record holds
(``taskplug_nodes``: ``workflow_state.phase``, a propeller ``NodePhase``), with its attempts, error and log
links. A sub-workflow node's children are its workflow's nodes under the node's unique id, a branch node's are
its cases (the taken one ran), and records below a task node that the closure does not name are a dynamic
node's children; each such node gets a graph of its own that the page expands. A launch-plan node links to the
execution it started (``workflow_state.child``), a gate node carries its signal (``workflow_state.gate`` or
the gate's own signal id) so the page can offer Approve/Reject or a value form while it waits.

The layout is a layered one: a node's layer is the longest path to it from the start node, and the nodes of a
layer are ordered by the mean row of their upstream nodes (one barycentre pass), which keeps most edges short
and uncrossed. The unique ids follow flytepropeller/pkg/controller/nodes/common/utils.go (``GenerateUniqueID``,
as ``taskplug.executor.nodes`` derives them): a top-level node's id is its node id, a child's is
``<parent unique id>-<parent attempt>-<node id>``, hashed past 20 characters. Flyte's console lays its graph
out in the browser; this one is laid out here and drawn as server-rendered SVG (the page's policy allows no
inline style, and SVG's position attributes are not styles).

A dynamic node's nodes are placed by their ids alone: their workflow is compiled by the node at run time and
kept in the data store, so their edges and names are not drawn (each shows its node id).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from flyteidl.core import compiler_pb2, identifier_pb2, workflow_pb2

from taskplug.compiler import END_NODE_ID, START_NODE_ID, literal_type_to_str
from taskplug.k8s import fixed_length_unique_id
from taskplug.service._web_render import group_of, node_phase_name

__all__ = [
    "NODE_HEIGHT",
    "NODE_WIDTH",
    "SMALL_WIDTH",
    "GateView",
    "GraphView",
    "NodeView",
    "WorkflowView",
    "layers",
    "unique_id",
    "workflow_view",
]

NODE_WIDTH: Final = 168
NODE_HEIGHT: Final = 46
SMALL_WIDTH: Final = 60
_COLUMN: Final = 212
_ROW: Final = 66
_MARGIN: Final = 14
_MAX_NAME: Final = 20
_MAX_DEPTH: Final = 32  # nested sub-workflows drawn; the compiler refuses deeper nesting long before
_UNIQUE_ID_LENGTH: Final = 20
_CHILD_JOINT: Final = re.compile(r"-[0-9]+-")
"""Between a parent's unique id and its child's node id: the parent's attempt."""


def _phase_name(number: object) -> str:
    if isinstance(number, int) and not isinstance(number, bool):
        return node_phase_name(number)
    return "NotYetStarted"


def unique_id(parent: str | None, parent_attempt: int, node_id: str) -> str:
    """A node's unique id within its execution (the path of its node record)."""
    text = node_id if parent is None else f"{parent}-{parent_attempt}-{node_id}"
    return fixed_length_unique_id(text, _UNIQUE_ID_LENGTH)


@dataclass(frozen=True, slots=True)
class GateView:
    """What a gate node waits for: an approval, a typed value (``type``, the output it becomes), or time."""

    kind: str  # approve | signal | sleep
    signal_id: str
    type: str = ""
    output: str = ""


@dataclass(slots=True)
class NodeView:
    """One node as the page shows it; ``x``/``y`` place its box in its graph."""

    id: str
    node_id: str
    name: str
    kind: str
    phase: str = "NotYetStarted"
    attempts: int = 0
    error: Mapping[str, Any] | None = None
    logs: list[Any] = field(default_factory=list)
    reason: str = ""
    child_execution: str | None = None
    cache: str | None = None  # a cacheable task node's catalog status (CACHE_HIT, CACHE_POPULATED …)
    cache_source: str | None = None  # a hit's: the execution that produced the outputs
    gate: GateView | None = None
    elements: dict[str, int] = field(default_factory=dict)
    children: GraphView | None = None
    taken: bool = False  # a branch case that ran
    x: int = 0
    y: int = 0

    @property
    def label(self) -> str:
        return self.name if len(self.name) <= _MAX_NAME else self.name[: _MAX_NAME - 1] + "…"

    @property
    def small(self) -> bool:
        """The start and end nodes: drawn as small rounded marks in the middle of their box."""
        return self.kind in ("start", "end")

    @property
    def left(self) -> int:
        """Where edges come in."""
        return self.x + (NODE_WIDTH - SMALL_WIDTH) // 2 if self.small else self.x

    @property
    def right(self) -> int:
        """Where edges leave."""
        return self.x + (NODE_WIDTH + SMALL_WIDTH) // 2 if self.small else self.x + NODE_WIDTH


@dataclass(frozen=True, slots=True)
class EdgeView:
    source: str
    target: str
    path: str  # the SVG path's ``d``


@dataclass(slots=True)
class GraphView:
    """The nodes of one workflow (or a branch's cases, a dynamic node's children) and their edges."""

    id: str  # the parent node's unique id; "" for the execution's own workflow
    title: str
    nodes: list[NodeView]
    edges: list[EdgeView]
    width: int
    height: int


@dataclass(slots=True)
class WorkflowView:
    graph: GraphView
    subgraphs: list[GraphView]
    """Every expandable node's children graph, outermost first."""
    nodes: list[NodeView]
    """Every node of every graph (the side panel's entries)."""

    def phases_json(self) -> str:
        """``{unique id: [phase, badge group, 1 for a branch case taken]}`` of every node, as JSON: what the
        page's ``graph.js`` sets on the drawn nodes when the live stream sends it."""
        return json.dumps(
            {n.id: [n.phase, group_of(n.phase), int(n.taken)] for n in self.nodes}, separators=(",", ":")
        )


def layers(nodes: Iterable[str], downstream: Mapping[str, Iterable[str]]) -> dict[str, tuple[int, int]]:
    """``(layer, row)`` of each node: its layer the longest path to it (from the nodes nothing points at), its
    row its place in the layer, ordered by its upstream nodes' mean row (then by the order given)."""
    order = list(dict.fromkeys(nodes))
    known = set(order)
    edges = {n: [d for d in dict.fromkeys(downstream.get(n, ())) if d in known and d != n] for n in order}
    incoming = {n: 0 for n in order}
    for targets in edges.values():
        for d in targets:
            incoming[d] += 1
    depth = dict.fromkeys(order, 0)
    ready = [n for n in order if incoming[n] == 0]
    seen: set[str] = set()
    while ready:
        n = ready.pop(0)
        seen.add(n)
        for d in edges[n]:
            depth[d] = max(depth[d], depth[n] + 1)
            incoming[d] -= 1
            if incoming[d] == 0:
                ready.append(d)
    # A cycle (never in a compiled workflow) leaves its nodes where their longest path so far put them.
    upstream: dict[str, list[str]] = {n: [] for n in order}
    for n, targets in edges.items():
        for d in targets:
            upstream[d].append(n)
    rows: dict[str, int] = {}
    place: dict[str, tuple[int, int]] = {}
    for layer in sorted(set(depth.values())):
        members = [n for n in order if depth[n] == layer]

        def centre(n: str, members: list[str] = members) -> tuple[float, int]:
            above = [rows[u] for u in upstream[n] if u in rows]
            return (sum(above) / len(above) if above else float("inf"), members.index(n))

        for row, n in enumerate(sorted(members, key=centre)):
            rows[n] = row
            place[n] = (layer, row)
    return place


def _kind(node: workflow_pb2.Node) -> str:
    target = node.WhichOneof("target")
    if node.id == START_NODE_ID:
        return "start"
    if node.id == END_NODE_ID:
        return "end"
    if target == "workflow_node":
        return "sub-workflow" if node.workflow_node.HasField("sub_workflow_ref") else "launch plan"
    return {"branch_node": "branch", "gate_node": "gate", "array_node": "map", "task_node": "task"}.get(
        target or "", target or "node"
    )


def _cases(node: workflow_pb2.Node) -> list[workflow_pb2.Node]:
    block = node.branch_node.if_else
    cases = [block.case.then_node, *(c.then_node for c in block.other)]
    if block.WhichOneof("default") == "else_node":
        cases.append(block.else_node)
    return [c for c in cases if c.id]


def _gate(node: workflow_pb2.Node, state: Mapping[str, Any]) -> GateView | None:
    if node.WhichOneof("target") != "gate_node":
        return None
    gate = node.gate_node
    given = state.get("gate")
    which = gate.WhichOneof("condition")
    if which == "approve":
        return GateView("approve", str(given or gate.approve.signal_id))
    if which == "signal":
        return GateView(
            "signal",
            str(given or gate.signal.signal_id),
            literal_type_to_str(gate.signal.type),
            gate.signal.output_variable_name,
        )
    return GateView("sleep", str(given or ""))


def _key(identifier: identifier_pb2.Identifier) -> tuple[str, str, str, str]:
    return (identifier.project, identifier.domain, identifier.name, identifier.version)


class _Builder:
    def __init__(
        self,
        closure: compiler_pb2.CompiledWorkflowClosure,
        records: Mapping[str, Mapping[str, Any]],
        elements: Mapping[str, Mapping[str, int]],
    ) -> None:
        self.sub_workflows = {_key(w.template.id): w for w in closure.sub_workflows}
        self.records = records
        self.elements = elements
        self.claimed: set[str] = set()
        self.subgraphs: list[GraphView] = []
        self.all: list[NodeView] = []

    def graph(
        self,
        graph_id: str,
        title: str,
        nodes: list[workflow_pb2.Node],
        downstream: Mapping[str, Iterable[str]],
        parent: str | None,
        depth: int,
        taken: str | None = None,
    ) -> GraphView:
        views = [self.node(n, parent, depth) for n in nodes]
        for node, view in zip(nodes, views, strict=True):
            view.taken = node.id == taken
        by_node = {n.id: v for n, v in zip(nodes, views, strict=True)}
        return _placed(graph_id, title, views, by_node, downstream)

    def node(self, node: workflow_pb2.Node, parent: str | None, depth: int) -> NodeView:
        unique = unique_id(parent, 0, node.id)
        self.claimed.add(unique)
        record = self.records.get(unique) or {}
        state = record.get("workflow_state") or {}
        if not isinstance(state, Mapping):
            state = {}
        error = record.get("error") or state.get("error")
        logs = record.get("logs")
        child = state.get("child")
        view = NodeView(
            id=unique,
            node_id=node.id,
            name=node.metadata.name or node.id,
            kind=_kind(node),
            phase=_phase_name(state.get("phase")) if record else "NotYetStarted",
            attempts=int(record.get("attempt") or 0) + 1 if record and state else 0,
            error=error if isinstance(error, Mapping) else None,
            logs=list(logs) if isinstance(logs, list) else [],
            reason=str(record.get("reason") or ""),
            child_execution=str(child) if isinstance(child, str) and child else None,
            cache=_cache(record).get("status"),
            cache_source=(_cache(record).get("source") or "").partition("#")[0] or None,
            gate=_gate(node, state),
            elements=dict(self.elements.get(unique, {})),
        )
        self.all.append(view)
        if depth >= _MAX_DEPTH:
            return view
        target = node.WhichOneof("target")
        if target == "workflow_node" and node.workflow_node.HasField("sub_workflow_ref"):
            compiled = self.sub_workflows.get(_key(node.workflow_node.sub_workflow_ref))
            if compiled is not None:
                view.children = self._nested(
                    unique,
                    f"{view.name} (sub-workflow {compiled.template.id.name})",
                    list(compiled.template.nodes),
                    {k: v.ids for k, v in compiled.connections.downstream.items()},
                    depth,
                )
        elif target == "branch_node":
            taken = state.get("taken")
            view.children = self._nested(
                unique,
                f"{view.name} (branch: its cases)",
                _cases(node),
                {},
                depth,
                taken=str(taken) if taken else None,
            )
        return view

    def _nested(
        self,
        unique: str,
        title: str,
        nodes: list[workflow_pb2.Node],
        downstream: Mapping[str, Iterable[str]],
        depth: int,
        taken: str | None = None,
    ) -> GraphView:
        # Appended before its own children's graphs: outermost first.
        slot = len(self.subgraphs)
        self.subgraphs.append(GraphView(unique, title, [], [], 0, 0))
        graph = self.graph(unique, title, nodes, downstream, unique, depth + 1, taken)
        self.subgraphs[slot] = graph
        return graph

    def dynamic(self) -> None:
        """Records the closure does not name, placed under the node whose unique id leads theirs
        (``<parent>-<attempt>-<node id>``): a ``@dynamic`` task node's nodes, and the nodes below those. A
        record whose id was hashed (past 20 characters) names no parent and is not drawn."""
        placed = {v.id: v for v in self.all}
        loose = sorted(p for p in self.records if p not in self.claimed and "/" not in p)
        loose_set = set(loose)
        groups: dict[str, list[str]] = {}
        for path in loose:
            for m in reversed(list(_CHILD_JOINT.finditer(path))):
                parent = path[: m.start()]
                if parent in loose_set or (parent in placed and placed[parent].kind == "task"):
                    groups.setdefault(parent, []).append(path)
                    break
        views: dict[str, NodeView] = {}

        def view_of(path: str, parent: str) -> NodeView:
            record = self.records[path]
            state = record.get("workflow_state") or {}
            if not isinstance(state, Mapping):
                state = {}
            error = record.get("error") or state.get("error")
            logs = record.get("logs")
            node_id = _CHILD_JOINT.split(path[len(parent) :], maxsplit=1)[-1]
            kind = {START_NODE_ID: "start", END_NODE_ID: "end"}.get(node_id, "node")
            view = NodeView(
                id=path,
                node_id=node_id,
                name=str(record.get("name") or node_id),  # its node events' name, when they gave one
                kind=kind,
                phase=_phase_name(state.get("phase")),
                attempts=int(record.get("attempt") or 0) + 1,
                error=error if isinstance(error, Mapping) else None,
                logs=list(logs) if isinstance(logs, list) else [],
                reason=str(record.get("reason") or ""),
                elements=dict(self.elements.get(path, {})),
            )
            self.claimed.add(path)
            self.all.append(view)
            return view

        for parent in sorted(groups, key=len):  # outer first: their graphs come first
            owner = placed.get(parent) or views.get(parent)
            if owner is None:
                continue
            children = [view_of(p, parent) for p in groups[parent]]
            views.update((c.id, c) for c in children)
            by_node = {c.id: c for c in children}
            # Their edges are in the dynamic workflow (kept in the data store), not here: layers only.
            starts = [c.id for c in children if c.kind == "start"]
            ends = [c.id for c in children if c.kind == "end"]
            middle = [c.id for c in children if c.kind not in ("start", "end")]
            order = {n: middle or ends for n in starts} | {n: ends for n in middle}
            title = f"{owner.name} ({'dynamic' if owner.kind == 'task' else 'its nodes'})"
            owner.children = _placed(parent, title, children, by_node, order, draw_edges=False)
            self.subgraphs.append(owner.children)


def _placed(
    graph_id: str,
    title: str,
    views: list[NodeView],
    by_node: Mapping[str, NodeView],
    downstream: Mapping[str, Iterable[str]],
    *,
    draw_edges: bool = True,
) -> GraphView:
    place = layers(by_node, downstream)
    width = height = 0
    for node_id, view in by_node.items():
        layer, row = place[node_id]
        view.x = _MARGIN + layer * _COLUMN
        view.y = _MARGIN + row * _ROW
        width = max(width, view.x + NODE_WIDTH + _MARGIN)
        height = max(height, view.y + NODE_HEIGHT + _MARGIN)
    edges: list[EdgeView] = []
    for source, targets in downstream.items() if draw_edges else ():
        a = by_node.get(source)
        if a is None:
            continue
        for target in dict.fromkeys(targets):
            b = by_node.get(target)
            if b is None or b is a:
                continue
            x1, y1 = a.right, a.y + NODE_HEIGHT // 2
            x2, y2 = b.left, b.y + NODE_HEIGHT // 2
            bend = max((x2 - x1) // 2, 20)
            edges.append(EdgeView(a.id, b.id, f"M{x1},{y1} C{x1 + bend},{y1} {x2 - bend},{y2} {x2 - 6},{y2}"))
    edges.sort(key=lambda e: (e.source, e.target))
    return GraphView(graph_id, title, views, edges, max(width, 200), max(height, 60))


def _cache(record: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """A node record's catalog use (``status``, ``source``), empty when the node is not cacheable."""
    cache = (record or {}).get("cache")
    return cache if isinstance(cache, Mapping) else {}


def workflow_view(
    closure: compiler_pb2.CompiledWorkflowClosure,
    records: Mapping[str, Mapping[str, Any]],
    elements: Mapping[str, Mapping[str, int]] | None = None,
) -> WorkflowView:
    """The graph of ``closure`` with the phases of ``records`` (node record JSON by path) and the map nodes'
    element counts (phase name → count, by map node path)."""
    builder = _Builder(closure, records, elements or {})
    primary = closure.primary
    graph = builder.graph(
        "",
        primary.template.id.name,
        list(primary.template.nodes),
        {k: v.ids for k, v in primary.connections.downstream.items()},
        None,
        0,
    )
    builder.dynamic()
    return WorkflowView(graph, builder.subgraphs, builder.all)
