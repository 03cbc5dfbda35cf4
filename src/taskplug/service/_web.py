"""The web view: server-rendered pages (Jinja2) that read without JavaScript, kept live by htmx over SSE.

``/executions`` lists executions newest first with filters in the URL (a plain GET form: the Back button
restores a filter) and keyset pages; its table body listens on ``/executions/stream`` and is re-rendered when
an execution it shows, or one that now matches its filter, changes. ``/executions/{key}`` shows one
execution: header (phase, reason, times, owner replica, links to the execution it was relaunched from and to
the one whose launch plan launched it),
controls (Abort with a confirmation; Relaunch once it ended, with a confirmation page), for a workflow its
graph (:mod:`._web_graph`: nodes coloured by phase, expandable sub-workflows and branches, a panel per node),
phase history, a card per attempt (error, log links, the object it created), a timeline, inputs and outputs,
and the spec as submitted; each section is re-sent over ``/executions/{key}/stream`` when the execution
changes, the controls only when what they offer does (a button swapped for a copy while it is pressed loses
the click). The graph itself is drawn once: the stream re-sends only its nodes' phases (``graph.js`` sets
them as attributes) and the panels' status parts, so a button or a node being clicked is never swapped away.
``/replicas`` shows the replica rows. What changed comes from the process's :class:`~._web_feed.Feed`.

Flyte's console polls every 10 s (``executionRefreshIntervalMs``); these pages follow the database's
notifications instead, so a phase change shows as soon as the replica commits it.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import AsyncIterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Final
from urllib.parse import parse_qsl, urlencode

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from flyteidl.core import compiler_pb2
from jinja2 import Environment
from psycopg import sql
from psycopg.rows import dict_row
from sse_starlette import EventSourceResponse, ServerSentEvent

from taskplug.core import TaskplugError
from taskplug.executor import unique_node_id
from taskplug.service._api import ApiError, elements_view, execution_view, filter_from, relaunch, replica_view
from taskplug.service._api_queries import ExecutionFilter, Row, ServiceDB, decode_cursor
from taskplug.service._web_feed import EVERYTHING, Feed
from taskplug.service._web_graph import WorkflowView, workflow_view
from taskplug.service._web_render import node_phase_name, timeline

__all__ = ["WINDOWS", "router"]

router = APIRouter(include_in_schema=False)

WINDOWS: Final = {
    "15m": timedelta(minutes=15),
    "1h": timedelta(hours=1),
    "24h": timedelta(days=1),
    "7d": timedelta(days=7),
}
"""The list's time windows (``?window=1h``): submitted within."""

PAGE: Final = 50
PING_SECONDS: Final = 15
WORKFLOW_TYPE: Final = "workflow"
"""The task type of a workflow execution's row (its spec's ``template`` stands for the workflow)."""
_CLOSURES_KEPT: Final = 64
_RETRY_UNREADABLE_SECONDS: Final = 30.0
_MAX_NODE_ROWS: Final = 20_000


def _db(request: Request) -> ServiceDB:
    db: ServiceDB = request.app.state.db
    return db


def _feed(request: Request) -> Feed:
    feed: Feed = request.app.state.feed
    return feed


def _env(request: Request) -> Environment:
    env: Environment = request.app.state.templates
    return env


def _render(request: Request, name: str, status: int = 200, **context: Any) -> HTMLResponse:
    context.setdefault("viewer", request.scope.get("state", {}).get("principal"))  # who is signed in
    return HTMLResponse(_env(request).get_template(name).render(**context), status_code=status)


def _fragment(request: Request, name: str, **context: Any) -> str:
    return _env(request).get_template(name).render(**context)


@router.get("/")
async def home() -> Response:
    return RedirectResponse("/executions", status_code=307)


