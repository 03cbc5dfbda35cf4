"""A real flytekit ``@task(cache=True, cache_version="1")`` run with ``taskplug run`` on the embedded cluster
(process kubelet: ``pyflyte-execute`` runs the task's body): the second run of the same inputs runs no pod,
another input does, ``--overwrite-cache`` runs it again, a changed body under the same ``cache_version`` hits
— counted by the task's own side effect (a line appended per run of its body) and the embedded cluster's
pods. Two runs racing on a ``cache_serialize`` task run its body once; a holder SIGKILLed is taken over."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

TASKPLUG = str(Path(sys.executable).parent / "taskplug")
DEADLINE = 120.0

MODULE = """
import pathlib
import time

from flytekit import task


@task(cache=True, cache_version="1")
def square(x: int) -> int:
    with open({runs!r}, "a") as f:
        f.write("{body} %d\\n" % x)
    return x * x


@task(cache=True, cache_version="1", cache_serialize=True)
def slow(x: int) -> int:
    with open({runs!r}, "a") as f:
        f.write("slow %d\\n" % x)
    deadline = time.time() + 60
    while not pathlib.Path({go!r}).exists() and time.time() < deadline:
        time.sleep(0.1)
    return x + 1
"""

CONFIG = "executor:\n  cache:\n    reservation-heartbeat: 1s\n    reservation-grace-multiplier: 2\n"


def _module(tmp_path: Path, body: str = "v1") -> Path:
    path = tmp_path / "cached.py"
    text = MODULE.format(runs=str(tmp_path / "runs.txt"), go=str(tmp_path / "go"), body=body)
    path.write_text(textwrap.dedent(text))
    return path


def _args(tmp_path: Path, *args: str | Path) -> list[str]:
    state = ("--state-db", str(tmp_path / "state.db"), "--cluster-mode", "process")
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG)
    return [TASKPLUG, "run", "--config", str(config), *state, "-o", "json", *map(str, args)]


def _run(tmp_path: Path, *args: str | Path) -> dict[str, Any]:
    done = subprocess.run(
        _args(tmp_path, *args), cwd=tmp_path, capture_output=True, text=True, timeout=DEADLINE, check=False
    )
    assert done.returncode == 0, done.stderr
    document: dict[str, Any] = json.loads(done.stdout)
    return document


def _runs(tmp_path: Path) -> list[str]:
    path = tmp_path / "runs.txt"
    return path.read_text().splitlines() if path.exists() else []


def test_a_cached_task_run_twice_with_the_same_inputs_runs_its_body_once(tmp_path: Path) -> None:
    module = _module(tmp_path)
    first = _run(tmp_path, module, "square", "--x", "3")
    assert (first["outputs"], first["cacheStatus"]) == ({"o0": 9}, "CACHE_POPULATED")
    second = _run(tmp_path, module, "square", "--x", "3")
    assert (second["outputs"], second["cacheStatus"]) == ({"o0": 9}, "CACHE_HIT")
    assert [e["phase"] for e in second["events"]] == ["Success"]
    assert _runs(tmp_path) == ["v1 3"]
    assert _run(tmp_path, module, "square", "--x", "4")["cacheStatus"] == "CACHE_POPULATED"
    assert (
        _run(tmp_path, "--overwrite-cache", module, "square", "--x", "3")["cacheStatus"] == "CACHE_POPULATED"
    )
    assert _runs(tmp_path) == ["v1 3", "v1 4", "v1 3"]

    # A new body under the same cache_version: a hit, as on Flyte (the task's version is not in the key).
    module = _module(tmp_path, body="v2")
    assert _run(tmp_path, module, "square", "--x", "3")["cacheStatus"] == "CACHE_HIT"
    assert len(_runs(tmp_path)) == 3


def test_two_runs_racing_on_a_serialized_task_run_it_once_and_a_killed_holder_is_taken_over(
    tmp_path: Path,
) -> None:
    module = _module(tmp_path)
    procs = []
    for _ in range(2):
        procs.append(
            subprocess.Popen(
                _args(tmp_path, module, "slow", "--x", "1"),
                cwd=tmp_path,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
        time.sleep(0.5)
    deadline = time.monotonic() + DEADLINE
    while not _runs(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(3)  # the other waits on the reservation meanwhile (it would have started by now)
    assert _runs(tmp_path) == ["slow 1"]
    (tmp_path / "go").touch()
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=DEADLINE)
        assert proc.returncode == 0, err
        results.append(json.loads(out))
    assert [r["outputs"] for r in results] == [{"o0": 2}, {"o0": 2}]
    assert sorted(r["cacheStatus"] for r in results) == ["CACHE_HIT", "CACHE_POPULATED"]
    assert _runs(tmp_path) == ["slow 1"]

    # The holder SIGKILLed mid-run: its reservation expires (2 heartbeats of 1 s) and the other takes over.
    (tmp_path / "go").unlink()
    holder = subprocess.Popen(
        _args(tmp_path, module, "slow", "--x", "2"),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    while len(_runs(tmp_path)) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    (tmp_path / "go").touch()
    taken = _run(tmp_path, module, "slow", "--x", "2")
    assert (taken["outputs"], taken["cacheStatus"]) == ({"o0": 3}, "CACHE_POPULATED")
    assert _runs(tmp_path)[-1] == "slow 2" and len(_runs(tmp_path)) == 3


WORKFLOW = """
from flytekit import task, workflow


@task(cache=True, cache_version="1")
def first(x: int) -> int:
    with open({runs!r}, "a") as f:
        f.write("first\\n")
    return x + 1


@task(cache=True, cache_version={last_version!r})
def last(y: int) -> int:
    with open({runs!r}, "a") as f:
        f.write("last\\n")
    return y * {factor}


@workflow
def pipeline(x: int) -> int:
    return last(y=first(x=x))
"""


def test_a_workflow_rerun_after_fixing_its_last_node_runs_only_that_node(tmp_path: Path) -> None:
    module = tmp_path / "pipeline.py"

    def write(version: str, factor: int) -> None:
        text = WORKFLOW.format(runs=str(tmp_path / "runs.txt"), last_version=version, factor=factor)
        module.write_text(textwrap.dedent(text))

    write("1", 10)
    assert _run(tmp_path, module, "pipeline", "--x", "1")["outputs"] == {"o0": 20}
    assert _runs(tmp_path) == ["first", "last"]
    write("2", 100)  # the fix, with its cache_version bumped
    assert _run(tmp_path, module, "pipeline", "--x", "1")["outputs"] == {"o0": 200}
    assert _runs(tmp_path) == ["first", "last", "last"]


MAP = """
from flytekit import map_task, task


@task(cache=True, cache_version="1")
def double(x: int) -> int:
    with open({runs!r}, "a") as f:
        f.write("%d\\n" % x)
    return 2 * x


square_all = map_task(double)
"""


def test_a_flytekit_map_task_rerun_with_an_appended_element_runs_only_that_element(tmp_path: Path) -> None:
    module = tmp_path / "mapped.py"
    module.write_text(textwrap.dedent(MAP.format(runs=str(tmp_path / "runs.txt"))))
    first = _run(tmp_path, module, "square_all", "--x", "[1, 2]")
    assert first["outputs"] == {"o0": [2, 4]}
    second = _run(tmp_path, module, "square_all", "--x", "[1, 2, 3]")
    assert second["outputs"] == {"o0": [2, 4, 6]}
    assert [e["cacheStatus"] for e in second["elements"]] == ["CACHE_HIT", "CACHE_HIT", "CACHE_POPULATED"]
    assert sorted(_runs(tmp_path)) == ["1", "2", "3"]
