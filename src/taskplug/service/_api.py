"""The JSON API, ``/api/v1`` (FastAPI, so the OpenAPI document at ``/api/v1/openapi.json`` is the reference).

``POST /executions`` submits (idempotent by key: 201 created, 200 when the key exists with the same spec, 409
when it exists with another); ``GET /executions`` lists newest first with filters and a keyset cursor;
``GET /executions/{key}`` and its ``/events``, ``/attempts``, ``/outputs``; ``POST /executions/{key}/abort``
(202 accepted and idempotent, 409 when already terminal); ``GET /executions/{key}/signals`` and ``POST
/executions/{key}/signals/{signal_id}`` (``{"value": <plain>}``, typed by the signal's type: a person's answer
to a gate node, flyteadmin's SignalService ListSignals / SetSignal); ``POST /executions/{key}/relaunch`` (201: a new
execution of the same task and inputs under a fresh name); ``GET /replicas``; ``/healthz``; ``/metrics``
(Prometheus text: every replica's samples labelled ``replica``, read from the rows the replicas refresh
with their heartbeat, so that any API server shows every replica's metrics).

A bad request names the field: ``{"error": {"message": ..., "field": "spec.template.container.image"}}``,
400 for a body that is not JSON, 413 past the size bound, 422 for a value (the CLI's exit-2 rules).
Flyte's admin API does this over gRPC (CreateExecution, ListExecutions, GetExecution, TerminateExecution);
this is its REST shape, with keys in place of admin's execution identifiers.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Annotated, Any, Final, Literal

import orjson
from fastapi import APIRouter, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from google.protobuf import json_format
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from pydantic import BaseModel, ConfigDict
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect

from taskplug.core import SpecError, describe_type, literal_to_plain, plain_to_literal
from taskplug.executor import SIGNAL_NOT_FOUND, Signal, SignalError, check_signal_value
from taskplug.service._api_nodes import ClosureCache, workflow_nodes
from taskplug.service._api_queries import ExecutionFilter, Row, ServiceDB
from taskplug.service._api_submit import (
    Submission,
    SubmitRequest,
    TaskTypeCheck,
    parse_submission,
    relaunch_submission,
)
from taskplug.service._auth import principal_of
from taskplug.service._web_render import PHASES, node_phase_name

__all__ = [
    "API_PREFIX",
    "ApiError",
    "Execution",
    "SignalOut",
    "api_error_handlers",
    "elements_view",
    "execution_view",
    "relaunch",
    "replica_state",
    "router",
    "signal_view",
]

API_PREFIX: Final = "/api/v1"
HEALTH_TIMEOUT: Final = 1.0
"""Seconds ``/healthz`` waits for a database connection before it answers 503."""
MAX_PAGE: Final = 500

router = APIRouter(prefix=API_PREFIX)


class ApiError(Exception):
    """An answer other than success: the status, a message for people, the field it is about."""

    def __init__(self, status: int, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field


def _error_response(status: int, message: str, field: str | None) -> JSONResponse:
    error: dict[str, Any] = {"message": message}
    if field is not None:
        error["field"] = field
    return JSONResponse({"error": error}, status_code=status)


async def _on_api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return _error_response(exc.status, exc.message, exc.field)


async def _on_validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
    return _error_response(422, str(first["msg"]), ".".join(str(p) for p in first["loc"]))


async def _on_http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return _error_response(exc.status_code, str(exc.detail), None)


api_error_handlers: Final = {
    ApiError: _on_api_error,
    RequestValidationError: _on_validation_error,
    # Starlette's, not FastAPI's subclass: the router's own 404/405 (a path no route matches, e.g. a key
    # holding a newline) are Starlette's, and they must answer in the same shape as every other error.
    HTTPException: _on_http_error,
}
"""Exception class → handler: every error the API answers is ``{"error": {"message", "field"}}``."""


# -- response models (they make the OpenAPI document) -----------------------------------------------------


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True)


class Owner(_Out):
    id: str
    host: str | None
    pid: int | None


class Execution(_Out):
    key: str
    id: int
    task_type: str
    plugin_id: str | None
    phase: str
    reason: str
    attempt: int
    terminal: bool
    aborting: bool
    labels: dict[str, Any]
    error: dict[str, Any] | None
    owner: Owner | None
    lease_epoch: int
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    abort_requested_at: datetime | None
    duration_seconds: float | None
    submitted_by: str | None
    """Who submitted (or relaunched) it: ``token:<name>``, ``proxy:<user>``, ``oidc:<email or sub>``, ``local``."""
    node: str | None  # the root node's path (``n0``) once a replica drove it
    cache_status: str | None = None  # a cacheable task's: CACHE_HIT, CACHE_POPULATED … (docs/cache.md)


class ExecutionPage(_Out):
    items: list[Execution]
    next_cursor: str | None


class ExecutionDetail(Execution):
    spec: dict[str, Any]


class EventOut(_Out):
    seq: int
    attempt: int
    phase: str
    version: int
    reason: str
    occurred_at: datetime | None
    recorded_at: datetime
    error: dict[str, Any] | None
    logs: list[dict[str, Any]] | None
    # A map task's event: the elements that changed (every element in a terminal event), as Flyte's
    # ExternalResourceInfo: externalId, index, retryAttempt, phase, logs and, when failing, reason.
    external_resources: list[dict[str, Any]] | None = None
    # Flyte's event kinds: "task" (a task attempt's phase), "node" (a workflow node's), "workflow" (the
    # workflow's own); ``node`` is the workflow node's unique id (None for the execution's own task).
    kind: str = "task"
    node: str | None = None
    # A cacheable task's catalog status at this event: status (CACHE_HIT …), key, source (docs/cache.md).
    cache: dict[str, Any] | None = None


class NodeOut(_Out):
    """One node of a workflow execution (flat: ``parent`` is the sub-workflow or branch node it runs under)."""

    id: str  # the node's unique id in the execution (``n1-0-n0`` below a node ``n1``)
    node_id: str  # its id in its workflow
    name: str
    kind: str  # task, array, branch, subworkflow, launchplan or gate
    parent: str | None
    phase: str  # propeller's node phase (NotYetStarted, Queued, Running, Succeeded, Failed, Skipped, …)
    attempts: int
    error: dict[str, Any] | None
    started_at: datetime | None
    updated_at: datetime | None
    logs: list[dict[str, Any]] | None  # the log links of its last attempt


class AttemptOut(_Out):
    attempt: int
    resource_name: str
    phase: str
    reason: str | None
    error: dict[str, Any] | None
    logs: list[dict[str, Any]] | None
    started_at: datetime | None
    finished_at: datetime | None


class Element(_Out):
    index: int
    node: str  # the element's node path, ``<root>/<index>``
    phase: str
    attempts: int
    reason: str | None
    error: dict[str, Any] | None
    logs: list[dict[str, Any]] | None


class Elements(_Out):
    total: int
    counts: dict[str, int]
    items: list[Element]


class Outputs(_Out):
    key: str
    phase: str
    outputs: dict[str, Any]


class SignalOut(_Out):
    """A gate's signal: what it waits for, and the value a person gave (None until then)."""

    signal_id: str
    type: dict[str, Any]
    """The signal's flyteidl LiteralType as JSON (``{"simple": "BOOLEAN"}`` for an approve gate)."""
    type_name: str
    """The type for people: ``BOOLEAN``, ``INTEGER``, ``list[STRING]``..."""
    is_set: bool
    value: Any = None
    """The value as a plain JSON value (shown by the signal's type), once set."""
    set_by: str | None = None
    """Who set it last: ``token:<name>``, ``oidc:<who>``, ``proxy:<user>``, ``local``."""
    updated_at: datetime | None = None


