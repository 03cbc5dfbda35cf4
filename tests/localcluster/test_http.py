"""The HTTP façade, with lightkube (the production client) and raw requests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from lightkube import ApiError, AsyncClient, KubeConfig
from lightkube.generic_resource import create_namespaced_resource
from lightkube.resources.core_v1 import Pod

from support.cluster_http import cluster_session
from taskplug.core import FakeClock
from taskplug.k8s import POD, ResourceType
from taskplug.localcluster import LocalCluster

from .conftest import pod_manifest, settle

pytestmark = pytest.mark.integration

WIDGET = ResourceType("example.com/v1", "Widget", "widgets")
Widget = create_namespaced_resource("example.com", "v1", "Widget", "widgets")


@pytest.fixture
async def served(clock: FakeClock, tmp_path: Path) -> AsyncIterator[tuple[LocalCluster, str, Path]]:
    async with LocalCluster(mode="simulated", clock=clock) as cluster:
        cluster.register_resource(WIDGET)
        url = await cluster.serve_http()
        kubeconfig = cluster.kubeconfig(tmp_path / "kubeconfig")
        yield cluster, url, kubeconfig


@pytest.fixture
async def lk(served: tuple[LocalCluster, str, Path]) -> AsyncIterator[AsyncClient]:
    client = AsyncClient(config=KubeConfig.from_file(served[2]))
    try:
        yield client
    finally:
        await client.close()


async def test_the_server_binds_loopback_only(served: tuple[LocalCluster, str, Path]) -> None:
    assert served[1].startswith("https://127.0.0.1:")


async def test_lightkube_creates_gets_lists_and_deletes_pods(lk: AsyncClient) -> None:
    created = await lk.create(Pod.from_dict(pod_manifest("a")))
    assert created.metadata is not None and created.metadata.uid
    fetched = await lk.get(Pod, "a", namespace="default")
    assert fetched.metadata is not None and fetched.metadata.name == "a"
    names = [p.metadata.name async for p in lk.list(Pod, namespace="default") if p.metadata]
    assert names == ["a"]
    await lk.delete(Pod, "a", namespace="default")
    with pytest.raises(ApiError) as caught:
        await lk.get(Pod, "a", namespace="default")
    assert caught.value.status.code == 404
    assert caught.value.status.message == 'pods "a" not found'


async def test_lightkube_sees_409_as_an_api_error(lk: AsyncClient) -> None:
    await lk.create(Pod.from_dict(pod_manifest("a")))
    with pytest.raises(ApiError) as caught:
        await lk.create(Pod.from_dict(pod_manifest("a")))
    assert (caught.value.status.code, caught.value.status.reason) == (409, "AlreadyExists")


async def test_lightkube_watches_pods_to_succeeded(lk: AsyncClient) -> None:
    listing = lk.list(Pod, namespace="default")
    _ = [p async for p in listing]
    rv = listing.resourceVersion
    await lk.create(Pod.from_dict(pod_manifest("a")))
    phases = []
    async for type_, pod in lk.watch(Pod, namespace="default", resource_version=rv):
        assert pod.status is not None
        phases.append((type_, pod.status.phase))
        if pod.status.phase == "Succeeded":
            break
    assert phases[0] == ("ADDED", "Pending")
    assert phases[-1] == ("MODIFIED", "Succeeded")


async def test_lightkube_gets_410_from_a_compacted_version(
    served: tuple[LocalCluster, str, Path], lk: AsyncClient
) -> None:
    created = await lk.create(Pod.from_dict(pod_manifest("a")))
    assert created.metadata is not None
    await settle()
    served[0].compact()
    with pytest.raises(ApiError) as caught:
        async for _ in lk.watch(Pod, namespace="default", resource_version=created.metadata.resourceVersion):
            pass
    assert (caught.value.status.code, caught.value.status.reason) == (410, "Expired")


async def test_lightkube_handles_custom_resources_and_patches(lk: AsyncClient) -> None:
    await lk.create(
        Widget.from_dict(
            {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"n": 1}}
        )
    )
    patched = await lk.patch(Widget, "w", {"spec": {"n": 2}}, namespace="default")
    assert patched["spec"] == {"n": 2}


async def test_lightkube_resumes_after_the_server_drops_the_watch(
    served: tuple[LocalCluster, str, Path], lk: AsyncClient
) -> None:
    cluster = served[0]
    listing = lk.list(Pod, namespace="default")
    _ = [p async for p in listing]
    seen: list[str] = []

    async def watch() -> None:
        async for type_, pod in lk.watch(Pod, namespace="default", resource_version=listing.resourceVersion):
            if type_ == "ADDED" and pod.metadata and pod.metadata.name:
                seen.append(pod.metadata.name)
                if len(seen) == 2:
                    return

    async with asyncio.TaskGroup() as group:
        task = group.create_task(watch())
        await cluster.client().create(POD, pod_manifest("a"))
        for _ in range(100):
            if seen:
                break
            await asyncio.sleep(0.01)
        cluster.drop_watches()
        await cluster.client().create(POD, pod_manifest("b"))
        await asyncio.wait_for(task, 10)
    assert seen == ["a", "b"]


async def _get(session: aiohttp.ClientSession, url: str) -> tuple[int, str, Any]:
    async with session.get(url) as response:
        return (
            response.status,
            response.headers.get("Content-Type", ""),
            await response.json(content_type=None),
        )


async def test_discovery_lists_resources_with_verbs(served: tuple[LocalCluster, str, Path]) -> None:
    url = served[1]
    async with cluster_session(served[0]) as session:
        status, _, api = await _get(session, f"{url}/api")
        assert (status, api["kind"], api["versions"]) == (200, "APIVersions", ["v1"])
        _, _, core = await _get(session, f"{url}/api/v1")
        names = {r["name"]: r for r in core["resources"]}
        assert {
            "pods",
            "pods/log",
            "pods/status",
            "nodes",
            "namespaces",
            "resourcequotas",
            "podtemplates",
        } <= set(names)
        assert names["pods"]["verbs"] == ["create", "delete", "get", "list", "patch", "update", "watch"]
        assert names["nodes"]["namespaced"] is False
        _, _, groups = await _get(session, f"{url}/apis")
        assert {g["name"] for g in groups["groups"]} == {"events.k8s.io", "example.com"}
        _, _, group = await _get(session, f"{url}/apis/example.com")
        assert group["preferredVersion"] == {"groupVersion": "example.com/v1", "version": "v1"}
        _, _, crs = await _get(session, f"{url}/apis/example.com/v1")
        assert crs["groupVersion"] == "example.com/v1"
        assert crs["resources"][0]["kind"] == "Widget"
        status, _, version = await _get(session, f"{url}/version")
        assert (status, version["major"]) == (200, "1")


async def test_errors_are_status_objects_with_exactly_application_json(
    served: tuple[LocalCluster, str, Path],
) -> None:
    async with cluster_session(served[0]) as session:
        status, content_type, body = await _get(session, f"{served[1]}/api/v1/namespaces/default/pods/nope")
    assert (status, content_type) == (404, "application/json")
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'pods "nope" not found',
        "reason": "NotFound",
        "code": 404,
        "details": {"name": "nope", "kind": "pods"},
    }


async def test_create_is_201_list_has_a_kind_and_delete_is_200_with_the_object(
    served: tuple[LocalCluster, str, Path],
) -> None:
    base = f"{served[1]}/api/v1/namespaces/default/pods"
    async with cluster_session(served[0]) as session:
        async with session.post(base, json=pod_manifest("a")) as created:
            assert created.status == 201
        status, _, listing = await _get(session, base)
        assert (status, listing["kind"], listing["apiVersion"]) == (200, "PodList", "v1")
        assert int(listing["metadata"]["resourceVersion"]) > 0
        _, _, every = await _get(session, f"{served[1]}/api/v1/pods")
        assert [p["metadata"]["name"] for p in every["items"]] == ["a"]
        async with session.delete(f"{base}/a") as deleted:
            assert deleted.status == 200
            assert (await deleted.json())["metadata"]["name"] == "a"


async def test_a_429_fault_carries_retry_after(served: tuple[LocalCluster, str, Path]) -> None:
    served[0].faults.fail("list", 429, retry_after=3)
    async with (
        cluster_session(served[0]) as session,
        session.get(f"{served[1]}/api/v1/namespaces/default/pods") as response,
    ):
        assert response.status == 429
        assert response.headers["Retry-After"] == "3"
        assert (await response.json())["reason"] == "TooManyRequests"


async def test_watch_streams_newline_delimited_events_and_ends_at_timeout(
    served: tuple[LocalCluster, str, Path], clock: FakeClock
) -> None:
    cluster, url, _ = served
    client = cluster.client()
    _, rv = await client.list(POD)
    await client.create(POD, pod_manifest("a"))
    lines: list[dict[str, Any]] = []
    async with (
        cluster_session(served[0]) as session,
        session.get(
            f"{url}/api/v1/namespaces/default/pods?watch=1&resourceVersion={rv}&timeoutSeconds=5"
        ) as response,
    ):
        assert response.status == 200
        async for line in response.content:
            lines.append(orjson.loads(line))
            if lines[-1]["object"]["status"]["phase"] == "Succeeded":
                await settle()
                await clock.advance(6)
        # The loop ended because the server closed the stream at timeoutSeconds.
    assert lines[0]["type"] == "ADDED"
    assert all(set(line) == {"type", "object"} for line in lines)


async def test_status_subresource_and_pod_logs(served: tuple[LocalCluster, str, Path]) -> None:
    cluster, url, _ = served
    await cluster.client().create(
        POD, pod_manifest("a", annotations={"taskplug.io/simulate-logs": "line1\nline2\n"})
    )
    await cluster.wait_for(POD, "default", "a", lambda o: o["status"]["phase"] == "Succeeded", within=5)
    base = f"{url}/api/v1/namespaces/default/pods/a"
    async with cluster_session(served[0]) as session:
        async with session.get(f"{base}/log") as response:
            assert (response.status, await response.text()) == (200, "line1\nline2\n")
        async with session.get(f"{base}/log?tailLines=1") as response:
            assert await response.text() == "line2\n"
        patch = {"status": {"message": "patched"}, "metadata": {"labels": {"ignored": "yes"}}}
        headers = {"Content-Type": "application/merge-patch+json"}
        async with session.patch(f"{base}/status", json=patch, headers=headers) as response:
            body = await response.json()
            assert body["status"]["message"] == "patched"
            assert "labels" not in body["metadata"]
