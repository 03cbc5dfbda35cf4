"""ResourceQuota admission: exact API-server messages (Flyte's back-off parses them)."""

from __future__ import annotations

import re

import pytest

from taskplug.core import FakeClock
from taskplug.k8s import POD, KubeApiError
from taskplug.localcluster import RESOURCE_QUOTA, LocalCluster

from .conftest import phase_in, pod_manifest, settle


def quota(name: str, hard: dict[str, str], namespace: str = "default") -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": namespace}, "spec": {"hard": hard}}


def limited(name: str, cpu: str, memory: str, **extra: object) -> dict[str, object]:
    return pod_manifest(name, resources={"limits": {"cpu": cpu, "memory": memory}}, **extra)  # type: ignore[arg-type]


async def test_exceeding_a_quota_is_403_with_the_real_message(sim: LocalCluster) -> None:
    client = sim.client()
    await client.create(RESOURCE_QUOTA, quota("team", {"limits.cpu": "4", "limits.memory": "4Gi"}))
    await client.create(POD, limited("a", "1", "1Gi", annotations={"taskplug.io/simulate-duration": "100"}))
    await client.create(POD, limited("b", "2", "1Gi", annotations={"taskplug.io/simulate-duration": "100"}))
    with pytest.raises(KubeApiError) as caught:
        await client.create(POD, limited("c", "2", "3Gi"))
    err = caught.value
    assert (err.status, err.reason) == (403, "Forbidden")
    assert err.message == (
        'pods "c" is forbidden: exceeded quota: team, requested: limits.cpu=2,limits.memory=3Gi, '
        "used: limits.cpu=3,limits.memory=2Gi, limited: limits.cpu=4,limits.memory=4Gi"
    )


async def test_only_the_exceeded_resources_are_listed(sim: LocalCluster) -> None:
    client = sim.client()
    await client.create(RESOURCE_QUOTA, quota("q", {"limits.cpu": "4", "limits.memory": "4Gi"}))
    with pytest.raises(KubeApiError) as caught:
        await client.create(POD, limited("big", "5", "1Gi"))
    assert caught.value.message == (
        'pods "big" is forbidden: exceeded quota: q, requested: limits.cpu=5, used: limits.cpu=0, limited: limits.cpu=4'
    )


async def test_flytes_backoff_regexes_find_the_requested_and_limited_resources(sim: LocalCluster) -> None:
    client = sim.client()
    await client.create(RESOURCE_QUOTA, quota("team", {"limits.cpu": "4", "limits.memory": "4Gi"}))
    with pytest.raises(KubeApiError) as caught:
        await client.create(POD, limited("c", "8", "8Gi"))
    # flytepropeller's backoff/handler.go GetComputeResourceAndQuantity: its regexes, split after ":" and
    # on ",".
    requested = re.search(r"requested: (limits.[a-zA-Z]+=[a-zA-Z0-9]+[,]*)+", caught.value.message)
    limited_ = re.search(r"limited: (limits.[a-zA-Z]+=[a-zA-Z0-9]+[,]*)+", caught.value.message)
    assert requested is not None and limited_ is not None
    chunks = [c for c in requested.group(0).split(":", 1)[1].strip().split(",") if c]
    assert chunks == ["limits.cpu=8", "limits.memory=8Gi"]
    assert limited_.group(0) == "limited: limits.cpu=4,limits.memory=4Gi"


async def test_a_missing_tracked_resource_fails_with_must_specify(sim: LocalCluster) -> None:
    client = sim.client()
    await client.create(
        RESOURCE_QUOTA, quota("q", {"limits.cpu": "4", "limits.memory": "4Gi", "requests.cpu": "4"})
    )
    pod = pod_manifest("a", resources={"requests": {"cpu": "1"}})
    with pytest.raises(KubeApiError) as caught:
        await client.create(POD, pod)
    assert caught.value.status == 403
    assert caught.value.message == (
        'pods "a" is forbidden: failed quota: q: must specify limits.cpu for: main; '
        "must specify limits.memory for: main"
    )


async def test_pod_count_and_extended_resources_are_quota_resources(sim: LocalCluster) -> None:
    client = sim.client()
    await client.create(RESOURCE_QUOTA, quota("q", {"pods": "1", "requests.nvidia.com/gpu": "1"}))
    slow = {"taskplug.io/simulate-duration": "100"}
    await client.create(POD, pod_manifest("a", annotations=slow))
    with pytest.raises(KubeApiError) as pods:
        await client.create(POD, pod_manifest("b"))
    assert (
        pods.value.message
        == 'pods "b" is forbidden: exceeded quota: q, requested: pods=1, used: pods=1, limited: pods=1'
    )


async def test_gpu_requests_are_charged_as_requests_dot_name(sim: LocalCluster) -> None:
    client = sim.client()
    await client.create(RESOURCE_QUOTA, quota("q", {"requests.nvidia.com/gpu": "1"}))
    gpu = {"limits": {"nvidia.com/gpu": "2"}}
    with pytest.raises(KubeApiError) as caught:
        await client.create(POD, pod_manifest("a", resources=gpu))
    assert caught.value.message == (
        'pods "a" is forbidden: exceeded quota: q, requested: requests.nvidia.com/gpu=2, '
        "used: requests.nvidia.com/gpu=0, limited: requests.nvidia.com/gpu=1"
    )


async def test_status_used_follows_live_pods_and_frees_when_they_finish(
    sim: LocalCluster, clock: FakeClock
) -> None:
    client = sim.client()
    await client.create(RESOURCE_QUOTA, quota("q", {"limits.cpu": "2", "limits.memory": "2Gi", "pods": "5"}))
    await client.create(
        POD, limited("a", "500m", "512Mi", annotations={"taskplug.io/simulate-duration": "10"})
    )
    await settle()
    status = (await client.get(RESOURCE_QUOTA, "default", "q"))["status"]
    assert status["hard"] == {"limits.cpu": "2", "limits.memory": "2Gi", "pods": "5"}
    assert status["used"] == {"limits.cpu": "500m", "limits.memory": "512Mi", "pods": "1"}
    await settle()
    await clock.advance(10)
    await sim.wait_for(POD, "default", "a", phase_in("Succeeded"), within=5)
    await settle()
    used = (await client.get(RESOURCE_QUOTA, "default", "q"))["status"]["used"]
    assert used == {"limits.cpu": "0", "limits.memory": "0", "pods": "0"}
    await client.create(POD, limited("b", "2", "2Gi"))  # the freed room is usable again


async def test_quotas_of_other_namespaces_do_not_apply(sim: LocalCluster) -> None:
    client = sim.client()
    await client.create(RESOURCE_QUOTA, quota("q", {"pods": "0"}, namespace="other"))
    await client.create(POD, pod_manifest("a"))
