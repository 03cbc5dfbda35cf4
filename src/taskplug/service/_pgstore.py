"""The executor's state store on PostgreSQL, with every write fenced by the replica's claim.

Follows Temporal's fenced shard writes (``common/persistence/sql/execution.go``: the ``range_id`` read in the
write's own transaction) applied per execution row, as docs/service.md describes: a replica that
claimed an execution holds ``(owner_id, lease_epoch)``, and every write says ``WHERE id = … AND owner_id = me
AND lease_epoch = <claimed epoch>``. Writes are batched as :class:`SQLiteStateStore` batches them (one commit
per ``commit_interval``, and at once when the executor flushes before deleting anything), and a batch is
one statement, one round trip: an ``UPDATE … FROM unnest(…) RETURNING id`` of every execution touched,
whose data-modifying CTEs insert the events, attempts, child node records (map elements, workflow nodes)
and kept container logs (:mod:`._logs`) of the ids it returned only. An id it did not return is an execution this replica no longer owns: its
writes are dropped and ``on_lost`` is told, so the replica stops driving it.

A web-API create is not idempotent, so it is persisted before and after the call (docs/service.md, "No object
created twice", item 6),
for a single task's attempt and a map task's element's retry attempt alike. Before:
:meth:`PostgresStateStore.write_create_intent` (the executor's ``before_create``, awaited by the web-API
adapters right before ``create`` or a sync plugin's ``do``) writes the intent — a ``taskplug_create_intents``
row keyed (execution, node, element, attempt): node '' and element -1 for the execution's own task, whose
attempt row in ``taskplug_attempts`` it also inserts; a map element's by its map node's path and its index;
a workflow's task node's by its unique id and element -1, so that two nodes' attempt 0 are two intents —
in one statement fenced like the batch and locking the execution row
(``… FROM taskplug_executions WHERE id = … AND owner_id = me AND lease_epoch = <claimed epoch> FOR SHARE``,
so a claim that commits first makes it write nothing, and one that commits after finds it): no row means
the execution is no longer this replica's, and it raises :class:`~taskplug.executor.FencedError`,
so the create is never sent. After: the executor's next save of that execution (or of that element, or of
that workflow node) after the intent is the round that made the call, so it carries the call's result — the resource meta, a sync
plugin's terminal state, or the failure the create answered; the store commits it at once, outside the
batch's interval, with the intent's ``outcome_at`` set in the same fenced statement. An unknown create is
exactly an intent whose ``outcome_at`` is still NULL when a later owner writes its own: the previous owner
stopped between the intent and the commit of the result. The create is sent again — at-least-once within
one call's window (for a map task, one round's: its elements' results are saved together), as the notes
allow for connectors that take no idempotency key — and the executor counts it
(``taskplug_executor_unknown_creates_total`` in the replica's metrics). An attempt row written for
anything else (an event, a quota token granted) is no intent and is never counted, and an owner's own
repeat of an intent (a round that errored before it had a result) is not a takeover and is not counted.

The store speaks the executor's synchronous :class:`StateStore` protocol over a synchronous psycopg
connection (a statement on the loopback takes well under a millisecond; the executor's SQLite store blocks
the loop the same way; the price is measured by ``benchmarks/replicas.py``). The executor's rows keep the columns the API and the web view read current: phase,
attempt, terminal, outputs, error, started/finished times; after a batch that inserted events it sends
``NOTIFY taskplug_events, '<max seq>'``.

The executor awaits :meth:`PostgresStateStore.aflush` where it must flush (before a delete, at a terminal
phase): concurrent rounds' flushes then share one batch statement (group commit).

Gate nodes' signals (:class:`~taskplug.executor.KeepsSignals`) live in ``taskplug_signals``, keyed by the
execution's row id. The gate's ``get_or_create_signal`` is one statement outside the batch (a person lists
the signal to answer it, so it is committed at once); ``set_signal`` — a person's answer, here or through the
API (``_api_queries.ServiceDB.set_signal``) — is not fenced by the claim, locks the signal's row while it
checks the value, and sends ``NOTIFY taskplug_signal, '<execution key>'`` in its transaction, which wakes the
owning replica's execution (``_replica.py``).
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import orjson
from flyteidl.core import literals_pb2, types_pb2

from taskplug.core import Phase
from taskplug.executor import (
    Event,
    ExecutionRecord,
    FencedError,
    Lease,
    NodeRecord,
    Signal,
    SignalError,
    StateStoreError,
    check_signal_value,
    signal_not_found,
)

if TYPE_CHECKING:
    import uuid

    import psycopg

__all__ = [
    "GET_OR_CREATE_SIGNAL",
    "LIST_SIGNALS",
    "LOCK_SIGNAL",
    "SET_SIGNAL",
    "SIGNAL_CHANNEL",
    "Claim",
    "PostgresStateStore",
    "signal_of_row",
]

log = logging.getLogger(__name__)

_EVENT_FIELDS = tuple(Event.__dataclass_fields__)

# One statement per batch, one round trip: the fenced write of every execution touched (a NULL column means
# "unchanged"), then — for the ids it returned only — their events (in order: seq follows the arrays), their
# attempts' rows (their own task's), their child nodes (a map's elements, a workflow's nodes), their pods'
# kept logs (a longer copy replaces a shorter one), the outcome of the intents to create whose result this
# batch carries, and one NOTIFY carrying the highest seq inserted.
_BATCH = """
WITH upd AS (
    UPDATE taskplug_executions e SET
        record = coalesce(u.record::jsonb, e.record),
        phase = coalesce(u.phase, e.phase),
        attempt = coalesce(u.attempt, e.attempt),
        terminal = coalesce(u.terminal, e.terminal),
        outputs = coalesce(u.outputs::jsonb, e.outputs),
        error = coalesce(u.error::jsonb, e.error),
        object_owner = coalesce(e.object_owner, u.owner),
        updated_at = now(),
        started_at = coalesce(e.started_at, now()),
        finished_at = CASE WHEN u.terminal AND e.finished_at IS NULL THEN now() ELSE e.finished_at END
    FROM unnest(%(ids)s::bigint[], %(epochs)s::bigint[], %(records)s::text[], %(phases)s::text[],
                %(attempts)s::int[], %(terminals)s::bool[], %(outputs)s::text[], %(errors)s::text[],
                %(owners)s::text[])
        AS u(id, epoch, record, phase, attempt, terminal, outputs, error, owner)
    WHERE e.id = u.id {fence}
    RETURNING e.id
), ev AS (
    INSERT INTO taskplug_events
        (execution_id, attempt, phase, version, reason, occurred_at, error, logs, external_resources, epoch,
         kind, node, cache, name)
    SELECT v.id, v.attempt, v.phase, v.version, v.reason, v.occurred_at::timestamptz, v.error::jsonb,
           v.logs::jsonb, v.external::jsonb, v.epoch, v.kind, v.node, v.cache::jsonb, v.name
    FROM unnest(%(ev_ids)s::bigint[], %(ev_attempts)s::int[], %(ev_phases)s::text[], %(ev_versions)s::int[],
                %(ev_reasons)s::text[], %(ev_times)s::text[], %(ev_errors)s::text[], %(ev_logs)s::text[],
                %(ev_external)s::text[], %(ev_epochs)s::bigint[], %(ev_kinds)s::text[], %(ev_nodes)s::text[],
                %(ev_cache)s::text[], %(ev_names)s::text[])
                WITH ORDINALITY
        AS v(id, attempt, phase, version, reason, occurred_at, error, logs, external, epoch, kind, node, cache,
             name, ord)
    WHERE v.id IN (SELECT id FROM upd)
    ORDER BY v.ord
    RETURNING seq
), att AS (
    INSERT INTO taskplug_attempts (execution_id, attempt, resource_name, resource_meta, phase, reason, error,
                                   logs, epoch, started_at, finished_at)
    SELECT a.id, a.attempt, a.name, a.meta::jsonb, a.phase, a.reason, a.error::jsonb, a.logs::jsonb, a.epoch,
           now(), CASE WHEN a.final THEN now() END
    FROM unnest(%(at_ids)s::bigint[], %(at_attempts)s::int[], %(at_names)s::text[], %(at_meta)s::text[],
                %(at_phases)s::text[], %(at_reasons)s::text[], %(at_errors)s::text[], %(at_logs)s::text[],
                %(at_epochs)s::bigint[], %(at_final)s::bool[])
        AS a(id, attempt, name, meta, phase, reason, error, logs, epoch, final)
    WHERE a.id IN (SELECT id FROM upd)
    ON CONFLICT (execution_id, attempt) DO UPDATE SET
        phase = excluded.phase,
        reason = coalesce(excluded.reason, taskplug_attempts.reason),
        resource_meta = coalesce(excluded.resource_meta, taskplug_attempts.resource_meta),
        error = coalesce(excluded.error, taskplug_attempts.error),
        logs = coalesce(excluded.logs, taskplug_attempts.logs),
        epoch = excluded.epoch,
        finished_at = coalesce(taskplug_attempts.finished_at, excluded.finished_at)
    RETURNING 1
), nd AS (
    INSERT INTO taskplug_nodes (execution_id, path, record, epoch)
    SELECT x.id, x.path, x.record::jsonb, x.epoch
    FROM unnest(%(nd_ids)s::bigint[], %(nd_paths)s::text[], %(nd_records)s::text[], %(nd_epochs)s::bigint[])
        AS x(id, path, record, epoch)
    WHERE x.id IN (SELECT id FROM upd)
    ON CONFLICT (execution_id, path) DO UPDATE SET record = excluded.record, epoch = excluded.epoch
    RETURNING 1
), lg AS (
    INSERT INTO taskplug_logs (execution_id, node, attempt, pod, container, log, size, ended)
    SELECT l.id, split_part(l.names, '/', 1), l.attempt, split_part(l.names, '/', 2),
           split_part(l.names, '/', 3), l.log, l.size, l.ended
    FROM unnest(%(lg_ids)s::bigint[], %(lg_names)s::text[], %(lg_attempts)s::int[], %(lg_logs)s::bytea[],
                %(lg_sizes)s::bigint[], %(lg_ended)s::bool[])
        AS l(id, names, attempt, log, size, ended)
    WHERE l.id IN (SELECT id FROM upd)
    ON CONFLICT (execution_id, node, attempt, pod, container) DO UPDATE
       SET log = excluded.log, size = excluded.size, ended = excluded.ended, kept_at = now()
     WHERE excluded.size >= taskplug_logs.size
    RETURNING 1
), oc AS (
    UPDATE taskplug_create_intents i SET outcome_at = now()
    FROM unnest(%(oc_ids)s::bigint[], %(oc_nodes)s::text[], %(oc_elements)s::int[], %(oc_attempts)s::int[],
                %(oc_epochs)s::bigint[])
        AS o(id, node, element, attempt, epoch)
    WHERE i.execution_id = o.id AND i.node = o.node AND i.element = o.element AND i.attempt = o.attempt
      AND i.epoch = o.epoch
      AND i.outcome_at IS NULL AND o.id IN (SELECT id FROM upd)
    RETURNING 1
)
SELECT (SELECT coalesce(array_agg(id), '{{}}') FROM upd),
       CASE WHEN (SELECT max(seq) FROM ev) IS NOT NULL
            THEN pg_notify('taskplug_events', (SELECT max(seq) FROM ev)::text) END,
       (SELECT count(*) FROM att), (SELECT count(*) FROM nd), (SELECT count(*) FROM lg)
