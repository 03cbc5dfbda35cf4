"""What the replica tests share: spec documents for the simulated cluster, submitting rows as the API does,
claiming them as a replica does, the ``conn`` fixture (an emptied, migrated database), a replica running in
the test's event loop, the safety checks run over the database (stale-epoch writes), and starting
``taskplug cluster serve`` and ``taskplug executor`` processes on 127.0.0.1 (stopped by the tests that start
them)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import os
import resource
import signal
import ssl
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml
from psycopg.types.json import Jsonb

from support.waiting import wait_until
from taskplug.service import Replica, migrate
from taskplug.service._pgstore import Claim

__all__ = [
    "CALL_FAILED",
    "ClusterProcess",
    "ReplicaProcess",
    "claim_row",
    "empty_database_fixture",
    "executor_command",
    "live_replica_id",
    "map_document",
    "pod_document",
    "replica_row",
    "rows",
    "running",
    "serve_cluster",
    "stale_epoch_writes",
    "start_replica",
    "stop_replica",
    "submit",
    "workflow_document",
]

CALL_FAILED = pytest.StashKey[bool]()
"""Set by ``conftest.py`` on a test item whose call failed: fixtures that hold replica processes print their
logs then."""

_EXECUTOR = "import taskplug.cli._executor_cmd as m, sys; sys.argv[0] = 'taskplug executor'; m.executor()"
"""How tests start ``taskplug executor`` (the command through its module, whatever ``COMMANDS`` holds)."""


def pod_document(
    name: str, *, duration: float = 0.0, exit_code: int = 0, max_attempts: int = 1, namespace: str = "default"
) -> dict[str, Any]:
    """A container task the simulated kubelet runs for ``duration`` seconds and ends with ``exit_code``."""
    return {
        "template": {
            "id": {"resourceType": "TASK", "project": "p", "domain": "d", "name": "sim", "version": "v1"},
            "type": "container",
            "container": {
                "image": "busybox",
                "command": ["true"],
                "resources": {
                    "requests": [{"name": "CPU", "value": "10m"}, {"name": "MEMORY", "value": "16Mi"}]
                },
            },
        },
        "execution": {
            "id": {"project": "p", "domain": "d", "name": name, "nodeId": "n0"},
            "namespace": namespace,
            "maxAttempts": max_attempts,
            "annotations": {
                "taskplug.io/simulate-duration": str(duration),
                "taskplug.io/simulate-exit-code": str(exit_code),
            },
        },
    }


def map_document(name: str, size: int, *, duration: float = 0.0) -> dict[str, Any]:
    """A map task (an ArrayNode over ``size`` elements) of simulated container pods."""
    document = pod_document(name, duration=duration)
    document["template"]["interface"] = {
        "inputs": {"variables": {"x": {"type": {"collectionType": {"simple": "INTEGER"}}}}}
    }
    document["arrayNode"] = {"parallelism": 0}
    document["inputs"] = {"x": list(range(size))}
    return document


def workflow_document(
    name: str,
    *,
    duration: float = 0.0,
    x: int = 7,
    fan_out: int = 2,
    exit_code: int = 0,
    max_attempts: int = 1,
) -> dict[str, Any]:
    """A workflow of simulated container pods in the self-contained form the API takes: ``n0``, then
    ``fan_out`` nodes after it side by side, then ``end`` after them all (a fan-out and a chain); its output
    ``o`` is its input ``x`` (the pods write no outputs), ``y`` the constant 1 bound in the workflow."""
    task = pod_document(name)["template"]
    task["id"] = {"resourceType": "TASK", "project": "p", "domain": "d", "name": "sim", "version": "v1"}
    ref = {"referenceId": task["id"]}
    middle = [f"m{i}" for i in range(fan_out)]
    nodes: list[dict[str, Any]] = [{"id": "n0", "taskNode": ref, "metadata": {"name": "first"}}]
    nodes += [{"id": m, "taskNode": ref, "upstreamNodeIds": ["n0"], "metadata": {"name": m}} for m in middle]
    nodes.append({"id": "end", "taskNode": ref, "upstreamNodeIds": middle, "metadata": {"name": "last"}})
    integer = {"simple": "INTEGER"}
    template = {
        "id": {"resourceType": "WORKFLOW", "project": "p", "domain": "d", "name": "fan", "version": "v1"},
        "interface": {
            "inputs": {"variables": {"x": {"type": integer}}},
            "outputs": {"variables": {"o": {"type": integer}, "y": {"type": integer}}},
        },
        "nodes": nodes,
        "outputs": [
            {"var": "o", "binding": {"promise": {"nodeId": "start-node", "var": "x"}}},
            {"var": "y", "binding": {"scalar": {"primitive": {"integer": "1"}}}},
        ],
        "metadataDefaults": {},
    }
    return {
        "workflowClosure": {"primary": {"template": template}, "tasks": [{"template": task}]},
        "launchPlans": [],
        "inputs": {"x": x},
        "execution": {
            "id": {"project": "p", "domain": "d", "name": name},
            "maxAttempts": max_attempts,
            "annotations": {
                "taskplug.io/simulate-duration": str(duration),
                "taskplug.io/simulate-exit-code": str(exit_code),
            },
        },
    }


def submit(conn: psycopg.Connection[Any], key: str, document: Mapping[str, Any]) -> None:
    """Insert an execution as the API's submit does (contract: ON CONFLICT DO NOTHING, then NOTIFY)."""
    conn.execute(
        "INSERT INTO taskplug_executions (key, task_type, spec) VALUES (%s, %s, %s) ON CONFLICT (key) DO NOTHING",
        (key, document["template"]["type"] if "template" in document else "workflow", Jsonb(dict(document))),
    )
    conn.execute("NOTIFY taskplug_work")


