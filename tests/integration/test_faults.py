"""The API misbehaving while tasks run: every task still reaches Success, each pod is created exactly once,
and nothing is left behind.

Faults are scripted at the API boundary (``cluster.faults``), so they reach the in-process client and
lightkube over HTTP alike: 500 InternalError, 429 TooManyRequests, 504 Timeout and 500 ServerTimeout on
create / get / list / watch, watch streams ended by the server (``drop_watches``), and a resume from a
compacted version (410 Expired, then a relist). Pods are simulated on the real clock; the executor resyncs
every 50 ms, so progress never waits on a long timer.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from support.waiting import wait_until
from taskplug.core import Phase
from taskplug.executor import ExecutionSpec, Platform
from taskplug.executor._executor import ExecutionResult, Executor
from taskplug.executor._runtime import open_executor
from taskplug.executor._store import MemoryStateStore
from taskplug.k8s import POD, KubeApiError
from taskplug.localcluster import ANNOTATION_DURATION, NAMESPACE, LocalCluster

from .conftest import PodLedger, container_spec, kube_client_for, make_platform, phase_of, pods_in

DEADLINE = 30.0
TASKS = 4


class FaultSpy:
    """Counts the scripted errors the API actually answered, per verb (a fault never hit proves nothing)."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.raised: Counter[str] = Counter()
        self.in_flight = 0  # calls held by a delay right now
        inner = cluster.faults.check

        async def check(verb: str, plural: str) -> None:
            self.in_flight += 1
            try:
                await inner(verb, plural)
            except KubeApiError:
                self.raised[verb] += 1
                raise
            finally:
                self.in_flight -= 1

        cluster.faults.check = check  # type: ignore[method-assign]


def _client_watches(cluster: LocalCluster) -> int:
    return sum(1 for w in cluster.store.watchers() if not w.internal)


def _platform(tmp_path: Path) -> Platform:
    # Finalizers on, deleted on finalize: a leaked pod or a finalizer left behind shows as a pod that remains.
    return make_platform(
        tmp_path,
        k8s={"inject-finalizer": True, "delete-resource-on-finalize": True},
        executor={"resync-period": "50ms"},
    )


def _specs(prefix: str, duration: float = 0.0) -> list[ExecutionSpec]:
    annotations = {ANNOTATION_DURATION: str(duration)}
    return [container_spec(f"{prefix}{i}", annotations=annotations) for i in range(TASKS)]


def _inject(cluster: LocalCluster, verb: Any, status: int | str, times: int) -> None:
    if status == "ServerTimeout":
        cluster.faults.server_timeout(verb, POD, times=times)
    else:
        assert isinstance(status, int)
        cluster.faults.fail(verb, status, times=times, plural="pods")


async def _run_all(ex: Executor, specs: Sequence[ExecutionSpec]) -> list[ExecutionResult]:
    keys = [await ex.submit(spec) for spec in specs]
    return list(await asyncio.wait_for(asyncio.gather(*(ex.wait(k) for k in keys)), DEADLINE))


def _assert_each_task_succeeded_once_and_left_nothing(
    results: Sequence[ExecutionResult], ledger: PodLedger, cluster: LocalCluster
) -> None:
    assert [(r.phase, r.attempts) for r in results] == [("Success", 1)] * len(results), [
        r.error for r in results
    ]
    assert len(ledger.added) == len(results)
    assert ledger.created_twice() == {}
    assert pods_in(cluster) == {}


@pytest.fixture
async def cluster() -> AsyncIterator[LocalCluster]:
    async with LocalCluster(mode="simulated") as local:
        yield local


@pytest.mark.parametrize("status", [500, 429, 504, "ServerTimeout"])
async def test_errors_answering_create_never_create_a_pod_twice(
    status: int | str, kube_access: str, cluster: LocalCluster, tmp_path: Path
) -> None:
    ledger, spy = PodLedger(cluster), FaultSpy(cluster)
    _inject(cluster, "create", status, times=3)
    async with (
        kube_client_for(cluster, kube_access, tmp_path) as client,
        open_executor(_platform(tmp_path), kube_client=client, store=MemoryStateStore()) as ex,
    ):
        results = await _run_all(ex, _specs("c"))
    assert spy.raised["create"] == 3
    _assert_each_task_succeeded_once_and_left_nothing(results, ledger, cluster)
    if status in (429, "ServerTimeout"):
        # Back-off errors are waits, not failures: a task that met one went through WaitingForResources.
        waited = [r for r in results if "WaitingForResources" in [e["phase"] for e in r.events]]
        assert waited


@pytest.mark.parametrize("status", [500, 429, 504])
async def test_errors_answering_get_are_retried_until_the_object_is_seen(
    status: int, kube_access: str, cluster: LocalCluster, tmp_path: Path
) -> None:
    ledger, spy = PodLedger(cluster), FaultSpy(cluster)
    # Hold the informer's first list so the executor must GET what it created, and the GETs fail first.
    cluster.faults.delay("list", 0.5, times=1, plural="pods")
    cluster.faults.fail("get", status, times=3, plural="pods")
    async with (
        kube_client_for(cluster, kube_access, tmp_path) as client,
        open_executor(_platform(tmp_path), kube_client=client, store=MemoryStateStore()) as ex,
    ):
        results = await _run_all(ex, _specs("g"))
    assert spy.raised["get"] == 3
    _assert_each_task_succeeded_once_and_left_nothing(results, ledger, cluster)


