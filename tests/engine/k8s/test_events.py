"""The event watcher (flytepropeller's nodes/task/k8s/event_watcher.go) fed by an Event informer on the
local cluster."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from taskplug.core import FakeClock
from taskplug.engine.k8s._events import EventWatcher
from taskplug.engine.k8s._informer import InformerFactory
from taskplug.k8s import EVENT

if TYPE_CHECKING:
    from conftest import CountingKubeClient

NS = "default"


def event(name: str, regarding: str, note: str, kind: str = "Pod") -> dict[str, Any]:
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": NS},
        "regarding": {"kind": kind, "namespace": NS, "name": regarding},
        "reason": "Test",
        "note": note,
        "type": "Normal",
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "test",
        "reportingInstance": "test",
        "action": "Test",
    }


async def test_events_are_indexed_by_the_object_they_regard_and_listed_oldest_first(
    counting_kube_client: CountingKubeClient, eventually_fn: Any
) -> None:
    client = counting_kube_client
    clock = FakeClock()
    async with InformerFactory(client, clock=clock) as factory:
        watcher = EventWatcher.attach(factory)
        assert EventWatcher.attach(factory) is watcher
        await watcher.informer.wait_synced()
        await client.create(EVENT, event("e1", "p", "first"))
        await client.create(EVENT, event("e2", "p", "second"))
        await client.create(EVENT, event("e3", "q", "other pod"))
        await client.create(EVENT, event("e4", "p", "same name, other kind", kind="SparkApplication"))
        await eventually_fn(lambda: len(watcher.informer) == 4)

        listed = watcher.list("Pod", NS, "p")
        assert [e.note for e in listed] == ["first", "second"]
        assert watcher.list("Pod", NS, "unknown") == []
        assert [e.note for e in watcher.list("SparkApplication", NS, "p")] == ["same name, other kind"]
        assert watcher.list("Pod", NS, "p", after=listed[-1].created_at) == []
        assert len(watcher.list("Pod", NS, "p", after=datetime(2000, 1, 1, tzinfo=UTC))) == 2

        await client.delete(EVENT, NS, "e1")
        await client.delete(EVENT, NS, "e3")
        await eventually_fn(lambda: len(watcher.informer) == 2)
        assert [e.note for e in watcher.list("Pod", NS, "p")] == ["second"]
        assert watcher.list("Pod", NS, "q") == []
