"""A real Flyte 2 connector server on loopback, as a session fixture.

The ``flyte`` SDK's ``c0`` runs in the Flyte 2 environment of ``support.flyte2_env`` (built on first use),
through the example's ``examples/connector/c0_loopback.py`` (gRPC and prometheus bound to 127.0.0.1), with the
test connectors of ``flyte2_connectors.py`` and the example's ``example_flyte2_connectors.py``; it is ready once a ListConnectors call answers and is always
stopped afterwards. Import ``flyte2_connector_server_fixture`` into a test module to use the fixture
``flyte2_connector_server``.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from flyteidl2.connector import connector_pb2, service_pb2_grpc

from support.flyte2_env import flyte2_python
from support.net import free_port, stop_process, wait_until_ready

__all__ = ["Flyte2ConnectorServer", "flyte2_connector_server_fixture", "start_flyte2_connector_server"]

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parents[1] / "examples" / "connector"
LOOPBACK_WRAPPER = EXAMPLES / "c0_loopback.py"


@dataclass(frozen=True)
class Flyte2ConnectorServer:
    endpoint: str
    """``127.0.0.1:<port>``."""
    state_dir: Path
    """Where the test connectors record what they received (see flyte2_connectors)."""
    log_path: Path

    def release(self, hold: str) -> None:
        (self.state_dir / "release").mkdir(exist_ok=True)
        (self.state_dir / "release" / hold).touch()

    def running(self, hold: str) -> list[str]:
        """Ids of the jobs held on ``hold`` that the connector is running now."""
        folder = self.state_dir / "running"
        return sorted(p.name for p in folder.iterdir() if p.read_text() == hold) if folder.exists() else []

    def deleted(self) -> list[str]:
        return sorted(p.name.removesuffix(".deleted") for p in self.state_dir.glob("*.deleted"))

    def request(self, job_id: str) -> dict[str, Any]:
        """What create received for ``job_id`` (inputs, output prefix, namespace, connection)."""
        data: dict[str, Any] = json.loads((self.state_dir / f"{job_id}.request.json").read_text())
        return data

    def calls(self, job_id: str) -> list[dict[str, Any]]:
        """Every GetTask and DeleteTask of ``job_id``: ``{"call": "get" | "delete", "kwargs": {...}}``."""
        path = self.state_dir / f"{job_id}.calls.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _listing(endpoint: str) -> bool:
    with grpc.insecure_channel(endpoint) as channel:
        try:
            service_pb2_grpc.ConnectorMetadataServiceStub(channel).ListConnectors(
                connector_pb2.ListConnectorsRequest(), timeout=1
            )
        except grpc.RpcError:
            return False
    return True


def start_flyte2_connector_server(workdir: Path) -> tuple[subprocess.Popen[bytes], Flyte2ConnectorServer]:
    """Start ``c0`` (ready when this returns); the caller stops the process with ``stop_process``."""
    python = flyte2_python()
    state_dir = workdir / "state"
    state_dir.mkdir(parents=True, exist_ok=True)
    port, prometheus_port = free_port(), free_port()
    log_path = workdir / "server.log"
    # Only the connectors' folders on the path: the Flyte 2 environment must not see taskplug's packages.
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(workdir),
        "PYTHONPATH": f"{HERE}:{EXAMPLES}",
        "TASKPLUG_TEST_CONNECTOR_STATE": str(state_dir),
    }
    command = [
        str(python),
        "-u",
        str(LOOPBACK_WRAPPER),
        "--port",
        str(port),
        "--prometheus_port",
        str(prometheus_port),
        "--worker",
        "4",
        "--timeout",
        "1800",
        "--modules",
        "flyte2_connectors",
        "--modules",
        "example_flyte2_connectors",
    ]
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, cwd=workdir, env=env, stdout=log, stderr=subprocess.STDOUT)
    server = Flyte2ConnectorServer(f"127.0.0.1:{port}", state_dir, log_path)
    try:
        wait_until_ready(
            lambda: _listing(server.endpoint), process, log_path, what="Flyte 2 connector server", limit=120
        )
    except BaseException:
        stop_process(process)
        raise
    return process, server


@pytest.fixture(scope="session", name="flyte2_connector_server")
def flyte2_connector_server_fixture(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Flyte2ConnectorServer]:
    process, server = start_flyte2_connector_server(tmp_path_factory.mktemp("flyte2-connector-server"))
    try:
        yield server
    finally:
        stop_process(process)
