"""An executor replica: one of any number of processes driving the executions stored in PostgreSQL.

The protocol is the one docs/service.md describes, which survived SIGKILL and SIGSTOP churn where a
per-execution lease did not:

- **Liveness on the replica row.** Each process start is a new incarnation (a UUID row in
  ``taskplug_replicas``); its own task and connection heartbeat it every ``heartbeat`` seconds in database
  time. A heartbeat answered 0 rows means another replica declared this one dead: it fences itself (stops
  its executor without writing or deleting anything more) and starts a new incarnation.
- **Fencing on the execution row.** A claim sets ``owner_id`` and increments ``lease_epoch``; every write
  checks both in its own statement (:mod:`._pgstore`), so a paused ex-owner's late writes are refused.
- **Claims** are one short ``UPDATE … WHERE id IN (SELECT … FOR UPDATE SKIP LOCKED)``; no lock or
  transaction is ever held across a plugin call.
- **The sweeper** (every replica, every ``poll``, idempotent) fences replicas silent for ``ttl`` and releases
  every execution whose owner is fenced or gone.
- **The create guard:** a create or delete is sent only while ``monotonic() < safe_until`` (the last
  confirmed heartbeat's send time + ``ttl`` − ``margin``): nobody can declare this replica dead before the
  call lands (:class:`~taskplug.executor.GuardedKubeClient`). A replica that cannot confirm a heartbeat for
  ``ttl`` fences itself.
- **NOTIFY is a hint** (``taskplug_work``: claim now; ``taskplug_abort``: abort that execution now;
  ``taskplug_signal``: a gate's signal was set, evaluate that execution now; ``taskplug_child``: a launch-plan
  child ended, evaluate its parent now), with a poll behind it; every ``reconcile`` seconds the replica also
  re-reads which rows it owns and the children its workflows wait for.
- **Launch-plan children are rows** (:mod:`._children`): written down for any replica to claim, never kept
  in one replica's memory.
- **SIGTERM hands over** at once: the guard closes, pending writes are flushed, the rows are released and
  the replica row fenced in one transaction, ``NOTIFY taskplug_work`` wakes the others.

A replica is the :class:`~taskplug.executor.Coordinator` of its process (it decides which executions its
executor drives; its store reports the ones taken over), as ``taskplug run``'s
:class:`~taskplug.executor.LocalCoordinator` is of one process on SQLite: the same seams, another protocol.

Flyte's counterpart is static sharding of FlyteWorkflow CRs between propeller pods plus leader election per
shard (``flytepropeller/manager``, ``pkg/leaderelection``); a dead shard waits for its pod's restart. Deviation:
ownership here is per execution and moves to any live replica within ``ttl`` + a poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any, Final

import orjson
import psycopg
from prometheus_client import REGISTRY, CollectorRegistry

from taskplug import __version__
from taskplug.core import TaskplugError
from taskplug.executor import (
    ExecutionRecord,
    ExecutionSpec,
    Executor,
    ExecutorSettings,
    FencedError,
    GuardedKubeClient,
    NodeKind,
    NodeRecord,
    Platform,
    open_executor,
    parse_spec,
)
from taskplug.k8s import K8S_SECTION, KubeClient, owner_key
from taskplug.service._catalog import PostgresCatalog
from taskplug.service._children import CHILD_CHANNEL, ChildRows
from taskplug.service._logs import DEFAULT_KEEP_BYTES, LogKeeper, LogKeepingKubeClient
from taskplug.service._migrations import migrate
from taskplug.service._pgstore import SIGNAL_CHANNEL, Claim, PostgresStateStore
from taskplug.service._reaper import reap_orphans, reaped_resource_types

__all__ = ["Replica", "ReplicaSettings"]

log = logging.getLogger(__name__)

_MAX_RECONNECT_BACKOFF = 30.0
"""Seconds between a replica's attempts to reach a database that went away, at most."""

