"""The reconciling operator kit (``taskplug.k8s._reconciling``): its pure helpers, its idempotent create and
delete, and the controller loop (object and pod events, requeues on the operator's clock or in real time,
retries, the garbage collection it stands in for) on the simulated embedded cluster."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest

from taskplug.core import FakeClock
from taskplug.k8s import (
    POD,
    KubeApiError,
    KubeClient,
    ObjectKey,
    ReconcilingOperator,
    Requeue,
    ResourceType,
    WatchEvent,
    create_or_get,
    delete_if_present,
    is_invalid,
    loopback_port,
    owned_by,
    owner_reference,
)
from taskplug.localcluster import NAMESPACE, LocalCluster

WIDGET = ResourceType("example.com/v1", "Widget", "widgets")
NS = "widgets"

KubeObject = dict[str, Any]


def widget(name: str) -> KubeObject:
    return {
        "apiVersion": WIDGET.api_version,
        "kind": WIDGET.kind,
        "metadata": {"name": name, "namespace": NS},
    }


def pod_for(owner: Mapping[str, Any]) -> KubeObject:
    meta = owner["metadata"]
    return {
        "metadata": {
            "name": f"{meta['name']}-pod",
            "namespace": meta["namespace"],
            "ownerReferences": [owner_reference(owner)],
        },
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]},
    }


# -- the pure helpers -------------------------------------------------------------------------------------


def test_owner_reference_is_the_controller_reference_controller_runtime_writes() -> None:
    owner = {**widget("w"), "metadata": {"name": "w", "namespace": NS, "uid": "u-1"}}
    assert owner_reference(owner) == {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "name": "w",
        "uid": "u-1",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    assert owner_reference(owner, controller=False)["controller"] is False


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        ({"ownerReferences": [{"uid": "a"}, {"uid": "u-1", "controller": False}]}, True),
        ({"ownerReferences": [{"uid": "a"}]}, False),
        ({"ownerReferences": None}, False),
        ({}, False),
    ],
)
def test_owned_by_looks_for_the_uid_among_the_owner_references(
    metadata: dict[str, Any], expected: bool
) -> None:
    assert owned_by({"metadata": metadata}, "u-1") is expected
    assert owned_by({}, "u-1") is False


def test_loopback_port_is_free_on_127_0_0_1() -> None:
    port = loopback_port()
    assert 0 < port < 65536
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", port))  # free: the kernel handed it out and nobody took it


def test_a_requeue_is_on_the_operators_clock_unless_it_says_real_time() -> None:
    requeue = Requeue(5)
    assert requeue.real_time is False
    with pytest.raises(dataclasses.FrozenInstanceError):
        requeue.seconds = 1  # type: ignore[misc]


# -- create_or_get and delete_if_present ------------------------------------------------------------------


@pytest.fixture
async def cluster() -> AsyncIterator[LocalCluster]:
    async with LocalCluster(mode="simulated", bookmark_interval=0) as local:
        local.register_resource(WIDGET)
        await local.client().create(NAMESPACE, {"metadata": {"name": NS}})
        yield local


async def test_create_or_get_returns_what_an_earlier_reconcile_created(cluster: LocalCluster) -> None:
    client = cluster.client()
    created = await create_or_get(client, WIDGET, widget("w"))
    again = await create_or_get(client, WIDGET, {**widget("w"), "spec": {"size": 3}})
    assert again["metadata"]["uid"] == created["metadata"]["uid"]
    assert "spec" not in again  # the stored object, not the one offered the second time


async def test_create_or_get_raises_what_is_not_already_exists(cluster: LocalCluster) -> None:
    with pytest.raises(KubeApiError) as info:
        await create_or_get(cluster.client(), WIDGET, widget("Not_A_Name"))
    assert is_invalid(info.value)


async def test_delete_if_present_deletes_and_ignores_what_is_gone(cluster: LocalCluster) -> None:
    client = cluster.client()
    await client.create(WIDGET, widget("w"))
    await delete_if_present(client, WIDGET, NS, "w")
    assert cluster.store.try_get(WIDGET, NS, "w") is None
    await delete_if_present(client, WIDGET, NS, "w")  # already gone: no error


# -- the controller ---------------------------------------------------------------------------------------


class WidgetOperator(ReconcilingOperator):
    """One pod per Widget; the Widget is ``Done`` once its pod has succeeded; a deleted Widget's pods go."""

    def __init__(self, clock: FakeClock | None = None) -> None:
        super().__init__(WIDGET, clock=clock)
        self.calls: asyncio.Queue[str] = asyncio.Queue()
        self.cleaned: list[tuple[str, str, str]] = []
        self.answers: list[Requeue | Exception | None] = []  # per call, then None

    def owner_of_pod(self, pod: Mapping[str, Any]) -> ObjectKey | None:
        meta = pod.get("metadata") or {}
        for ref in meta.get("ownerReferences") or []:
            if ref.get("kind") == WIDGET.kind:
                return (str(meta.get("namespace") or ""), str(ref.get("name") or ""))
        return None

    async def reconcile(self, client: KubeClient, obj: KubeObject) -> Requeue | None:
        name = obj["metadata"]["name"]
        self.calls.put_nowait(name)
        answer = self.answers.pop(0) if self.answers else None
        if isinstance(answer, Exception):
            raise answer
        if obj.get("spec", {}).get("pod"):
            pod = await create_or_get(client, POD, pod_for(obj))
            done = (pod.get("status") or {}).get("phase") == "Succeeded"
            if done and (obj.get("status") or {}).get("phase") != "Done":
                await client.patch(WIDGET, NS, name, {"status": {"phase": "Done"}})
        return answer

    async def cleanup(self, client: KubeClient, namespace: str, name: str, uid: str) -> None:
        self.cleaned.append((namespace, name, uid))
        pods, _ = await client.list(POD, namespace)
        for pod in pods:
            if owned_by(pod, uid):
                await delete_if_present(client, POD, namespace, pod["metadata"]["name"])


