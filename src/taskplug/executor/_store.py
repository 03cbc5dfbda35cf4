"""Durable execution state: where each execution is (attempt, plugin state, failure budgets, outcome) and
the phase events it went through.

Follows what flytepropeller keeps in the FlyteWorkflow CR's node status for a task node: the plugin state
(versioned bytes), the last phase and version, the attempt counters and the cleanup flag; for an ArrayNode,
its ``ArrayNodeState`` in the record and one :class:`NodeRecord` per element that has started (propeller's
``SubNode*`` arrays). SQLite is the default store; writes are committed in small batches (a killed executor
loses at most the last batch, and every plugin call is idempotent, so replaying it creates nothing twice).

The SQLite file is taskplug's or refused: a new file gets a schema marker (``PRAGMA application_id`` and a
schema version in ``user_version``), and an existing one is checked before anything is written to it — a file
that is not SQLite, a corrupt one, another program's database, one from a newer schema → :class:`StateStoreError`
(the CLI's exit 2) naming the file, which is left as it was. A stored record that does not decode is the same
error naming the execution. One execution is driven by one process at a time: :meth:`SQLiteStateStore.lock`
takes an ``fcntl`` lock on a side file per execution (``<db>.locks/``), released when its holder exits, even
killed.

Writes are fenced (:mod:`._coordination`): an execution held under a lease (:meth:`SQLiteStateStore.acquire_lease`,
taken by the ``LocalCoordinator`` after the lock) is written only while the file's ``leases`` row still names
that owner and epoch, checked in the statement that writes. A write refused means another process took the
execution over: it is dropped, and the store reports the execution lost (``on_lost``) and never writes it
again. An execution without a lease here (tests, tools that read and write records directly) is written
unfenced.

Gate nodes' signals (flyteidl's ``service/signal.proto`` and flyteadmin's ``manager/impl/signal_manager.go``):
a store that keeps them is a :class:`KeepsSignals` — an optional capability, a store without it is still a
:class:`StateStore`. A signal is keyed (execution key, signal id): one namespace per execution, so two gates
of one name share it. The gate creates it each round (``get_or_create_signal``, ``{type, value: null}``);
a person sets it (``set_signal``: the signal must exist, the value must be castable to its type, and a
later value overwrites an earlier one). Setting is never fenced by a lease: whoever answers is not the
process that drives the execution (:func:`check_signal_value` is the check every store and the API apply).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import socket
import sqlite3
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol, TypedDict, runtime_checkable

import orjson
from flyteidl.core import literals_pb2, types_pb2
from google.protobuf import json_format, text_format
from google.protobuf.message import DecodeError

from taskplug.core import SpecError, TaskplugError, describe_type, plain_to_literal
from taskplug.executor._catalog import CATALOG_TABLES

__all__ = [
    "SIGNAL_NOT_CASTABLE",
    "SIGNAL_NOT_FOUND",
    "Closing",
    "Event",
    "ExecutionRecord",
    "KeepsSignals",
    "Lease",
    "MemoryStateStore",
    "NodeRecord",
    "SQLiteStateStore",
    "Signal",
    "SignalError",
    "StateStore",
    "StateStoreError",
    "check_signal_value",
    "check_state_file",
    "signal_not_found",
]

SIGNAL_NOT_FOUND: Final = "SignalNotFound"
""":class:`SignalError`'s code when the signal does not exist (yet): its gate has not run."""
SIGNAL_NOT_CASTABLE: Final = "SignalNotCastable"
""":class:`SignalError`'s code when the value's type is not castable to the signal's."""


class Closing(TypedDict, total=False):
    """An attempt's end, decided and saved before its object is cleaned up (stored as JSON in the record).

    A process stopped while cleaning up finishes the cleanup on resume instead of deciding again."""

    retry: bool  # a next attempt follows the cleanup
    cleanup: bool  # abort the object before finalizing it (the plugin asked: ``cleanup_on_failure``)
    phase: int  # the NodePhase the node ends in when no retry follows (absent in records of 0.x: derived)


class StateStoreError(TaskplugError):
    """The state DB cannot be used: not taskplug's, corrupt, unreadable, a record that does not decode, or an
    execution another process is driving. The message names the file (and the execution)."""


@dataclass(frozen=True, slots=True)
class Lease:
    """An execution held by ``owner`` (one process incarnation) under ``epoch``, the fencing token: taking an
    execution increments it, and a write under an older epoch is refused (see :mod:`._coordination`)."""

    owner: str
    epoch: int