_SWEEP_FENCE = """
UPDATE taskplug_replicas SET fenced_at = now()
 WHERE fenced_at IS NULL AND heartbeat_at < now() - make_interval(secs => %s)
"""
_SWEEP_RELEASE = """
UPDATE taskplug_executions e SET owner_id = NULL, updated_at = now()
 WHERE NOT terminal AND owner_id IS NOT NULL
   AND NOT EXISTS (SELECT 1 FROM taskplug_replicas r WHERE r.id = e.owner_id AND r.fenced_at IS NULL)
"""
_SWEEP_FORGET = """
DELETE FROM taskplug_replicas r
 WHERE fenced_at < now() - make_interval(secs => %s)
   AND NOT EXISTS (SELECT 1 FROM taskplug_executions e WHERE e.owner_id = r.id)
"""
_CLAIM = """
UPDATE taskplug_executions e SET owner_id = %s, lease_epoch = e.lease_epoch + 1, updated_at = now()
 WHERE e.id IN (SELECT id FROM taskplug_executions WHERE owner_id IS NULL AND NOT terminal
                ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED)
RETURNING e.id, e.key, e.lease_epoch, e.record, e.spec, e.abort_requested_at IS NOT NULL
"""
_OWNED = """
SELECT id, key, lease_epoch, record, spec, abort_requested_at IS NOT NULL FROM taskplug_executions
 WHERE owner_id = %s AND NOT terminal
"""
_FAIL = """
UPDATE taskplug_executions SET phase = 'PermanentFailure', terminal = true, error = %s::jsonb,
       finished_at = now(), updated_at = now()
 WHERE id = %s AND owner_id = %s AND lease_epoch = %s
"""


@dataclass(frozen=True, slots=True)
class ReplicaSettings:
    """How a replica takes part in the protocol (the module docstring); defaults are docs/service.md's,
    tests use ttl 3 s, heartbeat 0.5 s, margin 1 s, poll 0.25 s."""

    capacity: int = 500
    """Executions this replica drives at once; it claims no more."""
    heartbeat: float = 2.0
    """Seconds between heartbeats; at most (ttl − margin) / 2, better a third."""
    ttl: float = 10.0
    """Seconds without a heartbeat after which another replica fences this one and releases its rows."""
    margin: float = 3.0
    """Seconds before ``ttl`` at which the create guard closes; at least a create call's timeout."""
    poll: float = 1.0
    """Seconds between sweeps and claims when no NOTIFY wakes the replica."""
    claim_batch: int = 50
    """Rows one claim takes at most, so that a fresh replica does not grab every queued execution."""
    reconcile: float = 10.0
    """Seconds between re-reads of the rows this replica owns (and their abort requests)."""
    reap: float = 5.0
    """Seconds between orphan-reaper passes (objects of finished attempts, deleted)."""
    forget_fenced_after: float = 300.0
    """Seconds a fenced replica's row stays visible (the replicas page) once it owns nothing."""
    keep_log_bytes: int = DEFAULT_KEEP_BYTES
    """The most of each container's log kept in the database when its pod ends or is deleted (the end of
    it; 0 keeps none): a finished attempt's log stays readable on ``taskplug serve`` after its pod is gone."""
    fencing: bool = True
    """False only in the negative control of the fencing tests: writes then ignore the owner and epoch, the
    create guard is open and a replica declared dead carries on (the sweeper still releases its rows)."""

    def __post_init__(self) -> None:
        if self.capacity < 1 or self.claim_batch < 1:
            raise ValueError("capacity and claim-batch must be at least 1")
        if self.keep_log_bytes < 0:
            raise ValueError("keep-log-bytes must be at least 0")
        if not (self.heartbeat > 0 and 0 <= self.margin < self.ttl):
            raise ValueError("heartbeat must be positive and 0 <= margin < ttl")
        if self.heartbeat * 2 > self.ttl - self.margin:
            raise ValueError(
                f"heartbeat {self.heartbeat}s is too slow for ttl {self.ttl}s and margin {self.margin}s: "
                "the create guard would close between two heartbeats (heartbeat <= (ttl - margin) / 2; "
                "a third leaves room for a late one)"
            )