class _ListQuery:
    """The list page's query parameters, checked; ``query()`` rebuilds them for links."""

    def __init__(
        self,
        phase: list[str] | None,
        task_type: str | None,
        q: str | None,
        window: str | None,
        cursor: str | None,
    ) -> None:
        self.phases = [p for p in (phase or []) if p]
        self.task_type = task_type or ""
        self.q = q or ""
        self.window = window if window in WINDOWS else ""
        self.cursor = cursor or None
        if self.cursor is not None:
            try:
                decode_cursor(self.cursor)
            except ValueError:
                self.cursor = None

    def filter(self) -> ExecutionFilter:
        since = datetime.now(UTC) - WINDOWS[self.window] if self.window else None
        return filter_from(self.phases, self.task_type, since, self.q)

    def query(self, *, cursor: str | None = None) -> str:
        pairs = [("phase", p) for p in self.phases]
        pairs += [
            (k, v) for k, v in (("task_type", self.task_type), ("q", self.q), ("window", self.window)) if v
        ]
        if cursor:
            pairs.append(("cursor", cursor))
        return urlencode(pairs)


def _list_query(
    phase: Annotated[list[str] | None, Query(max_length=32)] = None,
    task_type: Annotated[str | None, Query(max_length=256)] = None,
    q: Annotated[str | None, Query(max_length=256)] = None,
    window: Annotated[str | None, Query(max_length=8)] = None,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
) -> _ListQuery:
    return _ListQuery(phase, task_type, q, window, cursor)


async def _rows(request: Request, query: _ListQuery) -> tuple[list[dict[str, Any]], str | None]:
    rows, next_cursor = await _db(request).page(query.filter(), cursor=query.cursor, limit=PAGE)
    return [execution_view(r) for r in rows], next_cursor


@router.get("/executions", response_class=HTMLResponse)
async def executions_page(
    request: Request, query: Annotated[_ListQuery, Depends(_list_query)]
) -> HTMLResponse:
    rows, next_cursor = await _rows(request, query)
    return _render(
        request,
        "executions.html",
        rows=rows,
        query=query,
        windows=list(WINDOWS),
        stream_url="/executions/stream?" + query.query(cursor=query.cursor),
        next_url=f"/executions?{query.query(cursor=next_cursor)}" if next_cursor else None,
        newest_url=f"/executions?{query.query()}" if query.cursor else None,
    )


@router.get("/executions/stream")
async def executions_stream(
    request: Request, query: Annotated[_ListQuery, Depends(_list_query)]
) -> EventSourceResponse:
    """The list's rows, re-sent when one it shows (or one that now matches its filter) changes."""
    return EventSourceResponse(_rows_events(request, query), ping=PING_SECONDS)


def _stream_reads(request: Request) -> asyncio.Semaphore:
    """What a live stream holds while it reads: the streams together use at most half the pool."""
    reads: asyncio.Semaphore = request.app.state.stream_reads
    return reads


async def _rows_events(request: Request, query: _ListQuery) -> AsyncIterator[ServerSentEvent]:
    async with _feed(request).subscribe() as sub:
        async with _stream_reads(request):
            rows, _ = await _rows(request, query)
        shown = sub.watch = frozenset(r["id"] for r in rows)
        # Sent at once: whatever changed between the page's render and this connection shows now.
        yield ServerSentEvent(_fragment(request, "_rows.html", rows=rows), event="rows")
        while True:
            changed = await sub.next(PING_SECONDS)
            if not changed:
                continue
            async with _stream_reads(request):
                if (
                    changed != EVERYTHING
                    and not (changed & shown)
                    and not await _matches(request, query, changed)
                ):
                    continue
                rows, _ = await _rows(request, query)
            shown = sub.watch = frozenset(r["id"] for r in rows)
            yield ServerSentEvent(_fragment(request, "_rows.html", rows=rows), event="rows")


async def _matches(request: Request, query: _ListQuery, changed: frozenset[int]) -> bool:
    """Whether a changed execution belongs on this page now (its filter, and older than its cursor)."""
    hits = await _db(request).by_ids(sorted(changed), query.filter())
    if query.cursor is None:
        return bool(hits)
    position = decode_cursor(query.cursor)
    return any((r["created_at"], r["id"]) < position for r in hits)


