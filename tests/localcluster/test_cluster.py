"""Lifecycle, operators for custom resources, and pod events."""

from __future__ import annotations

import asyncio

import pytest

from taskplug.core import FakeClock
from taskplug.k8s import EVENT, POD, ResourceType, WatchEvent
from taskplug.localcluster import LocalCluster, LocalKubeClient

from .conftest import pod_manifest, settle

JOB = ResourceType("example.com/v1", "Job", "jobs")


async def test_an_operator_sees_every_change_and_may_update_objects(sim: LocalCluster) -> None:
    seen: list[tuple[str, str]] = []

    async def operator(event: WatchEvent, client: LocalKubeClient) -> None:
        seen.append((event.type, event.object["metadata"]["name"]))
        if event.type == "ADDED":
            await client.patch(
                JOB, "default", event.object["metadata"]["name"], {"status": {"state": "RUNNING"}}
            )

    sim.register_operator(JOB, operator)
    client = sim.client()
    await client.create(JOB, {"metadata": {"name": "j"}, "spec": {}})
    job = await sim.wait_for(JOB, "default", "j", lambda o: "status" in o, within=5)
    assert job["status"] == {"state": "RUNNING"}
    await client.delete(JOB, "default", "j")
    await settle()
    assert seen == [("ADDED", "j"), ("MODIFIED", "j"), ("DELETED", "j")]


async def test_an_operator_registered_before_start_gets_existing_objects_as_added(clock: FakeClock) -> None:
    seen: list[str] = []

    def operator(event: WatchEvent, client: LocalKubeClient) -> None:
        seen.append(event.type)

    cluster = LocalCluster(mode="simulated", clock=clock)
    cluster.register_operator(JOB, operator)
    async with cluster:
        await cluster.client().create(JOB, {"metadata": {"name": "j"}})
        await settle()
    assert seen == ["ADDED"]


async def test_a_failing_operator_does_not_stop_the_cluster(sim: LocalCluster) -> None:
    def operator(event: WatchEvent, client: LocalKubeClient) -> None:
        raise RuntimeError("broken operator")

    sim.register_operator(JOB, operator)
    await sim.client().create(JOB, {"metadata": {"name": "j"}})
    await settle()
    await sim.client().create(POD, pod_manifest("still-works"))


async def test_pod_events_are_events_k8s_io_v1_with_regarding(sim: LocalCluster) -> None:
    client = sim.client()
    created = await client.create(POD, pod_manifest("a"))
    await sim.wait_for(POD, "default", "a", lambda o: o["status"]["phase"] == "Succeeded", within=5)
    await settle()
    events, _ = await client.list(EVENT, "default", field_selector="regarding.kind=Pod")
    assert [e["reason"] for e in events] == ["Scheduled", "Started"]
    for event in events:
        assert event["apiVersion"] == "events.k8s.io/v1"
        assert event["regarding"]["uid"] == created["metadata"]["uid"]
        assert event["eventTime"].endswith("Z")


async def test_leaving_the_cluster_stops_every_task(clock: FakeClock) -> None:
    before = set(asyncio.all_tasks())
    async with LocalCluster(mode="simulated", clock=clock) as cluster:
        await cluster.client().create(
            POD, pod_manifest("a", annotations={"taskplug.io/simulate-duration": "100"})
        )
        await settle()
        assert len(asyncio.all_tasks() - before) > 1
    assert asyncio.all_tasks() - before == set()


async def test_the_cluster_can_be_left_from_another_task(clock: FakeClock) -> None:
    cluster = LocalCluster(mode="simulated", clock=clock)
    await asyncio.create_task(cluster.__aenter__())
    await asyncio.create_task(cluster.stop())


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="mode must be"):
        LocalCluster(mode="virtual")  # type: ignore[arg-type]