class SignalValue(BaseModel):
    """The body of a signal's set: the value, as a plain JSON value read by the signal's type (``true`` for
    an approve gate, ``3`` for an INTEGER, ``"text"`` for a STRING), or as flyteidl Literal JSON."""

    model_config = ConfigDict(extra="forbid")
    value: Any


class Replica(_Out):
    id: str
    host: str
    pid: int
    version: str
    capacity: int
    owned: int
    state: Literal["live", "silent", "fenced"]
    heartbeat_age_seconds: float
    started_at: datetime
    heartbeat_at: datetime
    fenced_at: datetime | None


class Health(_Out):
    status: str
    schema_version: int


class ErrorDetail(_Out):
    message: str
    field: str | None = None


class ErrorBody(_Out):
    """Every answer other than success."""

    error: ErrorDetail


_ERROR_MEANING: Final = {
    400: "The body is not JSON",
    404: "No execution has this key",
    408: "The body did not arrive within the server's body deadline",
    409: "Conflicts with the execution's state",
    413: "The body is larger than the server takes",
    415: "The body is not application/json",
    422: "A field is invalid: `error.field` names it",
    503: "The database does not answer",
}


def _errors(*statuses: int, meanings: dict[int, str] | None = None) -> dict[int | str, dict[str, Any]]:
    """The ``responses`` of a route for these error statuses and 503 (every route reads the database), each
    with the error body's schema (and ``meanings`` in place of the usual descriptions)."""
    said = meanings or {}
    return {
        status: {"model": ErrorBody, "description": said.get(status, _ERROR_MEANING[status])}
        for status in (*statuses, 503)
    }