async def _detail(request: Request, key: str) -> dict[str, Any] | None:
    """Everything the execution page shows, or None when there is no such execution."""
    db = _db(request)
    row = await db.get(key, with_spec=True)
    if row is None:
        return None
    events = await db.events(row["id"])
    attempts = await db.attempts(row["id"])
    elements = elements_view(*await db.elements(row["id"], limit=200))
    for item in elements["items"]:
        # The element's unique node id, which its pods' attempt annotation (and so its kept log) names.
        root = str(item["node"] or "n0").partition("/")[0]
        item["log_node"] = unique_node_id(root, int(row["attempt"] or 0), f"n{item['index']}")
    spec = row["spec"] if isinstance(row["spec"], dict) else {}
    workflow, problem, event_nodes = await _workflow(request, row, spec, events)
    ex = execution_view(row)
    ex["cache_source"] = _cache_source(row.get("cache_source"))
    return {
        "workflow": workflow,
        "workflow_problem": problem,
        "event_nodes": event_nodes,
        "ex": ex,
        "outputs": row["outputs"],
        "inputs": spec.get("inputs"),
        "spec": spec,
        "events": events,
        "attempts": attempts,
        "bars": timeline(row, attempts),
        "elements": elements,
        "controls": _controls_of(ex),
    }


_SECTIONS: Final = ("header", "elements", "events", "attempts", "timeline", "outputs")

_CONTROLS: Final = ("abort", "aborting", "relaunch")
"""What the page's controls offer, in the only order an execution goes through them."""


def _controls_of(ex: Row) -> str:
    """What the controls section offers for the execution ``ex`` (one of :data:`_CONTROLS`)."""
    if ex["terminal"]:
        return "relaunch"
    return "aborting" if ex["aborting"] else "abort"


def _cache_source(source: Any) -> str | None:
    """The execution whose outputs a cache hit reused (a catalog entry's source: ``<key>`` or ``<key>#<node>``)."""
    return str(source).partition("#")[0] or None if source else None


def is_workflow(row: Mapping[str, Any], spec: Mapping[str, Any]) -> bool:
    """Whether an execution row is a workflow's: its task type says so, or its spec holds a compiled one."""
    return row.get("task_type") == WORKFLOW_TYPE or "workflowClosure" in spec


async def _workflow(
    request: Request, row: Mapping[str, Any], spec: Mapping[str, Any], events: list[dict[str, Any]]
) -> tuple[WorkflowView | None, str | None, bool]:
    """A workflow execution's graph with its nodes' phases, or why there is none (None, None: not one); and
    whether ``events`` were given their ``node`` and ``kind``."""
    if not is_workflow(row, spec):
        return None, None, False
    closure = await _closure(request, row, spec)
    records, elements, event_nodes = await _node_records(request, row["id"], events)
    if isinstance(closure, str):
        return None, closure, event_nodes
    return workflow_view(closure, records, elements), None, event_nodes


_Closures = collections.OrderedDict[tuple[int, str], tuple[compiler_pb2.CompiledWorkflowClosure | str, float]]
"""The compiled workflows (or why not) by execution, with when each was read."""


async def _closure(
    request: Request, row: Mapping[str, Any], spec: Mapping[str, Any]
) -> compiler_pb2.CompiledWorkflowClosure | str:
    """The compiled workflow of an execution's spec, as a replica reads it (``parse_spec``: the spec's
    ``templateFile`` read and compiled, or the ``workflowClosure`` it holds), kept per execution: a spec never
    changes. A text saying why when it cannot be read here (tried again after a while: a file may appear)."""
    kept: _Closures | None = getattr(request.app.state, "workflow_closures", None)
    cache = kept if kept is not None else collections.OrderedDict()
    request.app.state.workflow_closures = cache
    key = (int(row["id"]), str(row["created_at"]))
    found = cache.get(key)
    now = time.monotonic()
    if found is None or (isinstance(found[0], str) and now - found[1] > _RETRY_UNREADABLE_SECONDS):
        # Reading a file and compiling are blocking work: off the event loop.
        found = (await asyncio.to_thread(_read_closure, dict(spec), str(row["key"])), now)
        cache[key] = found
        while len(cache) > _CLOSURES_KEPT:
            cache.popitem(last=False)
    cache.move_to_end(key)
    return found[0]


def _read_closure(spec: dict[str, Any], key: str) -> compiler_pb2.CompiledWorkflowClosure | str:
    from taskplug.executor import parse_spec  # the executor's parser, loaded by the first workflow page

    try:
        parsed = parse_spec(spec, source=f"execution {key}", fresh_name=False)
    except TaskplugError as e:
        return str(e)
    if parsed.workflow is None:
        return "its spec is not a workflow this server can read"
    return parsed.workflow.closure


