"""What the API server and the web view read from and write to the replicas' database: short statements only.

The server never drives an execution: it inserts a submitted one (``ON CONFLICT (key) DO NOTHING``, so that
submitting is idempotent), marks one for abort, sets a gate's signal (``taskplug_signal``), and reads what the replicas keep current (the execution row,
its events and attempts, the replica rows). Every write is followed by a NOTIFY in the same transaction, a
wake-up hint for the replicas (``taskplug_work``, ``taskplug_abort``, ``taskplug_signal``) and for other web
servers.

Lists are paged by keyset on ``(created_at, id)``, newest first: a page is one index range scan whatever the
page number, and an execution submitted while someone pages is never shown twice (Flyte's admin pages by
offset token; the keyset is what the PostgreSQL job queues' dashboards do).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Final, Literal

import orjson
from flyteidl.core import literals_pb2
from psycopg import sql
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from taskplug.executor import Signal, check_signal_value, signal_not_found
from taskplug.service._pgstore import LIST_SIGNALS, LOCK_SIGNAL, SET_SIGNAL, signal_of_row

__all__ = [
    "EXECUTION_COLUMNS",
    "AbortOutcome",
    "ExecutionFilter",
    "ServiceDB",
    "decode_cursor",
    "encode_cursor",
]

Row = dict[str, Any]

EXECUTION_COLUMNS: Final = (
    "id",
    "key",
    "task_type",
    "plugin_id",
    "labels",
    "phase",
    "attempt",
    "terminal",
    "outputs",
    "error",
    "abort_requested_at",
    "owner_id",
    "lease_epoch",
    "created_at",
    "updated_at",
    "started_at",
    "finished_at",
    "submitted_by",
)
"""The execution row's columns a view shows (not ``spec`` nor ``record``: those can be large)."""

_ELEMENT_PATH: Final = r"^[^/]+/[0-9]+$"
"""A map element's node path: a child of a node, named by its index."""

_OF_ROOT: Final = (
    "split_part(path, '/', 1) = coalesce((SELECT x.record->>'path' FROM taskplug_executions x"
    " WHERE x.id = %(id)s), split_part(path, '/', 1))"
)
"""The element is the root node's (a single map task's), not a workflow's map node's."""

_SELECT_EXECUTION: Final = sql.SQL(
    "SELECT {columns},"
    " (SELECT ev.reason FROM taskplug_events ev WHERE ev.execution_id = e.id ORDER BY ev.seq DESC LIMIT 1)"
    " AS reason,"
    " e.record->>'path' AS node,"  # the root node's path (NodeRecord's JSON), once a replica drove it
    " e.record->'cache'->>'status' AS cache_status,"  # a cacheable task's catalog status (NodeRecord's)
    " e.record->'cache'->>'source' AS cache_source,"  # a hit's: the execution (and node) that produced it
    " r.host AS owner_host, r.pid AS owner_pid"
    " FROM taskplug_executions e LEFT JOIN taskplug_replicas r ON r.id = e.owner_id"
).format(columns=sql.SQL(", ").join(sql.SQL("e.") + sql.Identifier(c) for c in EXECUTION_COLUMNS))

AbortOutcome = Literal["accepted", "terminal", "missing"]


