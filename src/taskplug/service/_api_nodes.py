"""A workflow execution's nodes as the API lists them (``GET /api/v1/executions/{key}/nodes``).

What flyteadmin's ``ListNodeExecutions`` answers from its node-execution table (``pkg/manager/impl/
node_execution_manager.go``; the unique ids of propeller's ``nodes/common/utils.go``), read here from what a
replica keeps: every node that started has a record among the execution's node records (``taskplug_nodes``,
path = the node's unique id, its phase in ``workflow_state``), and every node event names its node. Which
nodes there are, their names and kinds, and which node is whose parent come from the workflow itself: its
stored spec compiled (:class:`ClosureCache`), as the replica that runs it compiled it, so the ids are the ones
it walks. The list is flat, in the workflow's order, each node naming its ``parent`` (a
sub-workflow or branch node's unique id; None at the top level). A node that has not started is listed as
``NotYetStarted`` with no attempt; a branch's taken case is listed under it (and the cases not taken, once
their records say Skipped); a map node's elements are not nodes here (``/elements`` lists a single map
task's; a workflow's map node shows its own phase).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any, Final

from flyteidl.core import compiler_pb2, identifier_pb2, workflow_pb2

from taskplug.executor import NodePhase, parse_spec, unique_node_id

__all__ = ["MAX_LISTED_NODES", "ClosureCache", "node_kind", "workflow_nodes"]

MAX_LISTED_NODES: Final = 10_000
"""The most nodes one answer lists (a submission's node count is bounded by ``executor.limits.max-nodes``)."""

_HIDDEN: Final = frozenset({"start-node", "end-node"})
_PHASE_NUMBERS: Final = frozenset(int(p) for p in NodePhase)


def node_kind(node: workflow_pb2.Node) -> str:
    """What a node runs: ``task``, ``array`` (a map task), ``branch``, ``subworkflow``, ``launchplan`` or
    ``gate``."""
    target = node.WhichOneof("target")
    if target == "workflow_node":
        return "launchplan" if node.workflow_node.HasField("launchplan_ref") else "subworkflow"
    return {"task_node": "task", "array_node": "array", "branch_node": "branch", "gate_node": "gate"}.get(
        str(target), str(target or "unknown")
    )


def workflow_nodes(
    closure: compiler_pb2.CompiledWorkflowClosure,
    records: Mapping[str, Mapping[str, Any]],
    times: Mapping[str, tuple[datetime | None, datetime | None]],
) -> list[dict[str, Any]]:
    """The nodes of the workflow execution that runs ``closure`` (as compiled from its stored spec: the ids
    the replica walks, branch cases renamed ``<branch>-<case>``): ``records`` are its node records' JSON by
    path, ``times`` the first and last time an event of each node was recorded."""
    subs = {_key(sub.template.id): sub.template for sub in closure.sub_workflows}
    out: list[dict[str, Any]] = []
    for node, unique, parent in _walk(closure.primary.template.nodes, None, subs, records, ()):
        if len(out) >= MAX_LISTED_NODES:
            break
        out.append(_entry(node, unique, parent, records.get(unique), times.get(unique)))
    return out


class ClosureCache:
    """The compiled closures of the workflow executions whose nodes were listed lately, by execution row id (a
    stored spec never changes, and compiling one is the costly part of a listing)."""

    def __init__(self, size: int = 64) -> None:
        self.size = size
        self._closures: OrderedDict[int, compiler_pb2.CompiledWorkflowClosure] = OrderedDict()

    def get(self, row_id: int, spec: Mapping[str, Any]) -> compiler_pb2.CompiledWorkflowClosure | None:
        """The compiled closure of the stored ``spec`` of execution row ``row_id``; None when it is no
        workflow. Raises :class:`~taskplug.core.SpecError` when the stored spec no longer compiles. Blocking:
        call it from a thread."""
        found = self._closures.get(row_id)
        if found is not None:
            self._closures.move_to_end(row_id)
            return found
        if "workflowClosure" not in spec:
            return None
        parsed = parse_spec(spec, source="api", fresh_name=False)
        if parsed.workflow is None:
            return None
        closure = parsed.workflow.closure
        self._closures[row_id] = closure
        while len(self._closures) > self.size:
            self._closures.popitem(last=False)
        return closure


def _walk(
    nodes: Iterator[workflow_pb2.Node] | Any,
    parent: str | None,
    subs: Mapping[str, workflow_pb2.WorkflowTemplate],
    records: Mapping[str, Mapping[str, Any]],
    calling: tuple[str, ...],
) -> Iterator[tuple[workflow_pb2.Node, str, str | None]]:
    """Every node below ``parent`` (depth first, in the template's order), with its unique id and parent's."""
    for node in nodes:
        if node.id in _HIDDEN:
            continue
        unique = unique_node_id(parent, 0, node.id)
        yield node, unique, parent
        target = node.WhichOneof("target")
        if target == "workflow_node" and node.workflow_node.HasField("sub_workflow_ref"):
            key = _key(node.workflow_node.sub_workflow_ref)
            sub = subs.get(key)
            if sub is not None and key not in calling:  # a cycle is refused at compile; never loop here
                yield from _walk(sub.nodes, unique, subs, records, (*calling, key))
        elif target == "branch_node":
            state = (records.get(unique) or {}).get("workflow_state") or {}
            taken = state.get("taken") if isinstance(state, Mapping) else None
            for case in _cases(node.branch_node.if_else):
                # The taken case, and the others once they have a record (Skipped, when the executor keeps one).
                if case.id == taken or unique_node_id(unique, 0, case.id) in records:
                    yield from _walk([case], unique, subs, records, calling)


def _cases(if_else: workflow_pb2.IfElseBlock) -> Iterator[workflow_pb2.Node]:
    yield if_else.case.then_node
    for other in if_else.other:
        yield other.then_node
    if if_else.WhichOneof("default") == "else_node":
        yield if_else.else_node


def _entry(
    node: workflow_pb2.Node,
    unique: str,
    parent: str | None,
    record: Mapping[str, Any] | None,
    times: tuple[datetime | None, datetime | None] | None,
) -> dict[str, Any]:
    state = (record or {}).get("workflow_state")
    number = state.get("phase") if isinstance(state, Mapping) else None
    started = isinstance(number, int) and number > 0
    phase = str(NodePhase(number)) if isinstance(number, int) and number in _PHASE_NUMBERS else None
    error = (record or {}).get("error")
    logs = (record or {}).get("logs")
    first, last = times or (None, None)
    return {
        "id": unique,
        "node_id": node.id,
        "name": node.metadata.name or node.id,
        "kind": node_kind(node),
        "parent": parent,
        "phase": phase or "NotYetStarted",
        "attempts": int((record or {}).get("attempt") or 0) + 1 if started else 0,
        "error": error if isinstance(error, dict) else None,
        "started_at": _when((record or {}).get("queued_at")) or first,
        "updated_at": last,
        "logs": logs if isinstance(logs, list) else None,
    }


def _when(epoch: Any) -> datetime | None:
    if isinstance(epoch, int | float) and not isinstance(epoch, bool):
        return datetime.fromtimestamp(epoch, UTC)
    return None


def _key(identifier: identifier_pb2.Identifier) -> str:
    return str(identifier.SerializeToString(deterministic=True).hex())
