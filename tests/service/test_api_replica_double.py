"""A test double of a replica's writes, for the API and web-view tests: ``ReplicaDouble`` writes the rows a
replica writes (service contract: a replica row with a heartbeat and metrics; a claim with a new epoch; fenced
phase updates; events, attempts, ``NOTIFY taskplug_events``), so that the server's reads are tested without
starting executor processes. ``serve_app`` runs the server on uvicorn in a thread, on 127.0.0.1."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

__all__ = ["ReplicaDouble", "pod_spec", "serve_app"]

_TERMINAL = {"Success", "PermanentFailure", "Aborted"}
_ATTEMPT_ENDS = _TERMINAL | {"RetryableFailure"}


def pod_spec(name: str | None = "ex", *, image: str = "busybox", node: str = "n0") -> dict[str, Any]:
    """A container task's execution spec document (named ``name``; unnamed with None)."""
    ids: dict[str, Any] = {"project": "p", "domain": "d", "nodeId": node}
    if name is not None:
        ids["name"] = name
    return {
        "template": {
            "id": {"resourceType": "TASK", "project": "p", "domain": "d", "name": "hello", "version": "v1"},
            "type": "container",
            "interface": {"inputs": {"variables": {"who": {"type": {"simple": "STRING"}}}}},
            "container": {"image": image, "command": ["echo"], "args": ["hi"]},
        },
        "execution": {"id": ids, "maxAttempts": 2},
        "inputs": {"who": "world"},
    }


class ReplicaDouble:
    """Writes as one replica incarnation does (a test double: no executor runs)."""

    def __init__(self, dsn: str, *, host: str = "double-host", pid: int = 4242, capacity: int = 50) -> None:
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.id = uuid.uuid4()
        self.epochs: dict[str, int] = {}
        self.conn.execute(
            "INSERT INTO taskplug_replicas (id, host, pid, version, capacity) VALUES (%s, %s, %s, 'test', %s)",
            (self.id, host, pid, capacity),
        )

    def close(self) -> None:
        self.conn.close()

    def heartbeat(self, metrics: Mapping[str, Any] | None = None, *, age_seconds: float = 0.0) -> None:
        self.conn.execute(
            "UPDATE taskplug_replicas SET heartbeat_at = now() - make_interval(secs => %s),"
            " metrics = coalesce(%s, metrics),"
            " owned = (SELECT count(*) FROM taskplug_executions WHERE owner_id = %s AND NOT terminal)"
            " WHERE id = %s",
            (age_seconds, Jsonb(dict(metrics)) if metrics is not None else None, self.id, self.id),
        )

    def fence(self) -> None:
        self.conn.execute("UPDATE taskplug_replicas SET fenced_at = now() WHERE id = %s", (self.id,))

    def claim(self, key: str) -> int:
        row = self.conn.execute(
            "UPDATE taskplug_executions SET owner_id = %s, lease_epoch = lease_epoch + 1"
            " WHERE key = %s AND owner_id IS NULL AND NOT terminal RETURNING lease_epoch",
            (self.id, key),
        ).fetchone()
        assert row is not None, f"{key} is not claimable"
        self.epochs[key] = int(row[0])
        return self.epochs[key]

    def phase(
        self,
        key: str,
        phase: str,
        *,
        reason: str = "",
        attempt: int = 0,
        version: int = 0,
        error: Mapping[str, Any] | None = None,
        logs: list[dict[str, str]] | None = None,
        outputs: Mapping[str, Any] | None = None,
    ) -> int:
        """One phase change, fenced and in one transaction as a replica commits it; the event's seq."""
        epoch = self.epochs[key]
        terminal = phase in _TERMINAL
        with self.conn.transaction():
            row = self.conn.execute(
                "UPDATE taskplug_executions SET phase = %s, attempt = %s, terminal = %s, outputs = %s,"
                " error = %s, started_at = coalesce(started_at, now()),"
                " finished_at = CASE WHEN %s THEN now() END, updated_at = now()"
                " WHERE key = %s AND owner_id = %s AND lease_epoch = %s RETURNING id",
                (
                    phase,
                    attempt,
                    terminal,
                    Jsonb(dict(outputs)) if outputs is not None else None,
                    Jsonb(dict(error)) if error is not None else None,
                    terminal,
                    key,
                    self.id,
                    epoch,
                ),
            ).fetchone()
            assert row is not None, f"fenced out of {key}"
            execution_id = row[0]
            seq_row = self.conn.execute(
                "INSERT INTO taskplug_events (execution_id, attempt, phase, version, reason, occurred_at, error,"
                " logs, epoch) VALUES (%s, %s, %s, %s, %s, now(), %s, %s, %s) RETURNING seq",
                (
                    execution_id,
                    attempt,
                    phase,
                    version,
                    reason,
                    Jsonb(dict(error)) if error is not None else None,
                    Jsonb(logs) if logs is not None else None,
                    epoch,
                ),
            ).fetchone()
            assert seq_row is not None
            self.conn.execute(
                "INSERT INTO taskplug_attempts (execution_id, attempt, resource_name, phase, reason, error, logs,"
                " epoch, started_at, finished_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, now(),"
                " CASE WHEN %s THEN now() END)"
                " ON CONFLICT (execution_id, attempt) DO UPDATE SET phase = excluded.phase, reason = excluded.reason,"
                " error = excluded.error, logs = coalesce(excluded.logs, taskplug_attempts.logs),"
                " epoch = excluded.epoch, finished_at = excluded.finished_at",
                (
                    execution_id,
                    attempt,
                    f"{key.split('/')[2]}-n0-{attempt}",
                    phase,
                    reason,
                    Jsonb(dict(error)) if error is not None else None,
                    Jsonb(logs) if logs is not None else None,
                    epoch,
                    phase in _ATTEMPT_ENDS,
                ),
            )
            self.conn.execute("SELECT pg_notify('taskplug_events', %s)", (str(seq_row[0]),))
        return int(seq_row[0])

    def elements(self, key: str, elements: list[dict[str, Any]]) -> None:
        """A map task's element records (``NodeRecord`` fields: path, node_phase, attempt, error, logs; given
        with the ``index`` of the element under root node ``n0``), fenced by the claim's epoch, then an event as
        a replica's round writes one."""
        epoch = self.epochs[key]
        with self.conn.transaction():
            row = self.conn.execute(
                "SELECT id FROM taskplug_executions WHERE key = %s AND owner_id = %s AND lease_epoch = %s",
                (key, self.id, epoch),
            ).fetchone()
            assert row is not None, f"fenced out of {key}"
            for element in elements:
                path = f"n0/{element['index']}"
                record = {k: v for k, v in element.items() if k != "index"} | {"path": path}
                self.conn.execute(
                    "INSERT INTO taskplug_nodes (execution_id, path, record, epoch) VALUES (%s, %s, %s, %s)"
                    " ON CONFLICT (execution_id, path) DO UPDATE SET record = excluded.record, epoch = excluded.epoch",
                    (row[0], path, Jsonb(record), epoch),
                )
        self.phase(key, "Running", reason=f"{len(elements)} element(s) changed")


