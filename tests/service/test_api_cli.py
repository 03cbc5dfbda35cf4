"""``taskplug serve`` (a child process on 127.0.0.1) and ``taskplug run SPEC --server URL`` (submits, follows
until terminal, prints what a local run prints, exits 0/1/2), against a real PostgreSQL; the execution is
driven by :class:`ReplicaDouble` as a replica would drive it."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml
from click.testing import CliRunner

from service.test_api_replica_double import ReplicaDouble, pod_spec, serve_app
from support.net import free_port, stop_process, wait_until_ready
from taskplug.cli._run import run
from taskplug.service._api_app import create_app


@pytest.fixture(scope="module")
def server(postgres_dsn: str) -> Iterator[str]:
    with serve_app(create_app(postgres_dsn, poll_interval=0.25)) as url:
        yield url


def spec_file(tmp_path: Path, name: str, **changes: Any) -> Path:
    document = pod_spec(name)
    document["execution"].update(changes)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def drive(dsn: str, key: str, steps: Callable[[ReplicaDouble], None]) -> threading.Thread:
    """A replica double that waits for ``key`` to be submitted, claims it and runs ``steps``."""

    def play() -> None:
        double = ReplicaDouble(dsn, host="cli-host")
        try:
            deadline = time.monotonic() + 30
            with psycopg.connect(dsn, autocommit=True) as conn:
                while (
                    conn.execute("SELECT 1 FROM taskplug_executions WHERE key = %s", (key,)).fetchone()
                    is None
                ):
                    assert time.monotonic() < deadline, f"{key} was never submitted"
                    time.sleep(0.05)  # polling for the CLI's submission, not a timing
            double.claim(key)
            steps(double)
        finally:
            double.close()

    thread = threading.Thread(target=play, daemon=True)
    thread.start()
    return thread


def test_run_with_server_follows_to_success_and_prints_the_outputs(
    server: str, postgres_dsn: str, tmp_path: Path
) -> None:
    key = "p/d/cli-ok/n0"

    def steps(double: ReplicaDouble) -> None:
        double.phase(key, "Running", reason="pod started")
        double.phase(key, "Success", outputs={"greeting": "hello, world"})

    thread = drive(postgres_dsn, key, steps)
    result = CliRunner().invoke(run, [str(spec_file(tmp_path, "cli-ok")), "--server", server, "-o", "json"])
    thread.join(timeout=30)

    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["phase"] == "Success"
    assert document["outputs"] == {"greeting": "hello, world"}
    assert [e["phase"] for e in document["events"]] == ["Running", "Success"]


def test_run_with_server_exits_1_when_the_task_fails_and_shows_the_error(
    server: str, postgres_dsn: str, tmp_path: Path
) -> None:
    key = "p/d/cli-fail/n0"
    error = {"code": "ContainersNotReady", "kind": "USER", "message": "exit code 3"}

    def steps(double: ReplicaDouble) -> None:
        double.phase(key, "PermanentFailure", reason="exit code 3", error=error)

    thread = drive(postgres_dsn, key, steps)
    result = CliRunner().invoke(run, [str(spec_file(tmp_path, "cli-fail")), "--server", server])
    thread.join(timeout=30)

    assert result.exit_code == 1, result.output
    assert "PermanentFailure after 1 attempt(s)" in result.stdout
    assert "error [ContainersNotReady] (USER): exit code 3" in result.stdout


def test_run_with_server_refuses_a_bad_spec_naming_the_field(server: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(run, [str(spec_file(tmp_path, "cli-bad", maxAttempts=0)), "--server", server])

    assert result.exit_code == 2
    assert "execution.maxAttempts" in result.output


def test_run_with_server_refuses_local_only_options(server: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        run, ["--state-db", str(tmp_path / "s.db"), str(spec_file(tmp_path, "cli-opts")), "--server", server]
    )

    assert result.exit_code == 2
    assert "--state-db" in result.output


def test_run_with_an_unreachable_server_is_bad_input(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"

    result = CliRunner().invoke(run, [str(spec_file(tmp_path, "cli-nowhere")), "--server", url])

    assert result.exit_code == 2
    assert "cannot reach" in result.output


def test_serve_binds_loopback_and_answers_health(postgres_dsn: str, tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "serve.log"
    command = "import sys; from taskplug.cli._serve import serve; sys.argv[0] = 'taskplug serve'; serve()"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-c", command, "--store", postgres_dsn, "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:

        def healthy() -> bool:
            try:
                import urllib.request

                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/healthz", timeout=2) as response:
                    return bool(response.status == 200)
            except OSError:
                return False

        wait_until_ready(healthy, process, log, what="taskplug serve")
        listening = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True).stdout
        assert f"127.0.0.1:{port}" in listening
        assert f"0.0.0.0:{port}" not in listening
    finally:
        stop_process(process)
    # A clean stop: uvicorn finishes its shutdown, then re-raises the SIGTERM it caught (exit status -15).
    assert "Application shutdown complete" in log.read_text()
    assert process.returncode in (0, -15), log.read_text()


def test_serve_refuses_a_store_that_is_not_postgresql() -> None:
    from taskplug.cli._serve import serve

    result = CliRunner().invoke(serve, ["--store", "sqlite:///state.db"])

    assert result.exit_code == 2
    assert "--store" in result.output


def test_serve_with_an_unreachable_database_exits_2_naming_the_store_without_a_traceback() -> None:
    from taskplug.cli._serve import serve

    closed = free_port()
    result = CliRunner().invoke(
        serve, ["--store", f"postgresql://nobody@127.0.0.1:{closed}/x", "--port", "0"]
    )

    assert result.exit_code == 2, result.output
    assert "--store: cannot use the database" in result.output
    assert "Traceback" not in result.output


def test_a_template_file_is_sent_inline_and_an_unnamed_spec_gets_its_name_here(tmp_path: Path) -> None:
    from flyteidl.core import tasks_pb2
    from google.protobuf import json_format

    from taskplug.cli._remote_run import remote_document

    document = pod_spec(None)
    template = json_format.ParseDict(document.pop("template"), tasks_pb2.TaskTemplate())
    (tmp_path / "task.pb").write_bytes(template.SerializeToString())
    document["templateFile"] = "task.pb"
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(document))

    sent, key = remote_document(path)

    assert "templateFile" not in sent
    assert json_format.ParseDict(sent["template"], tasks_pb2.TaskTemplate()) == template
    name = sent["execution"]["id"]["name"]
    assert key == f"p/d/{name}/n0"
    assert remote_document(path)[1] != key  # unnamed: a new execution each run, as a local run


def test_the_first_interrupt_asks_the_server_to_abort_and_keeps_following(
    server: str, postgres_dsn: str, tmp_path: Path
) -> None:
    from rich.console import Console

    from taskplug.cli._remote_run import _follow, _Server

    key = "p/d/cli-interrupted/n0"
    api = _Server(server)
    api.expect("POST", "/executions", {"spec": pod_spec("cli-interrupted")}, ok=(201,))
    interrupted: list[bool] = []

    def sleep(seconds: float) -> None:
        if not interrupted:
            interrupted.append(True)
            raise KeyboardInterrupt
        # The owner sees the request and ends the execution Aborted.
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            row = conn.execute(
                "SELECT abort_requested_at IS NOT NULL FROM taskplug_executions WHERE key = %s", (key,)
            ).fetchone()
        if row and row[0]:
            double = ReplicaDouble(postgres_dsn)
            try:
                double.claim(key)
                double.phase(key, "Aborted", reason="aborted on request")
            finally:
                double.close()
        time.sleep(0.05)

    with (tmp_path / "err.txt").open("w") as err:
        events, execution = _follow(api, key, Console(file=err), quiet=False, poll=0.05, sleep=sleep)

    assert execution["phase"] == "Aborted"
    assert [e["phase"] for e in events] == ["Aborted"]
    assert "asking the server to abort" in (tmp_path / "err.txt").read_text()


@pytest.mark.integration
def test_run_with_server_shows_a_map_tasks_elements_as_a_local_run_does(
    server: str, postgres_dsn: str, tmp_path: Path
) -> None:
    """A real replica on the simulated cluster drives a map task submitted with ``--server``; the follower
    shows the local run's live view (elements by phase), and the API's events carry each element."""
    from service.replica_helpers import map_document, serve_cluster, start_replica, stop_replica

    document = map_document("cli-map", 4)
    spec = tmp_path / "map.yaml"
    spec.write_text(yaml.safe_dump(document))
    with serve_cluster(tmp_path) as cluster:
        replica = start_replica(postgres_dsn, cluster.kubeconfig, tmp_path / "replica.log")
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "taskplug.cli", "run", str(spec), "--server", server],
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
        finally:
            stop_replica(replica)
    assert proc.returncode == 0, proc.stderr + replica.text()
    assert "Success after 1 attempt(s)" in proc.stdout
    assert "4/4 elements done" in proc.stderr and "succeeded 4" in proc.stderr, proc.stderr

    key = "p/d/cli-map/n0"
    with urllib.request.urlopen(f"{server}/api/v1/executions/{key}/events") as answer:
        events = json.load(answer)
    seen = {r["index"] for e in events for r in (e["external_resources"] or [])}
    assert seen == {0, 1, 2, 3}
    assert events[-1]["phase"] == "Success"
    assert {r["phase"] for r in events[-1]["external_resources"]} == {"Success"}


def test_run_with_server_rides_out_a_database_outage_and_ends_as_the_execution_did(
    postgres_dsn: str, tmp_path: Path
) -> None:
    """The server's database goes away while a run follows (the server answers 503): the run says so once,
    keeps asking, and when the database is back reports the execution's end, which a replica reached
    meanwhile — exit 0 with the outputs, not exit 2 at the first 503."""
    from support.tcp_relay import relay_to_postgres

    relay, relayed = relay_to_postgres(postgres_dsn)
    key = "p/d/cli-outage/n0"
    log = tmp_path / "run.log"
    try:
        with serve_app(create_app(relayed, poll_interval=0.25, db_timeout=1.0)) as url, log.open("wb") as out:
            spec = str(spec_file(tmp_path, "cli-outage"))
            command = [sys.executable, "-m", "taskplug.cli", "run", "-o", "json", spec, "--server", url]
            run_process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=out)

            def steps(double: ReplicaDouble) -> None:
                double.phase(key, "Running", reason="pod started")
                relay.cut()
                deadline = time.monotonic() + 60
                while b"asking again until it answers" not in log.read_bytes():
                    assert time.monotonic() < deadline, log.read_text()
                    time.sleep(0.05)  # waiting for the run to meet the outage, not a timing
                # The replica writes straight to the database: the execution ends while the server is down.
                double.phase(key, "Success", outputs={"greeting": "after the outage"})
                relay.restore()

            thread = drive(postgres_dsn, key, steps)
            stdout, _ = run_process.communicate(timeout=120)
            thread.join(timeout=30)
    finally:
        relay.cut()

    assert run_process.returncode == 0, log.read_text()
    document = json.loads(stdout)
    assert (document["phase"], document["outputs"]) == ("Success", {"greeting": "after the outage"})
    assert "the server answered 503: the database does not answer" in log.read_text()
