"""Run tasks to completion on Kubernetes: the whole path (spec → Platform → open_executor → plugin manager →
local cluster), with the executor reaching the cluster in-process and over HTTP with lightkube.

Real containers (process mode) run on the real clock under deadlines; rules about time (image pull grace,
pending timeout, quota back-off, resync after an external deletion) run in simulated mode on a FakeClock
that the test advances.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from support.waiting import wait_until
from taskplug.core import FakeClock, Phase
from taskplug.engine.k8s._plugin_manager import FINALIZER
from taskplug.executor._runtime import open_executor
from taskplug.executor._store import MemoryStateStore
from taskplug.k8s import POD
from taskplug.localcluster import ANNOTATION_DURATION, RESOURCE_QUOTA, LocalCluster

from .conftest import (
    NAMESPACE,
    WRITE_OUTPUT,
    PodLedger,
    advance_until_done,
    container_spec,
    kube_client_for,
    make_platform,
    phase_of,
    pods_in,
)

DEADLINE = 30.0


def _process_cluster() -> LocalCluster:
    return LocalCluster(mode="process", memory_poll_interval=0.02, kill_grace_seconds=1.0)


def _codes(events: list[dict[str, Any]]) -> list[str]:
    return [e["error"]["code"] for e in events if e.get("error")]


# -- real containers -----------------------------------------------------------------------------------------


async def test_a_container_task_succeeds_with_the_outputs_it_wrote(kube_access: str, tmp_path: Path) -> None:
    platform = make_platform(tmp_path)
    async with (
        _process_cluster() as cluster,
        kube_client_for(cluster, kube_access, tmp_path) as client,
        open_executor(platform, kube_client=client, store=MemoryStateStore()) as ex,
    ):
        ledger = PodLedger(cluster)
        result = await asyncio.wait_for(ex.run(container_spec("ok", WRITE_OUTPUT, greeting=True)), DEADLINE)
    assert result.phase == "Success", result.error
    assert (result.attempts, result.error) == (1, None)
    assert result.outputs == {"greeting": "hello, world"}
    phases = [e["phase"] for e in result.events]
    assert phases[0] == "Queued" and phases[-1] == "Success"
    assert "Running" in phases
    assert list(ledger.added) == ["ok-n0-0"] and not ledger.created_twice()


async def test_a_non_zero_exit_is_a_user_failure_retried_per_max_attempts_then_failed(
    kube_access: str, tmp_path: Path
) -> None:
    platform = make_platform(tmp_path)
    async with (
        _process_cluster() as cluster,
        kube_client_for(cluster, kube_access, tmp_path) as client,
        open_executor(platform, kube_client=client, store=MemoryStateStore()) as ex,
    ):
        ledger = PodLedger(cluster)
        spec = container_spec("fails", "import sys; sys.exit(3)", max_attempts=2)
        result = await asyncio.wait_for(ex.run(spec), DEADLINE)
    # The budget is spent: Flyte fails the node with RetriesExhausted|<the last code>, the last error after "::".
    assert (result.phase, result.attempts) == ("PermanentFailure", 2)
    assert result.error is not None
    assert (result.error["code"], result.error["kind"]) == ("RetriesExhausted|Error", "USER")
    assert "exit code (3)" in result.error["message"]
    failures = [e for e in result.events if e["phase"] == "RetryableFailure"]
    assert [e["attempt"] for e in failures] == [0, 1]
    assert sorted(ledger.added) == ["fails-n0-0", "fails-n0-1"] and not ledger.created_twice()


async def test_a_container_allocating_past_its_memory_limit_is_oom_killed_and_retried_as_a_user_failure(
    kube_access: str, tmp_path: Path
) -> None:
    platform = make_platform(tmp_path)
    hog = "import time\nhog = b'x' * (512 << 20)\ntime.sleep(60)"
    async with (
        _process_cluster() as cluster,
        kube_client_for(cluster, kube_access, tmp_path) as client,
        open_executor(platform, kube_client=client, store=MemoryStateStore()) as ex,
    ):
        spec = container_spec("oom", hog, max_attempts=2, limits={"memory": "64Mi"})
        result = await asyncio.wait_for(ex.run(spec), DEADLINE)
        pod = pods_in(cluster)["oom-n0-1"]
    # The budget is spent: Flyte fails the node with RetriesExhausted|<the last code>, the last error after "::".
    assert (result.phase, result.attempts) == ("PermanentFailure", 2)
    assert result.error is not None
    assert (result.error["code"], result.error["kind"]) == ("RetriesExhausted|OOMKilled", "USER")
    assert _codes(result.events) == ["OOMKilled", "OOMKilled", "RetriesExhausted|OOMKilled"]
    terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["reason"], terminated["exitCode"]) == ("OOMKilled", 137)


async def test_aborting_a_running_task_leaves_no_pod_and_no_finalizer(
    kube_access: str, tmp_path: Path
) -> None:
    platform = make_platform(tmp_path, k8s={"inject-finalizer": True})
    async with (
        _process_cluster() as cluster,
        kube_client_for(cluster, kube_access, tmp_path) as client,
        open_executor(platform, kube_client=client, store=MemoryStateStore()) as ex,
    ):
        key = await ex.submit(container_spec("long", "import time; time.sleep(120)"))
        await wait_until(lambda: phase_of(ex, key) is Phase.RUNNING, what="the task runs")
        assert pods_in(cluster)["long-n0-0"]["metadata"]["finalizers"] == [FINALIZER]
        ex.abort(key)
        result = await asyncio.wait_for(ex.wait(key), DEADLINE)
        assert result.phase == "Aborted"
        assert result.events[-1]["phase"] == "Aborted"
        # The pod is gone (not merely terminating): the finalizer was removed and nothing holds it.
        assert pods_in(cluster) == {}


async def test_finalize_deletes_the_pod_after_success_when_configured(
    kube_access: str, tmp_path: Path
) -> None:
    platform = make_platform(tmp_path, k8s={"delete-resource-on-finalize": True, "inject-finalizer": True})
    async with (
        _process_cluster() as cluster,
        kube_client_for(cluster, kube_access, tmp_path) as client,
        open_executor(platform, kube_client=client, store=MemoryStateStore()) as ex,
    ):
        ledger = PodLedger(cluster)
        result = await asyncio.wait_for(ex.run(container_spec("tidy", "print('done')")), DEADLINE)
        assert result.phase == "Success"
        assert pods_in(cluster) == {}
        assert ledger.deleted == {"tidy-n0-0"}


# -- time rules on a fake clock ---------------------------------------------------------------------------


async def test_a_pod_that_changed_before_the_informer_listed_it_still_wakes_its_execution(
    kube_access: str, tmp_path: Path
) -> None:
    clock = FakeClock()
    platform = make_platform(tmp_path, k8s={"default-node-selector": {"pool": "nowhere"}}, clock=clock)
    async with (
        LocalCluster(mode="simulated", clock=clock) as cluster,
        kube_client_for(cluster, kube_access, tmp_path) as client,
        open_executor(platform, kube_client=client, store=MemoryStateStore()) as ex,
    ):
        # The informer's first list is held while the pod is created and marked Unschedulable, so that
        # change reaches the executor in the list, never as a watch event.
        cluster.faults.delay("list", 5.0, plural="pods", times=1)
        key = await ex.submit(container_spec("early"))
        await wait_until(lambda: ex.status(key).reason == "task submitted to K8s", what="created")
        await wait_until(lambda: bool(pods_in(cluster)["early-n0-0"].get("status")), what="scheduled")
        await clock.advance(5.0)  # the list answers; the executor's resync (10 s) is still far away
        await wait_until(lambda: "Unschedulable" in ex.status(key).reason, what="woken by the list")


async def test_an_image_that_cannot_be_pulled_fails_after_the_grace_period_and_is_cleaned_up(
    kube_access: str, tmp_path: Path
) -> None:
    clock = FakeClock()
    platform = make_platform(tmp_path, k8s={"image-pull-backoff-grace-period": "30s"}, clock=clock)
    async with (
        LocalCluster(mode="simulated", clock=clock, image_pull_failures=["registry.invalid/*"]) as cluster,
        kube_client_for(cluster, kube_access, tmp_path) as client,
        open_executor(platform, kube_client=client, store=MemoryStateStore()) as ex,
    ):
        key = await ex.submit(container_spec("pull", image="registry.invalid/nope:v1"))
        await wait_until(lambda: "ImagePullBackOff" in ex.status(key).reason, what="image pull back-off")
        assert phase_of(ex, key) is Phase.INITIALIZING  # within the grace period
        result = await advance_until_done(clock, ex, key)
        assert result.phase == "PermanentFailure"  # the budget is spent: RetriesExhausted|<the last code>
        assert result.error is not None
        assert (result.error["code"], result.error["kind"]) == (
            "RetriesExhausted|ContainersNotReady|ImagePullBackOff",
            "USER",
        )
        assert "Grace period [30s] exceeded" in result.error["message"]
        assert pods_in(cluster) == {}  # cleanup on failure deleted it


async def test_a_pod_nothing_can_schedule_fails_with_pod_pending_timeout(
    kube_access: str, tmp_path: Path
) -> None:
    clock = FakeClock()
    platform = make_platform(
        tmp_path,
        k8s={"pod-pending-timeout": "2m", "default-node-selector": {"pool": "nowhere"}},
        clock=clock,
    )
    async with (
        LocalCluster(mode="simulated", clock=clock) as cluster,
        kube_client_for(cluster, kube_access, tmp_path) as client,
        open_executor(platform, kube_client=client, store=MemoryStateStore()) as ex,
    ):
        key = await ex.submit(container_spec("stuck"))
        await wait_until(lambda: "Unschedulable" in ex.status(key).reason, what="unschedulable")
        assert phase_of(ex, key) is Phase.QUEUED
        result = await advance_until_done(clock, ex, key, step=5.0)
        assert result.phase == "PermanentFailure"  # the budget is spent: RetriesExhausted|<the last code>
        assert result.error is not None and result.error["code"] == "RetriesExhausted|PodPendingTimeout"
        assert "Unschedulable" in result.error["message"]
        assert pods_in(cluster) == {}


async def test_a_task_over_the_quota_waits_for_resources_and_runs_once_the_quota_frees(
    kube_access: str, tmp_path: Path
) -> None:
    clock = FakeClock()
    platform = make_platform(tmp_path, clock=clock)
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "cpu", "namespace": NAMESPACE},
        "spec": {"hard": {"limits.cpu": "1500m"}},
    }
    async with (
        LocalCluster(mode="simulated", clock=clock) as cluster,
        kube_client_for(cluster, kube_access, tmp_path) as client,
        open_executor(platform, kube_client=client, store=MemoryStateStore()) as ex,
    ):
        await cluster.client().create(RESOURCE_QUOTA, quota)
        ledger = PodLedger(cluster)
        first = await ex.submit(container_spec("first", annotations={ANNOTATION_DURATION: "60"}))
        await wait_until(lambda: phase_of(ex, first) is Phase.RUNNING, what="the first task runs")
        second = await ex.submit(container_spec("second"))
        await wait_until(
            lambda: phase_of(ex, second) is Phase.WAITING_FOR_RESOURCES, what="the second task waits"
        )
        assert "exceeded quota" in ex.status(second).reason
        results = [await advance_until_done(clock, ex, key) for key in (first, second)]
    assert [r.phase for r in results] == ["Success", "Success"]
    phases = [e["phase"] for e in results[1].events]
    assert phases.index("WaitingForResources") < phases.index("Queued")
    assert sorted(ledger.added) == ["first-n0-0", "second-n0-0"] and not ledger.created_twice()


async def test_a_pod_deleted_behind_the_executors_back_is_a_system_failure_and_the_retry_succeeds(
    kube_access: str, tmp_path: Path
) -> None:
    clock = FakeClock()
    platform = make_platform(tmp_path, clock=clock)
    async with (
        LocalCluster(mode="simulated", clock=clock) as cluster,
        kube_client_for(cluster, kube_access, tmp_path) as client,
        open_executor(platform, kube_client=client, store=MemoryStateStore()) as ex,
    ):
        key = await ex.submit(container_spec("gone", annotations={ANNOTATION_DURATION: "30"}))
        await wait_until(lambda: phase_of(ex, key) is Phase.RUNNING, what="the task runs")
        await cluster.client().delete(POD, NAMESPACE, "gone-n0-0")
        result = await advance_until_done(clock, ex, key)
    assert (result.phase, result.attempts) == ("Success", 2)
    failure = next(e for e in result.events if e["phase"] == "RetryableFailure")
    assert failure["attempt"] == 0
    assert (failure["error"]["code"], failure["error"]["kind"]) == ("ResourceDeletedExternally", "SYSTEM")


async def test_a_deleted_pod_wakes_its_execution_without_waiting_for_the_resync(
    kube_access: str, tmp_path: Path
) -> None:
    clock = FakeClock()  # never advanced: only the deletion event can wake the execution
    platform = make_platform(tmp_path, clock=clock)
    async with (
        LocalCluster(mode="simulated", clock=clock) as cluster,
        kube_client_for(cluster, kube_access, tmp_path) as client,
        open_executor(platform, kube_client=client, store=MemoryStateStore()) as ex,
    ):
        key = await ex.submit(container_spec("woken", annotations={ANNOTATION_DURATION: "30"}))
        await wait_until(lambda: phase_of(ex, key) is Phase.RUNNING, what="the task runs")
        await cluster.client().delete(POD, NAMESPACE, "woken-n0-0")
        await wait_until(lambda: ex.status(key).attempt == 1, what="the deletion was noticed")