"""
_FENCE = "AND e.owner_id = %(replica)s AND e.lease_epoch = u.epoch"


def _compact(sql: str) -> str:
    """``sql`` with every run of whitespace one space and none beside a parenthesis or a comma (none of these
    statements has either inside a literal)."""
    return re.sub(r" ?([(),]) ?", r"\1", " ".join(sql.split()))


def _positional(sql: str) -> tuple[str, tuple[str, ...]]:
    """``sql`` compacted, its named placeholders made positional and binary, and the names in their order.
    psycopg converts a query's placeholders once and caches it only while the query is at most 4,096 bytes
    (and 50 parameters): the batch, indented and named, was over that and was parsed again at every write.
    Binary, its arrays are sent as they are, where text escaped each element with a regular expression."""
    compact = _compact(sql)
    return re.sub(r"%\(\w+\)s", "%b", compact), tuple(re.findall(r"%\((\w+)\)s", compact))


_BATCH_SQL: Final = {
    fencing: _positional(_BATCH.format(fence=_FENCE if fencing else "")) for fencing in (True, False)
}

# The intent to create, one statement, fenced like the batch and holding the execution row's lock for its
# length (a claim committing first makes ``owner`` empty; one committing after waits, then finds the intent).
# ``prior`` reads the intent as it was before this statement (a CTE sees the statement's snapshot): an
# earlier epoch's intent with no outcome is a create whose outcome is unknown. A single task's intent
# (node '', element -1) also inserts its attempt's row, so the attempt is listed while its create is under
# way; a workflow's nodes have no attempt rows (their attempts are their node records' and events').
_INTENT = """
WITH owner AS (
    SELECT e.id FROM taskplug_executions e WHERE e.id = %(id)s {fence} FOR SHARE
), prior AS (
    SELECT i.outcome_at IS NULL AND i.epoch < %(epoch)s AS unknown FROM taskplug_create_intents i
     WHERE i.execution_id = %(id)s AND i.node = %(node)s AND i.element = %(element)s
       AND i.attempt = %(attempt)s
), att AS (
    INSERT INTO taskplug_attempts
        (execution_id, attempt, resource_name, resource_meta, phase, epoch, started_at)
    SELECT o.id, %(attempt)s, %(name)s, NULL, 'Queued', %(epoch)s, now() FROM owner o
     WHERE %(element)s < 0 AND %(node)s = ''
    ON CONFLICT (execution_id, attempt) DO UPDATE SET epoch = excluded.epoch
    RETURNING 1
), intent AS (
    INSERT INTO taskplug_create_intents (execution_id, node, element, attempt, resource_name, epoch)
    SELECT o.id, %(node)s, %(element)s, %(attempt)s, %(name)s, %(epoch)s FROM owner o
    ON CONFLICT (execution_id, node, element, attempt) DO UPDATE SET
        resource_name = excluded.resource_name, epoch = excluded.epoch, intent_at = now(), outcome_at = NULL
    RETURNING 1
)
SELECT coalesce((SELECT unknown FROM prior), false) FROM owner
"""
_INTENT_FENCE = "AND e.owner_id = %(replica)s AND e.lease_epoch = %(epoch)s"
_INTENT_SQL: Final = {
    fencing: _compact(_INTENT.format(fence=_INTENT_FENCE if fencing else "")) for fencing in (True, False)
}

SIGNAL_CHANNEL: Final = "taskplug_signal"
"""The NOTIFY channel of a signal set; the payload is the execution's row key."""