@dataclass(slots=True)
class Event:
    """One phase transition as reported to users (Flyte's TaskExecutionEvent, reduced)."""

    attempt: int
    phase: str
    version: int
    reason: str
    occurred_at: str | None
    error: dict[str, Any] | None = None
    logs: list[dict[str, Any]] | None = None  # log links the plugin reported with this phase
    # An ArrayNode's event: one entry per element that changed (every element in a terminal event), as
    # Flyte's ExternalResourceInfo: externalId, index, retryAttempt, phase, logs (and reason when failing).
    external_resources: list[dict[str, Any]] | None = None
    # Whose event it is, as Flyte's three event kinds: "task" (a task attempt's phase, Flyte's
    # TaskExecutionEvent), "node" (a workflow node's phase, NodeExecutionEvent) or "workflow" (the workflow's
    # own, WorkflowExecutionEvent); ``node`` is the node's unique id in a workflow (None for the execution's
    # own root node).
    kind: str = "task"
    node: str | None = None
    # A node event's node name (Flyte's NodeExecutionEvent ``node_name``: the node's metadata name, e.g. its
    # task's short name): what names a node no compiled workflow at hand describes, a ``@dynamic`` node's.
    name: str | None = None
    # A cacheable task's catalog use (Flyte's TaskNodeMetadata ``cache_status`` and ``catalog_key``):
    # ``{"status": "CACHE_HIT", "key": {...}, "source": ...}``; None for a task that is not cacheable.
    cache: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "phase": self.phase,
            "version": self.version,
            "reason": self.reason,
            "occurredAt": self.occurred_at,
            "attempt": self.attempt,
        }
        if self.error is not None:
            out["error"] = self.error
        if self.logs:
            out["logs"] = self.logs
        if self.external_resources is not None:
            out["externalResources"] = self.external_resources
        if self.kind != "task":
            out["kind"] = self.kind
        if self.node is not None:
            out["node"] = self.node
        if self.name:
            out["name"] = self.name
        if self.cache is not None:
            out["cacheStatus"] = self.cache.get("status")
            if self.cache.get("key"):
                out["catalogKey"] = self.cache["key"]
        return out


@dataclass(slots=True, kw_only=True)
class NodeRecord:
    """One node's status, as far as it got (what flytepropeller keeps in a node's status, read and written by the
    node step through :class:`~taskplug.executor.nodes.NodeState`), keyed within its execution by ``path``: the
    root node's id (``n0``), a map element ``<root>/<index>`` (``n0/3``), later a workflow's nested nodes
    (``n2/n0-n1``). The node phase, the attempt, the phase last reported, the plugin state, the system failures
    counted, the attempt's and node's start times (the deadlines' origins), the cleanup flag, the decided end
    being cleaned up, the last error and log links.

    The stored JSON's keys are these field names, and the API's SQL reads some of them out of it
    (``record->>'node_phase'``, ``'attempt'``, ``'reason'``, ``'error'``, ``'logs'``, and a root's ``'path'``:
    ``service/_api_queries.py``) — renaming a field is a schema change (a SQLite upgrade in this module, a
    PostgreSQL migration in ``service/migrations``).

    Deviation: for a map element, propeller keeps only small numbers (``SubNodePhases``, ``SubNodeTaskPhases``,
    ``SubNodeRetryAttempts``, ``SubNodeSystemFailures``) and fakes the plugin state every round; taskplug keeps
    the element's real plugin state, phase version, start time and last error, so a resumed executor continues
    each element where it was instead of rediscovering it.
    """

    path: str
    node_phase: int = 0  # NodePhase
    attempt: int = 0  # the current retry attempt (0-based)
    task_phase: int = 0  # the Phase the handler last reported for the current attempt
    phase_version: int = 0
    reason: str = ""
    state_version: int = 0
    plugin_state: dict[str, Any] | None = None
    system_failures: int = 0
    started_at: float | None = None  # the current attempt's start (epoch seconds): its execution deadline
    queued_at: float | None = None  # the node's first start: its active deadline
    cleanup_on_failure: bool = False
    # The attempt's end, decided and saved before its resource is cleaned up. A process stopped while cleaning
    # up finishes the cleanup on resume instead of deciding again.
    closing: Closing | None = None
    error: dict[str, Any] | None = None  # why the node (or its last attempt) failed
    logs: list[dict[str, Any]] | None = None  # the log links last reported for the current attempt
    # A workflow's node: its phase as the workflow sees it and its kind's own state (a branch's taken case, a
    # sub-workflow's phase and error, a gate's, a launch plan's child); a workflow execution's root: the
    # workflow's phase and the error it is failing with. None for nodes outside a workflow.
    workflow_state: dict[str, Any] | None = None
    # A cacheable task node's catalog use: ``status`` (CACHE_HIT, CACHE_MISS, CACHE_POPULATED …), the
    # ``key``, the hit's ``source`` execution, a serialized node's ``reservation``. None when not cacheable.
    cache: dict[str, Any] | None = None

    @property
    def index(self) -> int:
        """A child node's last path segment as a number (a map element's index)."""
        return int(self.path.rpartition("/")[2])

    @property
    def first_attempt(self) -> int:
        return 0

    def to_row(self) -> bytes:
        # Field by field: dataclasses.asdict deep-copies every value and dominated the executor's profile.
        return orjson.dumps({name: getattr(self, name) for name in _NODE_FIELDS})

    @classmethod
    def from_row(cls, data: bytes | str, *, parent: str = "") -> NodeRecord:
        return cls.from_json(orjson.loads(data), parent=parent)

    @classmethod
    def from_json(cls, data: dict[str, Any], *, parent: str = "") -> NodeRecord:
        """A record from its stored JSON, also as the release before node paths wrote it (an element's
        ``index`` becomes the path ``<parent>/<index>``); see :func:`_current_keys`. A workflow's task or map
        node is kept as the :class:`ExecutionRecord` its node runs over (it has a ``key``): read as one."""
        if cls is NodeRecord and isinstance(data, dict) and "key" in data:
            return ExecutionRecord.from_json(data)
        return cls(**_current_keys(data, _NODE_FIELD_SET, parent))


