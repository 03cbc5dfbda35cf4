"""10,000 pod tasks through the executor on the in-process local cluster in simulated mode.

Prints tasks per second end to end (submit → Success) and Kubernetes API calls per task by verb. Then a
second pass measures memory per in-flight task: N pods are kept running (simulated), and when all N are in
flight a tracemalloc snapshot is split into what taskplug's executor and machinery hold (execution records,
plugin state, informer cache, plugin managers) and what the in-process API server holds (its own copy of
every pod, its watch history) — on a real cluster the latter lives in kube-apiserver, not in taskplug. Targets on a
2-core machine: ≥ 500 tasks/s, one create and no GET per task in steady state, ≤ 20 KiB per in-flight task.

    .venv/bin/python benchmarks/executor_throughput.py [N] [--sqlite]
"""

from __future__ import annotations

import asyncio
import collections
import gc
import sys
import tempfile
import time
import tracemalloc
from collections.abc import AsyncIterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from taskplug.core import PluginRegistry, TaskExecutionID
from taskplug.executor import (
    MemoryStateStore,
    Platform,
    SQLiteStateStore,
    executor_settings,
    open_executor,
    parse_spec,
)
from taskplug.k8s import ResourceType, WatchEvent
from taskplug.localcluster import LocalCluster
from taskplug.plugins.pod import plugin_entries

SPEC = {
    "template": {
        "id": {"resourceType": "TASK", "project": "p", "domain": "d", "name": "noop", "version": "v1"},
        "type": "container",
        "container": {
            "image": "busybox",
            "command": ["true"],
            "resources": {"requests": [{"name": "CPU", "value": "10m"}, {"name": "MEMORY", "value": "16Mi"}]},
        },
    },
    "execution": {"id": {"project": "p", "domain": "d", "name": "bench", "nodeId": "n0"}},
}


