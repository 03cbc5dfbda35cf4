"""Pod tasks through the executor on the in-process local cluster in simulated mode, beside the bare embedded
API (``benchmarks/localcluster_simulated.py``) measured in the same run.

Each pair runs the bare API (N simulated pods created and watched to Succeeded) and the executor (N pod tasks,
submit → Success), in turn, the order alternating from pair to pair so that the machine's drift weighs on both;
the table gives the medians, the executor's rate as a fraction of the bare API's beside the goal (≥ 0.7×), CPU
per task of each, and the executor's Kubernetes API calls per task by verb (goal: one create and no GET).

Then a memory pass: N pods are kept running (simulated), and when all N are in flight a tracemalloc snapshot is
split into what taskplug's executor and machinery hold (execution records, plugin state, informer cache,
plugin managers) and what the in-process API server holds (its own copy of every pod, its watch history and the
JSON it keeps of each event, whichever watcher's read made it encode one) — on a real cluster the latter lives in
kube-apiserver, not in taskplug. Goal: ≤ 20 KiB per in-flight task.

``--counts`` adds one untimed pass that counts, per task: the executor's rounds, event-loop iterations and the
callbacks they ran (the API server's included), state store writes (saves, events, flushes), watch events the
informer handled, and JSON and protobuf encodes and decodes made outside the embedded API server.

Both sides run with the garbage collector as a ``taskplug`` command that drives the executor has it (start-up's
objects frozen, rarer collections: ``taskplug.cli._process``); ``--default-gc`` keeps CPython's defaults.

    .venv/bin/python benchmarks/executor_throughput.py [N] [--pairs P] [--sqlite] [--concurrency C]
        [--skip-memory] [--memory-tasks M] [--counts] [--default-gc]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import orjson
from flyteidl.core import literals_pb2

# benchmarks/ is on the path when a script runs: the bare API's own benchmark, run as it runs alone.
from localcluster_simulated import run as run_bare_api

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
from taskplug.k8s import ResourceType, WatchEvent
from taskplug.localcluster import LocalCluster
from taskplug.plugins.pod import plugin_entries

GOAL_RATIO = 0.7  # the executor's tasks/s as a fraction of the bare API's pods/s
GOAL_KIB = 20.0  # taskplug's memory per in-flight task

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
    """Counts API calls by verb on the way to the real (in-process) client, and the watch events it hands on."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: collections.Counter[str] = collections.Counter()
        self.watch_events = 0

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
            self.watch_events += 1
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


def make_specs(n: int) -> list[Any]:
    """N single pod tasks, each its own execution (``bench-<i>``)."""
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
    return specs


def make_platform(data_root: Path) -> Platform:
    registry = PluginRegistry()
    for entry in plugin_entries():
        registry.register(entry)
    return Platform.load(
        registry=registry,
        document={"executor": {"data-root": str(data_root), "workers": 256, "resync-period": "30s"}},
    )


def make_store(path: Path, sqlite: bool) -> StateStore:
    return SQLiteStateStore(path) if sqlite else MemoryStateStore()


@dataclass(frozen=True, slots=True)
class Timed:
    """One timed run: items per second, CPU milliseconds per item."""

    rate: float
    cpu_ms: float


async def executor_run(
    n: int, workdir: Path, run: int, sqlite: bool, specs: list[Any]
) -> tuple[Timed, CountingClient, collections.Counter[str], int]:
    """The executor's figure: N pod tasks from submit to Success, each run on a fresh cluster, store and data
    root (a data root written by an earlier run would spare this one its folders)."""
    platform = make_platform(workdir / f"data-{run}")
    store = make_store(workdir / f"state-{run}.db", sqlite)
    gc.collect()
    async with LocalCluster(mode="simulated") as cluster:
        client = CountingClient(cluster.client())
        async with open_executor(
            platform, kube_client=client, store=store, settings=executor_settings(platform)
        ) as ex:
            started, cpu = time.perf_counter(), time.process_time()
            keys = [await ex.submit(spec) for spec in specs]
            results = await asyncio.gather(*(ex.wait(k) for k in keys))
            elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
            rounds = ex.rounds
    store.close()
    phases = collections.Counter(r.phase for r in results)
    return Timed(n / elapsed, cpu * 1000 / n), client, phases, rounds


async def bare_run(n: int, concurrency: int) -> Timed:
    """The bare API's figure, exactly as ``localcluster_simulated.py`` measures it."""
    gc.collect()
    cpu = time.process_time()
    rate = await run_bare_api(n, concurrency)
    return Timed(rate, (time.process_time() - cpu) * 1000 / n)