def execution_view(row: Row) -> dict[str, Any]:
    """An execution row as the API shows it (and the web view renders it)."""
    owner = None
    if row["owner_id"] is not None:
        owner = {"id": str(row["owner_id"]), "host": row.get("owner_host"), "pid": row.get("owner_pid")}
    started, finished = row["started_at"], row["finished_at"]
    duration = (finished - started).total_seconds() if started is not None and finished is not None else None
    return {
        "key": row["key"],
        "id": row["id"],
        "task_type": row["task_type"],
        "plugin_id": row["plugin_id"],
        "phase": row["phase"],
        "reason": row.get("reason") or "",
        "attempt": row["attempt"],
        "terminal": row["terminal"],
        "aborting": row["abort_requested_at"] is not None and not row["terminal"],
        "labels": row["labels"] or {},
        "error": row["error"],
        "owner": owner,
        "lease_epoch": row["lease_epoch"],
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
        "started_at": started,
        "finished_at": finished,
        "abort_requested_at": row["abort_requested_at"],
        "duration_seconds": duration,
        "submitted_by": row.get("submitted_by"),
        "node": row.get("node"),
        "cache_status": row.get("cache_status"),
    }


def replica_state(row: Row, ttl: float) -> Literal["live", "silent", "fenced"]:
    """``fenced`` once the sweeper (or its own shutdown) fenced it; ``silent`` past the heartbeat ttl."""
    if row["fenced_at"] is not None:
        return "fenced"
    return "silent" if row["heartbeat_age"] > ttl else "live"


def _db(request: Request) -> ServiceDB:
    db: ServiceDB = request.app.state.db
    return db


async def _execution(request: Request, key: str, *, with_spec: bool = False) -> Row:
    row = await _db(request).get(key, with_spec=with_spec)
    if row is None:
        raise ApiError(404, f"no execution {key!r}", field="key")
    return row


# -- routes -----------------------------------------------------------------------------------------------


_SUBMIT_BODY: Final = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": SubmitRequest.model_json_schema()}},
    }
}


@router.post(
    "/executions",
    status_code=201,
    response_model=Execution,
    openapi_extra=_SUBMIT_BODY,
    responses={
        200: {"description": "The key existed: the execution it names"},
        **_errors(400, 408, 409, 413, 415, 422),
    },
)
async def submit_execution(request: Request, response: Response) -> dict[str, Any]:
    """Submit an execution; submitting the same key (with the same spec) again returns the existing one."""
    limit: int = request.app.state.max_body_bytes
    media_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media_type != "application/json":
        raise ApiError(415, f"the body must be application/json, not {media_type or 'untyped'}")
    body = await _read_bounded(request, limit)
    try:
        submission = parse_submission(body, max_bytes=limit, limits=request.app.state.submission_limits)
    except SpecError as e:
        status = 400 if e.path == "request body" else 422
        raise ApiError(status, e.reason, field=None if status == 400 else e.path) from None
    await _check_task_types(request, submission)
    row, created, same = await _db(request).submit(
        key=submission.key,
        task_type=submission.task_type,
        spec=submission.spec,
        labels=submission.labels,
        submitted_by=principal_of(request).identity,
    )
    if not created and not same:
        raise ApiError(
            409,
            f"execution {submission.key!r} exists with another spec or labels: submit it under another key",
            field="key",
        )
    if not created:
        response.status_code = 200
    return execution_view(row)


