"""A real ``redis-server`` on 127.0.0.1 for the shared allocation tokens; nothing is persisted.

Import ``redis_server_fixture`` to use the fixture ``redis_server``; it skips the test when no
``redis-server`` binary is installed.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from support.net import free_port, stop_process, wait_until_ready

__all__ = ["RedisServer", "redis_server_fixture"]


@dataclass(frozen=True)
class RedisServer:
    host: str
    port: int

    @property
    def host_path(self) -> str:
        """``host:port``, as ``propeller.resourcemanager.redis.hostPath`` wants it."""
        return f"{self.host}:{self.port}"


def _pings(port: int) -> bool:
    client = redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=1)
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
    finally:
        client.close()


@pytest.fixture(scope="module", name="redis_server")
def redis_server_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed")
    workdir: Path = tmp_path_factory.mktemp("redis")
    port = free_port()
    log_path = workdir / "redis.log"
    command = [
        binary,
        "--bind",
        "127.0.0.1",
        "--port",
        str(port),
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        str(workdir),
    ]
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, cwd=workdir, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_until_ready(lambda: _pings(port), process, log_path, what="redis-server")
        yield RedisServer("127.0.0.1", port)
    finally:
        stop_process(process)
