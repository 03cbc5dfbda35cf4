"""Running a kubeflow task end to end on the embedded cluster with the process kubelet, as ``taskplug run``
wires it: the platform from the entry points, the enabled plugins' local operators registered, the
executor driving the plugin manager."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from taskplug.engine import local_operators
from taskplug.executor import (
    ExecutionResult,
    ExecutionSpec,
    MemoryStateStore,
    Platform,
    open_executor,
    parse_spec,
)
from taskplug.k8s import POD
from taskplug.localcluster import LocalCluster

DEADLINE = 60.0
ENABLED = ["container", "sidecar", "pytorch", "tensorflow", "mpi"]
PROJECT, DOMAIN = "kf", "dev"
NAMESPACE = f"{PROJECT}-{DOMAIN}"

# Writes the named outputs (plain ints/strings) as a flyteidl LiteralMap under the output prefix (argv[1]).
WRITE_OUTPUTS = """
def write_outputs(prefix, **values):
    from pathlib import Path
    from flyteidl.core import literals_pb2
    out = Path(prefix)
    out.mkdir(parents=True, exist_ok=True)
    lm = literals_pb2.LiteralMap()
    for key, value in values.items():
        primitive = lm.literals[key].scalar.primitive
        if isinstance(value, int):
            primitive.integer = value
        else:
            primitive.string_value = str(value)
    (out / "outputs.pb").write_bytes(lm.SerializeToString())
"""


def platform_for(tmp_path: Path, config_path: Path | None = None) -> Platform:
    document = {
        "executor": {"data-root": str(tmp_path / "data"), "resync-period": "100ms"},
        "tasks": {
            "task-plugins": {
                "enabled-plugins": ENABLED,
                "default-for-task-types": {"container": "container", "sidecar": "sidecar"},
            }
        },
    }
    if config_path is not None:
        return Platform.load(config_path, document={"executor": document["executor"]})
    return Platform.load(document=document)


def task_spec(
    name: str,
    task_type: str,
    custom: Mapping[str, Any],
    script: str,
    *,
    outputs: Mapping[str, str] | None = None,
    max_attempts: int = 1,
) -> ExecutionSpec:
    """A v1 kubeflow task running ``python -c script OUTPUT_PREFIX`` in every replica."""
    template: dict[str, Any] = {
        "id": {"resourceType": "TASK", "project": PROJECT, "domain": DOMAIN, "name": name, "version": "v1"},
        "type": task_type,
        "taskTypeVersion": 1,
        "container": {
            "image": "python:3.11-slim",
            "command": ["python", "-c"],
            "args": [script, "{{.OutputPrefix}}"],
            "resources": {
                "requests": [{"name": "CPU", "value": "100m"}, {"name": "MEMORY", "value": "64Mi"}],
                "limits": [{"name": "MEMORY", "value": "512Mi"}],
            },
        },
        "custom": dict(custom),
    }
    if outputs:
        template["interface"] = {
            "outputs": {"variables": {k: {"type": {"simple": v}} for k, v in outputs.items()}}
        }
    return parse_spec(
        {
            "template": template,
            "execution": {
                "id": {"project": PROJECT, "domain": DOMAIN, "name": name, "nodeId": "n0"},
                "maxAttempts": max_attempts,
            },
        }
    )


@contextlib.asynccontextmanager
async def process_cluster(platform: Platform) -> AsyncIterator[LocalCluster]:
    async with LocalCluster(mode="process", memory_poll_interval=0.02, kill_grace_seconds=1.0) as cluster:
        for operator in local_operators(platform.config, platform.registry):
            cluster.register_operator(operator.resource_type, operator.make())
        yield cluster


async def run_task(cluster: LocalCluster, platform: Platform, spec: ExecutionSpec) -> ExecutionResult:
    async with open_executor(platform, kube_client=cluster.client(), store=MemoryStateStore()) as ex:
        return await asyncio.wait_for(ex.run(spec), DEADLINE)


def pod_phases(cluster: LocalCluster, namespace: str = NAMESPACE) -> dict[str, str]:
    return {p["metadata"]["name"]: p["status"]["phase"] for p in cluster.store.iter(POD, namespace)}