async def _check_task_types(request: Request, submission: Submission) -> None:
    """With ``--config``, every task type the submission runs (a workflow's tasks' too) must have a plugin."""
    task_types: TaskTypeCheck | None = request.app.state.task_types
    if task_types is None:
        return
    for task_type in submission.task_types or (submission.task_type,):
        refused = await asyncio.to_thread(task_types, task_type)
        if refused is not None:
            field = (
                "spec.template.type" if submission.task_type == task_type else "spec.workflowClosure.tasks"
            )
            raise ApiError(422, refused, field=field)


async def _read_bounded(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ApiError(413, f"the request body is larger than {limit} bytes")
    body = bytearray()
    try:
        async for chunk in request.stream():
            body += chunk
            if len(body) > limit:
                raise ApiError(413, f"the request body is larger than {limit} bytes")
    except ClientDisconnect:
        # The client went away mid-body, or the server's body deadline closed the connection: no one reads
        # an answer, but it is an answer, not a traceback.
        raise ApiError(408, "the request body did not arrive") from None
    return bytes(body)


@router.get("/executions", response_model=ExecutionPage, responses=_errors(422))
async def list_executions(
    request: Request,
    phase: Annotated[
        list[str] | None, Query(max_length=len(PHASES), description="Any of these phases")
    ] = None,
    task_type: Annotated[str | None, Query(max_length=256)] = None,
    since: Annotated[datetime | None, Query(description="Submitted at or after (ISO 8601)")] = None,
    q: Annotated[str | None, Query(max_length=256, description="Key contains")] = None,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
) -> dict[str, Any]:
    """Executions, newest first; ``next_cursor`` pages on."""
    unknown = sorted(set(phase or ()) - set(PHASES) - {""})
    if unknown:
        raise ApiError(422, f"unknown phase {unknown[0]!r} (one of {', '.join(PHASES)})", field="query.phase")
    flt = filter_from(phase, task_type, since, q)
    try:
        rows, next_cursor = await _db(request).page(flt, cursor=cursor, limit=limit)
    except ValueError as e:
        raise ApiError(422, str(e), field="query.cursor") from None
    return {"items": [execution_view(r) for r in rows], "next_cursor": next_cursor}


def filter_from(
    phases: list[str] | None, task_type: str | None, since: datetime | None, q: str | None
) -> ExecutionFilter:
    """The list filter of query parameters; a ``since`` without a zone is UTC."""
    if since is not None and since.tzinfo is None:
        since = since.replace(tzinfo=UTC)
    chosen = tuple(p for p in (phases or ()) if p)
    return ExecutionFilter(phases=chosen, task_type=task_type or None, since=since, q=q or None)


@router.get("/executions/{key:path}/events", response_model=list[EventOut], responses=_errors(404, 422))
async def execution_events(
    request: Request,
    key: str,
    after_seq: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=5000)] = 1000,
) -> list[Row]:
    """The execution's phase events in the order they were recorded (``seq``), after ``after_seq``."""
    row = await _execution(request, key)
    return await _db(request).events(row["id"], after_seq=after_seq, limit=limit)


@router.get("/executions/{key:path}/attempts", response_model=list[AttemptOut], responses=_errors(404, 422))
async def execution_attempts(request: Request, key: str) -> list[Row]:
    """One entry per attempt: the object or remote resource it created, its phase, error and log links."""
    row = await _execution(request, key)
    return await _db(request).attempts(row["id"])


@router.get("/executions/{key:path}/elements", response_model=Elements, responses=_errors(404, 422))
async def execution_elements(
    request: Request, key: str, limit: Annotated[int, Query(ge=0, le=5000)] = 500
) -> dict[str, Any]:
    """A map task's elements: counts by phase, and up to ``limit`` elements (failed ones first, then by
    index). Empty for a single task."""
    row = await _execution(request, key)
    return elements_view(*await _db(request).elements(row["id"], limit=limit))


