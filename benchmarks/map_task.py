"""A map of 2,000 elements (an ArrayNode over a ``container`` task) on the in-process local cluster in
simulated mode, at parallelism 0 (all at once) and 100, beside single-task executor throughput measured in
the same run (2,000 independent pod tasks, as benchmarks/executor_throughput.py runs them).

Prints, for each: elements (or tasks) per second end to end (submit → the map's Success), the map's rate
as a fraction of the single-task rate, and Kubernetes API calls per element by verb (creates per element
must be 1.0: each element's pod is created once, by its propeller name).

Everything runs with the garbage collector as a ``taskplug`` command that drives the executor has it
(``taskplug.cli._process``); ``--default-gc`` keeps CPython's defaults.

    .venv/bin/python benchmarks/map_task.py [N] [--sqlite] [--default-gc]
"""

from __future__ import annotations

import asyncio
import collections
import gc
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

# The same counting proxy as the single-task benchmark (benchmarks/ is on the path when a script runs).
from executor_throughput import CountingClient

from taskplug.cli._process import use_executor_collector
from taskplug.core import PluginRegistry, TaskExecutionID
from taskplug.executor import (
    MemoryStateStore,
    Platform,
    SQLiteStateStore,
    StateStore,
    executor_settings,
    open_executor,
    parse_spec,
)
from taskplug.localcluster import LocalCluster
from taskplug.plugins.pod import plugin_entries

TEMPLATE = {
    "id": {"resourceType": "TASK", "project": "p", "domain": "d", "name": "noop", "version": "v1"},
    "type": "container",
    "container": {
        "image": "busybox",
        "command": ["true"],
        "resources": {"requests": [{"name": "CPU", "value": "10m"}, {"name": "MEMORY", "value": "16Mi"}]},
    },
}


def platform_for(workdir: Path) -> Platform:
    registry = PluginRegistry()
    for entry in plugin_entries():
        registry.register(entry)
    return Platform.load(
        registry=registry,
        document={"executor": {"data-root": str(workdir / "data"), "workers": 256, "resync-period": "30s"}},
    )


def single_specs(n: int) -> list[Any]:
    base = parse_spec(
        {"template": TEMPLATE, "execution": {"id": {"project": "p", "domain": "d", "name": "single"}}}
    )
    specs = []
    for i in range(n):
        tid = type(base.metadata.task_execution_id.id)()
        tid.CopyFrom(base.metadata.task_execution_id.id)
        tid.node_execution_id.execution_id.name = f"single-{i}"
        meta = replace(
            base.metadata,
            task_execution_id=TaskExecutionID(f"single-{i}-n0-0", tid, "n0"),
            owner_name=f"single-{i}",
            labels={**base.metadata.labels, "execution-id": f"single-{i}"},
        )
        specs.append(replace(base, metadata=meta))
    return specs


def map_spec(n: int, parallelism: int, name: str) -> Any:
    template = {
        **TEMPLATE,
        "interface": {"inputs": {"variables": {"x": {"type": {"collectionType": {"simple": "INTEGER"}}}}}},
    }
    return parse_spec(
        {
            "template": template,
            "arrayNode": {"parallelism": parallelism},
            "execution": {"id": {"project": "p", "domain": "d", "name": name}},
            "inputs": {"x": list(range(n))},
        }
    )


def make_store(workdir: Path, name: str, sqlite: bool) -> StateStore:
    return SQLiteStateStore(workdir / f"{name}.db") if sqlite else MemoryStateStore()


async def run_singles(
    platform: Platform, workdir: Path, n: int, sqlite: bool
) -> tuple[float, dict[str, int]]:
    specs = single_specs(n)
    store = make_store(workdir, "single", sqlite)
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
    assert {r.phase for r in results} == {"Success"}, collections.Counter(r.phase for r in results)
    return n / elapsed, dict(client.calls)


async def run_map(
    platform: Platform, workdir: Path, n: int, parallelism: int, sqlite: bool
) -> tuple[float, dict[str, int], int]:
    spec = map_spec(n, parallelism, f"map-p{parallelism}")
    store = make_store(workdir, f"map-{parallelism}", sqlite)
    gc.collect()
    async with LocalCluster(mode="simulated") as cluster:
        client = CountingClient(cluster.client())
        async with open_executor(
            platform, kube_client=client, store=store, settings=executor_settings(platform)
        ) as ex:
            start = time.perf_counter()
            key = await ex.submit(spec)
            result = await ex.wait(key)
            elapsed = time.perf_counter() - start
            rounds = ex.rounds
    store.close()
    assert result.phase == "Success", result.error
    assert result.elements is not None
    assert {e["phase"] for e in result.elements} == {"Succeeded"}
    return n / elapsed, dict(client.calls), rounds


async def main(n: int, sqlite: bool) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="taskplug-map-bench-"))
    platform = platform_for(workdir)
    store_name = "sqlite" if sqlite else "memory"
    single_rate, single_calls = await run_singles(platform, workdir, n, sqlite)
    print(f"map_task N={n} store={store_name} (simulated local cluster, in process)")
    print(
        f"  single tasks:      {single_rate:8,.0f} tasks/s     creates/task    = {single_calls.get('create', 0) / n:.4f}"
    )
    for parallelism in (0, 100):
        rate, calls, rounds = await run_map(platform, workdir, n, parallelism, sqlite)
        per_element = {verb: count / n for verb, count in sorted(calls.items())}
        print(
            f"  map parallelism {parallelism:>3}: {rate:8,.0f} elements/s  ratio to single = {rate / single_rate:.2f}"
            f"  creates/element = {per_element.get('create', 0):.4f}  rounds = {rounds}"
        )
        print("      API calls per element: " + ", ".join(f"{v}={c:.4f}" for v, c in per_element.items()))


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if "--default-gc" not in sys.argv:
        use_executor_collector()
    asyncio.run(main(int(args[0]) if args else 2_000, "--sqlite" in sys.argv))
