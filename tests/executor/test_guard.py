"""The replica's Kubernetes client: the create guard, and adoption of AlreadyExists only for our own object."""

from __future__ import annotations

from typing import Any

import pytest

from taskplug.executor import FencedError, GuardedKubeClient
from taskplug.k8s import POD, KubeApiError, is_already_exists, is_invalid
from taskplug.localcluster import LocalCluster


def _pod(name: str, execution_id: str, node_id: str = "n0") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {"execution-id": execution_id, "node-id": node_id},
        },
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }


async def _open() -> None:
    return None


async def _closed() -> None:
    raise FencedError("fenced")


async def test_an_already_existing_object_of_this_execution_is_adopted() -> None:
    async with LocalCluster(mode="simulated") as cluster:
        client = GuardedKubeClient(cluster.client(), _open)
        await client.create(POD, _pod("x-n0-0", "x"))
        with pytest.raises(KubeApiError) as caught:
            await client.create(POD, _pod("x-n0-0", "x"))
    assert is_already_exists(caught.value)
    assert (client.adopted, client.collisions) == (1, 0)


@pytest.mark.parametrize(("execution_id", "node_id"), [("other", "n0"), ("x", "n1")])
async def test_an_object_of_another_execution_under_the_same_name_is_a_collision_not_adopted(
    execution_id: str, node_id: str
) -> None:
    async with LocalCluster(mode="simulated") as cluster:
        await cluster.client().create(POD, _pod("x-n0-0", execution_id, node_id))
        client = GuardedKubeClient(cluster.client(), _open)
        with pytest.raises(KubeApiError) as caught:
            await client.create(POD, _pod("x-n0-0", "x"))
    assert is_invalid(caught.value) and not is_already_exists(caught.value)
    assert "belongs to another execution" in str(caught.value)
    assert (client.adopted, client.collisions) == (0, 1)


async def test_a_closed_guard_sends_neither_create_nor_delete() -> None:
    async with LocalCluster(mode="simulated") as cluster:
        await cluster.client().create(POD, _pod("kept-n0-0", "kept"))
        client = GuardedKubeClient(cluster.client(), _closed)
        with pytest.raises(FencedError):
            await client.create(POD, _pod("new-n0-0", "new"))
        with pytest.raises(FencedError):
            await client.delete(POD, "default", "kept-n0-0")
        names = sorted(o["metadata"]["name"] for o in (await client.list(POD, None))[0])
    assert names == ["kept-n0-0"]
