"""A stand-alone executor process for test_kill_and_resume: runs N tasks on a cluster reached through a
kubeconfig (lightkube over HTTP), with its state in a SQLite file, until every task is terminal.

The test SIGKILLs it at random moments and starts it again with the same arguments; a restarted driver
submits the same specs, so the executor resumes each execution from the state file. It prints
``submitted`` once every task is submitted and ``finished`` (then one JSON line of results) at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
from typing import Any

from taskplug.engine.k8s._lightkube import LightkubeClient
from taskplug.executor import ExecutionSpec, Platform, parse_spec
from taskplug.executor._runtime import open_executor
from taskplug.executor._store import SQLiteStateStore
from taskplug.localcluster import ANNOTATION_DURATION

PROJECT, DOMAIN = "kr", "dev"


def task_name(index: int) -> str:
    return f"kr{index:02d}"


def spec_for(index: int, duration: float) -> ExecutionSpec:
    return parse_spec(
        {
            "template": {
                "id": {
                    "resourceType": "TASK",
                    "project": PROJECT,
                    "domain": DOMAIN,
                    "name": "t",
                    "version": "1",
                },
                "type": "container",
                "container": {
                    "image": "python:3.11-slim",
                    "command": ["python", "-c", "pass"],
                    "resources": {
                        "requests": [{"name": "CPU", "value": "10m"}, {"name": "MEMORY", "value": "16Mi"}],
                        "limits": [{"name": "CPU", "value": "10m"}, {"name": "MEMORY", "value": "16Mi"}],
                    },
                },
            },
            "execution": {
                "id": {"project": PROJECT, "domain": DOMAIN, "name": task_name(index), "nodeId": "n0"},
                "annotations": {ANNOTATION_DURATION: f"{duration:.2f}"},
            },
        }
    )


async def main(args: argparse.Namespace) -> int:
    platform = Platform.load(
        document={
            "executor": {"data-root": args.data_root, "workers": 16, "resync-period": "200ms"},
            "plugins": {
                "k8s": {
                    "inject-finalizer": True,
                    "delete-resource-on-finalize": args.delete_on_finalize,
                }
            },
        }
    )
    # The same durations on every (re)start: the specs must not change between runs.
    durations = random.Random(args.seed)
    specs = [spec_for(i, durations.uniform(0.5, 2.5)) for i in range(args.tasks)]
    store = SQLiteStateStore(args.state_db)
    client = LightkubeClient(args.kubeconfig, timeout=5.0)
    try:
        async with open_executor(platform, kube_client=client, store=store) as ex:
            keys = [await ex.submit(spec) for spec in specs]
            print("submitted", flush=True)
            results = [await ex.wait(key) for key in keys]
    finally:
        await client.close()
        store.close()
    summary: list[dict[str, Any]] = [
        {"key": r.key, "phase": r.phase, "attempts": r.attempts} for r in results
    ]
    print("finished", flush=True)
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--state-db", required=True)
    parser.add_argument("--data-root", required=True)
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--delete-on-finalize", action="store_true")
    sys.exit(asyncio.run(main(parser.parse_args())))