@dataclass(slots=True, kw_only=True)
class ExecutionRecord(NodeRecord):
    """Everything the executor must remember about one execution to resume it after a restart: its root node's
    status (the :class:`NodeRecord` fields, ``path`` the root node's id, taken from the key when not given) and
    the execution's own end (terminal, outcome, outputs, abort request, spec digest), in one row, so a round
    of a single task is one write."""

    path: str = ""
    key: str
    terminal: bool = False
    outcome: str = ""  # the final phase name once terminal
    outputs: dict[str, Any] | None = None
    abort_requested: bool = False
    # An ArrayNode's own state (propeller's ArrayNodeState less the per-element arrays, which are the child
    # NodeRecords): {"phase": ArrayNodePhase, "size": n, "version": task phase version, "error": ...}.
    array: dict[str, Any] | None = None
    # A digest of the spec the execution started with (template, inputs, execution fields): a resume with
    # another spec is refused. Empty in records written before it was kept.
    spec_hash: str = ""
    # Where ``taskplug run --rerun`` started this history: the attempt after the earlier history's last, so
    # its objects and outputs never collide with theirs (0 otherwise). What an attempt budget or an attempt
    # count should be measured from.
    first_attempt: int = 0  # a root node's own; a child's is always 0

    def __post_init__(self) -> None:
        if not self.path:
            self.path = root_path(self.key)

    def to_row(self) -> bytes:
        return orjson.dumps({name: getattr(self, name) for name in _RECORD_FIELDS})

    @classmethod
    def from_row(cls, data: bytes | str, *, parent: str = "") -> ExecutionRecord:
        return cls.from_json(orjson.loads(data))

    @classmethod
    def from_json(cls, data: dict[str, Any], *, parent: str = "") -> ExecutionRecord:
        """A record from its stored JSON, also as the release before node paths wrote it (``phase`` for
        ``task_phase``; ``user_failures``, written and never read, is dropped)."""
        return cls(**_current_keys(data, _RECORD_FIELD_SET, parent))


def root_path(key: str) -> str:
    """The root node's path of execution ``key`` (``project/domain/name/node``): its node id."""
    return key.rpartition("/")[2]


def _current_keys(data: dict[str, Any], fields: frozenset[str], parent: str) -> dict[str, Any]:
    """A stored record's JSON with the key names of the release before node paths (``phase``: an execution's
    task phase; ``attempts``, ``index``: an element's attempt and position) read as today's, keys no longer
    kept (``user_failures``) dropped. Anything else that is not a field is refused (TypeError): the row was
    not written by taskplug."""
    if not isinstance(data, dict):
        raise TypeError(f"a record is a JSON object, not {type(data).__name__}")
    if "path" not in data and ("phase" in data or "attempts" in data or "index" in data):
        data = dict(data)
        if "phase" in data:
            data.setdefault("task_phase", data.pop("phase"))
        if "attempts" in data:
            data.setdefault("attempt", data.pop("attempts"))
        if "index" in data:
            index = data.pop("index")
            data["path"] = f"{parent}/{index}" if parent else str(index)
    unknown = data.keys() - fields - _DROPPED_KEYS
    if unknown:
        raise TypeError(f"unknown record field(s): {', '.join(sorted(unknown))}")
    return {name: value for name, value in data.items() if name in fields}


_DROPPED_KEYS = frozenset({"user_failures"})


_NODE_FIELDS = tuple(NodeRecord.__dataclass_fields__)
_NODE_FIELD_SET = frozenset(_NODE_FIELDS)
_RECORD_FIELDS = tuple(ExecutionRecord.__dataclass_fields__)
_RECORD_FIELD_SET = frozenset(_RECORD_FIELDS)
_EVENT_FIELDS = tuple(Event.__dataclass_fields__)


class SignalError(TaskplugError):
    """A signal cannot be set: it does not exist (code :data:`SIGNAL_NOT_FOUND`) or the value does not fit its
    type (:data:`SIGNAL_NOT_CASTABLE`). The message says which, in flyteadmin's words."""


@dataclass(frozen=True, slots=True)
class Signal:
    """A gate's signal as a store keeps it (flyteidl's ``admin.Signal`` less the execution id): its id, its
    type, and its value once a person set it."""

    signal_id: str
    type: types_pb2.LiteralType
    value: literals_pb2.Literal | None = None


@runtime_checkable
class KeepsSignals(Protocol):
    """An optional capability of a state store: gate nodes' signals (see the module docstring)."""

    def get_or_create_signal(
        self, key: str, signal_id: str, literal_type: types_pb2.LiteralType
    ) -> literals_pb2.Literal | None:
        """The value of ``key``'s signal ``signal_id``, creating the signal (``literal_type``, no value) when
        absent; None while no value is set."""
        ...

    def list_signals(self, key: str) -> list[Signal]:
        """Every signal of ``key``, by id."""
        ...

    def set_signal(self, key: str, signal_id: str, value: literals_pb2.Literal) -> None:
        """Set (or overwrite) the value of ``key``'s signal ``signal_id``, committed at once; a
        :class:`SignalError` when it does not exist or ``value`` is not castable to its type."""
        ...


def signal_not_found(key: str, signal_id: str) -> SignalError:
    """flyteadmin's refusal of a signal set before its gate ran (``ValidateSignalSetRequest``)."""
    return SignalError(
        f"failed to validate that signal [execution {key!r}, signal {signal_id!r}] exists: its gate has not "
        "started yet (signals are created when their gate node runs)",
        code=SIGNAL_NOT_FOUND,
    )


