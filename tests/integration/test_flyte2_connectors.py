"""Flyte 2 connectors beside Flyte 1's, end to end through ``taskplug run``, ``taskplug logs`` and ``taskplug
metrics``: one config with two deployments — the ``flyte`` SDK's ``c0`` (``protocol: flyteidl2``, task type
``scripted_job2``) and flytekit's ``pyflyte serve connector`` (Flyte 1, ``scripted_job``) — both real servers
on 127.0.0.1, each task type routed to its deployment by discovery (ListConnectors, ListAgents).

Every scenario runs against both: running then succeeded with the outputs, a refused create, a failed job,
an abort (the connector sees DeleteTask), the job's logs and metrics. Real time, a 5 s status resync.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.connector_server import ConnectorServer, connector_server_fixture  # noqa: F401
from support.flyte2_connector_server import (  # noqa: F401
    Flyte2ConnectorServer,
    flyte2_connector_server_fixture,
)

pytestmark = pytest.mark.integration

TASKPLUG = Path(sys.executable).with_name("taskplug")
SECRET = "s3cr3t-value"
_INT = {"type": {"simple": "INTEGER"}}


@dataclass(frozen=True)
class Side:
    """One deployment of the config, as the scenarios see it."""

    protocol: str
    task_type: str
    state_dir: Path
    running: Callable[[str], list[str]]
    deleted: Callable[[], list[str]]

    def jobs(self) -> set[str]:
        return {p.name.removesuffix(".request.json") for p in self.state_dir.glob("*.request.json")}


@pytest.fixture(params=["flyteidl", "flyteidl2"])
def side(
    request: pytest.FixtureRequest,
    connector_server: ConnectorServer,
    flyte2_connector_server: Flyte2ConnectorServer,
) -> Side:
    if request.param == "flyteidl":
        f1 = connector_server
        return Side("flyteidl", "scripted_job", f1.state_dir, lambda h: sorted(f1.running(h)), f1.deleted)
    f2 = flyte2_connector_server
    return Side("flyteidl2", "scripted_job2", f2.state_dir, f2.running, f2.deleted)


@pytest.fixture
def config(
    tmp_path: Path, connector_server: ConnectorServer, flyte2_connector_server: Flyte2ConnectorServer
) -> Path:
    document = {
        "executor": {"data-root": str(tmp_path / "data"), "resync-period": "30s"},
        "plugins": {
            "connector-service": {
                "webApi": {"caching": {"resyncInterval": "5s"}},
                "connectors": {
                    "flyte1": {
                        "endpoint": connector_server.endpoint,
                        "insecure": True,
                        "defaultTimeout": "30s",
                    },
                    "flyte2": {
                        "endpoint": flyte2_connector_server.endpoint,
                        "insecure": True,
                        "defaultTimeout": "30s",
                        "protocol": "flyteidl2",
                    },
                },
            }
        },
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def task(side: Side, name: str, **custom: Any) -> dict[str, Any]:
    """A scripted task of ``side``'s type with input ``x`` and output ``o0``; it asks for a connection (a
    secret and a config), which only the Flyte 2 protocol carries."""
    custom.setdefault("script", ["RUNNING", "SUCCEEDED"])
    custom |= {"secrets": {"api_key": "demo_key"}, "configs": {"region": "eu-1"}}
    return {
        "template": {
            "id": {"resourceType": "TASK", "project": "fp", "domain": "dev", "name": "t", "version": "v1"},
            "type": side.task_type,
            "custom": custom,
            "interface": {"inputs": {"variables": {"x": _INT}}, "outputs": {"variables": {"o0": _INT}}},
        },
        "execution": {"id": {"project": "fp", "domain": "dev", "name": name, "nodeId": "n0"}},
        "inputs": {"x": 3},
    }


def env() -> dict[str, str]:
    return {**os.environ, "FLYTE_SECRET_demo_key": SECRET, "FLYTE_SECRET_countdown_token": "t0ken"}


def args(command: str, target: str, config: Path, tmp_path: Path, *extra: str) -> list[str]:
    return [
        str(TASKPLUG),
        command,
        target,
        "--config",
        str(config),
        "--state-db",
        str(tmp_path / "run.db"),
        *extra,
    ]


def run(document: dict[str, Any], config: Path, tmp_path: Path) -> tuple[int, dict[str, Any], str]:
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(document))
    proc = subprocess.run(
        args("run", str(spec), config, tmp_path, "--cluster-mode", "simulated", "-o", "json"),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=env(),
    )
    assert proc.stdout, proc.stderr
    return proc.returncode, json.loads(proc.stdout), proc.stderr


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_a_job_runs_then_succeeds_with_the_connectors_outputs(
    side: Side, config: Path, tmp_path: Path
) -> None:
    before = side.jobs()
    code, out, stderr = run(task(side, unique("ok")), config, tmp_path)

    assert code == 0, stderr
    assert (out["phase"], out["attempts"], out["error"], out["outputs"]) == ("Success", 1, None, {"o0": 42})
    assert [e["phase"] for e in out["events"]][-2:] == ["Running", "Success"]
    (job,) = side.jobs() - before
    if side.protocol == "flyteidl2":
        # The connection: its secret resolved from FLYTE_SECRET_demo_key, its config as written; the inputs.
        request = json.loads((side.state_dir / f"{job}.request.json").read_text())
        assert request["connection"] == {"api_key": SECRET, "region": "eu-1"}
        assert request["inputs"] == {"x": 3}
        calls = [
            json.loads(line) for line in (side.state_dir / f"{job}.calls.jsonl").read_text().splitlines()
        ]
        assert calls and all(c["kwargs"] == {"api_key": SECRET, "region": "eu-1"} for c in calls)
    # The secret's value is sent, never kept: the state DB has its name only.
    assert SECRET.encode() not in (tmp_path / "run.db").read_bytes()


def test_a_refused_create_fails_the_task_with_the_connectors_message(
    side: Side, config: Path, tmp_path: Path
) -> None:
    code, out, _ = run(task(side, unique("refused"), fail_create=True), config, tmp_path)

    assert code == 1
    assert out["phase"] in ("RetryableFailure", "PermanentFailure")
    message = out["error"]["message"]
    assert "failed to create task from connector with rpc error: code = Internal" in message
    assert "the scripted connector refuses this job" in message


def test_a_failed_job_is_a_permanent_failure_with_its_message(
    side: Side, config: Path, tmp_path: Path
) -> None:
    code, out, _ = run(task(side, unique("failed"), script=["FAILED"]), config, tmp_path)

    assert code == 1
    assert out["phase"] == "PermanentFailure"
    assert out["error"] == {
        "code": "TaskFailedWithError",
        "message": "failed to run the job: poll 1 -> FAILED",
        "kind": "USER",
    }


def test_an_abort_reaches_the_connectors_delete(side: Side, config: Path, tmp_path: Path) -> None:
    hold = unique("abort")
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(task(side, hold, hold=hold, group=hold)))
    command = args("run", str(spec), config, tmp_path, "--cluster-mode", "simulated", "-o", "json")
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=env()
    )
    try:
        deadline = time.monotonic() + 60
        while not side.running(hold):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the job never started on the connector"
            time.sleep(0.05)
        (job,) = side.running(hold)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1, stderr
    assert json.loads(stdout)["phase"] == "Aborted"
    assert job in side.deleted()
    if side.protocol == "flyteidl2":
        calls = [
            json.loads(line) for line in (side.state_dir / f"{job}.calls.jsonl").read_text().splitlines()
        ]
        # DeleteTask carries the connection too. It need not be the last call: as in propeller, the status
        # cache keeps the job until finalize, so a resync's GetTask can land beside the abort's DeleteTask.
        assert {"call": "delete", "kwargs": {"api_key": SECRET, "region": "eu-1"}} in calls


def test_logs_and_metrics_of_a_connector_task_come_from_its_connector(
    side: Side, config: Path, tmp_path: Path
) -> None:
    name = unique("logs")
    before = side.jobs()
    code, _, stderr = run(task(side, name), config, tmp_path)
    assert code == 0, stderr
    (job,) = side.jobs() - before

    logs = subprocess.run(args("logs", name, config, tmp_path), capture_output=True, text=True, timeout=60)
    assert logs.returncode == 0, logs.stderr
    if side.protocol == "flyteidl2":
        # Three pages, asked for one after the other by the token each page's header gives, in order.
        assert logs.stdout.splitlines() == [
            f"{job} page {page} line {i}" for page in (1, 2, 3) for i in range(4)
        ]
    else:
        # flytekit 1.16's server returns get_logs' answer from a streaming call instead of streaming it:
        # the stream is empty, and taskplug says so.
        assert logs.stdout == ""
        assert "no log lines" in logs.stderr

    metrics = subprocess.run(
        args("metrics", name, config, tmp_path, "--query", "polls", "-o", "json"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert metrics.returncode == 0, metrics.stderr
    (result,) = json.loads(metrics.stdout)["results"]
    assert result["metric"] == "polls"
    assert result["data"]["job_id"] == job
    assert result["data"]["polls"] >= 2


def test_an_unreachable_flyte2_deployment_is_named_with_its_protocol(tmp_path: Path) -> None:
    from support.net import free_port

    endpoint = f"127.0.0.1:{free_port()}"
    config = tmp_path / "config.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "plugins": {
                    "connector-service": {
                        "connectors": {
                            "far": {"endpoint": endpoint, "insecure": True, "protocol": "flyteidl2"}
                        }
                    }
                }
            }
        )
    )
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(task(Side("flyteidl2", "scripted_job2", tmp_path, list, list), "far")))
    proc = subprocess.run(
        args("run", str(spec), config, tmp_path, "--cluster-mode", "simulated"),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )

    assert proc.returncode == 2
    assert (
        f"failed to list connectors of deployment [far] at [{endpoint}] (protocol flyteidl2)" in proc.stderr
    )
    assert "no plugin defined for Handler type [scripted_job2]" in proc.stderr


def test_the_flyte2_example_runs_and_shows_its_logs_and_metrics(
    flyte2_connector_server: Flyte2ConnectorServer, connector_server: ConnectorServer, tmp_path: Path
) -> None:
    examples = Path(__file__).resolve().parents[2] / "examples" / "connector"
    config = yaml.safe_load((examples / "config-flyte2.yaml").read_text())
    deployments = config["plugins"]["connector-service"]["connectors"]
    deployments["flyte1"]["endpoint"] = connector_server.endpoint
    deployments["flyte2"]["endpoint"] = flyte2_connector_server.endpoint
    config["executor"]["data-root"] = str(tmp_path / "data")
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    document = yaml.safe_load((examples / "countdown.yaml").read_text())
    document["template"]["custom"]["seconds"] = 1

    code, out, stderr = run(document, tmp_path / "config.yaml", tmp_path)
    assert code == 0, stderr
    assert out["outputs"] == {"doubled": 42}

    logs = subprocess.run(
        args("logs", "countdown-1", tmp_path / "config.yaml", tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert logs.returncode == 0, logs.stderr
    first, second = logs.stdout.splitlines()
    assert first.endswith(": counting down from 1s") and second.endswith(": 42 is ready")
    metrics = subprocess.run(
        args("metrics", "countdown-1", tmp_path / "config.yaml", tmp_path, "--query", "elapsed"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert metrics.returncode == 0, metrics.stderr
    assert metrics.stdout.startswith('elapsed: {"elapsed_seconds": ')


WORKFLOW_MODULE = """
from flytekit import workflow
from flytekit.core.base_task import PythonTask
from flytekit.core.interface import Interface


