"""``taskplug status [KEY]`` without ``--resource``: what the local state DB knows of the executions ``taskplug
run`` drove — every execution's phase, or one execution's: its attempt and last reason, a map's elements by
phase, a workflow's phase and the tree of its nodes (each node's phase, attempt, the phase its task last
reported, its error).

A workflow's nodes are its node records (``workflow_state`` holds the phase the workflow gave the node,
flytepropeller's ``NodeStatus``), placed in the tree by their unique ids (see
:mod:`taskplug.cli._workflow_view`); the records hold no node names, so the nodes are shown by id. Nothing
is written but what opening the store writes (an older schema's upgrade, as ``run``'s): a file that is not
taskplug's is refused (exit 2) and left as it was; a missing one is an error naming it, never created.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.text import Text

from taskplug.cli._output import dump
from taskplug.cli._text import error_text
from taskplug.cli._workflow_view import (
    NodeView,
    WorkflowNodes,
    node_phase_name,
    workflow_phase_name,
)
from taskplug.core import Phase, SpecError
from taskplug.executor import ExecutionRecord, NodeRecord, SQLiteStateStore, check_state_file

__all__ = ["execution_status", "stored_keys"]


def stored_keys(state_db: Path) -> list[str]:
    """The keys of the executions a state DB holds, sorted (the file opened read-only)."""
    import sqlite3

    db = sqlite3.connect(f"{state_db.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return [row[0] for row in db.execute("SELECT key FROM executions ORDER BY key").fetchall()]
    except sqlite3.Error as e:
        raise SpecError("--state-db", f"{str(state_db)!r} cannot be read: {e}") from e
    finally:
        db.close()


def _open(state_db: Path) -> SQLiteStateStore:
    if not state_db.is_file() or state_db.stat().st_size == 0:
        raise SpecError(
            "--state-db", f"no state DB at {str(state_db)!r} (taskplug run --state-db FILE writes one there)"
        )
    check_state_file(state_db)
    return SQLiteStateStore(state_db)


def _find(target: str, keys: list[str], state_db: Path) -> str:
    """The key ``target`` names: a whole key, or an execution name alone when one execution has it."""
    if target in keys:
        return target
    named = [k for k in keys if k.split("/")[2:3] == [target]]
    if len(named) == 1:
        return named[0]
    if named:
        raise SpecError("KEY", f"{target!r} names several executions, give one's key: {', '.join(named)}")
    raise SpecError(
        "KEY", f"no execution {target!r} in state DB {str(state_db)!r} (taskplug status lists them)"
    )


def _kind(record: ExecutionRecord) -> str:
    if record.workflow_state is not None:
        return "workflow"
    return "map" if record.array is not None else "task"


def _phase(record: ExecutionRecord) -> str:
    """The execution's phase: a workflow's (Running, Failing, Succeeded…), a task's or a map's outcome once
    it has ended, else the phase its task last reported."""
    if record.workflow_state is not None:
        return workflow_phase_name(int(record.workflow_state.get("phase", 0)))
    if record.terminal:
        return record.outcome or "ended"
    return str(Phase(record.task_phase)) if record.task_phase in set(Phase) else f"Phase{record.task_phase}"


def _summary(store: SQLiteStateStore, key: str) -> dict[str, Any]:
    record = store.load(key)
    assert record is not None
    events = store.events(key)
    return {
        "execution": key,
        "kind": _kind(record),
        "phase": _phase(record),
        "terminal": record.terminal,
        "outcome": record.outcome or None,
        "updatedAt": next((e.occurred_at for e in reversed(events) if e.occurred_at), None),
    }


def _node_json(nodes: WorkflowNodes, view: NodeView) -> dict[str, Any]:
    out: dict[str, Any] = {"id": view.id, "phase": view.phase}
    if view.name:
        out["name"] = view.name
    if view.attempt is not None:
        out["attempt"] = view.attempt
        out["taskPhase"] = view.task_phase
    out["error"] = view.error
    if view.elements is not None:
        by_phase: dict[str, int] = {}
        for phase in view.elements.values():
            by_phase[phase] = by_phase.get(phase, 0) + 1
        out["elements"] = by_phase
    children = [nodes.nodes[c] for c in view.children]
    if children:
        out["nodes"] = [_node_json(nodes, c) for c in children]
    return out


def _details(store: SQLiteStateStore, key: str) -> tuple[dict[str, Any], WorkflowNodes | None]:
    record = store.load(key)
    assert record is not None
    document = _summary(store, key)
    document["attempt"] = record.attempt
    document["reason"] = record.reason
    document["error"] = record.error
    children: list[NodeRecord] = store.load_nodes(key)
    if record.workflow_state is not None:
        nodes = WorkflowNodes.from_records(children, workflow_state=record.workflow_state)
        nodes.name_nodes(store.events(key))
        document["workflowPhase"] = nodes.phase
        document["nodes"] = [_node_json(nodes, nodes.nodes[r]) for r in nodes.roots]
        return document, nodes
    if record.array is not None:
        by_phase: dict[str, int] = {}
        for child in children:
            name = node_phase_name(child.node_phase)
            by_phase[name] = by_phase.get(name, 0) + 1
        document["elements"] = by_phase
    return document, None


def execution_status(state_db: Path, target: str | None, *, as_json: bool) -> None:
    """Print the executions a state DB holds (``target`` None), or one execution's state."""
    store = _open(state_db)
    try:
        keys = stored_keys(state_db)
        if target is None:
            listed = [_summary(store, key) for key in keys]
            if as_json:
                click.echo(dump({"executions": listed}), nl=False)
                return
            _print_list(listed, state_db)
            return
        key = _find(target, keys, state_db)
        document, nodes = _details(store, key)
    finally:
        store.close()
    if as_json:
        click.echo(dump(document), nl=False)
    else:
        _print_details(document, nodes)


def _console() -> Console:
    return Console(markup=False, emoji=False, highlight=False)


def _print_list(listed: list[dict[str, Any]], state_db: Path) -> None:
    console = _console()
    if not listed:
        console.print(Text(f"no executions in {str(state_db)!r}"))
        return
    # The key last and whole: it is what the next command takes.
    console.print(Text(f"{'phase':<18} {'kind':<9} {'updated':<28} execution", style="bold"))
    for item in listed:
        console.print(
            Text(f"{item['phase']:<18} {item['kind']:<9} {item['updatedAt'] or '':<28} {item['execution']}"),
            soft_wrap=True,
        )


def _print_details(document: dict[str, Any], nodes: WorkflowNodes | None) -> None:
    console = _console()
    line = Text(f"{document['execution']}: {document['kind']} ")
    line.append(document["phase"], style="bold")
    if not document["terminal"]:
        line.append(" (not finished)")
    console.print(line)
    if nodes is not None:
        console.print(nodes.render(max_rows=10_000, header=False))
        return
    console.print(Text(f"attempt {document['attempt']}"))
    if document.get("elements"):
        counts = ", ".join(f"{n} {phase}" for phase, n in sorted(document["elements"].items()))
        console.print(Text(f"elements: {counts}"))
    if document["error"]:
        console.print(Text(f"error: {error_text(str(document['error'].get('message', '')))}", style="red"))
    elif document["reason"]:
        console.print(Text(f"last reason: {error_text(document['reason'])}"))
