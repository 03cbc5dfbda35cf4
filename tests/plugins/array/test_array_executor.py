"""The k8s array plugin end to end: loaded from its entry point by ``open_executor``, run by the executor on the
embedded cluster, whose process kubelet really runs each sub-task pod's container: a process that reads its
index from the environment (as ``pyflyte-map-execute`` does), its element from the map task's inputs, and
writes ``{outputPrefix}/{index}/outputs.pb``.

The executor's resync period is an hour, so a map task that finishes was woken by its pods' changes (the
plugin's own pod watch), not by the resync. Waits are deadlines on real processes, never timings.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from array_helpers import SQUARE, array_template

from integration.conftest import PodLedger, kube_client_for, make_platform, pods_in
from support.waiting import wait_until
from taskplug.core import Phase
from taskplug.executor import MemoryStateStore, Platform, SQLiteStateStore, open_executor, parse_spec
from taskplug.executor._executor import Executor
from taskplug.localcluster import LocalCluster
from taskplug.plugins.array import ARRAY_FINALIZER

DEADLINE = 60.0
NAMESPACE = "p-d"
# Sub-task 1 fails its first attempt (exit 1), then squares like the others.
FLAKY = (
    """
import os, sys
from pathlib import Path
marker = Path("{{.outputPrefix}}") / "tried-once"
if os.environ["FLYTE_K8S_ARRAY_INDEX"] == "1" and not marker.exists():
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text("once")
    sys.exit(1)
