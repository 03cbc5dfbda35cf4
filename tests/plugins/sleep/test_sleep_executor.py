"""The core-sleep plugin end to end: loaded from its entry point by ``open_executor`` and run by the executor
with the fake clock (Flyte's plugins/core/sleep/plugin.go); and ``taskplug run`` on a core-sleep task as a user runs it.

core-sleep asks for no wake-up, as in Flyte: the executor's resync (``executor.resync-period``, 10 s here)
runs it again, so it succeeds at the first resync after its duration.
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

import yaml

from taskplug.core import FakeClock, Phase
from taskplug.executor import (
    ExecutionResult,
    Executor,
    MemoryStateStore,
    Platform,
    SQLiteStateStore,
    open_executor,
    parse_spec,
)
from taskplug.localcluster import LocalCluster

DEADLINE = 20.0
RESYNC = 10.0


def spec_document(seconds: str, name: str = "nap-1") -> dict[str, Any]:
    return {
        "template": {
            "id": {
                "resourceType": "TASK",
                "project": "demo",
                "domain": "development",
                "name": "nap",
                "version": "v1",
            },
            "type": "core-sleep",
            "interface": {"inputs": {"variables": {"d": {"type": {"simple": "DURATION"}}}}},
        },
        "execution": {"id": {"project": "demo", "domain": "development", "name": name, "nodeId": "n0"}},
        "inputs": {"d": {"scalar": {"primitive": {"duration": seconds}}}},
    }


def platform(tmp_path: Path, clock: FakeClock) -> Platform:
    return Platform.load(
        document={
            "executor": {"data-root": str(tmp_path / "data"), "workers": 2, "resync-period": f"{RESYNC}s"},
            "tasks": {"task-plugins": {"enabled-plugins": ["core-sleep"]}},
        },
        clock=clock,
    )


async def until(predicate: Callable[[], bool], what: str) -> None:
    """Let the executor work until ``predicate`` holds; fail after a real-time deadline (not a timing)."""
    deadline = time.monotonic() + DEADLINE
    while not predicate():
        assert time.monotonic() < deadline, f"not within {DEADLINE}s: {what}"
        await asyncio.sleep(0.005)


async def advance_until_done(
    clock: FakeClock, ex: Executor, key: str, max_seconds: int = 120
) -> ExecutionResult:
    """Move fake time a second at a time, letting each round run, until the execution ends."""
    waiter = asyncio.ensure_future(ex.wait(key))
    try:
        for _ in range(max_seconds):
            if waiter.done():
                return waiter.result()
            await clock.advance(1)
            await asyncio.sleep(0.005)
        raise AssertionError(f"not done within {max_seconds} fake seconds")
    finally:
        waiter.cancel()


def occurred(event: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(event["occurredAt"].replace("Z", "+00:00"))


async def test_a_sleep_task_runs_then_succeeds_at_the_first_resync_after_its_duration(tmp_path: Path) -> None:
    clock = FakeClock()
    async with (
        LocalCluster(mode="simulated") as cluster,
        open_executor(
            platform(tmp_path, clock), kube_client=cluster.client(), store=MemoryStateStore()
        ) as ex,
    ):
        key = await ex.submit(parse_spec(spec_document("25s")))
        await until(lambda: ex.status(key).task_phase == Phase.RUNNING, "the first round")
        result = await advance_until_done(clock, ex, key)

    assert (result.phase, result.attempts, result.error) == ("Success", 1, None)
    assert result.outputs == {}
    assert [e["phase"] for e in result.events] == ["Running", "Success"]
    slept = occurred(result.events[1]) - occurred(result.events[0])
    assert timedelta(seconds=25) <= slept <= timedelta(seconds=25 + RESYNC)


async def test_a_zero_sleep_succeeds_in_the_first_round(tmp_path: Path) -> None:
    clock = FakeClock()
    async with (
        LocalCluster(mode="simulated") as cluster,
        open_executor(
            platform(tmp_path, clock), kube_client=cluster.client(), store=MemoryStateStore()
        ) as ex,
    ):
        result = await asyncio.wait_for(ex.run(parse_spec(spec_document("0s"))), DEADLINE)
    assert result.outputs == {}
    assert [e["phase"] for e in result.events] == ["Success"]


async def test_an_invalid_sleep_task_fails_permanently_without_retrying(tmp_path: Path) -> None:
    document = spec_document("-5s")
    document["execution"]["maxAttempts"] = 3
    clock = FakeClock()
    async with (
        LocalCluster(mode="simulated") as cluster,
        open_executor(
            platform(tmp_path, clock), kube_client=cluster.client(), store=MemoryStateStore()
        ) as ex,
    ):
        result = await asyncio.wait_for(ex.run(parse_spec(document)), DEADLINE)
    assert (result.phase, result.attempts) == ("PermanentFailure", 1)
    assert result.error == {
        "code": "BadTaskSpecification",
        "message": "duration input [d] must be non-negative",
        "kind": "USER",
    }


async def test_a_resumed_executor_continues_the_sleep_instead_of_restarting_it(tmp_path: Path) -> None:
    # Deviation from Flyte (Q15): the start time is plugin state, so a restart does not restart the sleep.
    clock = FakeClock()
    store = SQLiteStateStore(tmp_path / "state.db")
    spec = parse_spec(spec_document("25s"))
    try:
        async with (
            LocalCluster(mode="simulated") as cluster,
            open_executor(platform(tmp_path, clock), kube_client=cluster.client(), store=store) as ex,
        ):
            key = await ex.submit(spec)
            await until(lambda: ex.status(key).task_phase == Phase.RUNNING, "the first round")
            for _ in range(15):
                await clock.advance(1)
                await asyncio.sleep(0.005)
        async with (
            LocalCluster(mode="simulated") as cluster,
            open_executor(platform(tmp_path, clock), kube_client=cluster.client(), store=store) as ex,
        ):
            assert await ex.submit(spec) == key
            result = await advance_until_done(clock, ex, key)
    finally:
        store.close()
    assert [e["phase"] for e in result.events] == ["Running", "Success"]
    slept = occurred(result.events[1]) - occurred(result.events[0])
    # Restarted at 15 s, a restarted sleep would end at 40 s at the earliest.
    assert timedelta(seconds=25) <= slept < timedelta(seconds=40)


def test_taskplug_run_a_sleep_task_prints_its_phases_as_json(tmp_path: Path) -> None:
    spec = tmp_path / "nap.yaml"
    spec.write_text(yaml.safe_dump(spec_document("0.2s")))
    config = tmp_path / "platform.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "tasks": {"task-plugins": {"enabled-plugins": ["core-sleep"]}},
                "executor": {"resync-period": "50ms"},
            }
        )
    )
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "taskplug.cli",
            "run",
            str(spec),
            "--config",
            str(config),
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
    assert (document["phase"], document["error"], document["outputs"]) == ("Success", None, {})
    assert [e["phase"] for e in document["events"]] == ["Running", "Success"]