_NODE_ROWS: Final = (
    "SELECT path, record->'workflow_state' AS workflow_state, record->'attempt' AS attempt,"
    " record->'error' AS error, record->'logs' AS logs, record->>'reason' AS reason,"
    " record->'cache' AS cache"
    " FROM taskplug_nodes WHERE execution_id = %(id)s AND strpos(path, '/') = 0 ORDER BY path LIMIT %(n)s"
)
_ELEMENT_COUNTS: Final = (
    "SELECT split_part(path, '/', 1) AS parent, (record->>'node_phase')::int AS phase, count(*) AS n"
    " FROM taskplug_nodes WHERE execution_id = %(id)s AND strpos(path, '/') > 0 GROUP BY 1, 2"
)
_EVENT_COLUMNS: Final = (
    "SELECT column_name::text AS name FROM information_schema.columns WHERE table_schema = current_schema()"
    " AND table_name = 'taskplug_events' AND column_name IN ('kind', 'node', 'name')"
)
# The log links a node's last events carried (task events tagged with their node, once events have a node).
_EVENT_LOGS: Final = (
    "SELECT DISTINCT ON (node) node::text AS node, logs FROM taskplug_events"
    " WHERE execution_id = %(id)s AND node IS NOT NULL AND jsonb_typeof(logs) = 'array'"
    " AND jsonb_array_length(logs) > 0 ORDER BY node, seq DESC"
)
# The names node events gave their nodes (once events have a name): a @dynamic node's nodes are named by them.
_EVENT_NAMES: Final = (
    "SELECT DISTINCT ON (node) node::text AS node, name::text AS name FROM taskplug_events"
    " WHERE execution_id = %(id)s AND node IS NOT NULL AND name IS NOT NULL ORDER BY node, seq DESC"
)


async def _node_records(
    request: Request, execution_id: int, events: list[dict[str, Any]]
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, int]], bool]:
    """The workflow's node records by path (the fields the graph shows), its map nodes' element counts (node
    phase name → count, by map node path), and whether events name their node: then each of ``events`` gets
    its ``node`` and ``kind``."""
    params = {"id": execution_id, "n": _MAX_NODE_ROWS}
    async with _db(request).pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(_NODE_ROWS, params)
        records = {str(r.pop("path")): r for r in await cur.fetchall()}
        await cur.execute(_ELEMENT_COUNTS, params)
        elements: dict[str, dict[str, int]] = {}
        for r in await cur.fetchall():
            counts = elements.setdefault(str(r["parent"]), {})
            name = node_phase_name(int(r["phase"] or 0))
            counts[name] = counts.get(name, 0) + int(r["n"])
        # Events gain their node and kind in a later schema: asked of the catalog, so this reads either one.
        await cur.execute(_EVENT_COLUMNS)
        columns = {str(r["name"]) for r in await cur.fetchall()}
        if "node" in columns:
            await cur.execute(_EVENT_LOGS, params)
            for r in await cur.fetchall():
                record = records.get(str(r["node"]))
                if record is not None and not record.get("logs"):
                    record["logs"] = r["logs"]
            if events:
                kind = sql.SQL("kind::text") if "kind" in columns else sql.SQL("NULL::text")
                await cur.execute(
                    sql.SQL(
                        "SELECT seq, node::text AS node, {kind} AS kind FROM taskplug_events"
                        " WHERE execution_id = %(id)s AND seq = ANY(%(seqs)s)"
                    ).format(kind=kind),
                    {"id": execution_id, "seqs": [e["seq"] for e in events]},
                )
                tags = {int(r["seq"]): r for r in await cur.fetchall()}
                for e in events:
                    tag = tags.get(int(e["seq"]))
                    e["node"], e["kind"] = (tag["node"], tag["kind"]) if tag is not None else (None, None)
        if "name" in columns:
            await cur.execute(_EVENT_NAMES, params)
            for r in await cur.fetchall():
                record = records.get(str(r["node"]))
                if record is not None:
                    record["name"] = r["name"]
    return records, elements, "node" in columns


@router.get("/executions/{key:path}/stream")
async def execution_stream(
    request: Request, key: str, controls: Annotated[str | None, Query(max_length=16)] = None
) -> Response:
    """The execution page's sections (header, events, attempts, timeline, outputs), re-sent on change; its
    controls (Abort, Relaunch) only when what they offer differs from ``controls``, what the page shows."""
    row = await _db(request).get(key)
    if row is None:
        return Response(status_code=404)
    shown = controls if controls in _CONTROLS else None
    return EventSourceResponse(_detail_events(request, key, row["id"], shown), ping=PING_SECONDS)


