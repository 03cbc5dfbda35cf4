"""The plugin's own pod watch (``PodWakeups``): a change to a sub-task pod wakes the map task that owns it,
even in another namespace, and a failed list is tried again after a back-off on the (fake) clock."""

from __future__ import annotations

import asyncio
from typing import Any

from support.waiting import wait_until
from taskplug.core import FakeClock
from taskplug.k8s import POD
from taskplug.localcluster import LocalCluster
from taskplug.plugins.array import PodWakeups


def pod(name: str, namespace: str, execution_id: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"execution-id": execution_id}},
        "spec": {"containers": [{"name": "c", "image": "img"}]},
    }


async def test_a_sub_task_pod_change_wakes_its_map_task_and_no_other() -> None:
    clock = FakeClock()
    woken: list[tuple[str, str]] = []
    async with LocalCluster(mode="simulated", clock=clock) as cluster:
        wakeups = PodWakeups(cluster.client(), lambda ns, name: woken.append((ns, name)), clock=clock)
        # The map task lives in p-d, its sub-task pods in p-d-maps (a namespace template).
        wakeups.route(("p-d-maps", "exec1"), "exec1-n0-0", ("p-d", "exec1"))
        try:
            await wait_until(lambda: wakeups.running, what="the watch starts")
            await asyncio.sleep(0.05)
            client = cluster.client()
            await client.create(POD, pod("exec1-n0-0-0", "p-d-maps", "exec1"))
            await wait_until(lambda: ("p-d", "exec1") in woken, what="the map task is woken")
            woken.clear()
            await client.create(POD, pod("other-n0-0", "p-d-maps", "other"))  # not routed
            await client.create(POD, pod("exec1-n1-0", "elsewhere", "exec1"))  # another namespace
            await asyncio.sleep(0.1)
            assert woken == []
            wakeups.forget(("p-d-maps", "exec1"), "exec1-n0-0")
            await client.delete(POD, "p-d-maps", "exec1-n0-0-0")
            await asyncio.sleep(0.1)
            assert woken == []
        finally:
            await wakeups.aclose()
        assert not wakeups.running


async def test_a_failed_list_is_tried_again_after_a_back_off() -> None:
    clock = FakeClock()
    woken: list[tuple[str, str]] = []
    async with LocalCluster(mode="simulated", clock=clock) as cluster:
        client = cluster.client()
        await client.create(POD, pod("exec1-n0-0-0", "p-d", "exec1"))
        cluster.faults.fail("list", 500, plural="pods")
        wakeups = PodWakeups(client, lambda ns, name: woken.append((ns, name)), clock=clock)
        sleepers = clock.sleepers  # the cluster's own timers
        wakeups.route(("p-d", "exec1"), "exec1-n0-0", ("p-d", "exec1"))
        try:
            await wait_until(lambda: clock.sleepers > sleepers, what="the watch backs off")
            assert woken == []
            await clock.advance(0.5)
            # Listing again finds the pod changed while no watch was open, and wakes its owner.
            await wait_until(lambda: woken == [("p-d", "exec1")], what="the owner is woken after the relist")
        finally:
            await wakeups.aclose()