@pytest.fixture(name="conn")
def empty_database_fixture(postgres_dsn: str) -> Iterator[psycopg.Connection[Any]]:
    """A connection to the module's database, migrated, with no execution or replica left by a test before."""
    with psycopg.connect(postgres_dsn, autocommit=True) as c:
        migrate(c)
        c.execute("TRUNCATE taskplug_executions, taskplug_replicas CASCADE")
        yield c


def replica_row(conn: psycopg.Connection[Any]) -> uuid.UUID:
    """A live replica's row, as a replica's start inserts it; its id."""
    rid = uuid.uuid4()
    conn.execute(
        "INSERT INTO taskplug_replicas (id, host, pid, version, capacity) VALUES (%s, 'h', 1, 't', 10)",
        (rid,),
    )
    return rid


def claim_row(conn: psycopg.Connection[Any], rid: uuid.UUID, key: str) -> Claim:
    """Claim ``key`` for replica ``rid`` as a replica's claim does (owner set, epoch + 1); the store's claim."""
    row = conn.execute(
        "UPDATE taskplug_executions SET owner_id = %s, lease_epoch = lease_epoch + 1 WHERE key = %s "
        "RETURNING id, lease_epoch",
        (rid, key),
    ).fetchone()
    assert row is not None
    return Claim(row[0], row[1], None, resource_name=lambda a: f"{key}-n0-{a}", object_owner=f"default/{key}")


STOP_WITHIN = 120.0
"""Seconds a stopped replica has to hand over and end before a test fails naming where it hangs."""


@contextlib.asynccontextmanager
async def running(replica: Replica) -> AsyncIterator[Replica]:
    """``replica`` running in this event loop until the block exits (then stopped, its hand-over done)."""
    stop = asyncio.Event()
    task = asyncio.create_task(replica.run(stop))
    try:
        await wait_until(lambda: replica.replica_id is not None or task.done(), what="the replica started")
        yield replica
    finally:
        failing = sys.exc_info()[1]  # the test's own failure, if it is why the block ends
        stop.set()
        try:
            # Bounded: a replica that does not stop is a failure naming where it hangs, not a stuck suite.
            await asyncio.wait_for(asyncio.shield(task), STOP_WITHIN)
        except TimeoutError:
            stacks = io.StringIO()
            for other in asyncio.all_tasks():
                if other is not asyncio.current_task():
                    other.print_stack(file=stacks)
            task.cancel()
            raise AssertionError(
                f"the replica did not stop within {STOP_WITHIN} s; its tasks:\n{stacks.getvalue()}"
            ) from failing


def live_replica_id(conn: psycopg.Connection[Any], pid: int) -> Any:
    """The id of the live (unfenced) incarnation of the replica process ``pid``; None before it registers."""
    row = conn.execute(
        "SELECT id FROM taskplug_replicas WHERE pid = %s AND fenced_at IS NULL", (pid,)
    ).fetchone()
    return row[0] if row else None


