"""Simulated mode: scripted pods move Pending → Running → Succeeded/Failed on the clock."""

from __future__ import annotations

import pytest

from taskplug.core import FakeClock
from taskplug.k8s import POD, WatchEvent
from taskplug.localcluster import (
    ANNOTATION_DURATION,
    ANNOTATION_EXIT_CODE,
    ANNOTATION_LOGS,
    ANNOTATION_OOM,
    LocalCluster,
)

from .conftest import condition, phase_in, pod_manifest, settle


async def test_a_pod_goes_pending_running_succeeded_with_kubelet_shaped_status(sim: LocalCluster) -> None:
    client = sim.client()
    _, rv = await client.list(POD)
    await client.create(POD, pod_manifest("a"))
    phases: list[str] = []
    async for event in client.watch(POD, resource_version=rv):
        phases.append(event.object["status"]["phase"])
        if phases[-1] == "Succeeded":
            final = event.object
            break
    assert phases[0] == "Pending"
    assert "Running" in phases
    status = final["status"]
    terminated = status["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (0, "Completed")
    assert terminated["containerID"].startswith("taskplug://")
    ready = condition(final, "Ready")
    assert ready is not None and (ready["status"], ready["reason"]) == ("False", "PodCompleted")
    assert status["podIP"].startswith("10.244.")
    assert status["hostIP"] == "127.0.0.1"
    assert status["startTime"] == "2026-01-01T00:00:00Z"


async def test_duration_exit_code_and_logs_are_scripted_by_annotations(
    sim: LocalCluster, clock: FakeClock
) -> None:
    client = sim.client()
    notes = {ANNOTATION_DURATION: "30", ANNOTATION_EXIT_CODE: "3", ANNOTATION_LOGS: "boom\n"}
    await client.create(POD, pod_manifest("a", annotations=notes))
    running = await sim.wait_for(POD, "default", "a", phase_in("Running"), within=5)
    assert (
        running["status"]["containerStatuses"][0]["state"]["running"]["startedAt"] == "2026-01-01T00:00:00Z"
    )
    assert condition(running, "Ready")["status"] == "True"  # type: ignore[index]
    await settle()
    await clock.advance(29)
    await settle()
    assert (await client.get(POD, "default", "a"))["status"]["phase"] == "Running"
    await clock.advance(1)
    failed = await sim.wait_for(POD, "default", "a", phase_in("Failed"), within=5)
    terminated = failed["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (3, "Error")
    assert terminated["finishedAt"] == "2026-01-01T00:00:30Z"
    assert sim.logs("default", "a") == "boom\n"


async def test_simulated_oom_is_exit_137_oomkilled(sim: LocalCluster) -> None:
    await sim.client().create(POD, pod_manifest("a", annotations={ANNOTATION_OOM: "true"}))
    failed = await sim.wait_for(POD, "default", "a", phase_in("Failed"), within=5)
    terminated = failed["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (137, "OOMKilled")


async def test_on_failure_restarts_after_crash_loop_back_off(sim: LocalCluster, clock: FakeClock) -> None:
    await sim.client().create(
        POD, pod_manifest("a", restart="OnFailure", annotations={ANNOTATION_EXIT_CODE: "1"})
    )
    backing_off = await sim.wait_for(
        POD,
        "default",
        "a",
        lambda o: any(s["restartCount"] for s in o["status"].get("containerStatuses", [])),
        within=5,
    )
    status = backing_off["status"]["containerStatuses"][0]
    assert status["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert status["lastState"]["terminated"]["exitCode"] == 1
    assert backing_off["status"]["phase"] == "Running"
    await settle()  # let the cluster's timer task go to sleep on the clock before time moves
    await clock.advance(10)
    await sim.wait_for(
        POD, "default", "a", lambda o: o["status"]["containerStatuses"][0]["restartCount"] == 2, within=5
    )


async def test_a_pull_failure_pattern_gives_err_image_pull_then_back_off(clock: FakeClock) -> None:
    async with LocalCluster(
        mode="simulated", clock=clock, image_pull_failures=["registry.invalid/*"]
    ) as cluster:
        await cluster.client().create(POD, pod_manifest("a", image="registry.invalid/app:1"))
        pod = await cluster.wait_for(
            POD,
            "default",
            "a",
            lambda o: (
                "waiting" in o["status"].get("containerStatuses", [{}])[0].get("state", {})
                and o["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == "ImagePullBackOff"
            ),
            within=5,
        )
        assert pod["status"]["phase"] == "Pending"
        assert pod["status"]["containerStatuses"][0]["state"]["waiting"]["message"] == (
            'Back-off pulling image "registry.invalid/app:1"'
        )


async def test_node_shutdown_fails_running_simulated_pods(sim: LocalCluster) -> None:
    await sim.client().create(POD, pod_manifest("a", annotations={ANNOTATION_DURATION: "100"}))
    await sim.wait_for(POD, "default", "a", phase_in("Running"), within=5)
    sim.shutdown_node("local-node")
    failed = await sim.wait_for(POD, "default", "a", phase_in("Failed"), within=5)
    assert failed["status"]["reason"] == "NodeShutdown"
    assert failed["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 137


@pytest.mark.parametrize("count", [200])
async def test_many_pods_all_reach_succeeded(sim: LocalCluster, count: int) -> None:
    client = sim.client()
    _, rv = await client.list(POD)
    for i in range(count):
        await client.create(POD, pod_manifest(f"p{i}"))
    done: set[str] = set()
    event: WatchEvent
    async for event in client.watch(POD, resource_version=rv):
        if event.object["status"]["phase"] == "Succeeded":
            done.add(event.object["metadata"]["name"])
            if len(done) == count:
                break
    assert len(done) == count