def check_signal_value(signal: Signal, value: literals_pb2.Literal) -> None:
    """Refuse (:class:`SignalError`) a ``value`` whose type is not castable to ``signal``'s type."""
    shown_value = _one_line(value)
    reason = "it holds no value"
    if value.WhichOneof("value") is not None:
        # Castability: a simple check for now — the value, as Literal JSON, converted by the signal's type
        # with the same checks inputs get at launch. taskplug.compiler's AreTypesCastable replaces it here.
        try:
            plain_to_literal(json_format.MessageToDict(value), signal.type, "value")
            return
        except SpecError as e:
            reason = e.reason
    raise SignalError(
        f"requested signal value [{shown_value}] is not castable to existing signal type "
        f"[{_one_line(signal.type)}] of signal {signal.signal_id!r} ({describe_type(signal.type)}): {reason}",
        code=SIGNAL_NOT_CASTABLE,
    )


def _one_line(message: Any) -> str:
    text = str(text_format.MessageToString(message, as_one_line=True))
    return text if len(text) <= 300 else text[:297] + "..."


def _signal_from_row(signal_id: str, type_bytes: bytes, value_bytes: bytes | None) -> Signal:
    value = None if value_bytes is None else literals_pb2.Literal.FromString(value_bytes)
    return Signal(signal_id, types_pb2.LiteralType.FromString(type_bytes), value)


class StateStore(Protocol):
    """Where the executor keeps execution records and their events. :class:`SQLiteStateStore` is durable
    (``taskplug run`` resumes from it); :class:`MemoryStateStore` is for tests and benchmarks. ``save`` may
    batch writes; ``flush`` commits them, and the executor flushes before anything is deleted."""

    def load(self, key: str) -> ExecutionRecord | None: ...

    def save(self, record: ExecutionRecord) -> None: ...

    def append_event(self, key: str, event: Event) -> None: ...

    def events(self, key: str) -> list[Event]: ...

    def save_nodes(self, key: str, nodes: list[NodeRecord]) -> None:
        """Store the child nodes of execution ``key`` that changed (its root node is the record itself)."""
        ...

    def load_nodes(self, key: str) -> list[NodeRecord]:
        """Every child node of ``key`` ever saved (nodes never saved have not started)."""
        ...

    def flush(self) -> None: ...

    def close(self) -> None: ...


class MemoryStateStore:
    """An in-process store, for benchmarks and tests that do not restart the executor."""

    def __init__(self) -> None:
        self._records: dict[str, ExecutionRecord] = {}
        self._events: dict[str, list[Event]] = {}
        self._nodes: dict[str, dict[str, bytes]] = {}
        # key -> signal id -> (type, value): protobuf bytes, as SQLite keeps them.
        self._signals: dict[str, dict[str, tuple[bytes, bytes | None]]] = {}

    def load(self, key: str) -> ExecutionRecord | None:
        return self._records.get(key)

    def save(self, record: ExecutionRecord) -> None:
        self._records[record.key] = record

    def append_event(self, key: str, event: Event) -> None:
        self._events.setdefault(key, []).append(event)

    def events(self, key: str) -> list[Event]:
        return list(self._events.get(key, []))

    def save_nodes(self, key: str, nodes: list[NodeRecord]) -> None:
        # Stored as rows, as SQLite does: the executor keeps mutating its own node objects.
        rows = self._nodes.setdefault(key, {})
        for node in nodes:
            rows[node.path] = node.to_row()

    def load_nodes(self, key: str) -> list[NodeRecord]:
        rows = self._nodes.get(key, {})
        return [NodeRecord.from_row(row) for row in rows.values()]

    def get_or_create_signal(
        self, key: str, signal_id: str, literal_type: types_pb2.LiteralType
    ) -> literals_pb2.Literal | None:
        kept = self._signals.setdefault(key, {}).setdefault(
            signal_id, (literal_type.SerializeToString(), None)
        )
        return None if kept[1] is None else literals_pb2.Literal.FromString(kept[1])

    def list_signals(self, key: str) -> list[Signal]:
        rows = self._signals.get(key, {})
        return [_signal_from_row(sid, t, v) for sid, (t, v) in sorted(rows.items())]

    def set_signal(self, key: str, signal_id: str, value: literals_pb2.Literal) -> None:
        kept = self._signals.get(key, {}).get(signal_id)
        if kept is None:
            raise signal_not_found(key, signal_id)
        check_signal_value(_signal_from_row(signal_id, kept[0], None), value)
        self._signals[key][signal_id] = (kept[0], value.SerializeToString())

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


