"""N simulated pods created and watched to Succeeded through the local cluster's in-process client.

Measures the embedded API server end to end: create (validation, defaulting, admission, store, fan-out),
scheduling, the simulated kubelet's status writes, the events it records, and one client watch that sees
every pod reach Succeeded. Target on a 2-core machine: 10,000 pods at >= 500 pods/s.

    .venv/bin/python benchmarks/localcluster_simulated.py [N] [--concurrency C]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from taskplug.k8s import POD
from taskplug.localcluster import LocalCluster


def pod(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"bench-{i}", "namespace": "bench", "labels": {"app": "bench"}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": "python:3.11",
                    "command": ["python", "-c", "print('hi')"],
                    "resources": {
                        "requests": {"cpu": "100m", "memory": "64Mi"},
                        "limits": {"memory": "64Mi"},
                    },
                    "env": [{"name": "FLYTE_INTERNAL_EXECUTION_ID", "value": f"e{i}"}],
                }
            ],
            "tolerations": [{"key": "flyte.org/node-role", "operator": "Exists", "effect": "NoSchedule"}],
        },
    }


async def run(count: int, concurrency: int) -> float:
    async with LocalCluster(mode="simulated", history_limit=max(20_000, count * 5)) as cluster:
        client = cluster.client()
        _, rv = await client.list(POD, "bench")
        done: set[str] = set()

        async def watch() -> None:
            async for event in client.watch(POD, "bench", resource_version=rv, label_selector="app=bench"):
                if event.object.get("status", {}).get("phase") == "Succeeded":
                    done.add(event.object["metadata"]["name"])
                    if len(done) == count:
                        return

        async def create(start: int) -> None:
            for i in range(start, count, concurrency):
                await client.create(POD, pod(i))

        started = time.perf_counter()
        async with asyncio.TaskGroup() as group:
            watcher = group.create_task(watch())
            for worker in range(concurrency):
                group.create_task(create(worker))
            await watcher
        elapsed = time.perf_counter() - started
    return count / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("count", nargs="?", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    rate = asyncio.run(run(args.count, args.concurrency))
    print(f"{args.count} simulated pods created and watched to Succeeded: {rate:,.0f} pods/s")


if __name__ == "__main__":
    main()
