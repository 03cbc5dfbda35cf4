"""The scheduler inside a running cluster: binding, Unschedulable, retry when room frees."""

from __future__ import annotations

from taskplug.core import FakeClock
from taskplug.k8s import EVENT, POD
from taskplug.localcluster import NODE, LocalCluster, NodeConfig

from .conftest import condition, phase_in, pod_manifest, settle

SMALL = NodeConfig("small", capacity={"cpu": "2", "memory": "4Gi", "pods": "10"})


async def test_a_bound_pod_gets_its_node_the_condition_and_a_scheduled_event(sim: LocalCluster) -> None:
    client = sim.client()
    await client.create(POD, pod_manifest("a", annotations={"taskplug.io/simulate-duration": "100"}))
    pod = await sim.wait_for(POD, "default", "a", lambda o: bool(o["spec"].get("nodeName")), within=5)
    assert pod["spec"]["nodeName"] == "local-node"
    assert condition(pod, "PodScheduled") == {
        "type": "PodScheduled",
        "status": "True",
        "lastProbeTime": None,
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    await settle()
    events, _ = await client.list(EVENT, "default", field_selector="regarding.name=a,reason=Scheduled")
    assert [e["note"] for e in events] == ["Successfully assigned default/a to local-node"]
    assert events[0]["regarding"]["kind"] == "Pod"
    assert events[0]["reportingController"] == "default-scheduler"


async def test_a_pod_that_fits_nowhere_is_unschedulable_with_the_real_message(clock: FakeClock) -> None:
    async with LocalCluster(mode="simulated", clock=clock, nodes=[SMALL]) as cluster:
        client = cluster.client()
        await client.create(POD, pod_manifest("big", resources={"requests": {"cpu": "3"}}))
        pod = await cluster.wait_for(
            POD, "default", "big", lambda o: condition(o, "PodScheduled") is not None, within=5
        )
        cond = condition(pod, "PodScheduled")
        assert cond is not None
        assert (cond["status"], cond["reason"], cond["message"]) == (
            "False",
            "Unschedulable",
            "0/1 nodes are available: 1 Insufficient cpu.",
        )
        assert pod["status"]["phase"] == "Pending"
        assert "nodeName" not in pod["spec"]
        await settle()
        warnings, _ = await client.list(EVENT, "default", field_selector="reason=FailedScheduling")
        assert warnings[0]["type"] == "Warning"
        assert warnings[0]["note"] == "0/1 nodes are available: 1 Insufficient cpu."


async def test_an_unschedulable_pod_is_retried_when_capacity_frees(clock: FakeClock) -> None:
    async with LocalCluster(mode="simulated", clock=clock, nodes=[SMALL]) as cluster:
        client = cluster.client()
        hog = pod_manifest(
            "hog", resources={"requests": {"cpu": "2"}}, annotations={"taskplug.io/simulate-duration": "60"}
        )
        await client.create(POD, hog)
        await cluster.wait_for(POD, "default", "hog", phase_in("Running"), within=5)
        await client.create(POD, pod_manifest("next", resources={"requests": {"cpu": "1"}}))
        waiting = await cluster.wait_for(
            POD, "default", "next", lambda o: condition(o, "PodScheduled") is not None, within=5
        )
        assert condition(waiting, "PodScheduled")["reason"] == "Unschedulable"  # type: ignore[index]
        await settle()
        await clock.advance(60)
        bound = await cluster.wait_for(
            POD, "default", "next", lambda o: bool(o["spec"].get("nodeName")), within=5
        )
        assert condition(bound, "PodScheduled")["status"] == "True"  # type: ignore[index]


async def test_deleting_a_pod_frees_its_room_too(clock: FakeClock) -> None:
    async with LocalCluster(mode="simulated", clock=clock, nodes=[SMALL]) as cluster:
        client = cluster.client()
        await client.create(
            POD,
            pod_manifest(
                "hog",
                resources={"requests": {"cpu": "2"}},
                annotations={"taskplug.io/simulate-duration": "600"},
            ),
        )
        await client.create(POD, pod_manifest("next", resources={"requests": {"cpu": "2"}}))
        await cluster.wait_for(
            POD, "default", "next", lambda o: condition(o, "PodScheduled") is not None, within=5
        )
        await client.delete(POD, "default", "hog")
        await cluster.wait_for(POD, "default", "next", lambda o: bool(o["spec"].get("nodeName")), within=5)


async def test_selectors_and_taints_pick_the_node(clock: FakeClock) -> None:
    nodes = [
        NodeConfig("cpu-node", labels={"pool": "cpu"}),
        NodeConfig(
            "gpu-node",
            capacity={"cpu": "8", "memory": "32Gi", "pods": "10", "nvidia.com/gpu": "2"},
            labels={"pool": "gpu"},
            taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
        ),
    ]
    async with LocalCluster(mode="simulated", clock=clock, nodes=nodes) as cluster:
        client = cluster.client()
        gpu_pod = pod_manifest(
            "gpu",
            resources={"limits": {"nvidia.com/gpu": "1"}},
            spec={"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]},
        )
        untolerating = pod_manifest("stray", spec={"nodeSelector": {"pool": "gpu"}})
        await client.create(POD, gpu_pod)
        await client.create(POD, pod_manifest("plain"))
        await client.create(POD, untolerating)
        assert (
            await cluster.wait_for(POD, "default", "gpu", lambda o: bool(o["spec"].get("nodeName")), within=5)
        )["spec"]["nodeName"] == "gpu-node"
        assert (
            await cluster.wait_for(
                POD, "default", "plain", lambda o: bool(o["spec"].get("nodeName")), within=5
            )
        )["spec"]["nodeName"] == "cpu-node"
        stray = await cluster.wait_for(
            POD, "default", "stray", lambda o: condition(o, "PodScheduled") is not None, within=5
        )
        assert condition(stray, "PodScheduled")["message"] == (  # type: ignore[index]
            "0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
            "1 node(s) had untolerated taint {nvidia.com/gpu: present}."
        )


async def test_nodes_are_api_objects(sim: LocalCluster) -> None:
    nodes, _ = await sim.client().list(NODE)
    assert [n["metadata"]["name"] for n in nodes] == ["local-node"]
    assert nodes[0]["metadata"]["labels"]["kubernetes.io/hostname"] == "local-node"
    assert nodes[0]["status"]["allocatable"]["cpu"] == "1k"