@pytest.mark.parametrize("status", [500, 429, 504])
async def test_errors_answering_list_and_watch_when_the_informer_starts_delay_but_do_not_break_tasks(
    status: int, kube_access: str, cluster: LocalCluster, tmp_path: Path
) -> None:
    ledger, spy = PodLedger(cluster), FaultSpy(cluster)
    cluster.faults.fail("list", status, times=1, plural="pods")
    cluster.faults.fail("watch", status, times=1, plural="pods")
    async with (
        kube_client_for(cluster, kube_access, tmp_path) as client,
        open_executor(_platform(tmp_path), kube_client=client, store=MemoryStateStore()) as ex,
    ):
        results = await _run_all(ex, _specs("l", duration=1.0))
        await wait_until(lambda: spy.raised["watch"] == 1, what="the informer tried to watch")
    assert spy.raised["list"] == 1
    _assert_each_task_succeeded_once_and_left_nothing(results, ledger, cluster)


@pytest.mark.parametrize("status", [500, 429, 504])
async def test_a_watch_dropped_mid_run_that_fails_to_resume_recovers(
    status: int, kube_access: str, cluster: LocalCluster, tmp_path: Path
) -> None:
    ledger, spy = PodLedger(cluster), FaultSpy(cluster)
    async with (
        kube_client_for(cluster, kube_access, tmp_path) as client,
        open_executor(_platform(tmp_path), kube_client=client, store=MemoryStateStore()) as ex,
    ):
        keys = [await ex.submit(spec) for spec in _specs("w", duration=0.5)]
        await wait_until(lambda: all(phase_of(ex, k) is Phase.RUNNING for k in keys), what="all running")
        await wait_until(lambda: _client_watches(cluster) > 0, what="the informer watches")
        cluster.faults.fail("watch", status, times=1, plural="pods")
        assert cluster.drop_watches() >= 1
        results = list(await asyncio.wait_for(asyncio.gather(*(ex.wait(k) for k in keys)), DEADLINE))
    assert spy.raised["watch"] == 1
    _assert_each_task_succeeded_once_and_left_nothing(results, ledger, cluster)


@pytest.mark.parametrize("status", [500, 429, 504])
async def test_a_resume_from_a_compacted_version_relists_even_when_the_relist_fails_first(
    status: int, kube_access: str, cluster: LocalCluster, tmp_path: Path
) -> None:
    ledger, spy = PodLedger(cluster), FaultSpy(cluster)
    async with (
        kube_client_for(cluster, kube_access, tmp_path) as client,
        open_executor(_platform(tmp_path), kube_client=client, store=MemoryStateStore()) as ex,
    ):
        keys = [await ex.submit(spec) for spec in _specs("x", duration=0.5)]
        await wait_until(lambda: all(phase_of(ex, k) is Phase.RUNNING for k in keys), what="all running")
        await wait_until(lambda: _client_watches(cluster) > 0, what="the informer watches")
        # The watch ends and its first resume fails; while the informer backs off, the API moves on and
        # compacts, so the next resume answers 410 Expired; then the relist fails once too.
        cluster.faults.fail("watch", 500, times=1, plural="pods")
        cluster.faults.fail("list", status, times=1, plural="pods")
        assert cluster.drop_watches() >= 1
        await wait_until(lambda: spy.raised["watch"] == 1, what="the resume failed")
        await cluster.client().create(NAMESPACE, {"metadata": {"name": "moved-on"}})
        cluster.compact()
        results = list(await asyncio.wait_for(asyncio.gather(*(ex.wait(k) for k in keys)), DEADLINE))
        await wait_until(lambda: spy.raised["list"] == 1, what="the informer relisted")
    _assert_each_task_succeeded_once_and_left_nothing(results, ledger, cluster)


async def test_watches_dropped_again_and_again_and_compactions_lose_no_task(
    kube_access: str, cluster: LocalCluster, tmp_path: Path
) -> None:
    ledger = PodLedger(cluster)
    async with (
        kube_client_for(cluster, kube_access, tmp_path) as client,
        open_executor(_platform(tmp_path), kube_client=client, store=MemoryStateStore()) as ex,
    ):
        keys = [await ex.submit(spec) for spec in _specs("d", duration=0.3)]
        waiter = asyncio.ensure_future(asyncio.gather(*(ex.wait(k) for k in keys)))
        for round_ in range(20):
            if waiter.done():
                break
            if round_ % 3 == 2:
                cluster.compact()
            cluster.drop_watches()
            await asyncio.wait({waiter}, timeout=0.05)
        results = list(await asyncio.wait_for(waiter, DEADLINE))
    _assert_each_task_succeeded_once_and_left_nothing(results, ledger, cluster)


@pytest.mark.integration
async def test_a_create_the_client_gave_up_on_creates_one_pod(cluster: LocalCluster, tmp_path: Path) -> None:
    ledger, spy = PodLedger(cluster), FaultSpy(cluster)
    # The API holds the first create longer than lightkube waits: the client times out and the executor
    # tries again; whether the held request then lands (409 for it) or is dropped, one pod exists.
    cluster.faults.delay("create", 1.0, times=1, plural="pods")
    async with (
        kube_client_for(cluster, "http", tmp_path, request_timeout=0.3) as client,
        open_executor(_platform(tmp_path), kube_client=client, store=MemoryStateStore()) as ex,
    ):
        results = await _run_all(ex, _specs("t")[:1])
        await wait_until(lambda: spy.in_flight == 0, what="the held create is answered or dropped")
    _assert_each_task_succeeded_once_and_left_nothing(results, ledger, cluster)