async def compare(args: argparse.Namespace) -> None:
    n, pairs = args.count, args.pairs
    workdir = Path(tempfile.mkdtemp(prefix="taskplug-bench-"))
    specs = make_specs(n)
    store_name = "sqlite" if args.sqlite else "memory"
    print(
        f"executor_throughput N={n} store={store_name} pairs={pairs} "
        "(simulated local cluster, in process; each pair alternates which runs first)"
    )
    bare: list[Timed] = []
    executor: list[Timed] = []
    client: CountingClient | None = None
    for pair in range(pairs):
        order = ("bare", "executor") if pair % 2 == 0 else ("executor", "bare")
        for which in order:
            if which == "bare":
                bare.append(await bare_run(n, args.concurrency))
            else:
                timed, client, phases, rounds = await executor_run(n, workdir, pair, args.sqlite, specs)
                executor.append(timed)
                if phases != {"Success": n}:
                    print(f"  pair {pair + 1}: the executor's outcomes were {dict(phases)}")
        print(
            f"  pair {pair + 1}: bare API {bare[-1].rate:7,.0f} pods/s   executor {executor[-1].rate:7,.0f} tasks/s"
            f"   ratio {executor[-1].rate / bare[-1].rate:.2f}   (executor rounds per task {rounds / n:.2f})"
        )
    assert client is not None
    ratios = [e.rate / b.rate for e, b in zip(executor, bare, strict=True)]
    cpu_ratios = [e.cpu_ms / b.cpu_ms for e, b in zip(executor, bare, strict=True)]
    ratio = statistics.median(ratios)
    print(f"medians of {pairs} pair(s):")
    print(f"  {'':<30}{'bare API':>14}{'executor':>14}{'ratio':>9}{'goal':>9}")
    print(
        f"  {'items per second':<30}{statistics.median(b.rate for b in bare):>10,.0f} /s"
        f"{statistics.median(e.rate for e in executor):>12,.0f} /s{ratio:>8.2f}x"
        f"{'>= ' + str(GOAL_RATIO) + 'x':>9}  {'met' if ratio >= GOAL_RATIO else 'not met'}"
    )
    print(
        f"  {'CPU per item':<30}{statistics.median(b.cpu_ms for b in bare):>11.3f} ms"
        f"{statistics.median(e.cpu_ms for e in executor):>11.3f} ms{statistics.median(cpu_ratios):>8.2f}x"
    )
    per_task = {verb: count / n for verb, count in sorted(client.calls.items())}
    creates, gets = per_task.get("create", 0.0), per_task.get("get", 0.0)
    print(
        "  executor API calls per task (last run): "
        + ", ".join(f"{verb}={value:.4f}" for verb, value in per_task.items())
        + f"   goal create=1, get=0: {'met' if creates == 1.0 and gets == 0.0 else 'not met'}"
    )
    if args.counts:
        await count_work(n, workdir, args.sqlite, specs)
    if not args.skip_memory:
        m = min(n, args.memory_tasks) if args.memory_tasks else n
        await measure_memory(make_platform(workdir / "data-memory"), specs[:m], workdir, args.sqlite)


class _Counts:
    """What the counting pass tallies: calls by name."""

    def __init__(self) -> None:
        self.calls: collections.Counter[str] = collections.Counter()


def _outside_api(depth: int) -> bool:
    """Whether the caller ``depth`` frames up is not the embedded API server's code."""
    return "taskplug/localcluster/" not in sys._getframe(depth).f_code.co_filename


@contextmanager
def _counting(counts: _Counts, store: StateStore) -> Iterator[None]:
    """Count JSON and protobuf encodes/decodes made outside the API server, and the store's writes."""
    # The protobuf runtime's own message class (upb's): what every generated message's methods come from.
    message = literals_pb2.LiteralMap.__mro__[1]
    loads, dumps = orjson.loads, orjson.dumps
    serialize, parse = message.SerializeToString, message.ParseFromString

    def counted_loads(data: Any) -> Any:
        if _outside_api(2):
            counts.calls["json decode"] += 1
        return loads(data)

    def counted_dumps(obj: Any, *a: Any, **kw: Any) -> bytes:
        if _outside_api(2):
            counts.calls["json encode"] += 1
        return dumps(obj, *a, **kw)

    def counted_serialize(self: Any, **kw: Any) -> bytes:
        counts.calls["protobuf encode"] += 1
        return serialize(self, **kw)  # type: ignore[no-any-return]

    def counted_parse(self: Any, data: bytes) -> int:
        counts.calls["protobuf decode"] += 1
        return parse(self, data)  # type: ignore[no-any-return]

    def wrap(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*a: Any, **kw: Any) -> Any:
            counts.calls[f"store {name}"] += 1
            return method(*a, **kw)

        return counted

    orjson.loads, orjson.dumps = counted_loads, counted_dumps  # type: ignore[assignment]
    message.SerializeToString, message.ParseFromString = counted_serialize, counted_parse
    for name in ("save", "save_nodes", "append_event", "flush"):
        method = getattr(store, name, None)
        if method is not None:
            setattr(store, name, wrap(name, method))
    try:
        yield
    finally:
        orjson.loads, orjson.dumps = loads, dumps  # type: ignore[assignment]
        message.SerializeToString, message.ParseFromString = serialize, parse