# The signal's value, created (type, no value) when absent: the inserted row or the existing one (a CTE's
# insert is invisible to the statement's own SELECT, hence the union).
GET_OR_CREATE_SIGNAL: Final = """
WITH ins AS (
    INSERT INTO taskplug_signals (execution_id, signal_id, type) VALUES (%(id)s, %(signal)s, %(type)s)
    ON CONFLICT (execution_id, signal_id) DO NOTHING
    RETURNING value
)
SELECT value FROM ins
UNION ALL
SELECT value FROM taskplug_signals WHERE execution_id = %(id)s AND signal_id = %(signal)s
"""
LIST_SIGNALS: Final = (
    "SELECT signal_id, type, value, set_by, updated_at FROM taskplug_signals "
    "WHERE execution_id = %(id)s ORDER BY signal_id"
)
# A set, in one transaction: lock the signal's row and read its type (and the execution's key, the NOTIFY's
# payload), check the value, write it, notify.
LOCK_SIGNAL: Final = (
    "SELECT s.type, e.key FROM taskplug_signals s JOIN taskplug_executions e ON e.id = s.execution_id "
    "WHERE s.execution_id = %(id)s AND s.signal_id = %(signal)s FOR UPDATE OF s"
)
SET_SIGNAL: Final = f"""
UPDATE taskplug_signals SET value = %(value)s, set_by = %(by)s, updated_at = now()
 WHERE execution_id = %(id)s AND signal_id = %(signal)s
RETURNING pg_notify('{SIGNAL_CHANNEL}', %(key)s)
"""