async def next_call(operator: WidgetOperator) -> str:
    async with asyncio.timeout(10):  # a bound on a hang, not a timing
        return await operator.calls.get()


async def test_the_pods_progress_reconciles_the_object_that_owns_it(cluster: LocalCluster) -> None:
    operator = WidgetOperator()
    cluster.register_operator(WIDGET, operator)
    await cluster.client().create(WIDGET, {**widget("w"), "spec": {"pod": True}})
    # The first reconcile finds a new pod; only the pod's own events can bring the Widget to Done.
    done = await cluster.wait_for(WIDGET, NS, "w", lambda w: (w.get("status") or {}).get("phase") == "Done")
    assert done["status"] == {"phase": "Done"}
    pod = cluster.store.get(POD, NS, "w-pod")
    assert owned_by(pod, done["metadata"]["uid"])


async def test_a_deleted_object_has_what_it_owned_deleted(cluster: LocalCluster) -> None:
    operator = WidgetOperator()
    cluster.register_operator(WIDGET, operator)
    client = cluster.client()
    created = await client.create(WIDGET, {**widget("w"), "spec": {"pod": True}})
    await cluster.wait_for(POD, NS, "w-pod", lambda _pod: True)
    await client.create(POD, {**pod_for(widget("other")), "metadata": {"name": "unowned", "namespace": NS}})
    await client.delete(WIDGET, NS, "w")
    for _ in range(1000):  # bounded: the cleanup runs on the DELETED event
        if cluster.store.try_get(POD, NS, "w-pod") is None:
            break
        await asyncio.sleep(0.01)
    assert cluster.store.try_get(POD, NS, "w-pod") is None
    assert cluster.store.try_get(POD, NS, "unowned") is not None
    assert operator.cleaned == [(NS, "w", created["metadata"]["uid"])]


async def test_a_requeue_waits_for_the_operators_clock(cluster: LocalCluster) -> None:
    clock = FakeClock()
    operator = WidgetOperator(clock)
    operator.answers = [Requeue(60)]
    cluster.register_operator(WIDGET, operator)
    await cluster.client().create(WIDGET, widget("w"))
    assert await next_call(operator) == "w"
    for _ in range(1000):  # bounded: the requeue timer starts sleeping right after the reconcile
        if clock.sleepers:
            break
        await asyncio.sleep(0)
    assert clock.sleepers == 1
    await clock.advance(59)
    assert operator.calls.empty()  # nothing else moves the Widget: only the clock can
    await clock.advance(1)
    assert await next_call(operator) == "w"


async def test_a_real_time_requeue_does_not_wait_for_the_clock(cluster: LocalCluster) -> None:
    clock = FakeClock()
    operator = WidgetOperator(clock)
    operator.answers = [Requeue(0.01, real_time=True)]
    cluster.register_operator(WIDGET, operator)
    await cluster.client().create(WIDGET, widget("w"))
    assert [await next_call(operator), await next_call(operator)] == ["w", "w"]
    assert clock.monotonic() == 0


async def test_a_failed_reconcile_is_retried(cluster: LocalCluster) -> None:
    operator = WidgetOperator()
    operator.answers = [RuntimeError("flaky")]
    cluster.register_operator(WIDGET, operator)
    await cluster.client().create(WIDGET, {**widget("w"), "spec": {"pod": True}})
    assert await next_call(operator) == "w"
    assert await next_call(operator) == "w"  # the retry, after the failure
    await cluster.wait_for(POD, NS, "w-pod", lambda _pod: True)


async def test_an_operator_called_directly_is_closed_by_aclose(cluster: LocalCluster) -> None:
    def controllers() -> list[asyncio.Task[Any]]:
        return [
            t for t in asyncio.all_tasks() if t.get_name() == "WidgetOperator-controller" and not t.done()
        ]

    operator = WidgetOperator()
    client = cluster.client()
    created = await client.create(WIDGET, widget("w"))
    await operator(WatchEvent("ADDED", created), client)
    await operator(WatchEvent("BOOKMARK", created), client)  # not a change: ignored
    assert await next_call(operator) == "w"
    assert len(controllers()) == 1
    await operator.aclose()
    assert controllers() == []
    assert operator.calls.empty()