class CountingClient:
    """Counts API calls by verb on the way to the real (in-process) client."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: collections.Counter[str] = collections.Counter()

    async def create(self, rtype: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        self.calls["create"] += 1
        return await self.inner.create(rtype, obj)  # type: ignore[no-any-return]

    async def get(self, rtype: ResourceType, namespace: str, name: str) -> dict[str, Any]:
        self.calls["get"] += 1
        return await self.inner.get(rtype, namespace, name)  # type: ignore[no-any-return]

    async def list(self, rtype: ResourceType, namespace: str | None = None, **kw: Any) -> Any:
        self.calls["list"] += 1
        return await self.inner.list(rtype, namespace, **kw)

    async def watch(
        self, rtype: ResourceType, namespace: str | None = None, **kw: Any
    ) -> AsyncIterator[WatchEvent]:
        self.calls["watch"] += 1
        async for event in self.inner.watch(rtype, namespace, **kw):
            yield event

    async def patch(
        self, rtype: ResourceType, namespace: str, name: str, patch: Mapping[str, Any], **kw: Any
    ) -> Any:
        self.calls["patch"] += 1
        return await self.inner.patch(rtype, namespace, name, patch, **kw)

    async def replace(self, rtype: ResourceType, obj: dict[str, Any]) -> Any:
        self.calls["replace"] += 1
        return await self.inner.replace(rtype, obj)

    async def delete(self, rtype: ResourceType, namespace: str, name: str) -> Any:
        self.calls["delete"] += 1
        return await self.inner.delete(rtype, namespace, name)

    async def close(self) -> None:
        await self.inner.close()


async def main(n: int, sqlite: bool) -> None:
    registry = PluginRegistry()
    for entry in plugin_entries():
        registry.register(entry)
    workdir = Path(tempfile.mkdtemp(prefix="taskplug-bench-"))
    platform = Platform.load(
        registry=registry,
        document={"executor": {"data-root": str(workdir / "data"), "workers": 256, "resync-period": "30s"}},
    )
    base = parse_spec(SPEC)
    specs = []
    for i in range(n):
        tid = type(base.metadata.task_execution_id.id)()
        tid.CopyFrom(base.metadata.task_execution_id.id)
        tid.node_execution_id.execution_id.name = f"bench-{i}"
        meta = replace(
            base.metadata,
            task_execution_id=TaskExecutionID(f"bench-{i}-n0-0", tid, "n0"),
            owner_name=f"bench-{i}",
            labels={**base.metadata.labels, "execution-id": f"bench-{i}"},
        )
        specs.append(replace(base, metadata=meta))

    store = SQLiteStateStore(workdir / "state.db") if sqlite else MemoryStateStore()
    gc.collect()
    async with LocalCluster(mode="simulated") as cluster:
        client = CountingClient(cluster.client())
        async with open_executor(
            platform, kube_client=client, store=store, settings=executor_settings(platform)
        ) as ex:
            start = time.perf_counter()
            keys = [await ex.submit(spec) for spec in specs]
            results = await asyncio.gather(*(ex.wait(k) for k in keys))
            elapsed = time.perf_counter() - start
    store.close()

    phases = collections.Counter(r.phase for r in results)
    print(f"executor_throughput N={n} store={'sqlite' if sqlite else 'memory'} outcomes={dict(phases)}")
    print(f"  {n / elapsed:,.0f} tasks/s end to end ({elapsed:.2f} s)")
    per_task = {verb: count / n for verb, count in sorted(client.calls.items())}
    print("  API calls per task: " + ", ".join(f"{verb}={value:.4f}" for verb, value in per_task.items()))
    print(f"  API calls in total: {dict(sorted(client.calls.items()))}")
    await measure_memory(platform, specs, workdir, sqlite)


async def measure_memory(platform: Platform, specs: list[Any], workdir: Path, sqlite: bool) -> None:
    n = len(specs)
    running = [
        replace(s, metadata=replace(s.metadata, annotations={"taskplug.io/simulate-duration": "3600"}))
        for s in specs
    ]
    store = SQLiteStateStore(workdir / "memory.db") if sqlite else MemoryStateStore()
    gc.collect()
    tracemalloc.start(40)
    async with LocalCluster(mode="simulated") as cluster:
        client = CountingClient(cluster.client())
        async with open_executor(
            platform, kube_client=client, store=store, settings=executor_settings(platform)
        ) as ex:
            for spec in running:
                await ex.submit(spec)
            # Wait until every execution has seen its pod running: all N are in flight.
            while sum(1 for k in ex.keys if ex.status(k).task_phase == 5) < n:  # Phase.RUNNING
                await asyncio.sleep(0.05)
            snapshot = tracemalloc.take_snapshot()
            for key in list(ex.keys):
                ex.abort(key)
            await asyncio.gather(*(ex.wait(k) for k in ex.keys))
    tracemalloc.stop()
    store.close()
    ours = server = other = 0
    for stat in snapshot.statistics("traceback"):
        frames = [f.filename for f in stat.traceback]  # oldest first
        if any("taskplug/k8s/_informer" in f for f in frames):
            ours += stat.size  # the informer's cache: copies handed to it by the client while it watches
            continue
        innermost = next((f for f in reversed(frames) if "taskplug/" in f), None)
        if innermost is None:
            other += stat.size
        elif "taskplug/localcluster" in innermost:
            server += stat.size
        else:
            ours += stat.size
    print(f"memory with {n} tasks in flight (tracemalloc):")
    print(f"  taskplug executor + machinery: {ours / n / 1024:.1f} KiB per in-flight task")
    print(
        f"  in-process API server (kube-apiserver's share on a real cluster): {server / n / 1024:.1f} KiB per task"
    )
    print(f"  allocated elsewhere (asyncio, protobuf, libraries): {other / n / 1024:.1f} KiB per task")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    asyncio.run(main(int(args[0]) if args else 10_000, "--sqlite" in sys.argv))
