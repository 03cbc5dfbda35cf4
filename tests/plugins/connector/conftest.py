"""Fixtures for the connector plugin tests: a real flytekit connector server on loopback.

The server fixture follows spec/connectors.md §3.1/§7: ``pyflyte serve connector`` run through a small
wrapper (``pyflyte_loopback.py``) that binds gRPC and prometheus to 127.0.0.1 only, loading the scripted test
connectors (``scripted_connectors.py``); ready once a ListAgents call answers; always killed afterwards.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from connector_helpers import free_port
from flyteidl.admin import agent_pb2
from flyteidl.service import agent_pb2_grpc

HERE = Path(__file__).resolve().parent

# -- the real connector server ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConnectorServer:
    endpoint: str
    state_dir: Path
    log_path: Path


def _wait_until_listing(endpoint: str, process: subprocess.Popen[bytes], log_path: Path) -> None:
    deadline = time.monotonic() + 60
    with grpc.insecure_channel(endpoint) as channel:
        stub = agent_pb2_grpc.AgentMetadataServiceStub(channel)
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"connector server exited early:\n{log_path.read_text()}")
            try:
                stub.ListAgents(agent_pb2.ListAgentsRequest(), timeout=1)
                return
            except grpc.RpcError:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"connector server not ready in 60s:\n{log_path.read_text()}"
                    ) from None
                time.sleep(0.1)  # readiness polling of a child process, not a test timing


@pytest.fixture(scope="session")
def connector_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectorServer]:
    workdir = tmp_path_factory.mktemp("connector-server")
    state_dir = workdir / "state"
    state_dir.mkdir()
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
        str(HERE / "pyflyte_loopback.py"),
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
        "scripted_connectors",
    ]
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, cwd=workdir, env=env, stdout=log, stderr=subprocess.STDOUT)
    endpoint = f"127.0.0.1:{port}"
    try:
        _wait_until_listing(endpoint, process, log_path)
        yield ConnectorServer(endpoint, state_dir, log_path)
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
