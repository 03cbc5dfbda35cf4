"""The signal handling of ``taskplug run`` while foreign code is imported (``Interrupts.deferred``): a SIGINT
there ends the process at once with exit 1, and nothing else is taken for one — a process stopped and
continued (job control, a debugger or profiler attaching) goes on."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

DEADLINE = 60.0

IMPORTING = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from taskplug.cli._interrupts import Interrupts

    interrupts = Interrupts()
    interrupts.install()
    with interrupts.deferred():
        print("importing", flush=True)
        while not Path(sys.argv[1]).exists():  # an import that lasts until the test says
            time.sleep(0.01)
    print("imported", flush=True)
    """
)


def _start(tmp_path: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(
        [sys.executable, "-c", IMPORTING, str(tmp_path / "done")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "importing\n"
    return proc


def _until_stopped(proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + DEADLINE
    while (
        proc.poll() is None
        and Path(f"/proc/{proc.pid}/stat").read_text().rpartition(")")[2].split()[0] != "T"
    ):
        assert time.monotonic() < deadline, f"process {proc.pid} did not stop"
        time.sleep(0.001)


def _finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=DEADLINE)
    finally:
        if proc.returncode is None:
            proc.kill()
            proc.wait()
    return proc.returncode, out, err


def test_a_process_stopped_and_continued_while_importing_is_not_taken_as_interrupted(tmp_path: Path) -> None:
    proc = _start(tmp_path)
    for _ in range(20):
        proc.send_signal(signal.SIGSTOP)
        _until_stopped(proc)  # a SIGCONT sent before the stop took effect would cancel it
        time.sleep(0.02)  # stopped longer than the helper thread's look at the signals lasts
        proc.send_signal(signal.SIGCONT)
    (tmp_path / "done").touch()
    code, out, err = _finish(proc)
    assert (code, out, err) == (0, "imported\n", "")


def test_a_sigint_while_importing_exits_1_at_once(tmp_path: Path) -> None:
    proc = _start(tmp_path)
    proc.send_signal(signal.SIGINT)  # the import never ends by itself: only the signal ends the process
    code, out, err = _finish(proc)
    assert (code, out) == (1, "")
    assert err == "interrupted: stopped before anything was started\n"
