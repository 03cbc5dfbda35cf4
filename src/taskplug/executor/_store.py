"""Durable execution state: where each execution is (attempt, plugin state, failure budgets, outcome) and
the phase events it went through.

Follows what flytepropeller keeps in the FlyteWorkflow CR's node status for a task node: the plugin state
(versioned bytes), the last phase and version, the attempt counters and the cleanup flag; for an ArrayNode,
its ``ArrayNodeState`` in the record and one :class:`ElementRecord` per element that has started (propeller's
``SubNode*`` arrays). SQLite is the default store; writes are committed in small batches (a killed executor
loses at most the last batch, and every plugin call is idempotent, so replaying it creates nothing twice).
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import orjson

__all__ = ["ElementRecord", "Event", "ExecutionRecord", "MemoryStateStore", "SQLiteStateStore", "StateStore"]


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
        return out


@dataclass(slots=True)
class ExecutionRecord:
    """Everything the executor must remember about one execution to resume it after a restart (what
    flytepropeller keeps in a task node's status): the attempt, the phase last reported, the plugin state,
    the failure budgets spent, the cleanup flag, and once terminal the outcome, error and outputs."""

    key: str
    attempt: int = 0
    phase: int = 0  # the Phase last reported this attempt
    phase_version: int = 0
    reason: str = ""
    state_version: int = 0
    plugin_state: dict[str, Any] | None = None
    user_failures: int = 0
    system_failures: int = 0
    cleanup_on_failure: bool = False
    terminal: bool = False
    outcome: str = ""  # the final phase name once terminal
    error: dict[str, Any] | None = None
    outputs: dict[str, Any] | None = None
    abort_requested: bool = False
    # The attempt's end, decided and saved before its resource is cleaned up: {"retry": bool, "cleanup": bool}.
    # A process stopped while cleaning up finishes the cleanup on resume instead of deciding again.
    closing: dict[str, bool] | None = None
    # An ArrayNode's own state (propeller's ArrayNodeState less the per-element arrays, which are
    # ElementRecords): {"phase": ArrayNodePhase, "size": n, "version": task phase version, "error": ...}.
    array: dict[str, Any] | None = None

    def to_row(self) -> bytes:
        # Field by field: dataclasses.asdict deep-copies every value and dominated the executor's profile.
        return orjson.dumps({name: getattr(self, name) for name in _RECORD_FIELDS})

    @classmethod
    def from_row(cls, data: bytes) -> ExecutionRecord:
        return cls(**orjson.loads(data))


@dataclass(slots=True)
class ElementRecord:
    """One element of an ArrayNode, as far as it got (propeller's ``SubNodePhases``, ``SubNodeTaskPhases``,
    ``SubNodeRetryAttempts``, ``SubNodeSystemFailures`` and delta timestamps for index ``index``).

    Deviation: propeller keeps only those small numbers and fakes the plugin state every round (§3.1, §9.15);
    taskplug keeps the element's real plugin state, phase version, start time and last error, so a resumed
    executor continues each element where it was instead of rediscovering it.
    """

    index: int
    node_phase: int = 0  # NodePhase
    task_phase: int = 0  # the Phase the plugin last reported for the current attempt
    phase_version: int = 0
    reason: str = ""
    attempts: int = 0  # the current retry attempt (0-based), as SubNodeRetryAttempts
    system_failures: int = 0
    state_version: int = 0
    plugin_state: dict[str, Any] | None = None
    started_at: float | None = None  # when the current attempt started (epoch seconds), for its timeout
    cleanup_on_failure: bool = False
    # The attempt's end, decided and saved before its object is cleaned up:
    # {"retry": bool, "cleanup": bool, "phase": NodePhase it ends in}.
    closing: dict[str, Any] | None = None
    error: dict[str, Any] | None = None  # why the element (or its last attempt) failed
    logs: list[dict[str, Any]] | None = None  # the log links last reported for the current attempt

    def to_row(self) -> bytes:
        return orjson.dumps({name: getattr(self, name) for name in _ELEMENT_FIELDS})

    @classmethod
    def from_row(cls, data: bytes) -> ElementRecord:
        return cls(**orjson.loads(data))


_RECORD_FIELDS = tuple(ExecutionRecord.__dataclass_fields__)
_ELEMENT_FIELDS = tuple(ElementRecord.__dataclass_fields__)
_EVENT_FIELDS = tuple(Event.__dataclass_fields__)


class StateStore(Protocol):
    """Where the executor keeps execution records and their events. :class:`SQLiteStateStore` is durable
    (``taskplug run`` resumes from it); :class:`MemoryStateStore` is for tests and benchmarks. ``save`` may
    batch writes; ``flush`` commits them, and the executor flushes before anything is deleted."""

    def load(self, key: str) -> ExecutionRecord | None: ...

    def save(self, record: ExecutionRecord) -> None: ...

    def append_event(self, key: str, event: Event) -> None: ...

    def events(self, key: str) -> list[Event]: ...

    def save_elements(self, key: str, elements: list[ElementRecord]) -> None:
        """Store the elements of ArrayNode execution ``key`` that changed."""
        ...

    def load_elements(self, key: str) -> list[ElementRecord]:
        """Every element of ``key`` ever saved (elements never saved have not started)."""
        ...

    def flush(self) -> None: ...

    def close(self) -> None: ...


class MemoryStateStore:
    """An in-process store, for benchmarks and tests that do not restart the executor."""

    def __init__(self) -> None:
        self._records: dict[str, ExecutionRecord] = {}
        self._events: dict[str, list[Event]] = {}
        self._elements: dict[str, dict[int, bytes]] = {}

    def load(self, key: str) -> ExecutionRecord | None:
        return self._records.get(key)

    def save(self, record: ExecutionRecord) -> None:
        self._records[record.key] = record

    def append_event(self, key: str, event: Event) -> None:
        self._events.setdefault(key, []).append(event)

    def events(self, key: str) -> list[Event]:
        return list(self._events.get(key, []))

    def save_elements(self, key: str, elements: list[ElementRecord]) -> None:
        # Stored as rows, as SQLite does: the executor keeps mutating its own element objects.
        rows = self._elements.setdefault(key, {})
        for element in elements:
            rows[element.index] = element.to_row()

    def load_elements(self, key: str) -> list[ElementRecord]:
        rows = self._elements.get(key, {})
        return [ElementRecord.from_row(rows[i]) for i in sorted(rows)]

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


class SQLiteStateStore:
    """Records and events in one SQLite file (WAL mode); commits every ``commit_interval`` seconds."""

    def __init__(self, path: str | Path, *, commit_interval: float = 0.05) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS executions (key TEXT PRIMARY KEY, record BLOB NOT NULL)")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS events (key TEXT NOT NULL, seq INTEGER PRIMARY KEY AUTOINCREMENT, event BLOB NOT NULL)"
        )
        self._db.execute("CREATE INDEX IF NOT EXISTS events_by_key ON events (key, seq)")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS elements (key TEXT NOT NULL, idx INTEGER NOT NULL, record BLOB NOT NULL, "
            "PRIMARY KEY (key, idx))"
        )
        self._commit_interval = commit_interval
        self._in_tx = False
        self._last_commit = time.monotonic()

    def _begin(self) -> None:
        if not self._in_tx:
            self._db.execute("BEGIN")
            self._in_tx = True

    def _maybe_commit(self) -> None:
        if self._in_tx and time.monotonic() - self._last_commit >= self._commit_interval:
            self.flush()

    def load(self, key: str) -> ExecutionRecord | None:
        row = self._db.execute("SELECT record FROM executions WHERE key = ?", (key,)).fetchone()
        return ExecutionRecord.from_row(row[0]) if row is not None else None

    def save(self, record: ExecutionRecord) -> None:
        self._begin()
        self._db.execute(
            "INSERT INTO executions (key, record) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET record = excluded.record",
            (record.key, record.to_row()),
        )
        self._maybe_commit()

    def append_event(self, key: str, event: Event) -> None:
        self._begin()
        self._db.execute(
            "INSERT INTO events (key, event) VALUES (?, ?)",
            (key, orjson.dumps({name: getattr(event, name) for name in _EVENT_FIELDS})),
        )
        self._maybe_commit()

    def events(self, key: str) -> list[Event]:
        rows = self._db.execute("SELECT event FROM events WHERE key = ? ORDER BY seq", (key,)).fetchall()
        return [Event(**orjson.loads(r[0])) for r in rows]

    def save_elements(self, key: str, elements: list[ElementRecord]) -> None:
        if not elements:
            return
        self._begin()
        self._db.executemany(
            "INSERT INTO elements (key, idx, record) VALUES (?, ?, ?) "
            "ON CONFLICT(key, idx) DO UPDATE SET record = excluded.record",
            [(key, e.index, e.to_row()) for e in elements],
        )
        self._maybe_commit()

    def load_elements(self, key: str) -> list[ElementRecord]:
        rows = self._db.execute("SELECT record FROM elements WHERE key = ? ORDER BY idx", (key,)).fetchall()
        return [ElementRecord.from_row(r[0]) for r in rows]

    def flush(self) -> None:
        if self._in_tx:
            self._db.execute("COMMIT")
            self._in_tx = False
        self._last_commit = time.monotonic()

    def close(self) -> None:
        self.flush()
        self._db.close()