def elements_view(counts: dict[int, int], rows: list[Row]) -> dict[str, Any]:
    """Element rows with their node phase by name (and counts by phase name)."""
    return {
        "total": sum(counts.values()),
        "counts": {node_phase_name(phase): n for phase, n in sorted(counts.items())},
        "items": [
            {
                "index": r["index"],
                "node": r["node"],
                "phase": node_phase_name(r["phase"] or 0),
                "attempts": r["attempts"] or 0,
                "reason": r["reason"],
                "error": r["error"] if isinstance(r["error"], dict) else None,
                "logs": r["logs"] if isinstance(r["logs"], list) else None,
            }
            for r in rows
        ],
    }


@router.get("/executions/{key:path}/nodes", response_model=list[NodeOut], responses=_errors(404, 422))
async def execution_nodes(request: Request, key: str) -> list[dict[str, Any]]:
    """A workflow's nodes, flat, in the workflow's order: each with its parent (the sub-workflow or branch
    node it runs under; null at the top level), phase, attempts, error, times and its last attempt's log
    links. Empty for a task or map task."""
    row = await _execution(request, key, with_spec=True)
    spec = row.get("spec")
    if row["task_type"] != "workflow" or not isinstance(spec, dict):
        return []
    closures: ClosureCache = request.app.state.closures
    try:
        closure = await asyncio.to_thread(closures.get, row["id"], spec)
    except SpecError as e:
        raise ApiError(422, f"execution {key!r}'s stored spec does not compile: {e}", field="key") from None
    if closure is None:
        return []
    db = _db(request)
    records = await db.node_records(row["id"])
    times = await db.node_times(row["id"])
    return workflow_nodes(closure, records, times)


@router.get("/executions/{key:path}/outputs", response_model=Outputs, responses=_errors(404, 409, 422))
async def execution_outputs(request: Request, key: str) -> dict[str, Any]:
    """The outputs as plain values once the execution succeeded; 409 before (or when it did not)."""
    row = await _execution(request, key)
    if row["outputs"] is None:
        state = "has not finished" if not row["terminal"] else f"ended {row['phase']}"
        raise ApiError(409, f"execution {key!r} has no outputs: it {state}")
    return {"key": row["key"], "phase": row["phase"], "outputs": row["outputs"]}


_SIGNAL_ERRORS: Final = {
    404: "No execution has this key, or it has no signal of this id (its gate has not started)",
    409: "The execution has ended: its gates wait for nothing",
    422: "The value is not one of the signal's type (`error.field` is `value`)",
}


def signal_view(signal: Signal, extra: Row | None = None) -> dict[str, Any]:
    """A signal as the API shows it."""
    extra = extra or {}
    return {
        "signal_id": signal.signal_id,
        "type": json_format.MessageToDict(signal.type),
        "type_name": describe_type(signal.type),
        "is_set": signal.value is not None,
        "value": None if signal.value is None else literal_to_plain(signal.value, signal.type),
        "set_by": extra.get("set_by"),
        "updated_at": extra.get("updated_at"),
    }


def _known(signals: Sequence[tuple[Signal, Row]]) -> str:
    ids = [signal.signal_id for signal, _ in signals]
    return f"its signals: {', '.join(repr(i) for i in ids)}" if ids else "it has no signals yet"


@router.get(
    "/executions/{key:path}/signals",
    response_model=list[SignalOut],
    responses=_errors(404, 422, meanings=_SIGNAL_ERRORS),
)
async def execution_signals(request: Request, key: str) -> list[dict[str, Any]]:
    """The signals the execution's gate nodes wait for (each created when its gate starts), by id, with their
    values once set."""
    row = await _execution(request, key)
    return [signal_view(signal, extra) for signal, extra in await _db(request).signals(row["id"])]


_SIGNAL_BODY: Final = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": SignalValue.model_json_schema()}},
    }
}


