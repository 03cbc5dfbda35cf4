"""Replicas under SIGKILL and SIGSTOP (docs/service.md): safety and liveness together.

Three ``taskplug executor`` processes share one PostgreSQL and ``taskplug cluster serve`` (simulated pods,
over HTTP on 127.0.0.1). A few hundred executions are submitted as the API submits them: most succeed after
1–4 s, some fail and retry, some are aborted. For ``CHAOS_SECONDS`` a seeded RNG SIGKILLs a random replica
every 1–3 s (and starts a new one) and SIGSTOPs one for ttl + 2 s every 5–9 s. Then:

- every execution is terminal, and each ends as its script says (chaos charges no failure to a task);
- exactly one object was ever created per (execution, attempt) — per (execution, element, retry) for the
  map tasks among them, per (execution, node) for the workflows (a fan-out and a chain of pods) — counted
  from a watch on every pod; each workflow ends with its outputs and every node Succeeded. The one
  exception Kubernetes cannot fence is a create an ex-owner had already passed its guard for when it was
  paused; such a resurrected object (created after its attempt had finished) is counted, printed, and must
  have been deleted by the orphan reaper;
- no state write landed with a stale epoch (events in commit order per execution never go back in epoch);
- nothing is left in the cluster;
- the takeover time after each SIGKILL (until every execution the victim owned is owned by a live replica
  or finished) is printed as p50 / max.

The negative control runs the same protocol with fencing switched off (``--no-fencing``): a replica paused
past its ttl resumes and keeps writing, and the stale-write check must catch it. Set
``TASKPLUG_CHAOS_SEED`` to replay a run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import random
import signal
import statistics
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis
import yaml

from service.replica_helpers import (
    ClusterProcess,
    ReplicaProcess,
    empty_database_fixture,  # noqa: F401 (the conn fixture)
    map_document,
    pod_document,
    rows,
    serve_cluster,
    stale_epoch_writes,
    start_replica,
    stop_replica,
    submit,
    workflow_document,
)
from support.connector_server import ConnectorServer, connector_server_fixture  # noqa: F401
from support.postgres_server import postgres_dsn_fixture, postgres_server_fixture  # noqa: F401
from support.redis_server import RedisServer, redis_server_fixture  # noqa: F401
from support.waiting import wait_until
from support.webapi import connector_document, scripted_document
from taskplug.engine.k8s import connect
from taskplug.k8s import POD, KubeClient

pytestmark = pytest.mark.integration

EXECUTIONS = 500
SUBMIT_SECONDS = 30.0
REPLICAS = 3
CHAOS_SECONDS = 40.0
TTL = 3.0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterProcess]:
    with serve_cluster(tmp_path) as served:
        yield served


# The allocation tokens of the connector plugin's quota on the Redis manager (<manager>:<plugin>:<namespace>).
TOKENS = "redisresourcemanager:connector-service:default"


@pytest.fixture
def config(tmp_path: Path, connector_server: ConnectorServer, redis_server: RedisServer) -> Path:
    """Pods deleted when finalized (so that nothing may be left); web-API tasks on the scripted connector
    with a quota on shared Redis allocation tokens."""
    document = connector_document(
        tmp_path,
        connector_server.endpoint,
        quotas={"default": 1000},
        resource_manager={"type": "redis", "redis": {"hostPath": redis_server.host_path}},
    )
    document["executor"].pop("state-db", None)
    document["executor"]["workers"] = 64
    document["plugins"]["k8s"] = {"delete-resource-on-finalize": True}
    path = tmp_path / "platform.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


@dataclass
class Audit:
    """Every pod the cluster ever held, from a list + watch over HTTP: uids by name, when each was seen
    created and deleted (wall time, comparable with the database's timestamps on this one machine)."""

    kube: KubeClient
    created: dict[str, dict[str, float]] = field(default_factory=lambda: defaultdict(dict))
    deleted: dict[str, float] = field(default_factory=dict)
    execution: dict[str, str] = field(default_factory=dict)  # pod name -> its execution-id label

    def _seen(self, kind: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        uid, name = str(meta.get("uid")), str(meta.get("name"))
        self.execution.setdefault(name, str((meta.get("labels") or {}).get("execution-id", "")))
        if kind == "DELETED":
            self.deleted.setdefault(uid, time.time())
        self.created[name].setdefault(uid, time.time())

    async def run(self) -> None:
        while True:
            try:
                objects, version = await self.kube.list(POD, None)
            except (ConnectionError, TimeoutError):
                await asyncio.sleep(0.1)
                continue
            for obj in objects:
                self._seen("ADDED", obj)
            with contextlib.suppress(Exception):
                async for event in self.kube.watch(POD, None, resource_version=version, timeout_seconds=30):
                    if event.type in ("ADDED", "MODIFIED", "DELETED"):
                        self._seen(event.type, event.object)


@dataclass
class Chaos:
    dsn: str
    cluster: ClusterProcess
    config: Path
    logs: Path
    rng: random.Random
    replicas: list[ReplicaProcess] = field(default_factory=list)
    takeovers: list[float] = field(default_factory=list)
    kills: int = 0
    pauses: int = 0
    started: int = 0

    def start(self, *extra: str) -> ReplicaProcess:
        self.started += 1
        replica = start_replica(
            self.dsn,
            self.cluster.kubeconfig,
            self.logs / f"replica-{self.started}.log",
            "--capacity",
            "120",
            "--claim-batch",
            "20",
            *extra,
            config=self.config,
        )
        self.replicas.append(replica)
        return replica

    def stop_all(self) -> None:
        for replica in self.replicas:
            stop_replica(replica)


def _replica_id(conn: psycopg.Connection[Any], pid: int) -> Any:
    row = conn.execute(
        "SELECT id FROM taskplug_replicas WHERE pid = %s ORDER BY started_at DESC LIMIT 1", (pid,)
    ).fetchone()
    return row[0] if row else None


async def _takeover(dsn: str, victim: Any, keys: list[str], killed: float, out: list[float]) -> None:
    """How long until every execution ``victim`` owned is owned by a live replica or finished."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        while True:
            left = conn.execute(
                "SELECT count(*) FROM taskplug_executions e WHERE key = ANY(%s) AND NOT terminal "
                "AND (owner_id IS NULL OR owner_id = %s)",
                (keys, victim),
            ).fetchone()
            if left == (0,):
                out.append(time.monotonic() - killed)
                return
            await asyncio.sleep(0.05)


def _script(i: int, rng: random.Random) -> tuple[str, dict[str, Any]]:
    """What execution i does: ok (1–4 s), fail (exit 1, two attempts), abort (runs 30 s, aborted), web (a
    connector job: RUNNING, then SUCCEEDED with output o0 = 42), map (a map task of 3–5 pods, 1–3 s each),
    wf (a workflow: one pod, then 2–3 side by side, then one, 0.5–2 s each; its output o is its input x = i)."""
    roll = rng.random()
    name = f"c{i}"
    if roll < 0.06:
        return "wf", workflow_document(name, duration=rng.uniform(0.5, 2), x=i, fan_out=rng.randint(2, 3))
    if roll < 0.1:
        return "web", scripted_document(name, "RUNNING", "SUCCEEDED")
    if roll < 0.18:
        return "map", map_document(name, rng.randint(3, 5), duration=rng.uniform(1, 3))
    if roll < 0.28:
        return "fail", pod_document(name, duration=rng.uniform(0.5, 2), exit_code=1, max_attempts=2)
    if roll < 0.4:
        return "abort", pod_document(name, duration=30)
    return "ok", pod_document(name, duration=rng.uniform(1, 4))


async def test_replicas_under_sigkill_and_sigstop_finish_everything_once(
    conn: psycopg.Connection[Any],
    postgres_dsn: str,
    cluster: ClusterProcess,
    config: Path,
    tmp_path: Path,
    connector_server: ConnectorServer,
    redis_server: RedisServer,
) -> None:
    seed = int(os.environ.get("TASKPLUG_CHAOS_SEED") or random.randrange(1 << 30))
    print(f"\nchaos seed {seed} (TASKPLUG_CHAOS_SEED={seed} replays it)")
    rng = random.Random(seed)
    chaos = Chaos(postgres_dsn, cluster, config, tmp_path, rng)
    kube = connect(cluster.kubeconfig)
    audit = Audit(kube)
    scripts: dict[str, str] = {}
    map_elements = 0
    workflow_nodes: dict[str, int] = {}
    monitors: list[asyncio.Task[None]] = []
    async with asyncio.TaskGroup() as group:
        watcher = group.create_task(audit.run())
        try:
            for _ in range(REPLICAS):
                chaos.start()
            await wait_until(
                lambda: conn.execute("SELECT count(*) FROM taskplug_replicas").fetchone() == (REPLICAS,),
                within=60,
                what="the replicas registered",
            )
            began = time.monotonic()
            submitted = 0
            aborts: list[tuple[float, str]] = []
            next_kill = began + rng.uniform(1, 3)
            next_pause = began + rng.uniform(5, 9)
            paused: tuple[ReplicaProcess, float] | None = None
            while time.monotonic() - began < CHAOS_SECONDS:
                now = time.monotonic()
                # Submissions spread over most of the chaos, as clients would send them.
                while submitted < EXECUTIONS and submitted < EXECUTIONS * (now - began) / SUBMIT_SECONDS:
                    kind, document = _script(submitted, rng)
                    scripts[f"c{submitted}"] = kind
                    map_elements += len(document.get("inputs", {}).get("x", [])) if kind == "map" else 0
                    if kind == "wf":
                        template = document["workflowClosure"]["primary"]["template"]
                        workflow_nodes[f"c{submitted}"] = len(template["nodes"])
                    submit(conn, f"c{submitted}", document)
                    if kind == "abort":
                        aborts.append((now + rng.uniform(1, 6), f"c{submitted}"))
                    submitted += 1
                for due, key in [a for a in aborts if a[0] <= now]:
                    aborts.remove((due, key))
                    conn.execute(
                        "UPDATE taskplug_executions SET abort_requested_at = now() WHERE key = %s AND NOT terminal",
                        (key,),
                    )
                    conn.execute("SELECT pg_notify('taskplug_abort', %s)", (key,))
                if paused is not None and now >= paused[1]:
                    os.kill(paused[0].pid, signal.SIGCONT)
                    paused = None
                live = [r for r in chaos.replicas if r.process.poll() is None]
                if now >= next_kill:
                    next_kill = now + rng.uniform(1, 3)
                    candidates = [r for r in live if paused is None or r is not paused[0]]
                    victim = rng.choice(candidates)
                    victim_id = _replica_id(conn, victim.pid)
                    owned = [
                        r[0]
                        for r in conn.execute(
                            "SELECT key FROM taskplug_executions WHERE owner_id = %s AND NOT terminal",
                            (victim_id,),
                        ).fetchall()
                    ]
                    os.kill(victim.pid, signal.SIGKILL)
                    victim.process.wait()
                    chaos.kills += 1
                    if owned:
                        monitors.append(
                            group.create_task(
                                _takeover(postgres_dsn, victim_id, owned, time.monotonic(), chaos.takeovers)
                            )
                        )
                    chaos.replicas.remove(victim)
                    chaos.start()
                if now >= next_pause and paused is None:
                    next_pause = now + rng.uniform(5, 9)
                    target = rng.choice([r for r in chaos.replicas if r.process.poll() is None])
                    os.kill(target.pid, signal.SIGSTOP)
                    chaos.pauses += 1
                    paused = (target, now + TTL + 2)
                await asyncio.sleep(0.05)
            if paused is not None:
                os.kill(paused[0].pid, signal.SIGCONT)
            for _due, key in aborts:
                conn.execute(
                    "UPDATE taskplug_executions SET abort_requested_at = now() WHERE key = %s AND NOT terminal",
                    (key,),
                )
                conn.execute("SELECT pg_notify('taskplug_abort', %s)", (key,))
            ended = time.monotonic()
            try:
                await wait_until(
                    lambda: all(r["terminal"] for r in rows(conn).values()),
                    within=TTL + 45,
                    what="every execution terminal",
                )
            except AssertionError:
                stuck = {k: (scripts[k], r["phase"]) for k, r in rows(conn).items() if not r["terminal"]}
                print(f"not terminal: {stuck}")
                raise
            print(f"all {EXECUTIONS} terminal {time.monotonic() - ended:.1f} s after the chaos ended")

            async def pods_left() -> list[str]:
                objects, _ = await kube.list(POD, None)
                return [o["metadata"]["name"] for o in objects]

            left: list[str] = []
            deadline = time.monotonic() + TTL + 10
            while time.monotonic() < deadline:
                left = await pods_left()
                if not left:
                    break
                await asyncio.sleep(0.2)
            for monitor in monitors:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(monitor, 10)
        finally:
            watcher.cancel()
            for monitor in monitors:
                monitor.cancel()
            chaos.stop_all()
    await kube.close()

    found = rows(conn)
    finished = {
        r[0]: r[1]
        for r in conn.execute(
            "SELECT a.resource_name, a.finished_at FROM taskplug_attempts a WHERE a.finished_at IS NOT NULL"
        ).fetchall()
    }
    # A map element's pod has no attempt row: its attempt is over once its execution finished.
    execution_finished: dict[str, datetime] = {
        r[0]: r[1]
        for r in conn.execute(
            "SELECT key, finished_at FROM taskplug_executions WHERE finished_at IS NOT NULL"
        ).fetchall()
    }
    duplicates, resurrected = [], []
    for name, uids in audit.created.items():
        if len(uids) < 2:
            continue
        first, *later = sorted(uids.items(), key=lambda item: item[1])
        end: datetime | None = finished.get(name) or execution_finished.get(audit.execution.get(name, ""))
        for uid, seen in later:
            if end is not None and seen >= end.timestamp():
                resurrected.append((name, uid, audit.deleted.get(uid, float("inf")) - seen))
            else:
                duplicates.append((name, [u for u, _ in (first, *later)]))
    outcomes: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    retried = 0
    for key, row in found.items():
        outcomes[scripts[key]][row["phase"]] += 1
        retried += scripts[key] == "ok" and row["attempt"] > 0
    stale = stale_epoch_writes(conn)
    takeovers = sorted(chaos.takeovers)
    # The connector records every create it received; its output prefix names the execution and attempt.
    web_prefixes = {f"/{key}/" for key, kind in scripts.items() if kind == "web"}
    creates: dict[str, int] = defaultdict(int)
    for request in connector_server.state_dir.glob("job-*.request.json"):
        prefix = json.loads(request.read_text())["output_prefix"]
        if any(p in prefix for p in web_prefixes):
            creates[prefix] += 1
    web_duplicates = {prefix: n for prefix, n in creates.items() if n > 1}
    with redis.Redis(host=redis_server.host, port=redis_server.port) as tokens:
        leaked = tokens.smembers(TOKENS)
    print(
        f"executions {EXECUTIONS}, replicas {REPLICAS}, SIGKILLs {chaos.kills}, SIGSTOPs {chaos.pauses}, "
        f"replica processes started {chaos.started}"
    )
    print(
        f"outcomes by script: { {k: dict(v) for k, v in outcomes.items()} }; ok ones retried by chaos: {retried}"
    )
    print(f"objects created {sum(len(u) for u in audit.created.values())} for {len(audit.created)} attempts")
    maps = {key for key, kind in scripts.items() if kind == "map"}
    element_pods = [name for name, execution in audit.execution.items() if execution in maps]
    print(f"map tasks {len(maps)}: {len(element_pods)} element pods for {map_elements} elements")
    workflows = set(workflow_nodes)
    node_pods: dict[str, int] = defaultdict(int)
    for execution in audit.execution.values():
        if execution in workflows:
            node_pods[execution] += 1
    node_phases: dict[str, set[int]] = defaultdict(set)
    for key, phase in conn.execute(
        "SELECT e.key, (n.record->'workflow_state'->>'phase')::int FROM taskplug_nodes n"
        " JOIN taskplug_executions e ON e.id = n.execution_id WHERE e.task_type = 'workflow'"
    ).fetchall():
        node_phases[key].add(phase)
    print(
        f"workflows {len(workflows)}: {sum(node_pods.values())} node pods for {sum(workflow_nodes.values())} nodes"
    )
    print(f"duplicates {len(duplicates)}, resurrected (reaped) {len(resurrected)}: {resurrected}")
    print(f"stale-epoch writes {len(stale)}; pods left {len(left)}; allocation tokens left {len(leaked)}")
    print(
        f"web-API: {sum(creates.values())} connector creates for {len(creates)} attempts of "
        f"{sum(k == 'web' for k in scripts.values())} executions; duplicate creates {len(web_duplicates)}"
    )
    fenced = sum(
        log.read_text(errors="replace").count("fences itself") for log in tmp_path.glob("replica-*.log")
    )
    print(f"incarnations that fenced themselves (paused past the ttl, or refused writes): {fenced}")
    if takeovers:
        print(
            f"takeover after SIGKILL: p50 {statistics.median(takeovers):.2f} s, max {takeovers[-1]:.2f} s "
            f"({len(takeovers)} kills of a replica owning executions)"
        )

    assert all(r["terminal"] for r in found.values())
    assert set(outcomes["ok"]) <= {"Success"}, outcomes["ok"]
    assert set(outcomes["fail"]) <= {"PermanentFailure"}, outcomes["fail"]
    assert all(found[k]["attempt"] == 1 for k, s in scripts.items() if s == "fail")
    assert set(outcomes["abort"]) <= {"Aborted"}, outcomes["abort"]
    assert set(outcomes["web"]) <= {"Success"}, outcomes["web"]
    assert set(outcomes["map"]) <= {"Success"}, outcomes["map"]
    assert all(found[k]["attempt"] == 0 for k in maps)  # chaos charges no failure to a map either
    assert len(element_pods) == map_elements  # one pod per element: none retried, none created twice
    assert all(found[k]["outputs"] == {"o0": 42} for k, s in scripts.items() if s == "web")
    assert set(outcomes["wf"]) <= {"Success"}, outcomes["wf"]
    assert all(found[k]["outputs"] == {"o": int(k[1:]), "y": 1} for k in workflows)
    assert node_pods == workflow_nodes  # one pod per node: none retried, none created twice
    assert all(node_phases[k] == {5} for k in workflows)  # every node (start and end too) Succeeded
    assert leaked == set()
    assert duplicates == []
    assert stale == []
    assert left == []
    assert all(math.isfinite(lived) for _, _, lived in resurrected)  # every resurrected object was reaped
    assert chaos.kills >= CHAOS_SECONDS / 3 - 1


async def test_without_fencing_a_resumed_ex_owner_writes_stale_state_and_the_check_catches_it(
    conn: psycopg.Connection[Any], postgres_dsn: str, cluster: ClusterProcess, config: Path, tmp_path: Path
) -> None:
    """The negative control: the paused replica's executions finish under the new owner while it sleeps;
    resumed with fencing off, it keeps driving them and its writes land under the old epoch."""
    chaos = Chaos(postgres_dsn, cluster, config, tmp_path, random.Random(0))
    try:
        first = chaos.start("--no-fencing", "--capacity", "6")
        await wait_until(
            lambda: conn.execute("SELECT count(*) FROM taskplug_replicas").fetchone() == (1,), within=60
        )
        for i in range(6):
            submit(conn, f"n{i}", pod_document(f"n{i}", duration=2))
        await wait_until(
            lambda: all(r["phase"] == "Running" for r in rows(conn).values()) and len(rows(conn)) == 6,
            within=30,
            what="all running on the first replica",
        )
        chaos.start("--no-fencing")
        os.kill(first.pid, signal.SIGSTOP)
        try:
            await wait_until(
                lambda: all(r["terminal"] for r in rows(conn).values()),
                within=30,
                what="finished by the other",
            )
        finally:
            os.kill(first.pid, signal.SIGCONT)
        await wait_until(lambda: stale_epoch_writes(conn) != [], within=30, what="a stale write landed")
    finally:
        chaos.stop_all()
    stale = stale_epoch_writes(conn)
    print(f"\nwith fencing off: {len(stale)} stale-epoch write(s), e.g. {stale[:3]}")
    assert {key for key, _, _ in stale} <= {f"n{i}" for i in range(6)}
