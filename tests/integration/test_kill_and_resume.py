"""The executor SIGKILLed at random moments and restarted on the same state file: every task still ends,
no pod is ever created twice, nothing leaks.

The cluster is ``taskplug cluster serve --mode simulated`` in its own process on 127.0.0.1; the executor is
``kill_resume_driver.py`` in another, reaching the cluster with lightkube through the kubeconfig the server
wrote. The test watches the cluster's pods over HTTP from before the first run, so every pod the API ever
stored is seen with its uid: one ADDED per pod name, and the pods left at the end are those same objects.
Kill moments come from a seeded random generator (after the driver reports its tasks submitted, so kills
land mid-run); waits on the processes have deadlines.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import re
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.waiting import wait_until
from taskplug.engine.k8s._lightkube import LightkubeClient
from taskplug.executor._runtime import open_executor
from taskplug.executor._store import Event, ExecutionRecord, SQLiteStateStore
from taskplug.k8s import POD, KubeApiError, ResourceType
from taskplug.localcluster import LocalCluster
from taskplug.localcluster._store import StoredEvent

from .conftest import PodLedger, container_spec, make_platform

VENV_BIN = Path(sys.executable).parent
DRIVER = Path(__file__).with_name("kill_resume_driver.py")
NAMESPACE = "kr-dev"
TASKS = 20
KILLS = 4
SERVE_ARGS = ("cluster", "serve", "--mode", "simulated", "--port", "0")
START_DEADLINE = 20.0
FINISH_DEADLINE = 30.0


@pytest.fixture
def cluster_kubeconfig(tmp_path: Path) -> Iterator[Path]:
    """``taskplug cluster serve`` (simulated) on 127.0.0.1, stopped (then killed if need be) at the end."""
    kubeconfig = tmp_path / "kubeconfig"
    with open(tmp_path / "server.log", "wb") as log:
        server = subprocess.Popen(
            [str(VENV_BIN / "taskplug"), *SERVE_ARGS, "--kubeconfig-out", str(kubeconfig)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + START_DEADLINE
        while not (kubeconfig.exists() and "server:" in kubeconfig.read_text()):
            assert server.poll() is None, f"the cluster server exited with {server.returncode}"
            assert time.monotonic() < deadline, "the cluster server did not start"
            time.sleep(0.05)
        assert re.search(r"server: https://127\.0\.0\.1:\d+", kubeconfig.read_text())
        yield kubeconfig
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


class PodHistory:
    """Every pod the API stored, by name → uids seen ADDED, from a watch started before any executor ran."""

    def __init__(self, client: LightkubeClient) -> None:
        self.client = client
        self.added: dict[str, list[str]] = defaultdict(list)
        self.deleted: set[str] = set()
        self.resource_version = ""
        self.ready = asyncio.Event()

    async def follow(self) -> None:
        _, self.resource_version = await self.client.list(POD, NAMESPACE)
        self.ready.set()
        while True:  # a stream the server ends is resumed from the last version seen
            try:
                async for event in self.client.watch(POD, NAMESPACE, resource_version=self.resource_version):
                    meta = event.object["metadata"]
                    self.resource_version = meta["resourceVersion"]
                    if event.type == "ADDED":
                        self.added[meta["name"]].append(meta["uid"])
                    elif event.type == "DELETED":
                        self.deleted.add(meta["name"])
            except KubeApiError as e:
                if e.status == 410:  # never compacted here; a relist would hide a lost ADDED
                    raise AssertionError("the pod history lost events (410)") from e
                raise


async def _start_driver(kubeconfig: Path, tmp_path: Path, *, delete_on_finalize: bool) -> Any:
    args = [str(DRIVER), "--kubeconfig", str(kubeconfig), "--tasks", str(TASKS)]
    args += ["--state-db", str(tmp_path / "state.db"), "--data-root", str(tmp_path / "data"), "--seed", "7"]
    if delete_on_finalize:
        args.append("--delete-on-finalize")
    return await asyncio.create_subprocess_exec(
        sys.executable, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL
    )


async def _read_line(proc: Any, within: float) -> str:
    line: bytes = await asyncio.wait_for(proc.stdout.readline(), within)
    return line.decode().strip()


async def _run_with_kills(
    kubeconfig: Path, tmp_path: Path, *, delete_on_finalize: bool, seed: int
) -> tuple[int, list[dict[str, Any]]]:
    """Start, SIGKILL at a random moment after the tasks are submitted, restart; KILLS times, then let the
    last run finish. Returns how many kills landed before the driver finished, and its results."""
    chooser = random.Random(seed)
    kills = 0
    for _ in range(KILLS):
        proc = await _start_driver(kubeconfig, tmp_path, delete_on_finalize=delete_on_finalize)
        try:
            assert await _read_line(proc, START_DEADLINE) == "submitted"
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), chooser.uniform(0.0, 0.6))
            if proc.returncode is None:
                proc.send_signal(signal.SIGKILL)
                kills += 1
        finally:
            if proc.returncode is None:
                proc.kill()
            await proc.wait()
    proc = await _start_driver(kubeconfig, tmp_path, delete_on_finalize=delete_on_finalize)
    try:
        lines = (await asyncio.wait_for(proc.stdout.read(), FINISH_DEADLINE)).decode().splitlines()
        assert await asyncio.wait_for(proc.wait(), 5) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert lines[:2] == ["submitted", "finished"], lines
    return kills, json.loads(lines[2])


@pytest.mark.integration
@pytest.mark.parametrize("delete_on_finalize", [False, True], ids=["pods-kept", "pods-deleted"])
async def test_an_executor_killed_at_random_moments_and_restarted_finishes_every_task_creating_each_pod_once(
    delete_on_finalize: bool, cluster_kubeconfig: Path, tmp_path: Path
) -> None:
    client = LightkubeClient(cluster_kubeconfig, timeout=5.0)
    history = PodHistory(client)
    follower = asyncio.ensure_future(history.follow())
    try:
        await asyncio.wait_for(history.ready.wait(), START_DEADLINE)
        kills, results = await _run_with_kills(
            cluster_kubeconfig, tmp_path, delete_on_finalize=delete_on_finalize, seed=11
        )
        remaining = {p["metadata"]["name"]: p for p in (await client.list(POD, NAMESPACE))[0]}
        # Let the history catch up with the list just read before judging it.
        _, version = await client.list(POD, NAMESPACE)
        deadline = time.monotonic() + 10
        while int(history.resource_version or 0) < int(version) and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
    finally:
        follower.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await follower
        await client.close()

    assert kills >= 1, "no kill landed mid-run; the test proved nothing"
    assert len(results) == TASKS
    assert {r["phase"] for r in results} == {"Success"}, results

    # Every attempt's pod was created exactly once (a name is unique per attempt).
    store = SQLiteStateStore(tmp_path / "state.db")
    try:
        records = {r["key"]: store.load(r["key"]) for r in results}
    finally:
        store.close()
    expected_pods = {
        f"{key.split('/')[2]}-n0-{attempt}"
        for key, record in records.items()
        if record is not None
        for attempt in range(record.attempt + 1)
    }
    assert all(record is not None and record.terminal for record in records.values())
    assert set(history.added) == expected_pods
    assert {name: uids for name, uids in history.added.items() if len(uids) != 1} == {}

    if delete_on_finalize:
        assert remaining == {}
    else:
        # Nothing leaked: every pod left is one of the tasks', the very object created first, and finished.
        assert set(remaining) == expected_pods
        for name, pod in remaining.items():
            assert pod["metadata"]["uid"] == history.added[name][0]
            assert pod["status"]["phase"] == "Succeeded"
            assert pod["metadata"].get("finalizers") is None  # finalize took our finalizer off


# -- the kill that lands between finalize and the record of the outcome ------------------------------------


class CrashableStore:
    """A state store whose writes reach "disk" only at ``flush()`` (as a commit would), and which can crash:
    after :meth:`crash` nothing more is written, as when the process dies at that instant."""

    def __init__(self) -> None:
        self._rows: dict[str, bytes] = {}
        self._events: dict[str, list[Event]] = {}
        self._pending_rows: dict[str, bytes] = {}
        self._pending_events: list[tuple[str, Event]] = []
        self.crashed = False

    def load(self, key: str) -> ExecutionRecord | None:
        row = self._rows.get(key)
        return ExecutionRecord.from_row(row) if row is not None else None

    def save(self, record: ExecutionRecord) -> None:
        if not self.crashed:
            self._pending_rows[record.key] = record.to_row()

    def append_event(self, key: str, event: Event) -> None:
        if not self.crashed:
            self._pending_events.append((key, event))

    def events(self, key: str) -> list[Event]:
        return list(self._events.get(key, []))

    def flush(self) -> None:
        if self.crashed:
            return
        self._rows.update(self._pending_rows)
        for key, event in self._pending_events:
            self._events.setdefault(key, []).append(event)
        self._pending_rows.clear()
        self._pending_events.clear()

    def close(self) -> None:
        self.flush()

    def crash(self) -> None:
        self.crashed = True
        self._pending_rows.clear()
        self._pending_events.clear()

    def restart(self) -> None:
        self.crashed = False


async def test_a_kill_right_after_finalize_deleted_the_pod_does_not_run_the_task_again(
    tmp_path: Path,
) -> None:
    platform = make_platform(tmp_path, k8s={"inject-finalizer": True, "delete-resource-on-finalize": True})
    store = CrashableStore()
    spec = container_spec("once")
    async with LocalCluster(mode="simulated") as cluster:
        ledger = PodLedger(cluster)

        def die_when_the_pod_is_deleted(rtype: ResourceType, event: StoredEvent) -> None:
            if rtype.plural == "pods" and event.type == "DELETED":
                store.crash()

        cluster.store.observers.append(die_when_the_pod_is_deleted)
        async with open_executor(platform, kube_client=cluster.client(), store=store) as ex:
            await ex.submit(spec)
            await wait_until(lambda: store.crashed, what="finalize deleted the pod")
        store.restart()
        async with open_executor(platform, kube_client=cluster.client(), store=store) as ex:
            result = await asyncio.wait_for(ex.run(spec), 20)
    assert (result.phase, result.attempts) == ("Success", 1)
    assert dict(ledger.added) == {"once-n0-0": ledger.added["once-n0-0"]}
    assert ledger.created_twice() == {}


async def test_a_kill_while_a_failed_attempt_is_cleaned_up_charges_that_failure_once(tmp_path: Path) -> None:
    # The first attempt's user failure is decided and saved before its pod is deleted; the process dies as
    # the pod goes. On resume the executor finishes that cleanup instead of reading the missing pod as an
    # external deletion (which would charge a system failure and run an extra attempt).
    platform = make_platform(tmp_path, k8s={"inject-finalizer": True, "delete-resource-on-finalize": True})
    store = CrashableStore()
    spec = container_spec("fails", max_attempts=2, annotations={"taskplug.io/simulate-exit-code": "3"})
    async with LocalCluster(mode="simulated") as cluster:
        ledger = PodLedger(cluster)

        def die_when_the_first_pod_is_deleted(rtype: ResourceType, event: StoredEvent) -> None:
            if rtype.plural == "pods" and event.type == "DELETED" and not store.crashed:
                store.crash()
                # A killed process makes no more API calls: the dead executor's next creates fail.
                cluster.faults.fail("create", 500, times=1000)
                cluster.store.observers.remove(die_when_the_first_pod_is_deleted)

        cluster.store.observers.append(die_when_the_first_pod_is_deleted)
        async with open_executor(platform, kube_client=cluster.client(), store=store) as ex:
            await ex.submit(spec)
            await wait_until(lambda: store.crashed, what="the first attempt's pod was deleted")
        store.restart()
        cluster.faults.clear()
        async with open_executor(platform, kube_client=cluster.client(), store=store) as ex:
            result = await asyncio.wait_for(ex.run(spec), 20)
    # The budget (2 attempts) is spent: Flyte fails the node with RetriesExhausted (was a final RetryableFailure).
    assert (result.phase, result.attempts) == ("PermanentFailure", 2)
    assert result.error is not None
    assert result.error["kind"] == "USER"
    assert result.error["code"].startswith("RetriesExhausted|")
    assert sorted(ledger.added) == ["fails-n0-0", "fails-n0-1"]
    assert ledger.created_twice() == {}
