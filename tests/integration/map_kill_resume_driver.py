"""A stand-alone executor process for test_map_kill_and_resume: runs one map of N elements (an ArrayNode
over a ``container`` task that computes ``x * x`` in a real process) on a cluster reached through a
kubeconfig (lightkube over HTTP), its state in a SQLite file, until the map ends.

The test SIGKILLs it at random moments and starts it again with the same arguments; a restarted driver
submits the same spec, so the executor resumes the map from the state file. It prints ``submitted`` once
the map is submitted and ``finished`` (then one JSON line: phase, outputs, elements) at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from taskplug.engine.k8s._lightkube import LightkubeClient
from taskplug.executor import ExecutionSpec, Platform, parse_spec
from taskplug.executor._runtime import open_executor
from taskplug.executor._store import SQLiteStateStore

PROJECT, DOMAIN, NAME = "kr", "dev", "map-kr"

# Each element sleeps a little (longer for some indices, so elements finish out of order), then writes its
# output as pyflyte-map-execute would: the element-typed value under its own output prefix.
SCRIPT = """
import time
from pathlib import Path
from flyteidl.core import literals_pb2
x = {{.Inputs.x}}
time.sleep(0.5 + (x % 4) * 0.25)
out = Path("{{.OutputPrefix}}")
out.mkdir(parents=True, exist_ok=True)
lm = literals_pb2.LiteralMap()
lm.literals["o0"].scalar.primitive.integer = x * x
(out / "outputs.pb").write_bytes(lm.SerializeToString())
"""


def map_spec(size: int, parallelism: int) -> ExecutionSpec:
    list_int = {"collectionType": {"simple": "INTEGER"}}
    return parse_spec(
        {
            "template": {
                "id": {
                    "resourceType": "TASK",
                    "project": PROJECT,
                    "domain": DOMAIN,
                    "name": "sq",
                    "version": "1",
                },
                "type": "container",
                "interface": {
                    "inputs": {"variables": {"x": {"type": list_int}}},
                    "outputs": {"variables": {"o0": {"type": list_int}}},
                },
                "container": {
                    "image": "python:3.11-slim",
                    "command": ["python", "-c"],
                    "args": [SCRIPT],
                    "resources": {
                        "requests": [{"name": "CPU", "value": "10m"}, {"name": "MEMORY", "value": "16Mi"}],
                        "limits": [{"name": "CPU", "value": "10m"}, {"name": "MEMORY", "value": "64Mi"}],
                    },
                },
            },
            "arrayNode": {"parallelism": parallelism},
            "execution": {"id": {"project": PROJECT, "domain": DOMAIN, "name": NAME, "nodeId": "n0"}},
            "inputs": {"x": list(range(size))},
        }
    )


async def main(args: argparse.Namespace) -> int:
    platform = Platform.load(
        document={
            "executor": {"data-root": args.data_root, "workers": 4, "resync-period": "500ms"},
            "plugins": {
                "k8s": {"inject-finalizer": True, "delete-resource-on-finalize": args.delete_on_finalize}
            },
        }
    )
    spec = map_spec(args.elements, args.parallelism)
    store = SQLiteStateStore(args.state_db)
    client = LightkubeClient(args.kubeconfig, timeout=5.0)
    try:
        async with open_executor(platform, kube_client=client, store=store) as ex:
            key = await ex.submit(spec)
            print("submitted", flush=True)
            result = await ex.wait(key)
    finally:
        await client.close()
        store.close()
    print("finished", flush=True)
    print(
        json.dumps({"phase": result.phase, "outputs": result.outputs, "elements": result.elements}),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--state-db", required=True)
    parser.add_argument("--data-root", required=True)
    parser.add_argument("--elements", type=int, default=20)
    parser.add_argument("--parallelism", type=int, default=4)
    parser.add_argument("--delete-on-finalize", action="store_true")
    sys.exit(asyncio.run(main(parser.parse_args())))
