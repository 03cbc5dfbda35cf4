"""A SIGKILLed process running the embedded cluster leaves no container process behind.

The child runs a cluster with a long-running pod whose container is a shell with a background child (so the
container has a first process and a grandchild in its group), prints nothing until both are up, and is then
SIGKILLed: no handler, no cleanup. The container's first process dies of its parent-death signal, the rest of
its group by the kubelet's reaper. The child runs under memory and CPU limits, so a regression fails instead of
eating the machine.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

CHILD = """
import asyncio, sys
from taskplug.k8s import POD
from taskplug.localcluster import LocalCluster

async def main(pidfile: str) -> None:
    # "$$$$" is "$$" after the kubelet's $(VAR) expansion, which reads "$$" as an escaped "$".
    script = f"echo $$$$ >> {pidfile}; sleep 300 & echo $! >> {pidfile}; wait"
    pod = {
        "metadata": {"name": "long"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox", "command": ["sh", "-c", script]}],
        },
    }
    async with LocalCluster(mode="process") as cluster:
        await cluster.client().create(POD, pod)
        await asyncio.sleep(3600)

asyncio.run(main(sys.argv[1]))
"""


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (2 * 1024**3, 2 * 1024**3))
    resource.setrlimit(resource.RLIMIT_CPU, (120, 120))


def _alive(pid: int) -> bool:
    """Running or sleeping; a zombie (dead, not yet reaped by whoever inherited it) counts as gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat[stat.rfind(")") + 2] not in "ZX"


def _wait_until(condition: object, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return bool(condition())  # type: ignore[operator]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signals are Linux's")
def test_killing_the_process_that_runs_the_cluster_kills_every_container_process(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(pidfile)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=_limits,
        start_new_session=True,
    )
    pids: list[int] = []
    try:
        started = _wait_until(
            lambda: child.poll() is not None or (pidfile.exists() and len(pidfile.read_text().split()) >= 2),
            60,
        )
        assert started and child.poll() is None, child.stderr.read().decode() if child.stderr else ""
        pids = [int(p) for p in pidfile.read_text().split()]
        assert all(_alive(pid) for pid in pids)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        assert _wait_until(lambda: not any(_alive(pid) for pid in pids), 30), [p for p in pids if _alive(p)]
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        for pid in pids:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        if child.stderr is not None:
            child.stderr.close()
