"""Signals to ``taskplug run``: SIGTERM aborts as Ctrl-C does (the execution aborted, what it created deleted,
exit 1); a second Ctrl-C during that cleanup stops waiting for it and still exits 1 (not 130), with no
traceback, and the task's process does not outlive the run.

The run is a fresh interpreter on the embedded cluster in process mode; its task writes its pid to a file
and sleeps, so the test knows when it runs and can see it gone. Every wait has a deadline.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.integration

TASKPLUG = (sys.executable, "-m", "taskplug.cli")
DEADLINE = 60.0


def _spec(tmp_path: Path, pidfile: Path) -> Path:
    script = f"import os, time\nopen({str(pidfile)!r}, 'w').write(str(os.getpid()))\ntime.sleep(300)\n"
    document: dict[str, Any] = {
        "template": {
            "id": {
                "resourceType": "TASK",
                "project": "demo",
                "domain": "development",
                "name": "sig",
                "version": "v1",
            },
            "type": "container",
            "interface": {"inputs": {"variables": {}}, "outputs": {"variables": {}}},
            "container": {"image": "python:3.11-slim", "command": ["python", "-c"], "args": [script]},
        },
        "execution": {"id": {"project": "demo", "domain": "development", "name": "sig-1", "nodeId": "n0"}},
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat[stat.rfind(")") + 2] not in "ZX"


def _wait_for(predicate: Any, what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _start_running(tmp_path: Path) -> tuple[subprocess.Popen[str], int]:
    pidfile = tmp_path / "task.pid"
    proc = subprocess.Popen(
        [*TASKPLUG, "run", str(_spec(tmp_path, pidfile)), "-o", "json", "--state-db", "state.db"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for(
            lambda: (pidfile.exists() and pidfile.read_text()) or proc.poll() is not None, "the task to start"
        )
        assert proc.poll() is None, proc.communicate()
    except BaseException:
        proc.kill()
        proc.communicate()
        raise
    return proc, int(pidfile.read_text())


def _finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=DEADLINE)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, out, err


def test_sigterm_aborts_the_execution_like_ctrl_c_and_exits_1(tmp_path: Path) -> None:
    proc, task_pid = _start_running(tmp_path)
    proc.send_signal(signal.SIGTERM)
    code, out, err = _finish(proc)
    assert code == 1, err
    document = json.loads(out)
    assert document["phase"] == "Aborted"
    assert document["error"]["code"] == "Aborted"
    assert "Traceback" not in err
    _wait_for(lambda: not _alive(task_pid), "the task's process to be gone")
    # The abort is recorded: run again, it reports the aborted execution instead of starting it.
    again = subprocess.run(
        [*TASKPLUG, "run", str(tmp_path / "spec.yaml"), "-o", "json", "--state-db", "state.db"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
    )
    assert again.returncode == 1 and "already finished: Aborted" in again.stderr
    assert os.stat(tmp_path / "task.pid").st_size > 0


def test_a_second_ctrl_c_still_exits_1_without_a_traceback_and_leaves_no_process(tmp_path: Path) -> None:
    proc, task_pid = _start_running(tmp_path)
    proc.send_signal(signal.SIGINT)
    proc.send_signal(signal.SIGINT)
    code, _, err = _finish(proc)
    assert code == 1, err
    assert "Traceback" not in err
    assert "interrupted" in err
    _wait_for(lambda: not _alive(task_pid), "the task's process to be gone")