@dataclass(slots=True)
class _Stats:
    claimed: int = 0
    finished: int = 0
    lost: int = 0
    fenced: int = 0  # incarnations ended by self-fencing
    incarnations: int = 0
    statements: int = 0
    write_statements: int = 0
    guard_refusals: int = 0
    reaped: int = 0


@dataclass(eq=False)
class _Incarnation:
    id: uuid.UUID
    store: PostgresStateStore
    executor: Executor | None = None
    fenced: asyncio.Event = field(default_factory=asyncio.Event)
    why: str = ""
    rows: dict[str, int] = field(default_factory=dict)  # executor key -> row id
    by_row_key: dict[str, str] = field(default_factory=dict)  # the row's key (the API's) -> executor key
    row_keys: dict[str, str] = field(default_factory=dict)  # executor key -> the row's key
    work: asyncio.Event = field(default_factory=asyncio.Event)
    statements: int = 0  # heartbeats, sweeps, reconciles, hand-over
    # The plugin machinery's metrics (plugin managers, web-API adapters) of this incarnation, published in
    # its replica row; one registry per incarnation, as each incarnation loads its plugins afresh.
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    claim_statements: int = 0  # claims and what adopting a claimed row reads or writes
    keeper: LogKeeper | None = None  # keeps ended or deleted pods' logs (None: keep-log-bytes 0)
    children: ChildRows | None = None  # the launch-plan children its workflows launched