def signal_of_row(signal_id: str, type_bytes: bytes, value_bytes: bytes | None) -> Signal:
    """A :class:`~taskplug.executor.Signal` of a ``taskplug_signals`` row's protobuf bytes."""
    value = None if value_bytes is None else literals_pb2.Literal.FromString(bytes(value_bytes))
    return Signal(signal_id, types_pb2.LiteralType.FromString(bytes(type_bytes)), value)


_TASK = -1
"""The ``element`` of a task's own intent (a map element's is its index)."""
_OWN = ""
"""The ``node`` of an intent whose result the execution's own record carries (its task's, its map's
elements' are their map node's path: the path their records are children of)."""

LogIdent = tuple[str, int, str, str]
"""One container log of an execution: (unique node id, attempt, pod, container)."""

IntentKey = tuple[str, int]
"""An intent's place in its execution: (node, element) — ``("", -1)`` a single task's attempt, ``(map node
path, index)`` a map element's, ``(unique id, -1)`` a workflow's task node's."""


_ATTEMPT_PARAMS = {
    "name": "at_names",
    "meta": "at_meta",
    "phase": "at_phases",
    "reason": "at_reasons",
    "error": "at_errors",
    "logs": "at_logs",
    "epoch": "at_epochs",
    "final": "at_final",
}

_FINAL_PHASES = frozenset({"Success", "RetryableFailure", "PermanentFailure", "Aborted"})


@dataclass(slots=True)
class Claim:
    """An execution this replica claimed: its row id, the epoch every write is fenced with, and how to name
    an attempt's object (the deterministic generated name, for ``taskplug_attempts.resource_name``)."""

    id: int
    epoch: int
    record: ExecutionRecord | None
    nodes: list[NodeRecord] = field(default_factory=list)  # child node records (map elements, workflow nodes)
    resource_name: Callable[[int], str] = str
    object_owner: str = ""  # "<namespace>/<execution-id label>" of the objects it creates (the reaper's key)
    # What the database holds, as of the last write that landed (snapshots: the executor keeps mutating its
    # record object): whether it is terminal, and the web-API resource meta (JSON) of its current attempt.
    terminal: bool = False
    meta: str | None = None

    def __post_init__(self) -> None:
        if self.record is not None:
            self.terminal = self.record.terminal
            self.meta = _dumps(_resource_meta(self.record))


def _intent_key(path: str) -> IntentKey:
    """Whose intent a saved node record carries the result of: a map element's (``<map node>/<index>``) or
    a workflow task node's (its unique id)."""
    parent, _, last = path.rpartition("/")
    if parent and last.isdigit():
        return parent, int(last)
    return path, _TASK


def _root_path(claim: Claim, key: str) -> str:
    """The path of ``key``'s root node (the last segment of its key: a record's ``path`` default)."""
    return claim.record.path if claim.record is not None else key.rpartition("/")[2]


def _dumps(value: Any) -> str | None:
    return None if value is None else orjson.dumps(value).decode()


def _resource_meta(record: ExecutionRecord | None) -> Any:
    """A web-API execution's ResourceMeta as its plugin state holds it (``resourceMeta``), or None."""
    state = record.plugin_state if record is not None else None
    return state.get("resourceMeta") if isinstance(state, dict) else None


