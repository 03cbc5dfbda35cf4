"""Loopback ports and bounded readiness polling for servers started by tests."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["free_port", "stop_process", "wait_until_ready"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_until_ready(
    ready: Callable[[], bool],
    process: subprocess.Popen[bytes],
    log_path: Path,
    *,
    what: str,
    limit: float = 60,
) -> None:
    """Poll ``ready`` until it answers True; fail with the server's log if it exits or takes over ``limit``."""
    deadline = time.monotonic() + limit
    while not ready():
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited early:\n{log_path.read_text()}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} not ready in {limit:.0f}s:\n{log_path.read_text()}")
        time.sleep(0.1)  # readiness polling of a child process, not a test timing


def stop_process(process: subprocess.Popen[bytes]) -> None:
    """Terminate a server the test started (by its own handle), killing it if it does not stop."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