@contextmanager
def serve_app(app: Any) -> Iterator[str]:
    """``app`` on uvicorn at 127.0.0.1 (a free port) in a thread of the test process; its URL."""
    import uvicorn

    from support.net import free_port

    port = free_port()
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning", timeout_graceful_shutdown=1
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)  # readiness polling of the server thread, not a test timing
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)


# The double's own checks: it writes what the contract says, fenced.


def test_the_double_claims_with_a_new_epoch_and_its_writes_are_fenced(postgres_dsn: str) -> None:
    from taskplug.service import migrate

    with psycopg.connect(postgres_dsn) as conn:
        migrate(conn)
        conn.execute(
            "INSERT INTO taskplug_executions (key, task_type, spec) VALUES ('p/d/double/n0', 'container', '{}')"
        )
        conn.commit()
    first, second = ReplicaDouble(postgres_dsn), ReplicaDouble(postgres_dsn)
    try:
        assert first.claim("p/d/double/n0") == 1
        first.phase("p/d/double/n0", "Running", reason="started")
        # The sweeper releases the row; the other replica claims it with the next epoch.
        first.conn.execute("UPDATE taskplug_executions SET owner_id = NULL WHERE key = 'p/d/double/n0'")
        assert second.claim("p/d/double/n0") == 2
        with pytest.raises(AssertionError, match="fenced out"):
            first.phase("p/d/double/n0", "Success")
        second.phase("p/d/double/n0", "Success", outputs={"o": 1})
        with psycopg.connect(postgres_dsn) as conn:
            phases = conn.execute("SELECT phase, epoch FROM taskplug_events ORDER BY seq").fetchall()
        assert phases == [("Running", 1), ("Success", 2)]
    finally:
        first.close()
        second.close()
