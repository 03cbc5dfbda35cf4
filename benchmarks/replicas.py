"""Executor replicas on PostgreSQL: executions per second with 1, 2 and 3 replicas, beside one process on
SQLite, database statements per execution, and the takeover time after a SIGKILL.

Everything runs against one ``taskplug cluster serve --mode simulated`` (over HTTPS with its bearer token, as
every client of it has it, on 127.0.0.1; pods end at once) and a throwaway PostgreSQL started here
(``initdb`` + ``pg_ctl``, as the tests' fixture does; or ``--dsn`` for an existing server whose user may
create databases). For each configuration, N pod tasks are
submitted as the API submits them (one INSERT each, one NOTIFY) into a fresh database, and the rate is N over
the time from the submission to the last ``finished_at``. The SQLite single process is an executor in this
process with :class:`SQLiteStateStore` and the same HTTP cluster, each execution held through a
:class:`LocalCoordinator` (its lock and a lease every write is fenced with), as ``taskplug run`` has it; its
measured time includes parsing each execution's document, as a replica's includes parsing the rows it claims.

CPU per execution is each configuration's processes' user + system time over the run (the replicas' from
``/proc``, the single process's its own), printed beside the single process's and one replica's as ratios
(goals: one replica within 1.2x the single process, three within 1.2x one); one replica also runs with
``--keep-log-bytes 0``, for what keeping each pod's log costs.

Statements per execution are the replicas' own count (their ``taskplug_replica_*statements_total``
metrics): the write path (claims, fenced batches of state, events, attempts) and everything (with
heartbeats, sweeps, reconciles); measured at full load (batched) and for executions run one after another
(a pod task that succeeds first time, unbatched; target ≤ 10).

Every process runs with the garbage collector as the commands have it once their executor starts (start-up's
objects frozen, rarer collections: ``taskplug.cli._process``): the replicas are ``taskplug executor`` itself
(``python -m taskplug.cli executor``), the single process is tuned as ``taskplug run`` tunes itself;
``--default-gc`` keeps CPython's defaults on both sides instead.

    .venv/bin/python benchmarks/replicas.py [N] [--dsn postgresql://…] [--default-gc]
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from taskplug.cli._process import use_executor_collector
from taskplug.engine.k8s import connect
from taskplug.executor import (
    LocalCoordinator,
    Platform,
    SQLiteStateStore,
    executor_settings,
    open_executor,
    parse_spec,
)
from taskplug.service import migrate

THE_COMMAND = [sys.executable, "-m", "taskplug.cli", "executor"]
"""A replica as ``taskplug executor`` runs: the command itself, so it tunes its collector."""
NOT_THE_COMMAND = [
    sys.executable,
    "-c",
    "import taskplug.cli._executor_cmd as m, sys; sys.argv[0] = 'taskplug executor'; m.executor()",
]
"""A replica that is not the command (``python -c``), so it keeps CPython's collector (``--default-gc``)."""
EXECUTOR = THE_COMMAND


def document(name: str, duration: float = 0.0) -> dict[str, Any]:
    return {
        "template": {
            "id": {"resourceType": "TASK", "project": "p", "domain": "d", "name": "noop", "version": "v1"},
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
            "annotations": {"taskplug.io/simulate-duration": str(duration)},
        },
    }


# -- servers ---------------------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextlib.contextmanager
def postgres(dsn: str | None) -> Iterator[str]:
    """An admin DSN: ``dsn`` as given, or a throwaway server stopped at exit."""
    if dsn:
        yield dsn
        return
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    bindir = Path(shutil.which("pg_ctl") or found[-1]).parent
    workdir = Path(tempfile.mkdtemp(prefix="taskplug-bench-pg-"))
    run_as: list[str] = []
    user = pwd.getpwuid(os.getuid()).pw_name
    if os.getuid() == 0:
        user, run_as = "postgres", ["runuser", "-u", "postgres", "--"]
        shutil.chown(workdir, user)
    data = workdir / "data"
    subprocess.run(
        [*run_as, str(bindir / "initdb"), "-D", str(data), "-U", user, "-A", "trust", "--no-sync"],
        check=True,
        capture_output=True,
    )
    port = _free_port()
    options = (
        f"-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories={workdir} "
        "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
    )
    subprocess.run(
        [
            *run_as,
            str(bindir / "pg_ctl"),
            "-D",
            str(data),
            "-l",
            str(workdir / "log"),
            "-w",
            "-o",
            options,
            "start",
        ],
        check=True,
        capture_output=True,
    )
    try:
        yield f"postgresql://{user}@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(
            [*run_as, str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "stop"], capture_output=True
        )
        shutil.rmtree(workdir, ignore_errors=True)