class Scripted(PythonTask):
    def __init__(self, name: str, task_type: str) -> None:
        super().__init__(
            task_type=task_type, name=name, task_config=None,
            interface=Interface(inputs={"x": int}, outputs={"o0": int}),
        )

    def get_custom(self, settings):
        return {"script": ["SUCCEEDED"]}


job = Scripted("job", "scripted_job2")


@workflow
def wf(x: int) -> int:
    return job(x=x)
"""


def test_logs_of_a_workflows_connector_node_come_from_its_connector(
    flyte2_connector_server: Flyte2ConnectorServer, config: Path, tmp_path: Path
) -> None:
    module = tmp_path / "connector_wf.py"
    module.write_text(WORKFLOW_MODULE)
    name = unique("wflogs")
    before = {p.name for p in flyte2_connector_server.state_dir.glob("*.request.json")}
    options = ["--name", name, "--config", str(config), "--state-db", str(tmp_path / "run.db")]
    proc = subprocess.run(
        [str(TASKPLUG), "run", *options, "--cluster-mode", "simulated", str(module), "wf", "--x", "3"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=env(),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (request,) = {p.name for p in flyte2_connector_server.state_dir.glob("*.request.json")} - before
    job = request.removesuffix(".request.json")

    logs = subprocess.run(args("logs", name, config, tmp_path), capture_output=True, text=True, timeout=60)
    assert logs.returncode == 0, logs.stderr
    assert logs.stdout.splitlines() == [f"{job} page {page} line {i}" for page in (1, 2, 3) for i in range(4)]
