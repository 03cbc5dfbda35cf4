"""The echo plugin end to end: loaded from its entry point by ``open_executor``, run by the executor, with
the fake clock (Flyte's plugins/testing/echo.go); and ``taskplug run examples/echo.yaml`` as a user runs it.

The executor's resync period is set to an hour, so an execution that finishes after a few fake seconds was
woken by the plugin's own timer (through ``enqueue_owner``), not by the resync.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from taskplug.core import FakeClock, Phase
from taskplug.executor import (
    MemoryStateStore,
    Platform,
    SQLiteStateStore,
    StateStore,
    load_spec,
    open_executor,
)
from taskplug.localcluster import LocalCluster

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples" / "echo.yaml"
EXAMPLE_CONFIG = REPO / "examples" / "echo-platform.yaml"
DEADLINE = 20.0


async def until(predicate: Callable[[], bool], what: str) -> None:
    """Let the executor work until ``predicate`` holds; fail after a real-time deadline (not a timing)."""
    deadline = time.monotonic() + DEADLINE
    while not predicate():
        assert time.monotonic() < deadline, f"not within {DEADLINE}s: {what}"
        await asyncio.sleep(0.005)


def platform(tmp_path: Path, clock: FakeClock, sleep: str) -> Platform:
    return Platform.load(
        document={
            "executor": {"data-root": str(tmp_path / "data"), "workers": 2, "resync-period": "1h"},
            "tasks": {"task-plugins": {"enabled-plugins": ["echo"]}},
            "plugins": {"echo": {"sleep-duration": sleep}},
        },
        clock=clock,
    )


def occurred(event: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(event["occurredAt"].replace("Z", "+00:00"))


async def _run_until_running(tmp_path: Path, clock: FakeClock, store: StateStore, sleep: str) -> str:
    # The example has no execution name; resuming it takes the name its content gives (as render does).
    spec = load_spec(EXAMPLE, fresh_name=False)
    async with (
        LocalCluster(mode="simulated") as cluster,
        open_executor(platform(tmp_path, clock, sleep), kube_client=cluster.client(), store=store) as ex,
    ):
        key = await ex.submit(spec)
        await until(lambda: ex.status(key).task_phase == Phase.RUNNING, "the first round")
        return key


async def test_an_echo_task_runs_for_the_sleep_then_succeeds_with_its_input_as_output(tmp_path: Path) -> None:
    clock = FakeClock()
    spec = load_spec(EXAMPLE)
    async with (
        LocalCluster(mode="simulated") as cluster,
        open_executor(
            platform(tmp_path, clock, "5s"), kube_client=cluster.client(), store=MemoryStateStore()
        ) as ex,
    ):
        key = await ex.submit(spec)
        await until(lambda: ex.status(key).task_phase == Phase.RUNNING, "the first round")
        rounds = ex.rounds
        await clock.advance(4.9)
        await asyncio.sleep(0.05)
        assert ex.status(key).task_phase == Phase.RUNNING
        assert ex.rounds == rounds  # nothing woke it before its time
        await clock.advance(0.1)
        result = await asyncio.wait_for(ex.wait(key), DEADLINE)

    assert (result.phase, result.attempts, result.error) == ("Success", 1, None)
    assert result.outputs == {"o0": 42}
    assert [e["phase"] for e in result.events] == ["Running", "Success"]
    assert occurred(result.events[1]) - occurred(result.events[0]) == timedelta(seconds=5)


async def test_without_a_sleep_the_first_round_succeeds(tmp_path: Path) -> None:
    clock = FakeClock()
    async with (
        LocalCluster(mode="simulated") as cluster,
        open_executor(
            platform(tmp_path, clock, "0s"), kube_client=cluster.client(), store=MemoryStateStore()
        ) as ex,
    ):
        result = await asyncio.wait_for(ex.run(load_spec(EXAMPLE)), DEADLINE)
    assert result.outputs == {"o0": 42}
    assert [e["phase"] for e in result.events] == ["Success"]


async def test_a_resumed_executor_continues_the_sleep_where_it_was(tmp_path: Path) -> None:
    # Deviation from Flyte (Q15): the start time is plugin state, so a restart does not restart the sleep.
    clock = FakeClock()
    store = SQLiteStateStore(tmp_path / "state.db")
    try:
        key = await _run_until_running(tmp_path, clock, store, "5s")
        await clock.advance(2)  # the process is down for 2 s of the 5 s
        async with (
            LocalCluster(mode="simulated") as cluster,
            open_executor(platform(tmp_path, clock, "5s"), kube_client=cluster.client(), store=store) as ex,
        ):
            assert await ex.submit(load_spec(EXAMPLE, fresh_name=False)) == key
            echo = ex.resolver.resolve("echo").plugin  # the engine scopes each core plugin to its tasks
            await until(lambda: echo.pending_wakeups == 1, "the plugin's timer for the 3 s left")
            await clock.advance(3)
            result = await asyncio.wait_for(ex.wait(key), DEADLINE)
    finally:
        store.close()
    assert result.outputs == {"o0": 42}
    assert [e["phase"] for e in result.events] == ["Running", "Success"]
    assert occurred(result.events[1]) - occurred(result.events[0]) == timedelta(seconds=5)


def test_taskplug_run_the_echo_example_prints_its_outputs_and_phases_as_json(tmp_path: Path) -> None:
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "taskplug.cli",
            "run",
            str(EXAMPLE),
            "--config",
            str(EXAMPLE_CONFIG),
            "--cluster-mode",
            "simulated",
            "--state-db",
            str(tmp_path / "state.db"),
            "-o",
            "json",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    document = json.loads(completed.stdout)
    assert (document["phase"], document["attempts"], document["error"]) == ("Success", 1, None)
    assert document["outputs"] == {"o0": 42}
    # The example config sleeps 1 s: the task is seen Running first.
    assert [e["phase"] for e in document["events"]] == ["Running", "Success"]
