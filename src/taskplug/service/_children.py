"""Launch-plan children on replicas: a child execution is a row of its own, which any replica may claim.

A launch-plan node starts a child execution (``taskplug.executor``'s workflow node). One process runs the
child itself; replicas must not, or the child would live in one replica's memory only — invisible to the
API, and started afresh by whichever replica takes the parent over. So a replica writes the child down as
the API writes a submission: a row in ``taskplug_executions`` whose spec is the self-contained document
:func:`~taskplug.executor.child_document` makes from the parent's, labelled ``parent-execution`` with the
parent's key, submitted by the parent's submitter. Any replica claims it (``NOTIFY taskplug_work``), drives
it, and commits its end; a trigger (migration 0010) then sends ``NOTIFY taskplug_child``, and the replica
driving the parent reads the child's record and wakes the parent, which takes the child's outputs from the
shared data root as a single process does. The launch is idempotent (``ON CONFLICT DO NOTHING``): a parent
resumed on another replica launches again and finds its child. The replica's reconcile re-reads the children
it waits for, in case a notification was missed.

Flyte's counterpart: propeller's launch-plan handler asks flyteadmin to create the child
(``pkg/controller/nodes/subworkflow/launchplan/admin.go``: ``CreateExecution``, ``AlreadyExists`` taken as
success) and polls it (``GetExecution``); flyteadmin records the parent node execution on the child.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

import orjson
import psycopg
from psycopg.types.json import Jsonb

from taskplug.core import TaskplugError
from taskplug.executor import ExecutionRecord, ExecutionSpec, child_document

__all__ = ["CHILD_CHANNEL", "PARENT_LABEL", "ChildRows"]

log = logging.getLogger(__name__)

PARENT_LABEL: Final = "parent-execution"
"""The label a launch-plan node's child execution carries: its parent execution's key."""

CHILD_CHANNEL: Final = "taskplug_child"
"""The NOTIFY channel a child's end is announced on (``{"parent": key, "child": key}``)."""

_INSERT: Final = """
INSERT INTO taskplug_executions (key, task_type, plugin_id, spec, labels, submitted_by)
SELECT %(key)s, %(task_type)s, NULL, %(spec)s, %(labels)s,
       (SELECT submitted_by FROM taskplug_executions WHERE key = %(parent)s)
ON CONFLICT (key) DO NOTHING RETURNING id
"""
_READ: Final = "SELECT key, record, terminal, phase, error FROM taskplug_executions WHERE key = ANY(%s)"
_ABORT: Final = """
UPDATE taskplug_executions SET abort_requested_at = coalesce(abort_requested_at, now()), updated_at = now()
 WHERE key = %s AND NOT terminal RETURNING id
"""


