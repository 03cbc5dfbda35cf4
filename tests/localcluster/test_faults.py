from __future__ import annotations

import asyncio

import pytest

from taskplug.core import FakeClock
from taskplug.k8s import POD, KubeApiError
from taskplug.localcluster import RESOURCE_QUOTA, LocalCluster

from .conftest import pod_manifest, settle


async def test_an_injected_error_answers_the_verb_n_times_then_stops(sim: LocalCluster) -> None:
    sim.faults.fail("create", 500, times=2)
    client = sim.client()
    for _ in range(2):
        with pytest.raises(KubeApiError) as caught:
            await client.create(POD, pod_manifest("a"))
        assert (caught.value.status, caught.value.reason) == (500, "InternalError")
        assert caught.value.message == "Internal error occurred: injected fault"
    assert (await client.create(POD, pod_manifest("a")))["metadata"]["name"] == "a"


async def test_a_fault_can_target_one_resource_plural(sim: LocalCluster) -> None:
    sim.faults.fail("list", 429, plural="resourcequotas", retry_after=7)
    client = sim.client()
    await client.list(POD)
    with pytest.raises(KubeApiError) as caught:
        await client.list(RESOURCE_QUOTA)
    assert (caught.value.status, caught.value.reason) == (429, "TooManyRequests")
    assert caught.value.details["retryAfterSeconds"] == 7


async def test_timeout_and_server_timeout_faults_look_like_the_api_servers(sim: LocalCluster) -> None:
    sim.faults.fail("get", 504)
    sim.faults.server_timeout("delete", POD)
    client = sim.client()
    await client.create(POD, pod_manifest("a"))
    with pytest.raises(KubeApiError) as timeout:
        await client.get(POD, "default", "a")
    assert (timeout.value.status, timeout.value.reason) == (504, "Timeout")
    with pytest.raises(KubeApiError) as server_timeout:
        await client.delete(POD, "default", "a")
    assert (server_timeout.value.status, server_timeout.value.reason) == (500, "ServerTimeout")
    assert server_timeout.value.message == (
        "The delete operation against pods could not be completed at this time, please try again."
    )


async def test_a_delay_holds_the_answer_on_the_clusters_clock(sim: LocalCluster, clock: FakeClock) -> None:
    sim.faults.delay("get", 5, times=1)
    client = sim.client()
    await client.create(POD, pod_manifest("a"))
    async with asyncio.TaskGroup() as group:
        getting = group.create_task(client.get(POD, "default", "a"))
        await settle()
        assert not getting.done()
        await clock.advance(5)
    assert getting.result()["metadata"]["name"] == "a"


async def test_clearing_faults_restores_normal_answers(sim: LocalCluster) -> None:
    sim.faults.fail("watch", 500, times=None)
    sim.faults.clear()
    stream = sim.client().watch(POD, timeout_seconds=1)
    await sim.client().create(POD, pod_manifest("a"))
    event = await anext(aiter(stream))
    assert event.type == "ADDED"
    await stream.aclose()  # type: ignore[attr-defined]


def test_an_unknown_verb_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown verb"):
        LocalCluster(mode="simulated").faults.fail("explode", 500)  # type: ignore[arg-type]
