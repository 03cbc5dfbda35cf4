"""Connector tasks end to end: spec → platform → executor → web-API adapter → a real flytekit connector
server on 127.0.0.1 (``pyflyte serve connector`` with the scripted test connectors), through the executor
API and through ``taskplug run -o json``.

The executor-API tests run on a :class:`FastClock` (10×): the status cache's 5 s resync is half a second.
The ``taskplug run`` tests use real time with scripts that end on the first poll.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.clocks import FastClock
from support.connector_server import ConnectorServer, connector_server_fixture  # noqa: F401
from support.webapi import (
    connector_document,
    echo_sync_document,
    events_of,
    file_sensor_document,
    finished,
    phases_of,
    running_executor,
    scripted_document,
    spec,
    wait_until,
)
from taskplug.core import Phase
from taskplug.executor._executor import Executor
from taskplug.localcluster import LocalCluster

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "connector"
TASKPLUG = Path(sys.executable).with_name("taskplug")


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
async def cluster() -> AsyncIterator[LocalCluster]:
    async with LocalCluster(mode="simulated") as c:
        yield c


@pytest.fixture
async def ex(
    connector_server: ConnectorServer, cluster: LocalCluster, tmp_path: Path
) -> AsyncIterator[Executor]:
    document = connector_document(tmp_path, connector_server.endpoint)
    async with running_executor(document, kube_client=cluster.client(), clock=FastClock(10)) as executor:
        yield executor


# -- through the executor API -----------------------------------------------------------------------------


async def test_a_scripted_job_walks_its_phases_to_success_with_the_connectors_outputs(ex: Executor) -> None:
    key = await ex.submit(spec(scripted_document(unique("ok"), "QUEUED", "RUNNING", "SUCCEEDED")))
    (result,) = await finished(ex, [key])

    assert (result.phase, result.attempts, result.error) == ("Success", 1, None)
    assert result.outputs == {"o0": 42}
    timeline = events_of(ex, key)
    # The token round, create, then what the connector answered on each poll of the status cache.
    assert timeline[:2] == [("Queued", "Allocation token required"), ("Queued", "launched")]
    assert ("Queued", "poll 1 -> QUEUED") in timeline
    assert [phase for phase, _ in timeline[-2:]] == ["Running", "Success"]


async def test_a_failed_script_is_a_permanent_failure_with_the_connectors_message(ex: Executor) -> None:
    key = await ex.submit(spec(scripted_document(unique("fail"), "RUNNING", "FAILED")))
    (result,) = await finished(ex, [key])

    assert result.phase == "PermanentFailure"
    assert result.error == {
        "code": "TaskFailedWithError",
        "message": "failed to run the job: poll 2 -> FAILED",
        "kind": "USER",
    }
    assert result.outputs is None


async def test_the_file_sensor_runs_until_the_file_appears_then_succeeds(
    ex: Executor, connector_server: ConnectorServer, tmp_path: Path
) -> None:
    flag = tmp_path / "flagfile"
    key = await ex.submit(spec(file_sensor_document(unique("sensor"), flag)))
    await wait_until(lambda: Phase(ex.status(key).task_phase) is Phase.RUNNING, what="the sensor is running")
    # Several status-cache passes (0.5 s each on this clock) find no file: still running.
    rounds = ex.rounds
    await wait_until(lambda: ex.rounds >= rounds + 3, what="three more executor rounds")
    assert Phase(ex.status(key).task_phase) is Phase.RUNNING
    assert not ex.status(key).terminal

    flag.touch()
    (result,) = await finished(ex, [key])
    assert (result.phase, result.outputs) == ("Success", {})
    assert phases_of(ex, key)[-2:] == ["Running", "Success"]


async def test_aborting_a_running_job_reaches_the_connectors_delete(
    ex: Executor, connector_server: ConnectorServer
) -> None:
    group = unique("abort")
    key = await ex.submit(spec(scripted_document(unique("abort"), hold=group, group=group)))
    await wait_until(lambda: len(connector_server.running(group)) == 1, what="the job runs on the connector")
    (job_id,) = connector_server.running(group)
    await wait_until(
        lambda: Phase(ex.status(key).task_phase) is Phase.RUNNING, what="the task reports Running"
    )

    ex.abort(key)
    (result,) = await finished(ex, [key])
    assert result.phase == "Aborted"
    assert job_id in connector_server.deleted()
    assert connector_server.running(group) == {}


async def test_a_sync_connector_answers_through_execute_task_sync_with_outputs(ex: Executor) -> None:
    key = await ex.submit(spec(echo_sync_document(unique("echo"), 7)))
    (result,) = await finished(ex, [key])

    assert (result.phase, result.outputs) == ("Success", {"x": 7})
    # No job to follow: the token round, then create answers with the result.
    assert phases_of(ex, key) == ["Queued", "Success"]


async def test_web_api_tasks_progress_on_wake_ups_not_on_the_executors_resync(
    connector_server: ConnectorServer, cluster: LocalCluster, tmp_path: Path
) -> None:
    # A resync period far beyond the wait below: only the adapter's wake-ups (token granted, the status
    # cache seeing a change) can move the task along.
    document = connector_document(tmp_path, connector_server.endpoint, resync_period="1h")
    before = asyncio.all_tasks()
    async with running_executor(document, kube_client=cluster.client(), clock=FastClock(10)) as ex:
        key = await ex.submit(spec(scripted_document(unique("wake"), "QUEUED", "RUNNING", "SUCCEEDED")))
        (result,) = await finished(ex, [key])
        assert result.phase == "Success"
        # token, create, one round per status change the cache saw; a busy executor would have many more.
        assert ex.rounds <= 10, ex.rounds
    await asyncio.sleep(0)
    left = [t.get_name() for t in asyncio.all_tasks() - before if not t.done()]
    assert left == [], f"tasks outlived the executor (status cache, discovery poller?): {left}"


# -- through ``taskplug run`` -----------------------------------------------------------------------------


def write_config(tmp_path: Path, endpoint: str) -> Path:
    # The resync period is long on purpose: a web-API task moves on when its status changes.
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(connector_document(tmp_path, endpoint, resync_period="30s")))
    return config


def run_args(spec_path: Path, config: Path, tmp_path: Path) -> list[str]:
    return [
        str(TASKPLUG),
        "run",
        str(spec_path),
        "--config",
        str(config),
        "--state-db",
        str(tmp_path / "run.db"),
        "--cluster-mode",
        "simulated",
        "-o",
        "json",
    ]


def taskplug_run(
    spec_document: dict[str, Any], tmp_path: Path, endpoint: str
) -> tuple[int, dict[str, Any], str]:
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(yaml.safe_dump(spec_document))
    proc = subprocess.run(
        run_args(spec_path, write_config(tmp_path, endpoint), tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert proc.stdout, proc.stderr
    return proc.returncode, json.loads(proc.stdout), proc.stderr


def test_taskplug_run_runs_a_connector_task_to_success(
    connector_server: ConnectorServer, tmp_path: Path
) -> None:
    code, out, stderr = taskplug_run(
        scripted_document(unique("cli"), "SUCCEEDED"), tmp_path, connector_server.endpoint
    )

    assert code == 0, stderr
    assert (out["phase"], out["attempts"], out["error"], out["outputs"]) == ("Success", 1, None, {"o0": 42})
    assert [e["phase"] for e in out["events"]] == ["Queued", "Queued", "Success"]


def test_taskplug_run_exits_1_with_the_connectors_message_when_the_job_fails(
    connector_server: ConnectorServer, tmp_path: Path
) -> None:
    code, out, _ = taskplug_run(
        scripted_document(unique("clifail"), "FAILED"), tmp_path, connector_server.endpoint
    )

    assert code == 1
    assert out["phase"] == "PermanentFailure"
    assert out["error"]["message"] == "failed to run the job: poll 1 -> FAILED"
    assert out["events"][-1]["phase"] == "PermanentFailure"


def test_taskplug_run_runs_a_sync_connector_task(connector_server: ConnectorServer, tmp_path: Path) -> None:
    code, out, stderr = taskplug_run(
        echo_sync_document(unique("clisync"), 5), tmp_path, connector_server.endpoint
    )

    assert code == 0, stderr
    assert (out["phase"], out["outputs"]) == ("Success", {"x": 5})


def test_ctrl_c_on_taskplug_run_deletes_the_job_on_the_connector(
    connector_server: ConnectorServer, tmp_path: Path
) -> None:
    group = unique("cliabort")
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(yaml.safe_dump(scripted_document(group, hold=group, group=group)))
    args = run_args(spec_path, write_config(tmp_path, connector_server.endpoint), tmp_path)
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 30
        while not connector_server.running(group):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the job never started on the connector"
            time.sleep(0.05)
        (job_id,) = connector_server.running(group)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1, stderr
    assert json.loads(stdout)["phase"] == "Aborted"
    assert job_id in connector_server.deleted()


def test_the_example_spec_runs_against_a_connector_server(
    connector_server: ConnectorServer, tmp_path: Path
) -> None:
    example = yaml.safe_load((EXAMPLES / "scripted.yaml").read_text())
    config = yaml.safe_load((EXAMPLES / "config.yaml").read_text())
    config["plugins"]["connector-service"]["defaultConnector"]["endpoint"] = connector_server.endpoint
    config["executor"] = {"data-root": str(tmp_path / "data")}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(example))
    args = run_args(tmp_path / "spec.yaml", tmp_path / "config.yaml", tmp_path)
    proc = subprocess.run(args, capture_output=True, text=True, timeout=60, cwd=tmp_path, env={**os.environ})

    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["outputs"] == {"o0": 42}