# "tplg": marks the file as taskplug's state DB (SQLite's application_id, as a file-format magic number).
_APPLICATION_ID = 0x74706C67
# 2: the leases table (fenced writes). 3: node records keyed by node path (``nodes`` replaces ``elements``, the
# records' JSON speaks NodeRecord's key names). 4: gate nodes' signals (``signals``). An older file is upgraded
# when opened (:func:`_upgrade`). 5: the data catalog (``catalog``, ``catalog_reservations``).
_SCHEMA_VERSION = 5
_SQLITE_MAGIC = b"SQLite format 3\x00"
_TABLES = {"executions", "events", "nodes", "leases", "signals", "catalog", "catalog_reservations"}
# What a state DB written before the marker, or by an earlier schema, may hold: adopted (and upgraded) rather
# than refused.
_KNOWN_TABLES = _TABLES | {"elements"}
_SQLITE_INTERNAL = {"sqlite_sequence", "sqlite_stat1", "sqlite_stat4"}
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS executions (key TEXT PRIMARY KEY, record BLOB NOT NULL)",
    "CREATE TABLE IF NOT EXISTS events (key TEXT NOT NULL, seq INTEGER PRIMARY KEY AUTOINCREMENT, event BLOB NOT NULL)",
    "CREATE INDEX IF NOT EXISTS events_by_key ON events (key, seq)",
    "CREATE TABLE IF NOT EXISTS nodes (key TEXT NOT NULL, path TEXT NOT NULL, record BLOB NOT NULL, "
    "PRIMARY KEY (key, path))",
    "CREATE TABLE IF NOT EXISTS leases (key TEXT PRIMARY KEY, owner TEXT NOT NULL, epoch INTEGER NOT NULL)",
    # A signal's type and value are flyteidl LiteralType / Literal protobuf bytes; value NULL until set.
    "CREATE TABLE IF NOT EXISTS signals (key TEXT NOT NULL, signal_id TEXT NOT NULL, type BLOB NOT NULL, "
    "value BLOB, PRIMARY KEY (key, signal_id))",
    *CATALOG_TABLES,
)
# A held execution's writes: the same statements, applied only while its lease row is the one this process
# took (the fence, in the statement that writes).
_FENCE = "EXISTS (SELECT 1 FROM leases WHERE key = ? AND owner = ? AND epoch = ?)"
_SAVE = "INSERT INTO executions (key, record) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET record = excluded.record"
_SAVE_FENCED = (
    f"INSERT INTO executions (key, record) SELECT ?, ? WHERE {_FENCE} "
    "ON CONFLICT(key) DO UPDATE SET record = excluded.record"
)
_EVENT = "INSERT INTO events (key, event) VALUES (?, ?)"
_EVENT_FENCED = f"INSERT INTO events (key, event) SELECT ?, ? WHERE {_FENCE}"
_NODE = (
    "INSERT INTO nodes (key, path, record) VALUES (?, ?, ?) "
    "ON CONFLICT(key, path) DO UPDATE SET record = excluded.record"
)
_NODE_FENCED = (
    f"INSERT INTO nodes (key, path, record) SELECT ?, ?, ? WHERE {_FENCE} "
    "ON CONFLICT(key, path) DO UPDATE SET record = excluded.record"
)
_TAKE_LEASE = (
    "INSERT INTO leases (key, owner, epoch) VALUES (?, ?, 1) "
    "ON CONFLICT(key) DO UPDATE SET owner = excluded.owner, epoch = leases.epoch + 1 RETURNING epoch"
)