def fresh_database(admin: str) -> str:
    name = f"bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    dsn = admin.rsplit("/", 1)[0] + f"/{name}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        migrate(conn)
    return dsn


def cpu_seconds(pid: int) -> float:
    """User + system CPU a process has used so far (Linux /proc), 0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


CLUSTER_PID = 0


@contextlib.contextmanager
def cluster(workdir: Path) -> Iterator[Path]:
    kubeconfig = workdir / "cluster.kubeconfig"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "taskplug.cli._cluster",
            "serve",
            "--kubeconfig-out",
            str(kubeconfig),
            "--mode",
            "simulated",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    global CLUSTER_PID
    CLUSTER_PID = process.pid
    try:
        assert process.stdout is not None
        line = process.stdout.readline().decode()
        if "serving at" not in line:
            raise RuntimeError(f"the cluster did not start: {line}")
        process.stdout.readline()
        yield kubeconfig
    finally:
        process.terminate()
        process.wait(timeout=30)


@contextlib.contextmanager
def replicas(
    dsn: str, kubeconfig: Path, config: Path, count: int, workdir: Path, *extra: str
) -> Iterator[list[subprocess.Popen[bytes]]]:
    started = []
    for i in range(count):
        with (workdir / f"replica-{i}.log").open("ab") as log:
            started.append(
                subprocess.Popen(
                    [
                        *EXECUTOR,
                        "--store",
                        dsn,
                        "--kubeconfig",
                        str(kubeconfig),
                        "--config",
                        str(config),
                        "--capacity",
                        "5000",
                        "--claim-batch",
                        "100",
                        *extra,
                    ],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            deadline = time.monotonic() + 120
            while conn.execute(
                "SELECT count(*) FROM taskplug_replicas WHERE fenced_at IS NULL"
            ).fetchone() != (count,):
                if time.monotonic() > deadline:
                    raise RuntimeError("the replicas did not register")
                time.sleep(0.1)
        yield started
    finally:
        for process in started:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in started:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


# -- measurements ----------------------------------------------------------------------------------------


def submit_all(conn: psycopg.Connection[Any], names: list[str], duration: float = 0.0) -> None:
    with conn.transaction():
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO taskplug_executions (key, task_type, spec) VALUES (%s, 'container', %s)",
                [(n, Jsonb(document(n, duration))) for n in names],
            )
        conn.execute("NOTIFY taskplug_work")


def wait_terminal(conn: psycopg.Connection[Any], n: int, limit: float = 600) -> None:
    deadline = time.monotonic() + limit
    while conn.execute("SELECT count(*) FROM taskplug_executions WHERE terminal").fetchone() != (n,):
        if time.monotonic() > deadline:
            raise RuntimeError("executions did not finish")
        time.sleep(0.05)


def statements(conn: psycopg.Connection[Any], heartbeat: float) -> tuple[float, float]:
    """(write path, all) statements the replicas counted, after their next heartbeat reported them."""
    time.sleep(heartbeat * 1.5)
    write = total = 0.0
    for (metrics,) in conn.execute("SELECT metrics FROM taskplug_replicas").fetchall():
        write += sum(s["value"] for s in metrics.get("taskplug_replica_write_statements_total", []))
        total += sum(s["value"] for s in metrics.get("taskplug_replica_statements_total", []))
    return write, total


def _replica_cpu(dsn: str) -> float:
    with psycopg.connect(dsn, autocommit=True) as conn:
        pids = [
            r[0] for r in conn.execute("SELECT pid FROM taskplug_replicas WHERE fenced_at IS NULL").fetchall()
        ]
    return sum(cpu_seconds(pid) for pid in pids)


def run_replicas(
    admin: str,
    kubeconfig: Path,
    config: Path,
    count: int,
    n: int,
    workdir: Path,
    *extra: str,
    single: float | None = None,
    one: float | None = None,
) -> float:
    """Runs ``n`` executions on ``count`` replicas (``extra``: more options); returns the replicas' CPU
    milliseconds per execution, printed beside ``single`` (the SQLite single process's) and ``one`` (one
    replica's) as ratios."""
    dsn = fresh_database(admin)
    options = ("--heartbeat", "0.5", "--ttl", "3", "--margin", "1", *extra)
    with (
        replicas(dsn, kubeconfig, config, count, workdir, *options),
        psycopg.connect(dsn, autocommit=True) as conn,
    ):
        names = [f"r{count}-{i}" for i in range(n)]
        replica_before, cluster_before = _replica_cpu(dsn), cpu_seconds(CLUSTER_PID)
        started = time.perf_counter()
        submit_all(conn, names)
        wait_terminal(conn, n)
        elapsed = time.perf_counter() - started
        replica_cpu = _replica_cpu(dsn) - replica_before
        cluster_cpu = cpu_seconds(CLUSTER_PID) - cluster_before
        span = conn.execute(
            "SELECT extract(epoch FROM max(finished_at) - min(created_at)) FROM taskplug_executions"
        ).fetchone()
        phases: dict[str, int] = dict(
            conn.execute("SELECT phase, count(*) FROM taskplug_executions GROUP BY phase").fetchall()
        )
        write, total = statements(conn, 0.5)
    db_span = float(span[0]) if span and span[0] else elapsed
    what = f"{count} replica(s)" + (f" with {' '.join(extra)}" if extra else "")
    print(
        f"  {what}: {n / db_span:,.0f} executions/s ({db_span:.2f} s, {phases}); statements per "
        f"execution: {write / n:.2f} write path, {total / n:.2f} with heartbeats and sweeps; CPU: replicas "
        f"{replica_cpu:.1f} s ({replica_cpu * 1000 / n:.2f} ms per execution{_ratios(replica_cpu * 1000 / n, single, one)}), "
        f"the cluster's API server {cluster_cpu:.1f} s"
    )
    return replica_cpu * 1000 / n


def _ratios(per_execution: float, single: float | None, one: float | None) -> str:
    out = f", {per_execution / single:.2f}x the single process's" if single else ""
    return out + (f", {per_execution / one:.2f}x one replica's" if one else "")


def run_sequential(admin: str, kubeconfig: Path, config: Path, n: int, workdir: Path) -> None:
    dsn = fresh_database(admin)
    with (
        replicas(dsn, kubeconfig, config, 1, workdir, "--heartbeat", "0.5", "--ttl", "3", "--margin", "1"),
        psycopg.connect(dsn, autocommit=True) as conn,
    ):
        before, _ = statements(conn, 0.5)
        for i in range(n):
            submit_all(conn, [f"s{i}"])
            wait_terminal(conn, i + 1)
        write, _ = statements(conn, 0.5)
    print(
        f"  one at a time (unbatched), 1 replica: {(write - before) / n:.1f} write-path statements per execution"
    )


def run_takeover(admin: str, kubeconfig: Path, config: Path, workdir: Path, kills: int = 3) -> None:
    dsn = fresh_database(admin)
    times = []
    with (
        replicas(
            dsn, kubeconfig, config, 2, workdir, "--heartbeat", "0.5", "--ttl", "3", "--margin", "1"
        ) as procs,
        psycopg.connect(dsn, autocommit=True) as conn,
    ):
        submit_all(conn, [f"t{i}" for i in range(100)], duration=3600)
        for _ in range(kills):
            deadline = time.monotonic() + 60
            while conn.execute(
                "SELECT count(*) FROM taskplug_executions WHERE owner_id IS NOT NULL"
            ).fetchone() != (100,):
                if time.monotonic() > deadline:
                    raise RuntimeError("not all claimed")
                time.sleep(0.05)
            owner = conn.execute("SELECT owner_id FROM taskplug_executions LIMIT 1").fetchone()
            assert owner is not None
            row = conn.execute("SELECT pid FROM taskplug_replicas WHERE id = %s", (owner[0],)).fetchone()
            assert row is not None
            victim = next(p for p in procs if p.pid == row[0])
            killed = time.monotonic()
            victim.kill()
            victim.wait()
            while conn.execute(
                "SELECT count(*) FROM taskplug_executions WHERE owner_id IS NULL OR owner_id = %s",
                (owner[0],),
            ).fetchone() != (0,):
                time.sleep(0.02)
            times.append(time.monotonic() - killed)
            procs.remove(victim)
            with (workdir / "replica-restarted.log").open("ab") as log:
                procs.append(
                    subprocess.Popen(
                        [
                            *EXECUTOR,
                            "--store",
                            dsn,
                            "--kubeconfig",
                            str(kubeconfig),
                            "--config",
                            str(config),
                            "--heartbeat",
                            "0.5",
                            "--ttl",
                            "3",
                            "--margin",
                            "1",
                        ],
                        stdout=log,
                        stderr=subprocess.STDOUT,
                    )
                )
        conn.execute("UPDATE taskplug_executions SET abort_requested_at = now()")
    print(
        f"  takeover after SIGKILL (ttl 3 s, heartbeat 0.5 s, poll 1 s; 100 running executions): "
        f"p50 {statistics.median(times):.2f} s, max {max(times):.2f} s over {len(times)} kills"
    )


async def run_sqlite(kubeconfig: Path, platform: Platform, n: int, workdir: Path) -> float:
    """Runs ``n`` executions in this process; returns its CPU milliseconds per execution."""
    store = SQLiteStateStore(workdir / "state.db")
    coordinator = LocalCoordinator(store)
    kube = connect(kubeconfig)
    try:
        async with open_executor(
            platform, kube_client=kube, store=store, settings=executor_settings(platform)
        ) as ex:
            coordinator.drive(ex)
            documents = [document(f"q{i}") for i in range(n)]
            started, cpu_before, cluster_before = (
                time.perf_counter(),
                time.process_time(),
                cpu_seconds(CLUSTER_PID),
            )
            # Parsed in the measured time, as a replica parses each row's document it claims.
            specs = [parse_spec(d) for d in documents]
            with contextlib.ExitStack() as held:
                for spec in specs:
                    held.enter_context(coordinator.hold(spec.execution_key))
                keys = [await ex.submit(spec) for spec in specs]
                results = await asyncio.gather(*(ex.wait(k) for k in keys))
            elapsed = time.perf_counter() - started
            cpu = time.process_time() - cpu_before
            cluster_cpu = cpu_seconds(CLUSTER_PID) - cluster_before
    finally:
        store.close()
        await kube.close()
    phases: dict[str, int] = {}
    for r in results:
        phases[r.phase] = phases.get(r.phase, 0) + 1
    print(
        f"  SQLite, one process: {n / elapsed:,.0f} executions/s ({elapsed:.2f} s, {phases}); CPU: the executor "
        f"{cpu:.1f} s ({cpu * 1000 / n:.2f} ms per execution), the cluster's API server {cluster_cpu:.1f} s"
    )
    return cpu * 1000 / n


def main(n: int, dsn: str | None, default_gc: bool) -> None:
    if default_gc:
        global EXECUTOR
        EXECUTOR = NOT_THE_COMMAND
    else:
        use_executor_collector()  # the single process, as `taskplug run` has it once its executor starts
    workdir = Path(tempfile.mkdtemp(prefix="taskplug-bench-replicas-"))
    config = workdir / "platform.yaml"
    config.write_text(
        f"executor:\n  data-root: {workdir / 'data'}\n  workers: 128\n  resync-period: 30s\n"
        "plugins:\n  k8s:\n    delete-resource-on-finalize: true\n"
    )
    platform = Platform.load(config)
    print(
        f"replicas N={n} (pod tasks on `taskplug cluster serve --mode simulated` over HTTPS with its token, 127.0.0.1)"
    )
    with postgres(dsn) as admin, cluster(workdir) as kubeconfig:
        single = asyncio.run(run_sqlite(kubeconfig, platform, n, workdir))
        per_execution = {1: run_replicas(admin, kubeconfig, config, 1, n, workdir, single=single)}
        for count in (2, 3):
            per_execution[count] = run_replicas(
                admin, kubeconfig, config, count, n, workdir, single=single, one=per_execution[1]
            )
        # What keeping each ended pod's log costs (read when the watch shows it ended, kept with the
        # execution's writes, committed before the delete).
        no_logs = run_replicas(
            admin,
            kubeconfig,
            config,
            1,
            n,
            workdir,
            "--keep-log-bytes",
            "0",
            single=single,
            one=per_execution[1],
        )
        print(
            f"  CPU per execution: SQLite single process {single:.2f} ms; 1 replica {per_execution[1]:.2f} ms, "
            f"{per_execution[1] / single:.2f}x the single process's (goal <= 1.2); 3 replicas "
            f"{per_execution[3]:.2f} ms, {per_execution[3] / per_execution[1]:.2f}x one replica's (goal <= 1.2); "
            f"1 replica keeping no logs {no_logs:.2f} ms, {no_logs / single:.2f}x the single process's"
        )
        run_sequential(admin, kubeconfig, config, 20, workdir)
        run_takeover(admin, kubeconfig, config, workdir)
    shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    given = next((a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--dsn=")), None)
    main(int(args[0]) if args else 1000, given, "--default-gc" in sys.argv[1:])
