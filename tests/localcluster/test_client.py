"""The in-process client's watch semantics: resume, synthetic ADDED, selectors, 410, drop, timeout, bookmarks."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from taskplug.core import FakeClock
from taskplug.k8s import KubeApiError, KubeClient, ResourceType, WatchEvent
from taskplug.localcluster import LocalCluster, LocalKubeClient

from .conftest import settle

WIDGET = ResourceType("example.com/v1", "Widget", "widgets")


def widget(name: str, **labels: str) -> dict[str, object]:
    return {"metadata": {"name": name, "labels": labels}, "spec": {"n": 0}}


async def collect(stream: AsyncIterator[WatchEvent], count: int) -> list[WatchEvent]:
    events = []
    async for event in stream:
        events.append(event)
        if len(events) == count:
            break
    return events


def test_the_in_process_client_is_a_kube_client() -> None:
    def accepts(client: KubeClient) -> KubeClient:
        return client

    assert accepts(LocalCluster(mode="simulated").client()) is not None
    assert isinstance(LocalCluster(mode="simulated").client(), LocalKubeClient)


async def test_a_watch_from_a_version_replays_later_events_in_order(sim: LocalCluster) -> None:
    client = sim.client()
    first = await client.create(WIDGET, widget("a"))
    await client.patch(WIDGET, "default", "a", {"spec": {"n": 1}})
    await client.create(WIDGET, widget("b"))
    await client.delete(WIDGET, "default", "a")
    events = await collect(
        client.watch(WIDGET, "default", resource_version=first["metadata"]["resourceVersion"]), 3
    )
    assert [(e.type, e.object["metadata"]["name"]) for e in events] == [
        ("MODIFIED", "a"),
        ("ADDED", "b"),
        ("DELETED", "a"),
    ]
    versions = [int(e.object["metadata"]["resourceVersion"]) for e in events]
    assert versions == sorted(versions)


async def test_resuming_from_the_last_seen_version_loses_and_repeats_nothing(sim: LocalCluster) -> None:
    client = sim.client()
    _, rv = await client.list(WIDGET, "default")
    await client.create(WIDGET, widget("a"))
    seen = await collect(client.watch(WIDGET, "default", resource_version=rv), 1)
    last = seen[-1].object["metadata"]["resourceVersion"]
    await client.create(WIDGET, widget("b"))
    resumed = await collect(client.watch(WIDGET, "default", resource_version=last), 1)
    assert [e.object["metadata"]["name"] for e in seen + resumed] == ["a", "b"]


async def test_a_watch_without_a_version_starts_with_synthetic_added_events(sim: LocalCluster) -> None:
    client = sim.client()
    await client.create(WIDGET, widget("a"))
    stream = client.watch(WIDGET, "default")
    first = await collect(stream, 1)
    await client.create(WIDGET, widget("b"))
    rest = await collect(stream, 1)
    assert [(e.type, e.object["metadata"]["name"]) for e in first + rest] == [("ADDED", "a"), ("ADDED", "b")]


async def test_objects_entering_or_leaving_a_label_selector_are_added_or_deleted(sim: LocalCluster) -> None:
    client = sim.client()
    _, rv = await client.list(WIDGET)
    await client.create(WIDGET, widget("a", team="x"))
    await client.patch(WIDGET, "default", "a", {"metadata": {"labels": {"team": "y"}}})
    await client.patch(WIDGET, "default", "a", {"metadata": {"labels": {"team": "x"}}})
    await client.patch(WIDGET, "default", "a", {"spec": {"n": 3}})
    events = await collect(client.watch(WIDGET, resource_version=rv, label_selector="team=x"), 4)
    assert [e.type for e in events] == ["ADDED", "DELETED", "ADDED", "MODIFIED"]


async def test_a_watch_from_a_compacted_version_raises_410_expired_from_the_iterator(
    sim: LocalCluster,
) -> None:
    client = sim.client()
    created = await client.create(WIDGET, widget("a"))
    await client.patch(WIDGET, "default", "a", {"spec": {"n": 1}})
    sim.compact()
    stream = client.watch(WIDGET, "default", resource_version=created["metadata"]["resourceVersion"])
    with pytest.raises(KubeApiError) as caught:
        await collect(stream, 1)
    assert (caught.value.status, caught.value.reason) == (410, "Expired")
    assert caught.value.message.startswith(
        f"too old resource version: {created['metadata']['resourceVersion']} ("
    )


async def test_the_current_version_is_still_watchable_after_compaction(sim: LocalCluster) -> None:
    client = sim.client()
    await client.create(WIDGET, widget("a"))
    sim.compact()
    _, rv = await client.list(WIDGET)
    stream = client.watch(WIDGET, resource_version=rv)
    await client.create(WIDGET, widget("b"))
    assert [e.object["metadata"]["name"] for e in await collect(stream, 1)] == ["b"]


async def test_history_is_bounded_so_old_versions_expire_on_their_own(clock: FakeClock) -> None:
    async with LocalCluster(mode="simulated", clock=clock, history_limit=5) as cluster:
        client = cluster.client()
        first = await client.create(WIDGET, widget("w0"))
        for i in range(1, 8):
            await client.create(WIDGET, widget(f"w{i}"))
        with pytest.raises(KubeApiError) as caught:
            await collect(client.watch(WIDGET, resource_version=first["metadata"]["resourceVersion"]), 1)
        assert caught.value.status == 410


async def test_dropping_watches_ends_every_stream_cleanly(sim: LocalCluster) -> None:
    client = sim.client()
    _, rv = await client.list(WIDGET)

    async def drain() -> list[WatchEvent]:
        return [e async for e in client.watch(WIDGET, resource_version=rv)]

    async with asyncio.TaskGroup() as group:
        watching = group.create_task(drain())
        await settle()
        await client.create(WIDGET, widget("a"))
        await settle()
        assert sim.drop_watches() == 1
    assert [e.object["metadata"]["name"] for e in watching.result()] == ["a"]


async def test_timeout_seconds_ends_the_stream_on_the_clusters_clock(
    sim: LocalCluster, clock: FakeClock
) -> None:
    client = sim.client()

    async def drain() -> list[WatchEvent]:
        return [e async for e in client.watch(WIDGET, timeout_seconds=30)]

    async with asyncio.TaskGroup() as group:
        watching = group.create_task(drain())
        await settle()
        await clock.advance(29)
        assert not watching.done()
        await clock.advance(2)
        await settle()
    assert watching.result() == []


async def test_bookmarks_carry_the_current_version_when_asked_for(clock: FakeClock) -> None:
    async with LocalCluster(mode="simulated", clock=clock, bookmark_interval=10) as cluster:
        client = cluster.client()
        _, rv = await client.list(WIDGET)
        stream = client.watch(WIDGET, resource_version=rv, allow_watch_bookmarks=True)
        plain = client.watch(WIDGET, resource_version=rv, timeout_seconds=15)
        await client.create(WIDGET, widget("a"))

        async def first_two() -> list[WatchEvent]:
            return await collect(stream, 2)

        async with asyncio.TaskGroup() as group:
            got = group.create_task(first_two())
            others = group.create_task(collect(plain, 99))
            await settle()
            await clock.advance(11)
            await settle()
            await clock.advance(5)
        bookmark = got.result()[1]
        assert bookmark.type == "BOOKMARK"
        assert bookmark.object["kind"] == "Widget"
        assert int(bookmark.object["metadata"]["resourceVersion"]) >= int(rv) + 1
        assert [e.type for e in others.result()] == ["ADDED"]  # no bookmarks unless asked