@dataclasses.dataclass(frozen=True, slots=True)
class ExecutionFilter:
    """Which executions a list shows: any of ``phases`` (all when empty), one task type, submitted at or after
    ``since``, whose key contains ``q``."""

    phases: tuple[str, ...] = ()
    task_type: str | None = None
    since: datetime | None = None
    q: str | None = None

    def where(self) -> tuple[list[sql.Composable], dict[str, Any]]:
        clauses: list[sql.Composable] = []
        params: dict[str, Any] = {}
        if self.phases:
            clauses.append(sql.SQL("e.phase = ANY(%(phases)s)"))
            params["phases"] = list(self.phases)
        if self.task_type:
            clauses.append(sql.SQL("e.task_type = %(task_type)s"))
            params["task_type"] = self.task_type
        if self.since is not None:
            clauses.append(sql.SQL("e.created_at >= %(since)s"))
            params["since"] = self.since
        if self.q:
            clauses.append(sql.SQL("e.key ILIKE %(q)s ESCAPE '\\'"))
            params["q"] = "%" + _escape_like(self.q) + "%"
        return clauses, params


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def encode_cursor(row: Row) -> str:
    """The opaque position after ``row`` in a newest-first list."""
    raw = orjson.dumps([row["created_at"].isoformat(), row["id"]])
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, int]:
    """``(created_at, id)`` of a cursor; ValueError when it is not one :func:`encode_cursor` made."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        created_at, id_ = orjson.loads(raw)
        when = datetime.fromisoformat(created_at)
    except (binascii.Error, orjson.JSONDecodeError, TypeError, ValueError) as e:
        raise ValueError("not a cursor this server returned") from e
    if not isinstance(id_, int) or isinstance(id_, bool) or when.tzinfo is None:
        raise ValueError("not a cursor this server returned")
    return when, id_


class ServiceDB:
    """The API server's statements over a connection pool (psycopg 3, async)."""

    def __init__(self, pool: AsyncConnectionPool[Any]) -> None:
        self.pool = pool

    async def ping(self, *, connect_within: float | None = None) -> int:
        """The schema version; raises when the database cannot be reached (no pooled connection within
        ``connect_within`` seconds; the pool's own timeout when None)."""
        async with self.pool.connection(timeout=connect_within) as conn:
            cur = await conn.execute("SELECT coalesce(max(version), 0) FROM taskplug_schema")
            row = await cur.fetchone()
            return int(row[0]) if row else 0

    async def submit(
        self,
        *,
        key: str,
        task_type: str,
        spec: dict[str, Any],
        labels: dict[str, str],
        submitted_by: str | None = None,
    ) -> tuple[Row, bool, bool]:
        """Insert the execution unless ``key`` exists: (its row, whether it was created, whether an existing
        one was submitted with the same spec and labels). ``submitted_by``: the identity recorded on a new
        one (an existing one keeps its submitter's)."""
        while True:
            async with self.pool.connection() as conn, conn.transaction():
                cur = await conn.execute(
                    "INSERT INTO taskplug_executions (key, task_type, plugin_id, spec, labels, submitted_by)"
                    " VALUES (%s, %s, NULL, %s, %s, %s) ON CONFLICT (key) DO NOTHING RETURNING id",
                    (key, task_type, Jsonb(spec), Jsonb(labels), submitted_by),
                )
                created = await cur.fetchone() is not None
                if created:
                    await conn.execute("NOTIFY taskplug_work")
                cur = await conn.execute(
                    "SELECT spec = %s AND labels = %s FROM taskplug_executions WHERE key = %s",
                    (Jsonb(spec), Jsonb(labels), key),
                )
                same = await cur.fetchone()
            row = await self.get(key)
            if row is not None:
                return row, created, bool(same and same[0])
            # Only `taskplug gc` deletes an execution (one that finished long ago): it took the one this key
            # named between the statements above, so the key is free — submit again.

    async def page(
        self, flt: ExecutionFilter, *, cursor: str | None, limit: int
    ) -> tuple[list[Row], str | None]:
        """One page, newest first, and the cursor of the next page (None on the last)."""
        clauses, params = flt.where()
        if cursor is not None:
            created_at, id_ = decode_cursor(cursor)
            clauses.append(sql.SQL("(e.created_at, e.id) < (%(c_at)s, %(c_id)s)"))
            params |= {"c_at": created_at, "c_id": id_}
        query = (
            _SELECT_EXECUTION
            + _where(clauses)
            + sql.SQL(" ORDER BY e.created_at DESC, e.id DESC LIMIT %(n)s")
        )
        params["n"] = limit + 1
        rows = await self._rows(query, params)
        if len(rows) > limit:
            return rows[:limit], encode_cursor(rows[limit - 1])
        return rows, None

    async def by_ids(self, ids: Sequence[int], flt: ExecutionFilter | None = None) -> list[Row]:
        """The executions among ``ids`` that match ``flt``, newest first."""
        clauses, params = flt.where() if flt is not None else ([], {})
        clauses.append(sql.SQL("e.id = ANY(%(ids)s)"))
        params["ids"] = list(ids)
        query = _SELECT_EXECUTION + _where(clauses) + sql.SQL(" ORDER BY e.created_at DESC, e.id DESC")
        return await self._rows(query, params)

    async def get(self, key: str, *, with_spec: bool = False) -> Row | None:
        query = _SELECT_EXECUTION + sql.SQL(" WHERE e.key = %(key)s")
        rows = await self._rows(query, {"key": key})
        if not rows:
            return None
        row = rows[0]
        if with_spec:
            spec_rows = await self._rows(
                sql.SQL("SELECT spec FROM taskplug_executions WHERE id = %(id)s"), {"id": row["id"]}
            )
            row["spec"] = spec_rows[0]["spec"] if spec_rows else None
        return row

    async def events(self, execution_id: int, *, after_seq: int = 0, limit: int = 1000) -> list[Row]:
        return await self._rows(
            sql.SQL(
                "SELECT seq, attempt, phase, version, reason, occurred_at, recorded_at, error, logs,"
                " external_resources, kind, node, cache"
                " FROM taskplug_events WHERE execution_id = %(id)s AND seq > %(after)s ORDER BY seq LIMIT %(n)s"
            ),
            {"id": execution_id, "after": after_seq, "n": limit},
        )

    async def attempts(self, execution_id: int) -> list[Row]:
        return await self._rows(
            sql.SQL(
                "SELECT attempt, resource_name, phase, reason, error, logs, started_at, finished_at"
                " FROM taskplug_attempts WHERE execution_id = %(id)s ORDER BY attempt"
            ),
            {"id": execution_id},
        )

    async def elements(self, execution_id: int, *, limit: int = 500) -> tuple[dict[int, int], list[Row]]:
        """A map task's elements: how many are in each node phase, and the first ``limit`` by index (failed
        ones first: they are what a person looks for)."""
        # A map task's elements are its root node's children, ``<root>/<index>`` (NodeRecord's JSON keys); a
        # workflow's map nodes' elements are children of those nodes, not of the root: not listed here.
        counts = await self._rows(
            sql.SQL(
                "SELECT (record->>'node_phase')::int AS phase, count(*) AS n FROM taskplug_nodes"
                " WHERE execution_id = %(id)s AND path ~ %(child)s AND " + _OF_ROOT + " GROUP BY 1"
            ),
            {"id": execution_id, "child": _ELEMENT_PATH},
        )
        rows = await self._rows(
            sql.SQL(
                "SELECT split_part(path, '/', 2)::int AS index, path AS node,"
                " (record->>'node_phase')::int AS phase, (record->>'attempt')::int AS attempts,"
                " record->>'reason' AS reason, record->'error' AS error, record->'logs' AS logs"
                " FROM taskplug_nodes WHERE execution_id = %(id)s AND path ~ %(child)s AND "
                + _OF_ROOT
                + " ORDER BY (record->'error' IS NULL OR record->'error' = 'null'::jsonb),"
                " split_part(path, '/', 2)::int LIMIT %(n)s"
            ),
            {"id": execution_id, "child": _ELEMENT_PATH, "n": limit},
        )
        return {int(r["phase"] or 0): int(r["n"]) for r in counts}, rows

    async def node_records(self, execution_id: int) -> dict[str, dict[str, Any]]:
        """A workflow's node records (``workflow_state`` set: its nodes, not its maps' elements) by path."""
        rows = await self._rows(
            sql.SQL(
                "SELECT path, record FROM taskplug_nodes WHERE execution_id = %(id)s"
                " AND record ? 'workflow_state' AND record->'workflow_state' <> 'null'::jsonb"
            ),
            {"id": execution_id},
        )
        return {r["path"]: r["record"] for r in rows if isinstance(r["record"], dict)}

    async def node_times(self, execution_id: int) -> dict[str, tuple[datetime | None, datetime | None]]:
        """When each node's first and last events were recorded, by the node's unique id."""
        rows = await self._rows(
            sql.SQL(
                "SELECT node, min(recorded_at) AS first, max(recorded_at) AS last FROM taskplug_events"
                " WHERE execution_id = %(id)s AND node IS NOT NULL GROUP BY node"
            ),
            {"id": execution_id},
        )
        return {r["node"]: (r["first"], r["last"]) for r in rows}

    async def abort(self, key: str) -> AbortOutcome:
        """Ask the owner to abort ``key``: idempotent while it runs (the first request's time is kept)."""
        async with self.pool.connection() as conn, conn.transaction():
            cur = await conn.execute(
                "UPDATE taskplug_executions SET abort_requested_at = coalesce(abort_requested_at, now())"
                " WHERE key = %s AND NOT terminal RETURNING id",
                (key,),
            )
            if await cur.fetchone() is not None:
                await conn.execute("SELECT pg_notify('taskplug_abort', %s)", (key,))
                return "accepted"
            cur = await conn.execute("SELECT 1 FROM taskplug_executions WHERE key = %s", (key,))
            return "terminal" if await cur.fetchone() is not None else "missing"

    async def signals(self, execution_id: int) -> list[tuple[Signal, Row]]:
        """The execution's gate signals by id, each with who set it last and when (``set_by``,
        ``updated_at``)."""
        async with self.pool.connection() as conn:
            cur = await conn.execute(LIST_SIGNALS, {"id": execution_id})
            rows = await cur.fetchall()
        return [(signal_of_row(sid, t, v), {"set_by": by, "updated_at": at}) for sid, t, v, by, at in rows]

    async def set_signal(
        self, execution_id: int, key: str, signal_id: str, value: literals_pb2.Literal, *, set_by: str | None
    ) -> None:
        """Set (overwrite) the value of a signal of execution ``execution_id`` (row key ``key``), with its NOTIFY
        in the transaction; :class:`~taskplug.executor.SignalError` when the signal does not exist or the
        value is not castable to its type. Not fenced: the owner does not answer its gates."""
        async with self.pool.connection() as conn, conn.transaction():
            cur = await conn.execute(LOCK_SIGNAL, {"id": execution_id, "signal": signal_id})
            row = await cur.fetchone()
            if row is None:
                raise signal_not_found(key, signal_id)
            check_signal_value(signal_of_row(signal_id, row[0], None), value)
            await conn.execute(
                SET_SIGNAL,
                {
                    "id": execution_id,
                    "signal": signal_id,
                    "value": value.SerializeToString(),
                    "by": set_by,
                    "key": row[1],
                },
            )

    async def replicas(self) -> list[Row]:
        """Every replica row, newest first, with its heartbeat's age in database time."""
        return await self._rows(
            sql.SQL(
                "SELECT id, host, pid, version, capacity, owned, metrics, started_at, heartbeat_at, fenced_at,"
                " extract(epoch FROM now() - heartbeat_at)::float8 AS heartbeat_age"
                " FROM taskplug_replicas ORDER BY started_at DESC, id"
            ),
            {},
        )

    async def _rows(self, query: sql.Composable, params: dict[str, Any]) -> list[Row]:
        async with self.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(query, params)
            return list(await cur.fetchall())


def _where(clauses: list[sql.Composable]) -> sql.Composable:
    if not clauses:
        return sql.SQL("")
    return sql.SQL(" WHERE ") + sql.SQL(" AND ").join(clauses)