def record_phase(record: ExecutionRecord) -> str:
    """The phase the executions table shows for a record: its outcome once terminal, else the phase the
    plugin last reported (``Queued`` until the first report, as the row starts); a workflow's root is
    ``Running`` from the workflow's first phase past Ready (its ``workflow_state``) to its end."""
    if record.terminal and record.outcome:
        return record.outcome
    if record.workflow_state is not None:
        return str(Phase.RUNNING) if record.workflow_state.get("phase", 0) else "Queued"
    return str(Phase(record.task_phase)) if record.task_phase else "Queued"


class PostgresStateStore:
    """The :class:`~taskplug.executor.StateStore` of one replica incarnation; see the module docstring.

    ``fencing=False`` writes without the owner/epoch condition: only the negative control of the fencing
    tests uses it (a paused ex-owner's writes then land, and the stale-write check must catch them)."""

    def __init__(
        self,
        conn: psycopg.Connection[tuple[Any, ...]],
        *,
        replica_id: uuid.UUID,
        on_lost: Callable[[set[str]], None] | None = None,
        commit_interval: float = 0.05,
        fencing: bool = True,
    ) -> None:
        self._conn = conn
        self.replica_id = replica_id
        self._on_lost = on_lost
        self._commit_interval = commit_interval
        self._fencing = fencing
        self._claims: dict[str, Claim] = {}
        self._records: dict[str, ExecutionRecord] = {}
        self._events: dict[str, list[Event]] = {}
        self._nodes: dict[str, dict[str, bytes]] = {}
        # Intents to create this incarnation wrote whose result no save has carried yet, and the outcomes
        # pending commit: key -> (node, element) (see IntentKey) -> attempt.
        self._intents: dict[str, dict[IntentKey, int]] = {}
        self._outcomes: dict[str, dict[IntentKey, int]] = {}
        # Container logs of ended or deleted pods pending commit (see keep_log): key -> (node, attempt, pod,
        # container) -> (kept bytes, whole size, ended).
        self._logs: dict[str, dict[LogIdent, tuple[bytes, int, bool]]] = {}
        self._owners: dict[str, set[str]] = {}  # object_owner -> keys held (whose pod is whose)
        self._last_commit = time.monotonic()
        self._group: asyncio.Future[None] | None = None  # the grouped flush callers are joining, if any
        self.fenced = False
        self.statements = 0  # statements sent, for the benchmark's statements-per-execution figure
        self.lost: set[str] = set()

    # -- what the coordinator tells the store ---------------------------------------------------------------
    def claim(self, key: str, claim: Claim) -> None:
        """Hold ``key`` under ``claim`` (its record and child nodes as the database had them)."""
        previous = self._claims.get(key)
        if previous is not None:
            self._disown(key, previous)
        self._claims[key] = claim
        if claim.object_owner:
            self._owners.setdefault(claim.object_owner, set()).add(key)
        self.lost.discard(key)

    def release(self, key: str) -> None:
        """Stop writing ``key`` (it ended or was handed over); pending writes are dropped."""
        claim = self._claims.pop(key, None)
        if claim is not None:
            self._disown(key, claim)
        self._logs.pop(key, None)
        self._records.pop(key, None)
        self._events.pop(key, None)
        self._nodes.pop(key, None)
        self._intents.pop(key, None)
        self._outcomes.pop(key, None)

    def _disown(self, key: str, claim: Claim) -> None:
        keys = self._owners.get(claim.object_owner)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._owners[claim.object_owner]

    def key_of_object(self, object_owner: str, prefix: str) -> str | None:
        """The key held here whose objects carry ``object_owner`` (``<namespace>/<execution-id label>``)
        and whose key starts with ``prefix`` (``project/domain/name/`` of a pod's attempt annotation)."""
        for key in self._owners.get(object_owner, ()):
            if key.startswith(prefix):
                return key
        return None

    def keep_log(self, key: str, ident: LogIdent, data: bytes, size: int, *, ended: bool) -> bool:
        """Keep one container's log (``ident``: node, attempt, pod, container; ``data`` its kept end of
        ``size`` bytes) with ``key``'s next batch, fenced like the rest of it; False when ``key`` is not
        this replica's (nothing is kept). Committed by the next flush: :meth:`logs_pending` says whether
        that happened yet."""
        if key not in self._claims or self.fenced:
            return False
        logs = self._logs.setdefault(key, {})
        earlier = logs.get(ident)
        if earlier is None or size >= earlier[1]:
            logs[ident] = (data, size, ended)
        return True

    def logs_pending(self, key: str) -> bool:
        """Whether logs kept for ``key`` wait for a flush."""
        return key in self._logs

    def claim_of(self, key: str) -> Claim | None:
        return self._claims.get(key)

    def lease_of(self, key: str) -> Lease | None:
        """``key``'s lease as the executor's :class:`~taskplug.executor.FencedStateStore` seam names it: this
        incarnation and the epoch it claimed."""
        claim = self._claims.get(key)
        return None if claim is None else Lease(str(self.replica_id), claim.epoch)

    @property
    def keys(self) -> list[str]:
        return list(self._claims)

    def fence(self) -> None:
        """This incarnation was declared dead: from now on nothing is written."""
        self.fenced = True
        self._records.clear()
        self._events.clear()
        self._nodes.clear()
        self._intents.clear()
        self._outcomes.clear()
        self._logs.clear()

    # -- the StateStore protocol ------------------------------------------------------------------------------
    def load(self, key: str) -> ExecutionRecord | None:
        claim = self._claims.get(key)
        return claim.record if claim is not None else None

    def save(self, record: ExecutionRecord) -> None:
        claim = self._claims.get(record.key)
        if claim is None:
            return
        self._records[record.key] = record
        if self._carry_outcomes(record.key, ((_OWN, _TASK),)):
            # The first save after an intent is the round that made the call: its result (and the intent's
            # outcome) is committed now, outside the batch, so that a replica killed a moment later leaves
            # its successor the job to follow rather than one to create again (docs/service.md, "No object
            # created twice", item 6).
            self.flush()
            return
        meta = _dumps(_resource_meta(record))
        if meta is not None and meta != claim.meta:
            self.flush()  # a resource meta is committed at once whatever wrote it (see above)
            return
        self._maybe_commit()

    def _carry_outcomes(self, key: str, elements: Iterable[IntentKey]) -> bool:
        """Move ``key``'s open intents of ``elements`` to the outcomes the next batch commits; whether any
        was open."""
        opened = self._intents.get(key)
        if not opened:
            return False
        carried = False
        for element in elements:
            attempt = opened.pop(element, None)
            if attempt is not None:
                self._outcomes.setdefault(key, {})[element] = attempt
                carried = True
        if not opened:
            del self._intents[key]
        return carried

    def append_event(self, key: str, event: Event) -> None:
        if key not in self._claims:
            return
        self._events.setdefault(key, []).append(event)
        self._maybe_commit()

    def events(self, key: str) -> list[Event]:
        claim = self._claims.get(key)
        if claim is None:
            return []
        rows = self._conn.execute(
            "SELECT attempt, phase, version, reason, occurred_at, error, logs, external_resources, kind, node, "
            "cache, name "
            "FROM taskplug_events WHERE execution_id = %s ORDER BY seq",
            (claim.id,),
        ).fetchall()
        self.statements += 1
        return [
            Event(
                attempt=a,
                phase=p,
                version=v,
                reason=r,
                occurred_at=o.isoformat().replace("+00:00", "Z") if o is not None else None,
                error=e,
                logs=lg,
                external_resources=x,
                kind=k,
                node=n,
                cache=c,
                name=nm,
            )
            for a, p, v, r, o, e, lg, x, k, n, c, nm in rows
        ]

    def save_nodes(self, key: str, nodes: list[NodeRecord]) -> None:
        if not nodes or key not in self._claims:
            return
        rows = self._nodes.setdefault(key, {})
        for node in nodes:
            rows[node.path] = node.to_row()
        if self._carry_outcomes(key, (_intent_key(node.path) for node in nodes)):
            self.flush()  # an element's create answered: its result is committed now (see save)
            return
        self._maybe_commit()

    def load_nodes(self, key: str) -> list[NodeRecord]:
        claim = self._claims.get(key)
        return list(claim.nodes) if claim is not None else []

    def write_create_intent(
        self,
        key: str,
        attempt: int,
        resource_name: str,
        *,
        element: int | None = None,
        node: str | None = None,
    ) -> bool:
        """Write the intent to create ``key``'s ``attempt`` as ``resource_name`` now, fenced by the claim; see
        the module docstring. The attempt is of map element ``element`` of the map node at path ``node``, or
        (``element`` None) of the task node ``node`` of a workflow — of the execution's own task or map when
        ``node`` is None. Returns True when an earlier owner's intent of the same (node, element, attempt)
        has no outcome committed (the create's outcome is unknown). Raises :class:`FencedError` when the
        execution is no longer this replica's: the create must not be sent."""
        claim = self._claims.get(key)
        if claim is None or self.fenced:
            raise FencedError(f"execution {key} is not this replica's: its create was not sent")
        if node is None:
            # The execution's own task, or an element of its own map (a child of its root node's path).
            node = _OWN if element is None else _root_path(claim, key)
        target: IntentKey = (node, _TASK if element is None else element)
        sql = _INTENT_SQL[self._fencing]
        params = {
            "id": claim.id,
            "node": target[0],
            "element": target[1],
            "attempt": attempt,
            "name": resource_name,
            "epoch": claim.epoch,
            "replica": self.replica_id,
        }
        try:
            row = self._conn.execute(sql, params).fetchone()
        except Exception as e:
            raise StateStoreError(f"cannot write the intent to create to PostgreSQL: {e}") from e
        finally:
            self.statements += 1
        if row is None:
            self.lost.add(key)
            self.release(key)
            log.warning("execution %s is no longer this replica's (fenced intent refused)", key)
            if self._on_lost is not None:
                self._on_lost({key})
            raise FencedError(f"execution {key} is no longer this replica's: its create was not sent")
        self._intents.setdefault(key, {})[target] = attempt
        return bool(row[0])

    # -- gate nodes' signals (KeepsSignals; see the module docstring) --------------------------------------
    def _claim_id(self, key: str) -> int:
        claim = self._claims.get(key)
        if claim is None:
            raise FencedError(f"execution {key} is not this replica's: its signals are not read here")
        return claim.id

    def get_or_create_signal(
        self, key: str, signal_id: str, literal_type: types_pb2.LiteralType
    ) -> literals_pb2.Literal | None:
        params = {"id": self._claim_id(key), "signal": signal_id, "type": literal_type.SerializeToString()}
        try:
            row = self._conn.execute(GET_OR_CREATE_SIGNAL, params).fetchone()
        except Exception as e:
            raise StateStoreError(f"cannot read signal {signal_id!r} of execution {key}: {e}") from e
        finally:
            self.statements += 1
        if row is None or row[0] is None:
            return None
        return literals_pb2.Literal.FromString(bytes(row[0]))

    def list_signals(self, key: str) -> list[Signal]:
        execution_id = self._claim_id(key)
        try:
            rows = self._conn.execute(LIST_SIGNALS, {"id": execution_id}).fetchall()
        except Exception as e:
            raise StateStoreError(f"cannot list the signals of execution {key}: {e}") from e
        finally:
            self.statements += 1
        return [signal_of_row(sid, t, v) for sid, t, v, _, _ in rows]

    def set_signal(self, key: str, signal_id: str, value: literals_pb2.Literal, *, by: str = "") -> None:
        """See :class:`~taskplug.executor.KeepsSignals`: not fenced by the claim (only the execution's row id
        is taken from it), committed with its NOTIFY."""
        execution_id = self._claim_id(key)
        try:
            with self._conn.transaction():
                row = self._conn.execute(LOCK_SIGNAL, {"id": execution_id, "signal": signal_id}).fetchone()
                if row is None:
                    raise signal_not_found(key, signal_id)
                check_signal_value(signal_of_row(signal_id, row[0], None), value)
                self._conn.execute(
                    SET_SIGNAL,
                    {
                        "id": execution_id,
                        "signal": signal_id,
                        "value": value.SerializeToString(),
                        "by": by or None,
                        "key": row[1],
                    },
                )
        except SignalError:
            raise
        except Exception as e:
            raise StateStoreError(f"cannot set signal {signal_id!r} of execution {key}: {e}") from e
        finally:
            self.statements += 1

    def _maybe_commit(self) -> None:
        if time.monotonic() - self._last_commit >= self._commit_interval:
            self.flush()

    async def aflush(self) -> None:
        """:meth:`flush`, with concurrent callers grouped into one commit (the executor awaits this where it
        must flush: before deleting anything, before releasing a terminal execution's waiters).

        The first caller opens a group and yields once, so that the rounds ready to run reach their own
        flush and join it; then one batch statement writes everything pending — every joiner's writes were
        saved before it joined — and every caller returns once it committed, or raises its error."""
        group = self._group
        if group is not None:
            await asyncio.shield(group)
            return
        group = asyncio.get_running_loop().create_future()
        self._group = group
        try:
            await asyncio.sleep(0)
        finally:
            # Cancelled or not, the joiners' writes are pending: the group's one statement is sent now.
            self._group = None
            self._flush_group(group)
        await group

    def _flush_group(self, group: asyncio.Future[None]) -> None:
        try:
            self.flush()
        except Exception as e:
            group.set_exception(e)
            group.exception()  # retrieved: the caller that opened the group raises it
        else:
            group.set_result(None)

    def flush(self) -> None:
        self._last_commit = time.monotonic()
        if self.fenced:
            return
        pending = {**self._records, **self._events, **self._nodes, **self._outcomes, **self._logs}
        touched = [k for k in pending if k in self._claims]
        if not touched:
            return
        records, events, nodes, outcomes = self._records, self._events, self._nodes, self._outcomes
        logs = self._logs
        self._records, self._events, self._nodes, self._outcomes, self._logs = {}, {}, {}, {}, {}
        try:
            kept = self._write(touched, records, events, nodes, outcomes, logs)
        except Exception as e:
            # Put the batch back: the next flush tries again (a replica that cannot reach its database is
            # fenced by the others after ttl, and fences itself when its heartbeat fails as long).
            for key, record in records.items():
                self._records.setdefault(key, record)
            for key, evs in events.items():
                self._events.setdefault(key, []).extend(evs)
            for key, rows in nodes.items():
                self._nodes.setdefault(key, {}).update(rows)
            for key, carried in outcomes.items():
                self._outcomes.setdefault(key, {}).update(carried)
            for key, kept_logs in logs.items():
                self._logs.setdefault(key, {}).update(kept_logs)
            raise StateStoreError(f"cannot write execution state to PostgreSQL: {e}") from e
        lost = set(touched) - kept
        if lost:
            self.lost |= lost
            for key in lost:
                self.release(key)
            log.warning("%d execution(s) are no longer this replica's (fenced write refused)", len(lost))
            if self._on_lost is not None:
                self._on_lost(lost)

    def _write(
        self,
        touched: list[str],
        records: dict[str, ExecutionRecord],
        events: dict[str, list[Event]],
        nodes: dict[str, dict[str, bytes]],
        outcomes: dict[str, dict[IntentKey, int]],
        logs: dict[str, dict[LogIdent, tuple[bytes, int, bool]]],
    ) -> set[str]:
        params: dict[str, list[Any]] = defaultdict(list)
        attempts: dict[tuple[int, int], dict[str, Any]] = {}
        for key in touched:
            claim = self._claims[key]
            record = records.get(key)
            params["ids"].append(claim.id)
            params["epochs"].append(claim.epoch)
            params["owners"].append(claim.object_owner or None)
            params["records"].append(record.to_row().decode() if record is not None else None)
            params["phases"].append(record_phase(record) if record is not None else None)
            params["attempts"].append(record.attempt if record is not None else None)
            params["terminals"].append(record.terminal if record is not None else None)
            params["outputs"].append(
                _dumps(record.outputs) if record is not None and record.terminal else None
            )
            params["errors"].append(_dumps(record.error) if record is not None else None)
            for ev in events.get(key, ()):
                for column, value in (
                    ("ev_ids", claim.id),
                    ("ev_attempts", ev.attempt),
                    ("ev_phases", ev.phase),
                    ("ev_versions", ev.version),
                    ("ev_reasons", ev.reason),
                    ("ev_times", ev.occurred_at),
                    ("ev_errors", _dumps(ev.error)),
                    ("ev_logs", _dumps(ev.logs)),
                    ("ev_external", _dumps(ev.external_resources)),
                    ("ev_epochs", claim.epoch),
                    ("ev_kinds", ev.kind),
                    ("ev_nodes", ev.node),
                    ("ev_cache", _dumps(ev.cache)),
                    ("ev_names", ev.name),
                ):
                    params[column].append(value)
                if ev.kind != "task" or ev.node is not None:
                    # A workflow's own and its nodes' events: the execution's attempt rows are its own
                    # task's (a workflow's nodes each count their attempts in their records).
                    continue
                # The attempt's row takes the latest event of the batch; log links and the error an earlier
                # one reported stay, as they do across batches (the upsert's coalesce).
                before = attempts.get((claim.id, ev.attempt), {})
                attempts[(claim.id, ev.attempt)] = {
                    "name": claim.resource_name(ev.attempt),
                    "meta": None,
                    "phase": ev.phase,
                    "reason": ev.reason,
                    "error": _dumps(ev.error) or before.get("error"),
                    "logs": _dumps(ev.logs) or before.get("logs"),
                    "epoch": claim.epoch,
                    "final": ev.phase in _FINAL_PHASES or bool(before.get("final")),
                }
            meta = _dumps(_resource_meta(record))
            if record is not None and meta is not None and meta != claim.meta:
                row = attempts.setdefault(
                    (claim.id, record.attempt),
                    {
                        "name": claim.resource_name(record.attempt),
                        "phase": record_phase(record),
                        "reason": None,
                        "error": None,
                        "logs": None,
                        "epoch": claim.epoch,
                        "final": False,
                    },
                )
                row["meta"] = meta
            for path, node in nodes.get(key, {}).items():
                params["nd_ids"].append(claim.id)
                params["nd_paths"].append(path)
                params["nd_records"].append(node.decode())
                params["nd_epochs"].append(claim.epoch)
            for (node_path, element_index), attempt in outcomes.get(key, {}).items():
                params["oc_ids"].append(claim.id)
                params["oc_nodes"].append(node_path)
                params["oc_elements"].append(element_index)
                params["oc_attempts"].append(attempt)
                params["oc_epochs"].append(claim.epoch)
            for (node_id, attempt, pod, container), (data, size, ended) in logs.get(key, {}).items():
                params["lg_ids"].append(claim.id)
                # One text for three names none of which can hold a '/' (the statement splits them): the
                # batch stays within the parameters psycopg caches a statement's conversion for.
                params["lg_names"].append(f"{node_id}/{pod}/{container}")
                params["lg_attempts"].append(attempt)
                params["lg_logs"].append(data)
                params["lg_sizes"].append(size)
                params["lg_ended"].append(ended)
        for (execution_id, attempt), row in attempts.items():
            params["at_ids"].append(execution_id)
            params["at_attempts"].append(attempt)
            for column, param in _ATTEMPT_PARAMS.items():
                params[param].append(row[column])
        sql, names = _BATCH_SQL[self._fencing]
        values = [self.replica_id if name == "replica" else params[name] for name in names]
        found = self._conn.execute(sql, values).fetchone()
        self.statements += 1
        kept_ids = set(found[0]) if found else set()
        kept = {key for key in touched if self._claims[key].id in kept_ids}
        for key in kept:
            record = records.get(key)
            if record is not None:
                claim = self._claims[key]
                claim.terminal = record.terminal
                claim.meta = _dumps(_resource_meta(record))
        return kept

    def close(self) -> None:
        try:
            self.flush()
        finally:
            self._conn.close()