def rows(conn: psycopg.Connection[Any]) -> dict[str, dict[str, Any]]:
    """Every execution row by key: phase, attempt, terminal, owner, epoch, outputs, error."""
    found = conn.execute(
        "SELECT key, phase, attempt, terminal, owner_id, lease_epoch, outputs, error FROM taskplug_executions"
    ).fetchall()
    names = ("phase", "attempt", "terminal", "owner_id", "lease_epoch", "outputs", "error")
    return {r[0]: dict(zip(names, r[1:], strict=True)) for r in found}


def stale_epoch_writes(conn: psycopg.Connection[Any]) -> list[tuple[str, int, int]]:
    """Writes applied with a stale epoch: an event (seq order = commit order per execution, as the row's
    lock serialises them) whose epoch is lower than an earlier event's of the same execution. (key, seq,
    epoch) of each; the fencing tests' safety check and its negative control."""
    found = conn.execute(
        """
        SELECT e.key, v.seq, v.epoch FROM (
            SELECT execution_id, seq, epoch,
                   max(epoch) OVER (PARTITION BY execution_id ORDER BY seq
                                    ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before
              FROM taskplug_events) v
        JOIN taskplug_executions e ON e.id = v.execution_id
        WHERE v.epoch < v.before ORDER BY v.seq
        """
    ).fetchall()
    return [(str(k), int(s), int(ep)) for k, s, ep in found]


@dataclass
class ClusterProcess:
    process: subprocess.Popen[bytes]
    kubeconfig: Path
    url: str

    def request(self, path: str, *, timeout: float = 5.0) -> Any:
        """GET ``path`` as kubectl would: trusting the cluster's CA and sending the kubeconfig's token."""
        config = yaml.safe_load(self.kubeconfig.read_text())
        ca = base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"]).decode()
        token = config["users"][0]["user"]["token"]
        request = urllib.request.Request(f"{self.url}{path}", headers={"Authorization": f"Bearer {token}"})
        return urllib.request.urlopen(request, timeout=timeout, context=ssl.create_default_context(cadata=ca))


@contextlib.contextmanager
def serve_cluster(tmp_path: Path, *, mode: str = "simulated") -> Iterator[ClusterProcess]:
    """``taskplug cluster serve`` on 127.0.0.1 in a child process, stopped (SIGTERM) when the block exits."""
    kubeconfig = tmp_path / "cluster.kubeconfig"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "taskplug.cli._cluster",
            "serve",
            "--port",
            "0",
            "--kubeconfig-out",
            str(kubeconfig),
            "--mode",
            mode,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        preexec_fn=_limit_memory,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline().decode()
        if "serving at" not in first:
            raise RuntimeError(f"the cluster did not start: {first}{process.stdout.read().decode()}")
        process.stdout.readline()
        yield ClusterProcess(process, kubeconfig, first.rsplit(" ", 1)[1].strip())
    finally:
        _stop(process)


@dataclass
class ReplicaProcess:
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


def executor_command(dsn: str, kubeconfig: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-c",
        _EXECUTOR,
        "--store",
        dsn,
        "--kubeconfig",
        str(kubeconfig),
        "--ttl",
        "3",
        "--heartbeat",
        "0.5",
        "--margin",
        "1",
        "--poll",
        "0.25",
        "--reap",
        "1",
        "-v",
        *extra,
    ]


def start_replica(
    dsn: str, kubeconfig: Path, log: Path, *extra: str, config: Path | None = None
) -> ReplicaProcess:
    """A ``taskplug executor`` child process with the tests' timings (ttl 3 s, heartbeat 0.5 s, margin 1 s,
    poll 0.25 s), its output in ``log``, its address space bounded."""
    args = [*extra]
    if config is not None:
        args += ["--config", str(config)]
    with log.open("ab") as out:
        process = subprocess.Popen(
            executor_command(dsn, kubeconfig, *args),
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=_limit_memory,
        )
    return ReplicaProcess(process, log)


def stop_replica(replica: ReplicaProcess) -> None:
    _stop(replica.process)


def _limit_memory() -> None:
    limit = 1536 * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    try:
        os.kill(process.pid, signal.SIGCONT)
    except ProcessLookupError:
        return
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
