"""The informer against the local cluster's API: list, watch, resume, relist on 410, back-off, cache reads."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import pytest

from taskplug.core import FakeClock
from taskplug.engine.k8s._informer import Informer, InformerFactory
from taskplug.k8s import ResourceType

if TYPE_CHECKING:
    from conftest import CountingKubeClient

NS = "default"
# PodTemplates: a built-in type no controller of the local cluster touches, so every event is the test's.
POD = ResourceType("v1", "PodTemplate", "podtemplates")


def pod(name: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": name, "namespace": NS, "labels": dict(labels)},
        "template": {"spec": {"containers": [{"name": "main", "image": "busybox"}]}},
    }


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def on_add(self, obj: dict[str, Any]) -> None:
        self.events.append(("add", obj["metadata"]["name"]))

    def on_update(self, old: dict[str, Any] | None, new: dict[str, Any]) -> None:
        self.events.append(("update", new["metadata"]["name"]))

    def on_delete(self, obj: dict[str, Any]) -> None:
        self.events.append(("delete", obj["metadata"]["name"]))


async def started(client: CountingKubeClient, clock: FakeClock) -> tuple[InformerFactory, Informer, Recorder]:
    factory = InformerFactory(client, clock=clock)
    informer = factory.informer(POD, namespace=NS)
    recorder = Recorder()
    informer.add_handler(recorder)
    await factory.__aenter__()
    await informer.wait_synced()
    return factory, informer, recorder


async def test_informer_lists_then_serves_reads_from_its_cache_without_api_calls(
    counting_kube_client: CountingKubeClient, eventually_fn: Any
) -> None:
    client = counting_kube_client
    await client.create(POD, pod("a"))
    await client.create(POD, pod("b"))
    factory, informer, recorder = await started(client, FakeClock())
    try:
        assert sorted(recorder.events) == [("add", "a"), ("add", "b")]
        before = dict(client.calls)
        for _ in range(100):
            assert informer.get(NS, "a") is not None
            assert len(informer.list()) == 2
        assert informer.get(NS, "missing") is None
        assert dict(client.calls) == before
        assert client.calls["list"] == 1
    finally:
        await factory.__aexit__(None, None, None)


async def test_informer_delivers_adds_updates_and_deletes_made_after_the_list(
    counting_kube_client: CountingKubeClient, eventually_fn: Any
) -> None:
    client = counting_kube_client
    factory, informer, recorder = await started(client, FakeClock())
    try:
        await client.create(POD, pod("a"))
        await eventually_fn(lambda: ("add", "a") in recorder.events)
        await client.patch(POD, NS, "a", {"metadata": {"labels": {"x": "1"}}})
        await eventually_fn(lambda: ("update", "a") in recorder.events)
        assert informer.get(NS, "a")["metadata"]["labels"] == {"x": "1"}  # type: ignore[index]
        await client.delete(POD, NS, "a")
        await eventually_fn(lambda: informer.get(NS, "a") is None)
        assert recorder.events[-1] == ("delete", "a") or ("delete", "a") in recorder.events
    finally:
        await factory.__aexit__(None, None, None)


async def test_an_update_by_version_handler_is_told_the_old_version_and_others_still_get_the_old_copy(
    counting_kube_client: CountingKubeClient, eventually_fn: Any
) -> None:
    client = counting_kube_client
    await client.create(POD, pod("a", v="1"))
    factory, informer, recorder = await started(client, FakeClock())
    by_version: list[tuple[str | None, str]] = []
    with_copy: list[tuple[dict[str, Any] | None, dict[str, Any]]] = []
    informer.add_callbacks(
        on_update_version=lambda old_rv, new: by_version.append((old_rv, new["metadata"]["resourceVersion"]))
    )
    informer.add_callbacks(on_update=lambda old, new: with_copy.append((old, new)))
    try:
        first = informer.get(NS, "a")
        assert first is not None
        await client.patch(POD, NS, "a", {"metadata": {"labels": {"v": "2"}}})
        await eventually_fn(lambda: len(by_version) == 1 and len(with_copy) == 1)
        old_rv, new_rv = by_version[0]
        assert old_rv == first["metadata"]["resourceVersion"] and new_rv != old_rv
        old, new = with_copy[0]
        assert old is not None and old["metadata"]["labels"] == {"v": "1"}
        assert new["metadata"]["labels"] == {"v": "2"}
        assert ("update", "a") in recorder.events
        with pytest.raises(ValueError, match="not both"):
            informer.add_callbacks(on_update=lambda old, new: None, on_update_version=lambda rv, new: None)
    finally:
        await factory.__aexit__(None, None, None)


async def test_informer_resumes_from_the_last_resource_version_after_a_clean_stream_end(
    local_cluster: Any, counting_kube_client: CountingKubeClient, eventually_fn: Any
) -> None:
    client = counting_kube_client
    await client.create(POD, pod("a"))
    factory, informer, recorder = await started(client, FakeClock())
    try:
        await client.create(POD, pod("b"))
        await eventually_fn(lambda: ("add", "b") in recorder.events)
        last_seen = informer.resource_version
        watches = client.calls["watch"]
        local_cluster.drop_watches()
        await eventually_fn(lambda: client.calls["watch"] == watches + 1)
        assert client.watch_versions[-1] == last_seen
        await client.create(POD, pod("c"))
        await eventually_fn(lambda: ("add", "c") in recorder.events)
        assert client.calls["list"] == 1
        assert informer.stats["relists"] == 0
    finally:
        await factory.__aexit__(None, None, None)


async def test_informer_relists_and_reconciles_after_410(
    local_cluster: Any, counting_kube_client: CountingKubeClient, eventually_fn: Any
) -> None:
    client = counting_kube_client
    for name in ("keep", "change", "vanish"):
        await client.create(POD, pod(name))
    factory, informer, recorder = await started(client, FakeClock())
    try:
        recorder.events.clear()
        # Hold the next watch so the changes below happen while nobody watches, then compact them away.
        client.watch_gate.clear()
        local_cluster.drop_watches()
        watches = client.calls["watch"]
        await eventually_fn(lambda: client.calls["watch"] == watches + 1)
        await client.delete(POD, NS, "vanish")
        await client.patch(POD, NS, "change", {"metadata": {"labels": {"v": "2"}}})
        await client.create(POD, pod("new"))
        local_cluster.compact()
        client.watch_gate.set()
        await eventually_fn(lambda: client.calls["list"] == 2 and informer.get(NS, "new") is not None)
        await eventually_fn(lambda: len(recorder.events) >= 3)
        assert sorted(recorder.events) == [("add", "new"), ("delete", "vanish"), ("update", "change")]
        assert informer.get(NS, "vanish") is None
        assert informer.get(NS, "change")["metadata"]["labels"] == {"v": "2"}  # type: ignore[index]
        assert informer.stats["relists"] == 1
    finally:
        await factory.__aexit__(None, None, None)


@pytest.mark.parametrize("status", [500, 429, 504])
async def test_informer_backs_off_exponentially_on_api_errors_through_the_clock(
    local_cluster: Any, counting_kube_client: CountingKubeClient, eventually_fn: Any, status: int
) -> None:
    client = counting_kube_client
    clock = FakeClock()
    factory, informer, _ = await started(client, clock)
    try:
        local_cluster.faults.fail("watch", status, times=3)
        watches = client.calls["watch"]
        local_cluster.drop_watches()
        await eventually_fn(lambda: client.calls["watch"] == watches + 1 and clock.sleepers == 1)
        # 0.5 s, then 1 s, then 2 s: nothing retries before its delay has passed.
        for delay in (0.5, 1.0, 2.0):
            calls = client.calls["watch"]
            await clock.advance(delay * 0.9)
            assert client.calls["watch"] == calls
            await clock.advance(delay * 0.1)
            await eventually_fn(lambda c=calls: client.calls["watch"] == c + 1)  # type: ignore[misc]
        assert informer.stats["backoffs"] == 3
        await client.create(POD, pod("after"))
        await eventually_fn(lambda: informer.get(NS, "after") is not None)
    finally:
        await factory.__aexit__(None, None, None)


async def test_informer_backs_off_on_refused_connections_before_the_first_list(
    counting_kube_client: CountingKubeClient, eventually_fn: Any
) -> None:
    client = counting_kube_client
    client.refuse_connections("list", 2)
    clock = FakeClock()
    factory = InformerFactory(client, clock=clock, max_backoff=0.75)
    informer = factory.informer(POD)
    async with factory:
        await eventually_fn(lambda: clock.sleepers == 1)
        assert not informer.has_synced
        await clock.advance(0.5)
        await eventually_fn(lambda: client.calls["list"] == 2 and clock.sleepers == 1)
        # Capped: the second delay is 0.75 s, not 1 s.
        await clock.advance(0.75)
        await informer.wait_synced()
        assert informer.stats["backoffs"] == 2


async def test_informer_factory_shares_one_informer_per_type_and_stops_its_tasks_cleanly(
    counting_kube_client: CountingKubeClient,
) -> None:
    factory = InformerFactory(counting_kube_client, clock=FakeClock())
    async with factory:
        first = factory.informer(POD)
        assert factory.informer(POD) is first
        assert factory.informer(POD, namespace=NS) is not first
        await first.wait_synced()
    leftover = [t for t in asyncio.all_tasks() if t is not asyncio.current_task() and "Informer" in repr(t)]
    assert leftover == []


async def test_a_handler_added_after_sync_is_replayed_the_cache(
    counting_kube_client: CountingKubeClient,
) -> None:
    await counting_kube_client.create(POD, pod("a"))
    factory, informer, _ = await started(counting_kube_client, FakeClock())
    try:
        late = Recorder()
        informer.add_handler(late)
        assert late.events == [("add", "a")]
    finally:
        await factory.__aexit__(None, None, None)


async def test_an_informer_that_lost_contact_answers_no_reads_until_the_api_answers_again(
    local_cluster: Any, counting_kube_client: CountingKubeClient, eventually_fn: Any
) -> None:
    # A cache the informer cannot keep current does not answer: the plugin manager then asks the API,
    # and learns that it cannot be reached (a round error), instead of reporting a stale phase for ever.
    client = counting_kube_client
    await client.create(POD, pod("a"))
    clock = FakeClock()
    factory, informer, _ = await started(client, clock)
    try:
        assert informer.get(NS, "a") is not None
        client.refuse_connections("watch", 1)
        local_cluster.drop_watches()
        await eventually_fn(lambda: clock.sleepers == 1)  # backing off after the refused watch
        assert informer.get(NS, "a") is None
        assert len(informer.list()) == 1  # what it last saw is kept, to reconcile against
        await clock.advance(0.5)
        await client.create(POD, pod("b"))  # an event: the API answers again
        await eventually_fn(lambda: informer.get(NS, "b") is not None)
        assert informer.get(NS, "a") is not None
    finally:
        await factory.__aexit__(None, None, None)