class SQLiteStateStore:
    """Records and events in one SQLite file (WAL mode); commits every ``commit_interval`` seconds.

    Opening checks the file is taskplug's (or new) before writing anything: see the module docstring."""

    def __init__(self, path: str | Path, *, commit_interval: float = 0.05) -> None:
        self.path = Path(path)
        _check_path(self.path)
        new = not self.path.exists() or self.path.stat().st_size == 0
        try:
            self._db = sqlite3.connect(
                str(self.path), isolation_level=None, check_same_thread=False, timeout=15.0
            )
        except sqlite3.Error as e:
            raise StateStoreError(f"state DB {str(self.path)!r} cannot be opened: {e}") from e
        try:
            if new:
                # Nothing in the file to leave as it was: its schema is written as its first WAL transaction,
                # instead of committed through a rollback journal and then converted to WAL (eight syncs of
                # the disk, a tenth of a second on a small machine's, on a project's first run).
                self._use_wal()
            self._init_schema()
            self._use_wal()
        except BaseException:
            self._db.close()
            raise
        self._commit_interval = commit_interval
        self._in_tx = False
        self._last_commit = time.monotonic()
        self._leases: dict[str, Lease] = {}
        self._lost: set[str] = set()
        self.on_lost: Callable[[Collection[str]], None] | None = None

    def _use_wal(self) -> None:
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")

    def _init_schema(self) -> None:
        """Check the marker and tables; on a new (empty) file or a pre-marker taskplug file, write them.

        A marked file is only read (a reader never waits on another process's write in WAL mode). Writing
        re-checks inside an immediate transaction, so that two processes opening one new file do not both
        initialise it, and a foreign file is refused before anything is written."""
        where = str(self.path)
        try:
            if not self._needs_schema():
                return
            self._db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as e:
            if _is_busy(e):
                raise self._busy(e) from e
            raise StateStoreError(f"state DB {where!r} is not a usable SQLite database: {e}") from e
        except sqlite3.DatabaseError as e:
            raise StateStoreError(f"state DB {where!r} is not a usable SQLite database: {e}") from e
        try:
            if self._needs_schema():
                for statement in _SCHEMA:
                    self._db.execute(statement)
                _upgrade(self._db)
                self._db.execute(f"PRAGMA application_id = {_APPLICATION_ID}")
                self._db.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")
            self._db.execute("COMMIT")
        except sqlite3.DatabaseError as e:
            self._rollback()
            if isinstance(e, sqlite3.OperationalError) and _is_busy(e):
                raise self._busy(e) from e
            raise StateStoreError(f"state DB {where!r} is corrupt or not a database: {e}") from e
        except BaseException:
            self._rollback()
            raise

    def _needs_schema(self) -> bool:
        """Whether the file still needs taskplug's marker or tables; refuses a file that is not taskplug's."""
        where = str(self.path)
        try:
            app_id = self._db.execute("PRAGMA application_id").fetchone()[0]
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            tables = {
                row[0]
                for row in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
            } - _SQLITE_INTERNAL
        except sqlite3.OperationalError as e:
            if _is_busy(e):
                raise self._busy(e) from e
            raise StateStoreError(f"state DB {where!r} is corrupt or not a database: {e}") from e
        except sqlite3.DatabaseError as e:
            raise StateStoreError(f"state DB {where!r} is corrupt or not a database: {e}") from e
        if app_id == _APPLICATION_ID:
            if version > _SCHEMA_VERSION:
                raise StateStoreError(
                    f"state DB {where!r} has schema version {version}, written by a newer taskplug "
                    f"(this one reads up to {_SCHEMA_VERSION})"
                )
        elif app_id != 0:
            raise StateStoreError(
                f"state DB {where!r} is another program's SQLite database (application_id {app_id:#x}); "
                "give --state-db a file of its own"
            )
        elif tables and not tables <= _KNOWN_TABLES:
            raise StateStoreError(
                f"state DB {where!r} is another program's SQLite database (tables: "
                f"{', '.join(sorted(tables))}); give --state-db a file of its own"
            )
        return app_id != _APPLICATION_ID or version != _SCHEMA_VERSION or tables != _TABLES

    def _busy(self, e: Exception) -> StateStoreError:
        return StateStoreError(
            f"state DB {str(self.path)!r} is busy: another process has held a write lock on it too long ({e})"
        )

    def _rollback(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            self._db.execute("ROLLBACK")

    def _begin(self) -> None:
        if not self._in_tx:
            self._db.execute("BEGIN")
            self._in_tx = True

    def _maybe_commit(self) -> None:
        if self._in_tx and time.monotonic() - self._last_commit >= self._commit_interval:
            self.flush()

    def _undecodable(self, what: str, key: str, e: Exception) -> StateStoreError:
        return StateStoreError(
            f"state DB {str(self.path)!r}: the stored {what} of execution {key!r} cannot be read ({e}); "
            "the file was damaged or written by another program"
        )

    def load(self, key: str) -> ExecutionRecord | None:
        row = self._db.execute("SELECT record FROM executions WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        try:
            return ExecutionRecord.from_row(row[0])
        except (orjson.JSONDecodeError, TypeError, ValueError) as e:
            raise self._undecodable("record", key, e) from e

    def save(self, record: ExecutionRecord) -> None:
        self._write(record.key, _SAVE, _SAVE_FENCED, [(record.key, record.to_row())])

    def append_event(self, key: str, event: Event) -> None:
        row = (key, orjson.dumps({name: getattr(event, name) for name in _EVENT_FIELDS}))
        self._write(key, _EVENT, _EVENT_FENCED, [row])

    def events(self, key: str) -> list[Event]:
        rows = self._db.execute("SELECT event FROM events WHERE key = ? ORDER BY seq", (key,)).fetchall()
        try:
            return [Event(**orjson.loads(r[0])) for r in rows]
        except (orjson.JSONDecodeError, TypeError, ValueError) as e:
            raise self._undecodable("events", key, e) from e

    def save_nodes(self, key: str, nodes: list[NodeRecord]) -> None:
        if not nodes:
            return
        self._write(key, _NODE, _NODE_FENCED, [(key, node.path, node.to_row()) for node in nodes])

    def _write(self, key: str, plain: str, fenced: str, rows: list[tuple[Any, ...]]) -> None:
        """Write ``rows`` of execution ``key`` in the open batch: fenced by its lease when one is held (a
        refused write reports ``key`` lost), as they are otherwise; nothing once ``key`` was lost."""
        if key in self._lost:
            return
        self._begin()
        lease = self._leases.get(key)
        if lease is None:
            self._db.executemany(plain, rows)
        else:
            fence = (key, lease.owner, lease.epoch)
            written = self._db.executemany(fenced, [(*row, *fence) for row in rows]).rowcount
            if written < len(rows):
                self._lose(key)
        self._maybe_commit()

    def _lose(self, key: str) -> None:
        self._lost.add(key)
        self._leases.pop(key, None)
        # The refused statement took the file's write lock: commit now rather than keep the new holder
        # waiting for this process's next write.
        self.flush()
        if self.on_lost is not None:
            self.on_lost({key})

    # -- leases (see the module docstring) --------------------------------------------------------------------
    def acquire_lease(self, key: str, owner: str) -> Lease:
        """Take execution ``key`` for ``owner``: a new epoch in the file, committed, and this store's writes
        of ``key`` fenced with it from now on. A holder of an older epoch finds its next write refused."""
        self.flush()
        try:
            self._db.execute("BEGIN IMMEDIATE")
            (epoch,) = self._db.execute(_TAKE_LEASE, (key, owner)).fetchone()
            self._db.execute("COMMIT")
        except sqlite3.OperationalError as e:
            self._rollback()
            if _is_busy(e):
                raise self._busy(e) from e
            raise StateStoreError(f"state DB {str(self.path)!r}: cannot take execution {key!r}: {e}") from e
        lease = Lease(owner, int(epoch))
        self._leases[key] = lease
        self._lost.discard(key)
        return lease

    def lease_of(self, key: str) -> Lease | None:
        return self._leases.get(key)

    def release(self, key: str) -> None:
        """Stop fencing ``key`` with a lease (its lease row stays: a later holder's epoch follows it)."""
        self._leases.pop(key, None)

    @property
    def lost(self) -> Collection[str]:
        return set(self._lost)

    def load_nodes(self, key: str) -> list[NodeRecord]:
        rows = self._db.execute("SELECT record FROM nodes WHERE key = ?", (key,)).fetchall()
        try:
            return [NodeRecord.from_row(r[0]) for r in rows]
        except (orjson.JSONDecodeError, TypeError, ValueError) as e:
            raise self._undecodable("node records", key, e) from e

    def keys_named(self, name: str) -> list[str]:
        """The keys (``project/domain/name/node``) of the executions named ``name``, sorted: what a person
        who gives an execution's name alone (as ``taskplug run`` printed it) means."""
        rows = self._db.execute("SELECT key FROM executions").fetchall()
        return sorted(key for (key,) in rows if key.count("/") == 3 and key.split("/")[2] == name)

    # -- gate nodes' signals (KeepsSignals; see the module docstring) --------------------------------------
    def get_or_create_signal(
        self, key: str, signal_id: str, literal_type: types_pb2.LiteralType
    ) -> literals_pb2.Literal | None:
        created = self._db.execute(
            "INSERT INTO signals (key, signal_id, type) VALUES (?, ?, ?) ON CONFLICT(key, signal_id) DO NOTHING",
            (key, signal_id, literal_type.SerializeToString()),
        ).rowcount
        if created:
            # Committed at once (and the batch with it): a person lists the signal to answer it, and must not
            # wait on this process's write lock to do so.
            self.flush()
        row = self._db.execute(
            "SELECT value FROM signals WHERE key = ? AND signal_id = ?", (key, signal_id)
        ).fetchone()
        if row is None or row[0] is None:
            return None
        try:
            return literals_pb2.Literal.FromString(row[0])
        except DecodeError as e:
            raise self._undecodable(f"value of signal {signal_id!r}", key, e) from e

    def list_signals(self, key: str) -> list[Signal]:
        rows = self._db.execute(
            "SELECT signal_id, type, value FROM signals WHERE key = ? ORDER BY signal_id", (key,)
        ).fetchall()
        try:
            return [_signal_from_row(*row) for row in rows]
        except DecodeError as e:
            raise self._undecodable("signals", key, e) from e

    def set_signal(self, key: str, signal_id: str, value: literals_pb2.Literal) -> None:
        """See :class:`KeepsSignals`: checked and written in one immediate transaction, committed (never
        fenced by a lease: a person answers, not the execution's driver)."""
        self.flush()
        try:
            self._db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as e:
            if _is_busy(e):
                raise self._busy(e) from e
            raise StateStoreError(f"state DB {str(self.path)!r}: cannot set signal {signal_id!r}: {e}") from e
        try:
            row = self._db.execute(
                "SELECT type FROM signals WHERE key = ? AND signal_id = ?", (key, signal_id)
            ).fetchone()
            if row is None:
                raise signal_not_found(key, signal_id)
            try:
                signal = _signal_from_row(signal_id, row[0], None)
            except DecodeError as e:
                raise self._undecodable(f"type of signal {signal_id!r}", key, e) from e
            check_signal_value(signal, value)
            self._db.execute(
                "UPDATE signals SET value = ? WHERE key = ? AND signal_id = ?",
                (value.SerializeToString(), key, signal_id),
            )
            self._db.execute("COMMIT")
        except BaseException:
            self._rollback()
            raise

    def forget(self, key: str) -> None:
        """Delete everything stored about execution ``key`` (its record, events, nodes and signals),
        committed."""
        self.flush()
        lease = self._leases.get(key)
        fence = "" if lease is None else f" AND {_FENCE}"
        params = (key,) if lease is None else (key, key, lease.owner, lease.epoch)
        self._db.execute("BEGIN IMMEDIATE")
        deleted = 0
        for table in ("executions", "events", "nodes", "signals"):
            deleted += self._db.execute(f"DELETE FROM {table} WHERE key = ?{fence}", params).rowcount
        self._db.execute("COMMIT")
        if lease is not None and deleted == 0 and self._lease_moved(key, lease):
            self._lose(key)

    def _lease_moved(self, key: str, lease: Lease) -> bool:
        row = self._db.execute("SELECT owner, epoch FROM leases WHERE key = ?", (key,)).fetchone()
        return row is None or (row[0], row[1]) != (lease.owner, lease.epoch)

    @contextlib.contextmanager
    def lock(self, key: str) -> Iterator[None]:
        """Hold execution ``key`` for this process until the block exits; :class:`StateStoreError` naming
        the holder when another process holds it. The lock is the kernel's (``fcntl``): a killed holder's
        is released with it, so a resume after a crash never waits on a stale lease."""
        directory = Path(f"{self.path}.locks")
        name = directory / (hashlib.sha256(key.encode()).hexdigest()[:32] + ".lock")
        try:
            directory.mkdir(exist_ok=True)
        except OSError as e:
            raise StateStoreError(f"cannot create the lock directory {str(directory)!r}: {e.strerror}") from e
        fd = _take_lock(name, key, self.path)
        try:
            yield
        finally:
            # Unlinked while still held: a process waiting on this file finds it replaced and retries.
            with contextlib.suppress(OSError):
                name.unlink()
            os.close(fd)

    @property
    def connection(self) -> sqlite3.Connection:
        """The store's connection, for the data catalog's tables in the same file (``SQLiteCatalog``): it
        calls :meth:`flush` before it writes, so its writes commit at once and never wait on this store."""
        return self._db

    def flush(self) -> None:
        if self._in_tx:
            self._db.execute("COMMIT")
            self._in_tx = False
        self._last_commit = time.monotonic()

    def close(self) -> None:
        self.flush()
        self._db.close()


def _upgrade(db: sqlite3.Connection) -> None:
    """Bring a file written by an earlier schema to this one, inside the caller's transaction (all of it or
    none): every ``elements`` row (``key, idx``) becomes a ``nodes`` row at ``<root node id>/<idx>``, and every
    record's JSON is rewritten with today's key names (:meth:`NodeRecord.from_json` reads the old ones). A
    record that does not decode is carried over as it was: loading it names the execution, as it did."""
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "elements" in tables:
        rows = db.execute("SELECT key, idx, record FROM elements").fetchall()
        converted = []
        for key, idx, record in rows:
            parent = root_path(key)
            converted.append((key, f"{parent}/{idx}", _rewritten(NodeRecord, record, parent)))
        db.executemany("INSERT OR REPLACE INTO nodes (key, path, record) VALUES (?, ?, ?)", converted)
        db.execute("DROP TABLE elements")
    records = db.execute("SELECT key, record FROM executions").fetchall()
    db.executemany(
        "UPDATE executions SET record = ? WHERE key = ?",
        [(_rewritten(ExecutionRecord, record, ""), key) for key, record in records],
    )


def _rewritten(kind: type[NodeRecord], row: bytes | str, parent: str) -> bytes | str:
    try:
        return kind.from_row(row, parent=parent).to_row()
    except (orjson.JSONDecodeError, TypeError, ValueError):
        return row


def _is_busy(e: sqlite3.OperationalError) -> bool:
    return "locked" in str(e) or "busy" in str(e)


def _check_path(path: Path) -> None:
    """Refuse, before SQLite creates or touches anything, a path that cannot be a state DB."""
    where = str(path)
    for ancestor in path.parents:
        if ancestor.exists() and not ancestor.is_dir():
            raise StateStoreError(f"state DB {where!r} is under {str(ancestor)!r}, which is not a directory")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise StateStoreError(f"state DB {where!r}: cannot create its directory: {e.strerror or e}") from e
    if path.is_dir():
        raise StateStoreError(f"state DB {where!r} is a directory")
    if not path.exists():
        return
    if not path.is_file():
        raise StateStoreError(f"state DB {where!r} is not a regular file")
    try:
        with path.open("rb") as f:
            head = f.read(len(_SQLITE_MAGIC))
    except OSError as e:
        raise StateStoreError(f"state DB {where!r} cannot be read: {e.strerror}") from e
    if head and head != _SQLITE_MAGIC:
        raise StateStoreError(f"state DB {where!r} is not an SQLite database (refusing to write to it)")


def check_state_file(path: str | Path) -> None:
    """Refuse a file that is not taskplug's state DB, reading it only (SQLite opened read-only), so that a
    refused file is left byte for byte as it was: not SQLite, or another program's database — by its
    ``application_id``, or, unmarked, by tables named as taskplug's but with other columns (which opening the
    store would adopt and then fail on). A missing or empty file is a new state DB. Called before the store
    opens (:class:`SQLiteStateStore` checks the marker and table names itself, but writes the schema into an
    unmarked file whose table names match)."""
    path = Path(path)
    where = str(path)
    if not path.is_file() or path.stat().st_size == 0:
        return
    _check_path(path)
    with path.open("rb") as f:
        header = f.read(72)
    # The application id is the header's bytes 68-71: a marked file is the store's to check (it opens a
    # corrupt or newer one itself), and is not opened here at all.
    if len(header) == 72 and int.from_bytes(header[68:72], "big") == _APPLICATION_ID:
        return
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as e:
        raise StateStoreError(f"state DB {where!r} cannot be opened: {e}") from e
    try:
        if db.execute("PRAGMA application_id").fetchone()[0] == _APPLICATION_ID:
            return
        found = _columns(db)
    except sqlite3.DatabaseError as e:
        raise StateStoreError(f"state DB {where!r} is corrupt or not a database: {e}") from e
    finally:
        db.close()
    expected = _schema_columns()
    other = {table: columns for table, columns in found.items() if expected.get(table) != columns}
    if other:
        described = "; ".join(f"{table}({', '.join(columns)})" for table, columns in sorted(other.items()))
        raise StateStoreError(
            f"state DB {where!r} is another program's SQLite database (tables {described} are not taskplug's); "
            "it was left as it was: give --state-db a file of its own"
        )


def _columns(db: sqlite3.Connection) -> dict[str, tuple[str, ...]]:
    tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()]
    return {
        table: tuple(row[1] for row in db.execute(f"PRAGMA table_info({_quoted(table)})").fetchall())
        for table in tables
        if table not in _SQLITE_INTERNAL
    }


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _schema_columns() -> dict[str, tuple[str, ...]]:
    """The tables and columns :data:`_SCHEMA` makes, read back from an in-memory database."""
    db = sqlite3.connect(":memory:")
    try:
        for statement in _SCHEMA:
            db.execute(statement)
        return _columns(db)
    finally:
        db.close()


def _take_lock(name: Path, key: str, db: Path) -> int:
    while True:
        fd = os.open(name, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise StateStoreError(
                f"execution {key!r} is being run by another process ({holder}); state DB {str(db)!r}. "
                "Wait for it to finish or stop it, then run again to see its outcome"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        try:
            same = os.fstat(fd).st_ino == os.stat(name).st_ino
        except FileNotFoundError:
            same = False
        if not same:  # its holder released and unlinked it between our open and our lock
            os.close(fd)
            continue
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
        return fd


def _read_holder(fd: int) -> str:
    try:
        text = os.pread(fd, 200, 0).decode(errors="replace").strip()
    except OSError:
        text = ""
    return text or "a process that is starting"
