"""Ctrl-C and SIGTERM to ``taskplug run`` of a flytekit task, at every moment of its life: while Python
starts, while flytekit and the user's module are imported, while the embedded cluster starts, while the
pod runs, as it ends. Every run exits 1 (0 only when the task had already returned before the signal), never
by the signal, never with a traceback or an error blamed on the user's module, and leaves no container
process behind. Two signals 50 ms apart exit 1 as well; a SIGTERM against an API server that never answers
ends the run within the abort's patience.

The moments are spread over a first uninterrupted run's duration; what is asserted is the outcome at each,
never how long anything took.
"""

from __future__ import annotations

import signal
import socket
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

TASKPLUG = str(Path(sys.executable).parent / "taskplug")
DEADLINE = 60.0
_FIRST = 0.1
"""The earliest moment: before the interpreter has read taskplug's first line (tens of milliseconds on an idle
machine, more on a loaded one) a signal meets Python's own default, which no program can change."""


def _before_taskplug(code: int, err: str) -> bool:
    """Whether the signal came while the interpreter was still starting (its ``site`` import, the ``.pth``
    files of the environment), before taskplug's first line: Python's own default then ends the process with
    a KeyboardInterrupt (exit 1, "Fatal Python error: init_import_site"). A loaded machine can start slower
    than ``_FIRST``; such a moment tests Python, not taskplug."""
    return code == 1 and "Fatal Python error: init_import_site" in err


MODULE = textwrap.dedent(
    """
    import os
    import time
    from pathlib import Path

    from flytekit import task


    @task
    def slow(marks: str, seconds: float = 1.0) -> int:
        Path(marks, "pid").write_text(str(os.getpid()))
        time.sleep(seconds)
        Path(marks, "returned").write_text("")
        return 1
    """
)


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"  # a zombie is not running


def _start(tmp_path: Path, marks: Path, *options: str) -> subprocess.Popen[str]:
    marks.mkdir()
    return subprocess.Popen(
        [
            TASKPLUG,
            "run",
            "--state-db",
            str(tmp_path / "state.db"),
            *options,
            str(tmp_path / "slow.py"),
            "slow",
            "--marks",
            str(marks),
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=DEADLINE)
    finally:
        if proc.returncode is None:
            proc.kill()
            proc.wait()
    return proc.returncode, out, err


def _assert_nothing_left(marks: Path) -> None:
    """The task's process, if it started, is gone (the run's reaper kills it; a deadline, not a timing)."""
    pid_file = marks / "pid"
    if not pid_file.exists():
        return
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while _alive(pid):
        assert time.monotonic() < deadline, f"the task's process {pid} is still running"
        time.sleep(0.05)


def _recorded(state_db: Path) -> bool:
    """Whether the run has written its execution's record (read-only: the run holds the file)."""
    if not state_db.exists():
        return False
    try:
        db = sqlite3.connect(f"{state_db.as_uri()}?mode=ro", uri=True, timeout=1)
        try:
            return db.execute("SELECT count(*) FROM executions").fetchone()[0] > 0
        finally:
            db.close()
    except sqlite3.Error:
        return False


@pytest.fixture
def module(tmp_path: Path) -> Path:
    path = tmp_path / "slow.py"
    path.write_text(MODULE)
    return path


def test_one_sigint_at_any_moment_exits_1_and_leaves_nothing_running(tmp_path: Path, module: Path) -> None:
    started = time.monotonic()
    code, out, err = _finish(_start(tmp_path, tmp_path / "whole"))
    assert code == 0, err
    duration = time.monotonic() - started

    moments = [_FIRST + i * (duration * 1.05 - _FIRST) / 19 for i in range(20)]
    outcomes = []
    for i, moment in enumerate(moments):
        marks = tmp_path / f"at-{i}"
        proc = _start(tmp_path, marks)
        time.sleep(moment)
        returned_before = (marks / "returned").exists()
        proc.send_signal(signal.SIGINT)
        code, out, err = _finish(proc)
        outcomes.append((round(moment, 2), code))
        if moment == _FIRST and _before_taskplug(code, err):
            _assert_nothing_left(marks)
            continue
        assert "Traceback" not in err, (moment, err)
        assert "cannot import" not in err, (moment, err)
        if code == 0:
            # Only a run whose task had returned before the signal may end as it would have.
            assert returned_before and "Success" in out, (moment, err)
        else:
            assert code == 1, (moment, code, err)
            assert "interrupted" in err, (moment, err)
        _assert_nothing_left(marks)
    assert any(code == 1 for _, code in outcomes), outcomes


def test_a_signal_swallowed_before_the_task_returned_is_not_a_success(tmp_path: Path, module: Path) -> None:
    # Signals during the imports and the cluster's start: the run must not go on to run the task.
    for i, moment in enumerate((_FIRST, 0.2, 0.4, 0.6, 0.8, 1.0, 1.2)):
        marks = tmp_path / f"at-{i}"
        proc = _start(tmp_path, marks, "--name", f"early-{i}")
        time.sleep(moment)
        proc.send_signal(signal.SIGINT)
        code, _, err = _finish(proc)
        if moment != _FIRST or not _before_taskplug(code, err):
            assert (code, "Traceback" in err) == (1, False), (moment, code, err)
        assert not (marks / "returned").exists(), (moment, err)
        _assert_nothing_left(marks)


def test_two_signals_50_ms_apart_exit_1_not_by_the_signal(tmp_path: Path, module: Path) -> None:
    for i, moment in enumerate((0.3, 1.0, 2.0, 3.0)):
        marks = tmp_path / f"twice-{i}"
        proc = _start(tmp_path, marks)
        time.sleep(moment)
        proc.send_signal(signal.SIGINT)
        time.sleep(0.05)
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        code, _out, err = _finish(proc)
        assert code in (0, 1), (moment, code, err)
        assert "Traceback" not in err, (moment, err)
        assert code == 1 or (marks / "returned").exists(), (moment, err)
        _assert_nothing_left(marks)


def test_sigterm_against_an_api_server_that_never_answers_ends_the_run(tmp_path: Path) -> None:
    # A listening socket that never accepts: connections open, no answer ever comes.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)
        port = silent.getsockname()[1]
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(
            textwrap.dedent(
                f"""
                apiVersion: v1
                kind: Config
                clusters:
                - name: c
                  cluster: {{server: "https://127.0.0.1:{port}", insecure-skip-tls-verify: true}}
                users:
                - name: u
                  user: {{token: t}}
                contexts:
                - name: c
                  context: {{cluster: c, user: u}}
                current-context: c
                """
            )
        )
        spec = Path(__file__).resolve().parents[2] / "examples" / "hello.yaml"
        proc = subprocess.Popen(
            [
                TASKPLUG,
                "run",
                "--kubeconfig",
                str(kubeconfig),
                "--state-db",
                str(tmp_path / "s.db"),
                str(spec),
            ],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        # Once the execution is recorded it is being submitted: the abort then has a server to wait for.
        deadline = time.monotonic() + DEADLINE
        while not _recorded(tmp_path / "s.db"):
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        try:
            # The abort's patience and the unwinding's, with room: far less than the minute it hung.
            proc.wait(timeout=20)
        finally:
            code, _, err = _finish(proc)
    assert code == 1, err
    assert "Traceback" not in err
    assert "the abort did not finish within 5 s (is the cluster reachable?)" in err