@router.post(
    "/executions/{key:path}/signals/{signal_id}",
    response_model=SignalOut,
    openapi_extra=_SIGNAL_BODY,
    responses=_errors(400, 404, 408, 409, 413, 415, 422, meanings=_SIGNAL_ERRORS),
)
async def set_execution_signal(request: Request, key: str, signal_id: str) -> dict[str, Any]:
    """Answer a gate: set the signal's value (``true``/``false`` approves or rejects an approve gate), which
    overwrites any earlier one and wakes the execution. Needs the ``submit`` role. The signal must exist
    (its gate has started) and the value must be of its type."""
    media_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media_type != "application/json":
        raise ApiError(415, f"the body must be application/json, not {media_type or 'untyped'}")
    body = await _read_bounded(request, request.app.state.max_body_bytes)
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as e:
        raise ApiError(400, f"the request body is not JSON: {e}") from None
    if not isinstance(document, dict) or "value" not in document:
        raise ApiError(422, 'the body must be {"value": <the signal\'s value>}', field="value")
    unknown = sorted(set(document) - {"value"})
    if unknown:
        raise ApiError(422, f'unknown field {unknown[0]!r} (the body is {{"value": ...}})', field=unknown[0])
    row = await _execution(request, key)
    signals = await _db(request).signals(row["id"])
    found = next((s for s, _ in signals if s.signal_id == signal_id), None)
    if found is None:
        raise ApiError(
            404,
            f"execution {key!r} has no signal {signal_id!r}: its gate has not started yet ({_known(signals)})",
            field="signal_id",
        )
    if row["terminal"]:
        raise ApiError(409, f"execution {key!r} has already ended {row['phase']}: its gates wait for nothing")
    type_name = describe_type(found.type)
    try:
        literal = plain_to_literal(document["value"], found.type, "value")
        check_signal_value(found, literal)
        await _db(request).set_signal(
            row["id"], key, signal_id, literal, set_by=principal_of(request).identity
        )
    except SpecError as e:
        raise ApiError(
            422, f"not a value of signal {signal_id!r}'s type {type_name}: {e.reason}", field="value"
        ) from None
    except SignalError as e:
        status = 404 if e.code == SIGNAL_NOT_FOUND else 422
        raise ApiError(status, str(e), field="signal_id" if status == 404 else "value") from None
    feed = getattr(request.app.state, "feed", None)
    if feed is not None:
        feed.publish({row["id"]})
    updated = next(
        (
            signal_view(s, extra)
            for s, extra in await _db(request).signals(row["id"])
            if s.signal_id == signal_id
        ),
        None,
    )
    if updated is None:  # deleted meanwhile (``taskplug gc``)
        raise ApiError(404, f"no execution {key!r}", field="key")
    return updated


@router.post(
    "/executions/{key:path}/abort",
    status_code=202,
    response_model=Execution,
    responses=_errors(404, 409, 422),
)
async def abort_execution(request: Request, key: str) -> dict[str, Any]:
    """Ask the replica driving the execution to abort it (it deletes what it created and ends it Aborted)."""
    outcome = await _db(request).abort(key)
    if outcome == "missing":
        raise ApiError(404, f"no execution {key!r}", field="key")
    row = await _execution(request, key)
    if outcome == "terminal":
        raise ApiError(409, f"execution {key!r} has already ended {row['phase']}: nothing to abort")
    feed = getattr(request.app.state, "feed", None)
    if feed is not None:
        feed.publish({row["id"]})
    return execution_view(row)


@router.post(
    "/executions/{key:path}/relaunch", status_code=201, response_model=Execution, responses=_errors(404, 422)
)
async def relaunch_execution(request: Request, key: str) -> dict[str, Any]:
    """A new execution of the same task with the same inputs under a fresh name, labelled ``relaunch-of``
    with this key (flyteadmin's RelaunchExecution). Any execution can be relaunched, running or ended."""
    return execution_view(await relaunch(request, key))


async def relaunch(request: Request, key: str) -> Row:
    """Submit a relaunch of ``key``; the new execution's row (:class:`ApiError` 404/422 otherwise)."""
    original = await _execution(request, key, with_spec=True)
    try:
        submission = relaunch_submission(original["spec"], original["labels"], of=key)
    except SpecError as e:
        raise ApiError(422, f"execution {key!r} cannot be relaunched: {e.reason}", field=e.path) from None
    row, _, _ = await _db(request).submit(
        key=submission.key,
        task_type=submission.task_type,
        spec=submission.spec,
        labels=submission.labels,
        submitted_by=principal_of(request).identity,
    )
    return row