async def _detail_events(
    request: Request, key: str, execution_id: int, controls: str | None
) -> AsyncIterator[ServerSentEvent]:
    async with _feed(request).subscribe() as sub:
        sub.watch = frozenset({execution_id})
        changed: frozenset[int] = EVERYTHING
        while True:
            if changed == EVERYTHING or execution_id in changed:
                async with _stream_reads(request):
                    context = await _detail(request, key)
                if context is None:
                    return
                for section in _SECTIONS:
                    yield ServerSentEvent(_fragment(request, f"_{section}.html", **context), event=section)
                if context["workflow"] is not None:
                    yield ServerSentEvent(_fragment(request, "_graph_live.html", **context), event="graph")
                # Not re-sent while it offers the same: a swap while its button is pressed loses the click
                # (the browser clicks nothing when the element pressed is gone at release).
                if context["controls"] != controls:
                    controls = context["controls"]
                    yield ServerSentEvent(_fragment(request, "_controls.html", **context), event="controls")
            changed = await sub.next(PING_SECONDS)


@router.post("/executions/{key:path}/abort")
async def abort_from_page(request: Request, key: str) -> Response:
    """Abort from the page: with htmx the new controls and, out of band, the new header; without JavaScript,
    back to the execution's page."""
    outcome = await _db(request).abort(key)
    if outcome == "missing":
        return _render(request, "missing.html", status=404, key=key)
    context = await _detail(request, key)
    if context is None:
        return _render(request, "missing.html", status=404, key=key)
    _feed(request).publish({context["ex"]["id"]})
    if request.headers.get("hx-request") == "true":
        header = _fragment(request, "_header.html", **context)
        return HTMLResponse(
            _fragment(request, "_controls.html", **context)
            + f'<div id="header" hx-swap-oob="innerHTML">{header}</div>'
        )
    return RedirectResponse(f"/executions/{key}", status_code=303)


@router.post("/executions/{key:path}/relaunch")
async def relaunch_from_page(request: Request, key: str) -> Response:
    """Relaunch from the page (a plain form, with or without JavaScript): first a page that asks, as Abort
    asks, whose form confirms (``confirm=yes``); then on to the new execution's page."""
    if not await _confirmed(request):
        if await _db(request).get(key) is None:
            return _render(request, "missing.html", status=404, key=key)
        return _render(request, "relaunch.html", key=key)
    try:
        row = await relaunch(request, key)
    except ApiError as e:
        if e.status == 404:
            return _render(request, "missing.html", status=404, key=key)
        message = f"{e.field}: {e.message}" if e.field else e.message
        return _render(request, "refused.html", status=e.status, key=key, message=message)
    _feed(request).publish({row["id"]})
    return RedirectResponse(f"/executions/{row['key']}", status_code=303)


async def _confirmed(request: Request) -> bool:
    """Whether the form says ``confirm=yes`` (a urlencoded body of a few bytes; a larger one is not a
    confirmation form)."""
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/x-www-form-urlencoded":
        return False
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > 1024:
            return False
    return ("confirm", "yes") in parse_qsl(body.decode("latin-1"))


@router.get("/executions/{key:path}", response_class=HTMLResponse)
async def execution_page(request: Request, key: str) -> HTMLResponse:
    context = await _detail(request, key)
    if context is None:
        return _render(request, "missing.html", status=404, key=key)
    return _render(request, "execution.html", **context)


async def _replica_rows(request: Request) -> list[Row]:
    ttl: float = request.app.state.replica_ttl
    return [replica_view(r, ttl) for r in await _db(request).replicas()]


@router.get("/replicas", response_class=HTMLResponse)
async def replicas_page(request: Request, fragment: bool = False) -> HTMLResponse:
    """The replicas; with ``fragment`` only the table (the page refreshes it every 2 s: heartbeats do not
    notify)."""
    replicas = await _replica_rows(request)
    if fragment:
        return HTMLResponse(_fragment(request, "_replicas.html", replicas=replicas))
    return _render(request, "replicas.html", replicas=replicas)