async def count_work(n: int, workdir: Path, sqlite: bool, specs: list[Any]) -> None:
    """One untimed pass, counting per task what the executor's side did."""
    platform = make_platform(workdir / "data-counts")
    store = make_store(workdir / "state-counts.db", sqlite)
    counts = _Counts()
    loop = asyncio.get_running_loop()
    run_once = loop._run_once  # type: ignore[attr-defined]
    run_handle = asyncio.Handle._run

    def counted_run_once() -> None:
        counts.calls["event-loop iterations"] += 1
        run_once()

    def counted_run_handle(handle: asyncio.Handle) -> None:
        counts.calls["event-loop callbacks"] += 1
        run_handle(handle)

    async with LocalCluster(mode="simulated") as cluster:
        client = CountingClient(cluster.client())
        async with open_executor(
            platform, kube_client=client, store=store, settings=executor_settings(platform)
        ) as ex:
            with _counting(counts, store):
                loop._run_once = counted_run_once  # type: ignore[attr-defined]
                asyncio.Handle._run = counted_run_handle  # type: ignore[method-assign]
                try:
                    keys = [await ex.submit(spec) for spec in specs]
                    await asyncio.gather(*(ex.wait(k) for k in keys))
                finally:
                    del loop._run_once  # type: ignore[attr-defined]
                    asyncio.Handle._run = run_handle  # type: ignore[method-assign]
            rounds = ex.rounds
    store.close()
    counts.calls["executor rounds"] = rounds
    counts.calls["watch events handled"] = client.watch_events
    print(f"work per task (one untimed pass of {n}; JSON and protobuf outside the API server):")
    for name, count in sorted(counts.calls.items()):
        print(f"  {name:<28}{count / n:8.2f}")


async def measure_memory(platform: Platform, specs: list[Any], workdir: Path, sqlite: bool) -> None:
    n = len(specs)
    running = [
        replace(s, metadata=replace(s.metadata, annotations={"taskplug.io/simulate-duration": "3600"}))
        for s in specs
    ]
    store = make_store(workdir / "memory.db", sqlite)
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
        innermost = next((f for f in reversed(frames) if "taskplug/" in f), None)
        if innermost is not None and "taskplug/localcluster/" in innermost and "_client.py" not in innermost:
            # The server's own structures (its objects, its watch history and the JSON it keeps of each
            # event), even when a watcher's read made it encode them: kube-apiserver's on a real cluster.
            server += stat.size
            continue
        if any("taskplug/k8s/_informer" in f or "taskplug/engine/k8s/_informer" in f for f in frames):
            ours += stat.size  # the informer's cache: copies handed to it by the client while it watches
            continue
        if innermost is None:
            other += stat.size
        elif "taskplug/localcluster" in innermost:
            server += stat.size
        else:
            ours += stat.size
    kib = ours / n / 1024
    print(f"memory with {n} tasks in flight (tracemalloc):")
    print(
        f"  taskplug executor + machinery: {kib:.1f} KiB per in-flight task   goal <= {GOAL_KIB:.0f} KiB: "
        + ("met" if kib <= GOAL_KIB else "not met")
    )
    print(
        f"  in-process API server (kube-apiserver's share on a real cluster): {server / n / 1024:.1f} KiB per task"
    )
    print(f"  allocated elsewhere (asyncio, protobuf, libraries): {other / n / 1024:.1f} KiB per task")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0] + " " + __doc__.splitlines()[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("count", nargs="?", type=int, default=10_000, help="tasks (and bare pods) per run")
    parser.add_argument(
        "--pairs", type=int, default=3, help="bare API / executor pairs (medians are printed)"
    )
    parser.add_argument("--sqlite", action="store_true", help="the SQLite state store instead of memory")
    parser.add_argument(
        "--concurrency", type=int, default=32, help="the bare API's concurrent creators (its own default)"
    )
    parser.add_argument("--skip-memory", action="store_true", help="leave out the memory pass")
    parser.add_argument(
        "--memory-tasks",
        type=int,
        default=0,
        help="tasks in flight for the memory pass (default: N; tracemalloc makes it slow)",
    )
    parser.add_argument("--counts", action="store_true", help="add an untimed pass counting work per task")
    parser.add_argument(
        "--default-gc", action="store_true", help="CPython's collector settings, not the command's"
    )
    args = parser.parse_args()
    if args.count < 1 or args.pairs < 1:
        parser.error("N and --pairs must be at least 1")
    if not args.default_gc:
        use_executor_collector()
    asyncio.run(compare(args))


if __name__ == "__main__":
    main()