@router.get("/executions/{key:path}", response_model=ExecutionDetail, responses=_errors(404, 422))
async def get_execution(request: Request, key: str) -> dict[str, Any]:
    """One execution, with the spec as submitted."""
    row = await _execution(request, key, with_spec=True)
    return execution_view(row) | {"spec": row["spec"]}


@router.get("/replicas", response_model=list[Replica], responses=_errors())
async def list_replicas(request: Request) -> list[dict[str, Any]]:
    """Every replica that registered, newest first, with its state as of its heartbeat."""
    ttl: float = request.app.state.replica_ttl
    return [replica_view(r, ttl) for r in await _db(request).replicas()]


def replica_view(row: Row, ttl: float) -> dict[str, Any]:
    return {
        "id": str(row["id"]),
        "host": row["host"],
        "pid": row["pid"],
        "version": row["version"],
        "capacity": row["capacity"],
        "owned": row["owned"],
        "state": replica_state(row, ttl),
        "heartbeat_age_seconds": round(max(row["heartbeat_age"], 0.0), 3),
        "started_at": row["started_at"],
        "heartbeat_at": row["heartbeat_at"],
        "fenced_at": row["fenced_at"],
    }


@router.get("/healthz", response_model=Health, responses=_errors())
async def healthz(request: Request) -> Any:
    """200 when the database answers (with its schema version); 503 when it does not."""
    try:
        # Probes give up after a second or two: answer within that, whatever the pool's own timeout.
        version = await _db(request).ping(connect_within=HEALTH_TIMEOUT)
    except Exception as e:  # any failure to reach the database is "unhealthy", reported, not raised
        return _error_response(503, f"the database does not answer: {type(e).__name__}", None)
    return {"status": "ok", "schema_version": version}


@router.get("/metrics", response_class=Response, responses=_errors())
async def metrics(request: Request) -> Response:
    """Prometheus text: each replica's samples with a ``replica`` label, and each replica's liveness."""
    ttl: float = request.app.state.replica_ttl
    rows = await _db(request).replicas()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_ReplicaSamples(rows, ttl))
    return Response(generate_latest(registry), media_type="text/plain; version=0.0.4; charset=utf-8")


_METRIC_NAME: Final = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL_NAME: Final = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


class _ReplicaSamples(Collector):
    """The replica rows' metric samples (``{name: [{labels, value}]}``) as metric families, each sample with
    the replica's id as its ``replica`` label; replicas that are fenced are left out (their numbers are
    history). A name or label a replica wrote that Prometheus cannot take is skipped, not an error."""

    def __init__(self, rows: list[Row], ttl: float) -> None:
        self.rows = rows
        self.ttl = ttl

    def collect(self) -> Any:
        up = GaugeMetricFamily(
            "taskplug_replica_up", "1 while the replica heartbeats within the ttl", labels=["replica", "host"]
        )
        owned = GaugeMetricFamily(
            "taskplug_replica_owned_executions", "Executions the replica drives", labels=["replica"]
        )
        families: dict[str, Metric] = {}
        for row in self.rows:
            replica = str(row["id"])
            state = replica_state(row, self.ttl)
            up.add_metric([replica, row["host"]], 1.0 if state == "live" else 0.0)
            if state == "fenced":
                continue
            owned.add_metric([replica], float(row["owned"]))
            samples = row["metrics"] if isinstance(row["metrics"], dict) else {}
            for name, entries in samples.items():
                if not _METRIC_NAME.match(name) or not isinstance(entries, list):
                    continue
                family = families.setdefault(name, Metric(name, f"{name}, per replica", "untyped"))
                for entry in entries:
                    sample = _sample(entry, replica)
                    if sample is not None:
                        family.add_sample(name, sample[0], sample[1])
        yield up
        yield owned
        yield from families.values()


def _sample(entry: object, replica: str) -> tuple[dict[str, str], float] | None:
    if not isinstance(entry, dict):
        return None
    value = entry.get("value")
    labels = entry.get("labels") or {}
    if isinstance(value, bool) or not isinstance(value, int | float) or not isinstance(labels, dict):
        return None
    clean = {str(k): str(v) for k, v in labels.items() if _LABEL_NAME.match(str(k)) and k != "replica"}
    return clean | {"replica": replica}, float(value)
