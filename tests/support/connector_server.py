"""A real flytekit connector server on loopback, as a session fixture.

``pyflyte serve connector`` runs through the example's ``examples/connector/serve_loopback.py`` (gRPC and
prometheus bound to 127.0.0.1)
with the test connectors of ``scripted_connectors.py``; it is ready once a ListAgents call answers and is
always stopped afterwards. Import ``connector_server_fixture`` into a conftest or a test module to use
the fixture ``connector_server``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from flyteidl.admin import agent_pb2
from flyteidl.service import agent_pb2_grpc

from support.net import free_port, stop_process, wait_until_ready

__all__ = ["ConnectorServer", "connector_server_fixture", "start_connector_server"]

HERE = Path(__file__).resolve().parent
# The same wrapper users run by hand (examples/connector/README.md): one copy, tested by every connector test.
LOOPBACK_WRAPPER = HERE.parents[1] / "examples" / "connector" / "serve_loopback.py"


@dataclass(frozen=True)
class ConnectorServer:
    endpoint: str
    """``127.0.0.1:<port>``."""
    state_dir: Path
    """Where the scripted connectors record requests, deletions, running jobs (see scripted_connectors)."""
    log_path: Path

    def release(self, hold: str) -> None:
        """Let every scripted job held on ``hold`` go on with its script."""
        (self.state_dir / "release").mkdir(exist_ok=True)
        (self.state_dir / "release" / hold).touch()

    def running(self, group: str) -> dict[str, str]:
        """Job id → hold name of the scripted jobs of ``group`` that the connector is running now."""
        folder = self.state_dir / "groups" / group / "running"
        return {p.name: p.read_text() for p in folder.iterdir()} if folder.exists() else {}

    def max_running(self, group: str) -> int:
        """The most jobs of ``group`` the connector ever ran at once."""
        path = self.state_dir / "groups" / group / "max"
        return int(path.read_text()) if path.exists() else 0

    def deleted(self) -> list[str]:
        """Job ids the connector received a DeleteTask for."""
        return sorted(p.name.removesuffix(".deleted") for p in self.state_dir.glob("*.deleted"))


def _listing(endpoint: str) -> bool:
    with grpc.insecure_channel(endpoint) as channel:
        try:
            agent_pb2_grpc.AgentMetadataServiceStub(channel).ListAgents(
                agent_pb2.ListAgentsRequest(), timeout=1
            )
        except grpc.RpcError:
            return False
    return True


def start_connector_server(
    workdir: Path, modules: str = "scripted_connectors"
) -> tuple[subprocess.Popen[bytes], ConnectorServer]:
    """Start the server (ready when this returns); the caller stops the process with ``stop_process``."""
    state_dir = workdir / "state"
    state_dir.mkdir(parents=True, exist_ok=True)
    port, prometheus_port = free_port(), free_port()
    log_path = workdir / "server.log"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        "TASKPLUG_TEST_CONNECTOR_STATE": str(state_dir),
    }
    command = [
        sys.executable,
        "-u",
        str(LOOPBACK_WRAPPER),
        "serve",
        "connector",
        "--port",
        str(port),
        "--prometheus_port",
        str(prometheus_port),
        "--worker",
        "4",
        "--timeout",
        "1800",
        "--modules",
        modules,
    ]
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, cwd=workdir, env=env, stdout=log, stderr=subprocess.STDOUT)
    server = ConnectorServer(f"127.0.0.1:{port}", state_dir, log_path)
    try:
        wait_until_ready(lambda: _listing(server.endpoint), process, log_path, what="connector server")
    except BaseException:
        stop_process(process)
        raise
    return process, server


@pytest.fixture(scope="session", name="connector_server")
def connector_server_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectorServer]:
    process, server = start_connector_server(tmp_path_factory.mktemp("connector-server"))
    try:
        yield server
    finally:
        stop_process(process)