class Replica:
    """Drive executions from the PostgreSQL database at ``dsn`` until ``stop`` is set; see the module
    docstring. ``kube_client`` is shared by every incarnation and left open."""

    def __init__(
        self,
        dsn: str,
        platform: Platform,
        kube_client: KubeClient,
        *,
        settings: ReplicaSettings | None = None,
        executor_settings: ExecutorSettings | None = None,
        on_incarnation: Callable[[uuid.UUID], None] | None = None,
    ) -> None:
        self.dsn = dsn
        self.platform = platform
        self.kube = kube_client
        self.settings = settings or ReplicaSettings()
        self.executor_settings = executor_settings
        self.on_incarnation = on_incarnation
        self.stats = _Stats()
        self._safe_until = 0.0
        self._last_ok = 0.0
        self._current: _Incarnation | None = None

    @property
    def replica_id(self) -> uuid.UUID | None:
        return self._current.id if self._current is not None else None

    # -- the Coordinator seam (taskplug.executor's; the single process's is LocalCoordinator) ----------------
    @property
    def owner(self) -> str:
        """The current incarnation, as the executions it claimed name it (``owner_id``); empty between two."""
        return str(self._current.id) if self._current is not None else ""

    def driving(self) -> Collection[str]:
        return set(self._current.rows) if self._current is not None else set()

    def on_lost(self, keys: Collection[str]) -> None:
        if self._current is not None:
            self._lost(self._current.id, keys)

    # -- the guard plugins' creates and deletes pass ----------------------------------------------------------
    async def _guard(self) -> None:
        if not self.settings.fencing:
            return
        deadline = time.monotonic() + 2 * self.settings.heartbeat
        while True:
            current = self._current
            if current is None or current.fenced.is_set():
                self.stats.guard_refusals += 1
                raise FencedError("this replica was fenced: the call was not sent")
            if time.monotonic() < self._safe_until:
                return
            if time.monotonic() > deadline:
                self.stats.guard_refusals += 1
                raise FencedError(
                    "this replica's ownership is not confirmed (its heartbeat is late): the call was not sent"
                )
            await asyncio.sleep(min(0.05, self.settings.heartbeat / 4))

    # -- the process ----------------------------------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        """Run incarnations until ``stop`` is set; a fenced incarnation is followed by a new one."""
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            migrate(conn)  # at start an unusable database is the caller's error (taskplug executor: exit 2)
        backoff = self.settings.heartbeat
        while not stop.is_set():
            try:
                fenced = await self._incarnation(stop)
            except psycopg.OperationalError as e:
                # The database went away (an outage, a failover): whatever this process owned was fenced
                # with the incarnation, and the sweeper releases its rows once the ttl has passed. Wait for
                # the database as long as it takes, then start a new incarnation.
                log.warning("the database does not answer (%s); a new incarnation in %.1fs", e, backoff)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(backoff):  # not wait_for: see _claim_loop
                        await stop.wait()
                backoff = min(backoff * 2, _MAX_RECONNECT_BACKOFF)
                continue
            backoff = self.settings.heartbeat
            if not fenced:
                return
            self.stats.fenced += 1

    async def _incarnation(self, stop: asyncio.Event) -> bool:
        s = self.settings
        rid = uuid.uuid4()
        self.stats.incarnations += 1
        async with (
            await psycopg.AsyncConnection.connect(self.dsn, autocommit=True) as beat,
            await psycopg.AsyncConnection.connect(self.dsn, autocommit=True) as work,
            await psycopg.AsyncConnection.connect(self.dsn, autocommit=True) as logs,
        ):
            sent = time.monotonic()
            await beat.execute(
                "INSERT INTO taskplug_replicas (id, host, pid, version, capacity) VALUES (%s, %s, %s, %s, %s)",
                (rid, socket.gethostname(), os.getpid(), __version__, s.capacity),
            )
            self._safe_until, self._last_ok = sent + s.ttl - s.margin, sent
            store = PostgresStateStore(
                psycopg.connect(self.dsn, autocommit=True),
                replica_id=rid,
                on_lost=lambda keys: self._lost(rid, keys),
                fencing=s.fencing,
            )
            # The catalog every replica shares (its own connection: its writes commit at once, outside the
            # store's batch).
            catalog = PostgresCatalog(psycopg.connect(self.dsn, autocommit=True))
            inc = _Incarnation(rid, store)
            inc.children = ChildRows(self.dsn, inc.row_keys.get)
            self._current = inc
            if self.on_incarnation is not None:
                self.on_incarnation(rid)
            log.info("replica %s started (capacity %d)", rid, s.capacity)
            guarded: GuardedKubeClient = GuardedKubeClient(self.kube, self._guard)
            if s.keep_log_bytes > 0:
                # Its own connection: a log is kept between two statements of the executor's, never inside.
                inc.keeper = LogKeeper(logs, self.kube, max_bytes=s.keep_log_bytes, store=inc.store)
                guarded = LogKeepingKubeClient(self.kube, self._guard, inc.keeper)
            try:
                async with open_executor(
                    self.platform,
                    kube_client=guarded,
                    store=inc.store,
                    settings=self.executor_settings,
                    metrics_registry=inc.registry,
                    catalog=catalog,
                    children=inc.children,
                ) as executor:
                    inc.executor = executor
                    async with asyncio.TaskGroup() as group:
                        loops = [
                            group.create_task(self._heartbeat_loop(inc, beat)),
                            group.create_task(self._claim_loop(inc, work)),
                            group.create_task(self._listen(inc)),
                            group.create_task(self._reap_loop(inc)),
                        ]
                        stopped = group.create_task(stop.wait())
                        fenced = group.create_task(inc.fenced.wait())
                        await asyncio.wait({stopped, fenced}, return_when=asyncio.FIRST_COMPLETED)
                        for task in (*loops, stopped, fenced):
                            task.cancel()
                    if not inc.fenced.is_set():
                        await self._hand_over(inc, work)
                    else:
                        inc.store.fence()
            finally:
                inc.fenced.set()
                self._safe_until = 0.0
                self.stats.write_statements += inc.store.statements + inc.claim_statements
                self.stats.statements += inc.store.statements + inc.claim_statements + inc.statements
                if inc.keeper is not None:
                    inc.keeper.close()
                with contextlib.suppress(Exception):
                    inc.store.close()
                with contextlib.suppress(Exception):
                    catalog.close()
                with contextlib.suppress(Exception):
                    await inc.children.close()
                self._current = None
            return not stop.is_set() and bool(inc.why)

    def _lost(self, rid: uuid.UUID, keys: Collection[str]) -> None:
        # Under this protocol only a fenced replica loses rows (the sweeper fences before it releases): a
        # refused write means this incarnation is dead, whatever its heartbeat has seen so far.
        self.stats.lost += len(keys)
        if self._current is not None and self._current.id == rid:
            self._fence(self._current, f"{len(keys)} fenced write(s) refused")

    def _fence(self, inc: _Incarnation, why: str) -> None:
        if inc.fenced.is_set():
            return
        inc.why = why
        log.warning("replica %s fences itself: %s", inc.id, why)
        self._safe_until = 0.0
        inc.store.fence()
        inc.fenced.set()

    async def _hand_over(self, inc: _Incarnation, conn: psycopg.AsyncConnection[Any]) -> None:
        """SIGTERM: close the guard, flush, release every row this incarnation owns and fence its replica row
        in one transaction, wake the other replicas — all before the executor is torn down."""
        self._safe_until = 0.0
        with contextlib.suppress(TaskplugError):
            inc.store.flush()
        inc.store.fence()
        inc.fenced.set()
        try:
            async with conn.transaction():
                cur = await conn.execute(
                    "UPDATE taskplug_executions SET owner_id = NULL, updated_at = now() "
                    "WHERE owner_id = %s AND NOT terminal",
                    (inc.id,),
                )
                released = cur.rowcount
                await conn.execute(
                    "UPDATE taskplug_replicas SET fenced_at = now(), owned = 0 WHERE id = %s", (inc.id,)
                )
                await conn.execute("NOTIFY taskplug_work")
        except psycopg.Error as e:
            # Nothing is lost: this replica writes and creates nothing more, and the others' sweeper
            # releases its executions once its heartbeat is ttl old.
            log.warning("hand-over failed (%s): the other replicas take over after the ttl", e)
            return
        inc.statements += 3
        log.info("replica %s stopped: %d execution(s) handed over", inc.id, released)

    # -- heartbeat --------------------------------------------------------------------------------------------
    async def _heartbeat_loop(self, inc: _Incarnation, conn: psycopg.AsyncConnection[Any]) -> None:
        s = self.settings
        while True:
            sent = time.monotonic()
            try:
                cur = await conn.execute(
                    "UPDATE taskplug_replicas SET heartbeat_at = now(), owned = %s, metrics = %s::jsonb "
                    "WHERE id = %s AND fenced_at IS NULL",
                    (self._owned(inc), orjson.dumps(self._metrics(inc)).decode(), inc.id),
                )
                inc.statements += 1
            except psycopg.Error as e:
                _reraise_cancellation()
                log.warning("heartbeat failed: %s", e)
                if time.monotonic() - self._last_ok > s.ttl:
                    self._fence(inc, f"no heartbeat confirmed for {s.ttl}s ({e})")
                    return
            else:
                if cur.rowcount == 0 and s.fencing:
                    self._fence(inc, "declared dead by another replica (heartbeat refused)")
                    return
                if sent - self._last_ok > s.ttl and s.fencing:
                    # Paused past the ttl, yet nobody fenced us yet: the others may do so any moment, and
                    # this replica may have been acting on an expired guard. Fence rather than race.
                    self._fence(inc, f"heartbeat gap of {sent - self._last_ok:.1f}s exceeded the ttl")
                    return
                self._last_ok = sent
                self._safe_until = sent + s.ttl - s.margin
            await asyncio.sleep(s.heartbeat)

    def _owned(self, inc: _Incarnation) -> int:
        return len(inc.rows)

    def _metrics(self, inc: _Incarnation) -> dict[str, list[dict[str, Any]]]:
        """The replica's metric samples for the API's ``/metrics`` (contract: {name: [{labels, value}]})."""
        ex = inc.executor
        values = {
            "taskplug_replica_owned_executions": len(inc.rows),
            "taskplug_replica_claimed_total": self.stats.claimed,
            "taskplug_replica_finished_total": self.stats.finished,
            "taskplug_replica_incarnations_total": self.stats.incarnations,
            "taskplug_replica_self_fenced_total": self.stats.fenced,
            "taskplug_replica_guard_refusals_total": self.stats.guard_refusals,
            "taskplug_replica_statements_total": (
                self.stats.statements + inc.store.statements + inc.claim_statements + inc.statements
            ),
            "taskplug_replica_write_statements_total": (
                self.stats.write_statements + inc.store.statements + inc.claim_statements
            ),
            "taskplug_replica_reaped_total": self.stats.reaped,
            "taskplug_executor_rounds_total": ex.rounds if ex is not None else 0,
        }
        out: dict[str, list[dict[str, Any]]] = {
            name: [{"labels": {}, "value": float(value)}] for name, value in values.items()
        }
        # The plugin machinery's metrics, then the process's own collectors (CPU, memory, open files, GC)
        # and anything registered globally.
        for family in (*inc.registry.collect(), *REGISTRY.collect()):
            for sample in family.samples:
                out.setdefault(sample.name, []).append({"labels": dict(sample.labels), "value": sample.value})
        return out

    # -- sweep, claim, reconcile ---------------------------------------------------------------------------
    async def _claim_loop(self, inc: _Incarnation, conn: psycopg.AsyncConnection[Any]) -> None:
        s = self.settings
        next_reconcile = time.monotonic() + s.reconcile
        while True:
            inc.work.clear()
            try:
                await self._sweep(inc, conn)
                self._retire_finished(inc)
                free = s.capacity - len(inc.rows)
                if free > 0 and time.monotonic() < self._safe_until:
                    cur = await conn.execute(_CLAIM, (inc.id, min(free, s.claim_batch)))
                    inc.claim_statements += 1
                    rows = await cur.fetchall()
                    await self._adopt(inc, conn, rows)
                    if len(rows) == min(free, s.claim_batch):
                        inc.work.set()  # more may be waiting: claim again at once
                if time.monotonic() >= next_reconcile:
                    next_reconcile = time.monotonic() + s.reconcile
                    await self._reconcile(inc, conn)
            except psycopg.Error as e:
                _reraise_cancellation()
                log.warning("sweep/claim failed: %s", e)
            # asyncio.timeout, not wait_for: Python 3.11's wait_for loses a cancellation that comes as the event
            # is set (the claim sets it to claim again at once), and this loop ends only by being cancelled.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(s.poll):
                    await inc.work.wait()

    async def _sweep(self, inc: _Incarnation, conn: psycopg.AsyncConnection[Any]) -> None:
        s = self.settings
        await conn.execute(_SWEEP_FENCE, (s.ttl,))
        cur = await conn.execute(_SWEEP_RELEASE)
        inc.statements += 2
        if cur.rowcount:
            log.info("released %d execution(s) of fenced or missing replicas", cur.rowcount)
            await conn.execute("NOTIFY taskplug_work")
            await conn.execute(_SWEEP_FORGET, (s.forget_fenced_after,))
            inc.statements += 2
            inc.work.set()

    def _retire_finished(self, inc: _Incarnation) -> None:
        """Executions whose terminal state is committed (or that are no longer this replica's) are dropped
        from the store's claims and from the executor's memory, so a long-running replica holds only the
        executions it drives."""
        for key in list(inc.rows):
            claim = inc.store.claim_of(key)
            if claim is None:
                self._forget(inc, key)
                continue
            if claim.terminal:
                if inc.store.logs_pending(key):
                    # A log kept after the end was committed (its pod was not deleted here): commit it
                    # before the execution is forgotten.
                    with contextlib.suppress(TaskplugError):
                        inc.store.flush()
                inc.store.release(key)
                self._forget(inc, key)
                self.stats.finished += 1

    def _forget(self, inc: _Incarnation, key: str) -> None:
        if inc.children is not None:
            inc.children.forget(key)
        inc.rows.pop(key, None)
        row_key = inc.row_keys.pop(key, None)
        if row_key is not None and inc.by_row_key.get(row_key) == key:
            del inc.by_row_key[row_key]
        if inc.executor is not None:
            inc.executor.forget(key)

    async def _adopt(self, inc: _Incarnation, conn: psycopg.AsyncConnection[Any], rows: list[Any]) -> None:
        ex = inc.executor
        assert ex is not None
        for row_id, row_key, epoch, record_json, spec_doc, abort in rows:
            self.stats.claimed += 1
            try:
                spec = parse_spec(spec_doc, source=f"execution {row_key}", fresh_name=False)
            except TaskplugError as e:
                await self._fail_row(inc, conn, row_id, epoch, "BadTaskSpecification", str(e))
                continue
            key = spec.execution_key
            if key in inc.rows and inc.rows[key] != row_id:
                await self._fail_row(
                    inc, conn, row_id, epoch, "DuplicateExecution", f"execution {key} is already driven here"
                )
                continue
            record = ExecutionRecord.from_json(record_json) if record_json else None
            # A map's elements and a workflow's nodes (and their maps' elements) are its child node records:
            # a taken-over execution resumes from them, never starting a finished node or element again.
            nodes = await self._nodes(inc, conn, row_id) if spec.kind in _WITH_NODES else []
            inc.store.claim(
                key,
                Claim(row_id, epoch, record, nodes, _resource_name(spec), object_owner=_object_owner(spec)),
            )
            inc.rows[key] = row_id
            inc.by_row_key[row_key] = key
            inc.row_keys[key] = row_key
            if spec.kind is NodeKind.WORKFLOW and inc.children is not None:
                inc.children.documents[key] = spec_doc  # its launch plans' children are written from it
            try:
                await ex.submit(spec)
            except TaskplugError as e:
                inc.store.release(key)
                self._forget(inc, key)
                await self._fail_row(inc, conn, row_id, epoch, getattr(e, "code", "") or "BadTask", str(e))
                continue
            log.info("claimed %s (epoch %d)%s", row_key, epoch, ": its abort was requested" if abort else "")
            if abort:
                ex.abort(key)

    async def _nodes(
        self, inc: _Incarnation, conn: psycopg.AsyncConnection[Any], row_id: int
    ) -> list[NodeRecord]:
        cur = await conn.execute("SELECT record FROM taskplug_nodes WHERE execution_id = %s", (row_id,))
        inc.claim_statements += 1
        return [NodeRecord.from_json(r[0]) for r in await cur.fetchall()]

    async def _fail_row(
        self,
        inc: _Incarnation,
        conn: psycopg.AsyncConnection[Any],
        row_id: int,
        epoch: int,
        code: str,
        message: str,
    ) -> None:
        error = {"code": code, "kind": "USER", "message": message}
        await conn.execute(_FAIL, (orjson.dumps(error).decode(), row_id, inc.id, epoch))
        inc.claim_statements += 1
        log.warning("execution row %d cannot run: %s", row_id, message)

    async def _reconcile(self, inc: _Incarnation, conn: psycopg.AsyncConnection[Any]) -> None:
        """Adopt rows this incarnation owns but does not drive (a claim whose answer was lost), and act on
        abort requests whose NOTIFY was missed."""
        cur = await conn.execute(_OWNED, (inc.id,))
        inc.statements += 1
        rows = await cur.fetchall()
        known = set(inc.rows.values())
        missing = [r for r in rows if r[0] not in known]
        if missing:
            log.warning("adopting %d owned execution(s) this replica was not driving", len(missing))
            await self._adopt(inc, conn, missing)
        for _, row_key, _, _, _, abort in rows:
            if abort:
                self._abort(inc, row_key)
        if inc.children is not None:
            for parent in await inc.children.refresh_waiting():
                if inc.executor is not None and parent in inc.rows:
                    inc.executor.wake(parent)

    def _abort(self, inc: _Incarnation, row_key: str) -> None:
        key = inc.by_row_key.get(row_key)
        if key is not None and inc.executor is not None and key in inc.rows:
            log.info("aborting %s as requested", row_key)
            inc.executor.abort(key)
        else:
            log.info("abort of %s requested: not driven here", row_key)

    def _wake(self, inc: _Incarnation, row_key: str) -> None:
        """A signal of ``row_key``'s execution was set: if this replica drives it, evaluate it now (its gate
        reads the signal) rather than at its next resync."""
        key = inc.by_row_key.get(row_key)
        if key is not None and inc.executor is not None and key in inc.rows:
            inc.executor.wake(key)

    # -- NOTIFY -----------------------------------------------------------------------------------------------
    async def _listen(self, inc: _Incarnation) -> None:
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(self.dsn, autocommit=True) as conn:
                    await conn.execute("LISTEN taskplug_work")
                    await conn.execute("LISTEN taskplug_abort")
                    await conn.execute(f"LISTEN {SIGNAL_CHANNEL}")
                    await conn.execute(f"LISTEN {CHILD_CHANNEL}")
                    inc.work.set()  # anything sent while not listening: claim (and reconcile) now
                    async for note in conn.notifies():
                        if note.channel == "taskplug_abort":
                            self._abort(inc, note.payload)
                        elif note.channel == SIGNAL_CHANNEL:
                            self._wake(inc, note.payload)
                        elif note.channel == CHILD_CHANNEL and inc.children is not None:
                            parent = await inc.children.child_ended(note.payload)
                            if parent is not None:
                                self._wake(inc, parent)
                        else:
                            inc.work.set()
            except psycopg.Error as e:
                _reraise_cancellation()
                log.warning("LISTEN connection lost (%s); the poll covers until it is back", e)
                await asyncio.sleep(self.settings.poll)

    # -- the orphan reaper --------------------------------------------------------------------------------
    async def _reap_loop(self, inc: _Incarnation) -> None:
        keep_finished = not self.platform.config.get(K8S_SECTION).delete_resource_on_finalize
        rtypes = reaped_resource_types(self.platform)  # every kind the enabled plugins create, Pods first
        async with await psycopg.AsyncConnection.connect(self.dsn, autocommit=True) as conn:
            while True:
                await asyncio.sleep(self.settings.reap)
                if inc.keeper is not None:
                    try:
                        # Before the reaper: an ended pod's log is kept before anything deletes the pod.
                        await inc.keeper.keep_ended()
                    except (psycopg.Error, TaskplugError, ConnectionError, TimeoutError) as e:
                        _reraise_cancellation()
                        log.warning("keeping ended pods' logs failed: %s", e)
                try:
                    deleted = await reap_orphans(conn, self.kube, rtypes=rtypes, keep_finished=keep_finished)
                except (psycopg.Error, TaskplugError, ConnectionError, TimeoutError) as e:
                    _reraise_cancellation()
                    log.warning("orphan reaper pass failed: %s", e)
                    continue
                self.stats.reaped += len(deleted)
                for namespace, name in deleted:
                    log.warning(
                        "orphan reaper deleted %s/%s (its attempt was already finished)", namespace, name
                    )


_WITH_NODES: Final = frozenset({NodeKind.ARRAY, NodeKind.WORKFLOW})
"""The kinds of execution whose root node has child node records."""


def _reraise_cancellation() -> None:
    """psycopg answers a cancelled query with ``QueryCanceled`` (it cancels the statement on the server):
    a loop that catches database errors must not swallow its task's cancellation with it."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


def _resource_name(spec: ExecutionSpec) -> Callable[[int], str]:
    def name(attempt: int) -> str:
        return spec.for_attempt(attempt).metadata.task_execution_id.generated_name

    return name


def _object_owner(spec: ExecutionSpec) -> str:
    namespace, execution_id = owner_key(spec.metadata)
    return f"{namespace}/{execution_id}"