"""
    + SQUARE
)


def platform(tmp_path: Path, **k8s: Any) -> Platform:
    return make_platform(
        tmp_path,
        k8s=k8s,
        executor={"resync-period": "1h"},
        tasks={"task-plugins": {"enabled-plugins": ["container", "sidecar", "k8s-array"]}},
    )


def spec(
    name: str,
    xs: list[int],
    *,
    custom: dict[str, Any] | None = None,
    script: str = SQUARE,
    max_attempts: int = 1,
) -> Any:
    return parse_spec(
        {
            "template": array_template(custom=custom, script=script),
            "execution": {
                "id": {"project": "p", "domain": "d", "name": name, "nodeId": "n0"},
                "maxAttempts": max_attempts,
            },
            "inputs": {"x": xs},
        }
    )


def _cluster() -> LocalCluster:
    return LocalCluster(mode="process", memory_poll_interval=0.02, kill_grace_seconds=1.0)


@pytest.mark.parametrize("access", ["in-process", pytest.param("http", marks=pytest.mark.integration)])
async def test_a_legacy_map_runs_one_process_per_element_and_returns_lists_in_order(
    tmp_path: Path, access: str
) -> None:
    async with (
        _cluster() as cluster,
        kube_client_for(cluster, access, tmp_path) as client,
        open_executor(platform(tmp_path), kube_client=client, store=MemoryStateStore()) as ex,
    ):
        ledger = PodLedger(cluster)
        result = await asyncio.wait_for(
            ex.run(spec("squares", [3, 1, 4, 1, 5], custom={"parallelism": "2", "minSuccessRatio": 1.0})),
            DEADLINE,
        )
        pods = pods_in(cluster, NAMESPACE)
    assert (result.phase, result.error) == ("Success", None), result.error
    assert result.outputs == {"o0": [9, 1, 16, 1, 25]}
    names = [f"squares-n0-0-{i}" for i in range(5)]
    assert sorted(ledger.added) == names
    assert ledger.created_twice() == {}
    for i, name in enumerate(names):
        env = {e["name"]: e.get("value") for e in pods[name]["spec"]["containers"][0]["env"]}
        assert (env["FLYTE_K8S_ARRAY_INDEX"], env["BATCH_JOB_ARRAY_INDEX_VAR_NAME"]) == (
            str(i),
            "FLYTE_K8S_ARRAY_INDEX",
        )
        assert pods[name]["status"]["phase"] == "Succeeded"
    assert result.events[-1]["phase"] == "Success"
    assert {e["phase"] for e in result.events[:-1]} == {"Running"}


async def test_sub_tasks_failing_within_min_successes_give_none_for_their_elements(tmp_path: Path) -> None:
    async with (
        _cluster() as cluster,
        open_executor(platform(tmp_path), kube_client=cluster.client(), store=MemoryStateStore()) as ex,
    ):
        result = await asyncio.wait_for(
            ex.run(spec("some", [1, -1, 2, -2], custom={"minSuccessRatio": 0.5})), DEADLINE
        )
    assert result.phase == "Success", result.error
    assert result.outputs == {"o0": [1, None, 4, None]}


async def test_sub_tasks_failing_beyond_min_successes_fail_the_map_task_with_their_errors(
    tmp_path: Path,
) -> None:
    async with (
        _cluster() as cluster,
        open_executor(platform(tmp_path), kube_client=cluster.client(), store=MemoryStateStore()) as ex,
    ):
        result = await asyncio.wait_for(
            ex.run(spec("many", [1, -1, 2, -2], custom={"minSuccessRatio": 0.75})), DEADLINE
        )
    assert (result.phase, result.attempts) == ("PermanentFailure", 1)
    error = result.error
    assert error is not None
    assert (error["code"], error["kind"]) == ("", "USER")
    message = error["message"]
    assert message.startswith("[1]: code:Error message:")
    assert "\n[3]: code:Error message:" in message
    assert "terminated with exit code (3)" in message
    assert "[0]" not in message and "[2]" not in message


async def test_a_failed_sub_task_is_retried_in_a_new_pod(tmp_path: Path) -> None:
    async with (
        _cluster() as cluster,
        open_executor(platform(tmp_path), kube_client=cluster.client(), store=MemoryStateStore()) as ex,
    ):
        ledger = PodLedger(cluster)
        result = await asyncio.wait_for(
            ex.run(spec("flaky", [1, 2, 3], script=FLAKY, max_attempts=2)), DEADLINE
        )
    assert result.phase == "Success", result.error
    assert result.outputs == {"o0": [1, 4, 9]}
    assert sorted(ledger.added) == ["flaky-n0-0-0", "flaky-n0-0-1", "flaky-n0-0-1-1", "flaky-n0-0-2"]
    assert ledger.created_twice() == {}


async def _running_pods(cluster: LocalCluster, count: int) -> None:
    def running() -> bool:
        pods = pods_in(cluster, NAMESPACE).values()
        return sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Running") >= count

    await wait_until(running, within=DEADLINE, what=f"{count} sub-task pods running")


async def test_aborting_a_map_task_deletes_every_sub_task_pod(tmp_path: Path) -> None:
    sleeper = "import time; time.sleep(120)"
    async with (
        _cluster() as cluster,
        open_executor(
            platform(tmp_path, **{"inject-finalizer": True}),
            kube_client=cluster.client(),
            store=MemoryStateStore(),
        ) as ex,
    ):
        key = await ex.submit(spec("long", [1, 2, 3], script=sleeper))
        await _running_pods(cluster, 3)
        assert all(
            p["metadata"]["finalizers"] == [ARRAY_FINALIZER] for p in pods_in(cluster, NAMESPACE).values()
        )
        ex.abort(key)
        result = await asyncio.wait_for(ex.wait(key), DEADLINE)
        # Gone, not merely terminating: finalize dropped the finalizers of the deleted pods.
        await wait_until(lambda: pods_in(cluster, NAMESPACE) == {}, within=DEADLINE, what="no pod left")
    assert result.phase == "Aborted"


async def _until_launched(ex: Executor, key: str, cluster: LocalCluster, count: int) -> None:
    await wait_until(lambda: len(pods_in(cluster, NAMESPACE)) >= count, within=DEADLINE, what="pods launched")
    await wait_until(
        lambda: Phase(ex.status(key).task_phase) is Phase.RUNNING, within=DEADLINE, what="running"
    )


async def test_a_resumed_executor_finishes_the_map_task_without_creating_a_sub_task_twice(
    tmp_path: Path,
) -> None:
    slow_square = "import time; time.sleep(1)\n" + SQUARE
    store = SQLiteStateStore(tmp_path / "state.db")
    try:
        async with _cluster() as cluster:
            ledger = PodLedger(cluster)
            async with open_executor(platform(tmp_path), kube_client=cluster.client(), store=store) as ex:
                key = await ex.submit(spec("resume", [2, 3, 4], script=slow_square))
                await _until_launched(ex, key, cluster, 3)
            # The first executor is gone with its sub-tasks still running; a new one takes over.
            async with open_executor(platform(tmp_path), kube_client=cluster.client(), store=store) as ex:
                assert await ex.submit(spec("resume", [2, 3, 4], script=slow_square)) == key
                result = await asyncio.wait_for(ex.wait(key), DEADLINE)
    finally:
        store.close()
    assert result.phase == "Success", result.error
    assert result.outputs == {"o0": [4, 9, 16]}
    assert ledger.created_twice() == {}
    assert sorted(ledger.added) == [f"resume-n0-0-{i}" for i in range(3)]


async def test_a_resource_quota_holds_sub_tasks_back_until_tokens_are_released(tmp_path: Path) -> None:
    """``plugins.k8s-array.resourceConfig`` through the engine: the quota is registered for the plugin, each
    sub-task takes a token scoped to its execution, and no more than ``limit`` sub-task pods exist at once."""
    document = {
        "executor": {"data-root": str(tmp_path / "data"), "workers": 8, "resync-period": "1h"},
        "tasks": {"task-plugins": {"enabled-plugins": ["container", "sidecar", "k8s-array"]}},
        "plugins": {"k8s-array": {"resourceConfig": {"primaryLabel": "pods", "limit": 2}}},
    }
    most_at_once = 0
    async with (
        _cluster() as cluster,
        open_executor(
            Platform.load(document=document), kube_client=cluster.client(), store=MemoryStateStore()
        ) as ex,
    ):

        def watch(rtype: Any, event: Any) -> None:
            nonlocal most_at_once
            unfinished = [
                p
                for p in pods_in(cluster, NAMESPACE).values()
                if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
            ]
            most_at_once = max(most_at_once, len(unfinished))

        cluster.store.observers.append(watch)
        result = await asyncio.wait_for(ex.run(spec("quota", [1, 2, 3, 4, 5])), DEADLINE)
    assert (result.phase, result.error) == ("Success", None), result.error
    assert result.outputs == {"o0": [1, 4, 9, 16, 25]}
    assert 1 <= most_at_once <= 2