class ChildRows:
    """One replica incarnation's :class:`~taskplug.executor.ChildExecutions` (see the module docstring).

    ``row_key`` gives the row key of an execution this replica drives (its API key, which may differ from
    its executor key). :attr:`documents` holds the spec document of each workflow execution the replica
    drives: a child is written from its parent's."""

    def __init__(self, dsn: str, row_key: Callable[[str], str | None]) -> None:
        self.dsn = dsn
        self._row_key = row_key
        self.documents: dict[str, Mapping[str, Any]] = {}
        self._records: dict[str, ExecutionRecord] = {}
        self._parents: dict[str, str] = {}  # child key -> parent (executor key)
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._lock = asyncio.Lock()
        self._aborts: set[asyncio.Task[None]] = set()

    # -- ChildExecutions ---------------------------------------------------------------------------------------
    async def launch(self, spec: ExecutionSpec, *, parent: str) -> None:
        document = self.documents.get(parent)
        if document is None:
            raise TaskplugError(
                f"execution {parent}: its spec is not held by this replica, so its launch plan's child cannot "
                "be written down",
                code="RuntimeExecutionError",
            )
        key = spec.execution_key
        parent_row = self._row_key(parent) or parent
        params = {
            "key": key,
            "task_type": spec.template.type,
            "spec": Jsonb(child_document(document, spec)),
            "labels": Jsonb({PARENT_LABEL: parent_row}),
            "parent": parent_row,
        }
        async with self._lock:
            conn = await self._connection()
            async with conn.transaction():
                cur = await conn.execute(_INSERT, params)
                if await cur.fetchone() is not None:
                    await conn.execute("NOTIFY taskplug_work")
                    log.info("launched %s, a child of %s", key, parent_row)
        self._parents[key] = parent
        await self.refresh((key,))

    def record(self, key: str) -> ExecutionRecord | None:
        return self._records.get(key)

    def abort(self, key: str) -> None:
        task = asyncio.get_running_loop().create_task(self._abort(key))
        self._aborts.add(task)
        task.add_done_callback(self._aborts.discard)

    # -- what the replica tells it -----------------------------------------------------------------------------
    async def refresh(self, keys: Iterable[str]) -> list[str]:
        """Read the rows of children ``keys`` again; the parents (executor keys) of those that have ended."""
        wanted = list(keys)
        if not wanted:
            return []
        async with self._lock:
            conn = await self._connection()
            cur = await conn.execute(_READ, (wanted,))
            rows = await cur.fetchall()
        ended = []
        for key, record_json, terminal, phase, error in rows:
            record = ExecutionRecord.from_json(record_json) if record_json else ExecutionRecord(key=key)
            if terminal and not record.terminal:
                # A row failed before any replica ran it (its spec could not be read): its end is the row's.
                record = ExecutionRecord(key=key, terminal=True, outcome=phase, error=error)
            self._records[key] = record
            if record.terminal and key in self._parents:
                ended.append(self._parents[key])
        return ended

    async def child_ended(self, payload: str) -> str | None:
        """A ``taskplug_child`` notification: the parent's row key, to be woken if this replica drives it (a
        child launched here has its record read first, so the parent's round finds it ended; a parent taken
        over here may not have launched it again yet, and its round then does)."""
        try:
            note = orjson.loads(payload)
            child = str(note["child"])
            parent = str(note["parent"])
        except (orjson.JSONDecodeError, KeyError, TypeError):
            log.warning("ignoring a malformed %s notification: %r", CHILD_CHANNEL, payload[:200])
            return None
        if child in self._parents:
            await self.refresh((child,))
        return parent

    async def refresh_waiting(self) -> list[str]:
        """Re-read every child not yet known to have ended (a notification may have been missed); the parents
        of those that have."""
        return await self.refresh(
            key for key in self._parents if key not in self._records or not self._records[key].terminal
        )

    def forget(self, parent: str) -> None:
        """``parent`` is no longer driven here: its document and its children's records go."""
        self.documents.pop(parent, None)
        for child in [c for c, p in self._parents.items() if p == parent]:
            del self._parents[child]
            self._records.pop(child, None)

    async def close(self) -> None:
        for task in list(self._aborts):
            with contextlib.suppress(asyncio.CancelledError, psycopg.Error):
                await task
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                await self._conn.close()
            self._conn = None

    # -- helpers -----------------------------------------------------------------------------------------------
    async def _connection(self) -> psycopg.AsyncConnection[Any]:
        if self._conn is None or self._conn.closed:
            self._conn = await psycopg.AsyncConnection.connect(self.dsn, autocommit=True)
        return self._conn

    async def _abort(self, key: str) -> None:
        try:
            async with self._lock:
                conn = await self._connection()
                async with conn.transaction():
                    cur = await conn.execute(_ABORT, (key,))
                    if await cur.fetchone() is not None:
                        await conn.execute("SELECT pg_notify('taskplug_abort', %s)", (key,))
                        log.info("asked child execution %s to abort", key)
        except psycopg.Error as e:
            log.warning("could not ask child execution %s to abort: %s", key, e)
