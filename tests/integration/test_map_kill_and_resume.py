"""A map of 20 elements whose executor is SIGKILLed at random moments and restarted on the same state file:
the map still ends with the right outputs, and every element's pod was created exactly once.

The cluster is ``taskplug cluster serve`` (process mode: each element really runs ``python``) in its own
process on 127.0.0.1, so pods outlive the killed executor; the executor is ``map_kill_resume_driver.py`` in
another process, reaching the cluster with lightkube through the kubeconfig the server wrote. The test
watches the cluster's pods over HTTP from before the first run, so every pod the API ever stored is seen
with its uid. Kill moments come from a seeded random generator, after the driver reports the map
submitted; waits on the processes have deadlines.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from taskplug.engine.k8s._lightkube import LightkubeClient
from taskplug.k8s import POD

from .test_kill_and_resume import NAMESPACE, PodHistory

VENV_BIN = Path(sys.executable).parent
DRIVER = Path(__file__).with_name("map_kill_resume_driver.py")
ELEMENTS = 20
KILLS = 3
START_DEADLINE = 20.0
FINISH_DEADLINE = 120.0
EXECUTION = "map-kr"
SERVE_ARGS = (
    "cluster",
    "serve",
    "--mode",
    "process",
    "--port",
    "0",
)  # the driver's execution name; its namespace is NAMESPACE (kr-dev)


@pytest.fixture
def process_cluster(tmp_path: Path) -> Iterator[Path]:
    """``taskplug cluster serve`` in process mode on 127.0.0.1; stopped (then killed if need be) at the end."""
    kubeconfig = tmp_path / "kubeconfig"
    with open(tmp_path / "server.log", "wb") as log:
        server = subprocess.Popen(
            [str(VENV_BIN / "taskplug"), *SERVE_ARGS, "--kubeconfig-out", str(kubeconfig)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + START_DEADLINE
        while not (kubeconfig.exists() and "server:" in kubeconfig.read_text()):
            assert server.poll() is None, f"the cluster server exited with {server.returncode}"
            assert time.monotonic() < deadline, "the cluster server did not start"
            time.sleep(0.05)
        assert re.search(r"server: https://127\.0\.0\.1:\d+", kubeconfig.read_text())
        yield kubeconfig
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


async def _start_driver(kubeconfig: Path, tmp_path: Path) -> Any:
    args = [str(DRIVER), "--kubeconfig", str(kubeconfig), "--elements", str(ELEMENTS), "--delete-on-finalize"]
    args += ["--state-db", str(tmp_path / "state.db"), "--data-root", str(tmp_path / "data")]
    return await asyncio.create_subprocess_exec(
        sys.executable, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL
    )


async def _run_with_kills(
    kubeconfig: Path, tmp_path: Path, history: PodHistory, *, seed: int
) -> tuple[list[int], dict[str, Any]]:
    """Start, SIGKILL at a random moment after the map is submitted, restart; KILLS times, then let the last
    run finish. Returns how many element pods existed at each kill that landed, and the final result."""
    chooser = random.Random(seed)
    kills: list[int] = []
    for _ in range(KILLS):
        proc = await _start_driver(kubeconfig, tmp_path)
        try:
            line = await asyncio.wait_for(proc.stdout.readline(), START_DEADLINE)
            assert line.decode().strip() == "submitted"
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), chooser.uniform(0.3, 1.5))
            if proc.returncode is None:
                proc.send_signal(signal.SIGKILL)
                kills.append(len(history.added))
        finally:
            if proc.returncode is None:
                proc.kill()
            await proc.wait()
    proc = await _start_driver(kubeconfig, tmp_path)
    try:
        out = await asyncio.wait_for(proc.stdout.read(), FINISH_DEADLINE)
        assert await asyncio.wait_for(proc.wait(), 5) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    lines = out.decode().splitlines()
    assert lines[:2] == ["submitted", "finished"], lines
    return kills, json.loads(lines[2])


@pytest.mark.integration
async def test_a_map_whose_executor_is_killed_and_resumed_creates_each_element_once_and_ends_right(
    process_cluster: Path, tmp_path: Path
) -> None:
    client = LightkubeClient(process_cluster, timeout=5.0)
    history = PodHistory(client)
    follower = asyncio.ensure_future(history.follow())
    try:
        await asyncio.wait_for(history.ready.wait(), START_DEADLINE)
        kills, result = await _run_with_kills(process_cluster, tmp_path, history, seed=5)
        remaining = {p["metadata"]["name"] for p in (await client.list(POD, NAMESPACE))[0]}
        _, version = await client.list(POD, NAMESPACE)
        deadline = time.monotonic() + 10
        while int(history.resource_version or 0) < int(version) and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
    finally:
        follower.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await follower
        await client.close()

    # The kills landed in the middle of the map: some element pods existed, not all of them yet.
    assert any(0 < created < ELEMENTS for created in kills), kills

    assert result["phase"] == "Success", result
    assert result["outputs"] == {"o0": [x * x for x in range(ELEMENTS)]}
    assert [(e["phase"], e["attempts"]) for e in result["elements"]] == [("Succeeded", 1)] * ELEMENTS

    # Every element's one attempt had exactly one pod, named as propeller names it; nothing else was created.
    expected = {f"{EXECUTION}-n0-0-n{i}-0" for i in range(ELEMENTS)}
    assert set(history.added) == expected
    assert {name: uids for name, uids in history.added.items() if len(uids) != 1} == {}
    assert remaining == set()  # finalize deleted every pod (delete-resource-on-finalize)
