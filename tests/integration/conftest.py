"""Shared builders for the end-to-end tests: specs, platforms, the two ways of reaching the local cluster,
a ledger of pod creations, and bounded waits.

``kube_access`` parametrizes a test over the in-process client (``cluster.client()``) and lightkube over
HTTP on 127.0.0.1 (``cluster.serve_http()`` + a kubeconfig in ``tmp_path``); the HTTP variant is marked
``integration``. Waits are bounded by deadlines (real processes take real time) or driven by advancing a
:class:`FakeClock` (time rules), never by sleeping until a rule fires.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from taskplug.core import FakeClock, Phase
from taskplug.engine.k8s._lightkube import LightkubeClient
from taskplug.executor import ExecutionSpec, Platform, parse_spec
from taskplug.executor._executor import ExecutionResult, Executor
from taskplug.k8s import POD, KubeClient, ResourceType
from taskplug.localcluster import LocalCluster
from taskplug.localcluster._store import StoredEvent

PROJECT, DOMAIN = "it", "dev"
NAMESPACE = f"{PROJECT}-{DOMAIN}"

# Writes every declared output as a flyteidl LiteralMap, as examples/hello.yaml does.
WRITE_OUTPUT = """
from pathlib import Path
from flyteidl.core import literals_pb2
out = Path("{{.OutputPrefix}}")
out.mkdir(parents=True, exist_ok=True)
lm = literals_pb2.LiteralMap()
lm.literals["greeting"].scalar.primitive.string_value = "hello, {{.Inputs.name}}"
(out / "outputs.pb").write_bytes(lm.SerializeToString())
"""


def container_spec(
    name: str,
    script: str = "pass",
    *,
    max_attempts: int = 1,
    image: str = "python:3.11-slim",
    annotations: Mapping[str, str] | None = None,
    limits: Mapping[str, str] | None = None,
    greeting: bool = False,
) -> ExecutionSpec:
    """A ``container`` task running ``python -c script``; ``greeting`` declares input ``name`` and output
    ``greeting`` (use with :data:`WRITE_OUTPUT`)."""
    return parse_spec(
        container_spec_document(
            name,
            script,
            max_attempts=max_attempts,
            image=image,
            annotations=annotations,
            limits=limits,
            greeting=greeting,
        )
    )


def container_spec_document(
    name: str,
    script: str = "pass",
    *,
    max_attempts: int = 1,
    image: str = "python:3.11-slim",
    annotations: Mapping[str, str] | None = None,
    limits: Mapping[str, str] | None = None,
    greeting: bool = False,
) -> dict[str, Any]:
    """The execution spec document (docs/spec.md) of :func:`container_spec`."""
    resource_limits = {"cpu": "1", "memory": "256Mi", **(limits or {})}
    template: dict[str, Any] = {
        "id": {"resourceType": "TASK", "project": PROJECT, "domain": DOMAIN, "name": "t", "version": "v1"},
        "type": "container",
        "container": {
            "image": image,
            "command": ["python", "-c"],
            "args": [script],
            "resources": {
                "requests": [{"name": "CPU", "value": "100m"}, {"name": "MEMORY", "value": "32Mi"}],
                "limits": [
                    {"name": "CPU", "value": resource_limits["cpu"]},
                    {"name": "MEMORY", "value": resource_limits["memory"]},
                ],
            },
        },
    }
    document: dict[str, Any] = {
        "template": template,
        "execution": {
            "id": {"project": PROJECT, "domain": DOMAIN, "name": name, "nodeId": "n0"},
            "maxAttempts": max_attempts,
            "annotations": dict(annotations or {}),
        },
    }
    if greeting:
        template["interface"] = {
            "inputs": {"variables": {"name": {"type": {"simple": "STRING"}}}},
            "outputs": {"variables": {"greeting": {"type": {"simple": "STRING"}}}},
        }
        document["inputs"] = {"name": "world"}
    return document


def make_platform(
    tmp_path: Path,
    *,
    k8s: Mapping[str, Any] | None = None,
    executor: Mapping[str, Any] | None = None,
    tasks: Mapping[str, Any] | None = None,
    clock: FakeClock | None = None,
) -> Platform:
    """The built-in plugins over the platform defaults, data under ``tmp_path``; config keys as in Flyte."""
    document: dict[str, Any] = {
        "executor": {"data-root": str(tmp_path / "data"), "workers": 8, **(executor or {})},
        "plugins": {"k8s": dict(k8s or {})},
    }
    if tasks:
        document["tasks"] = dict(tasks)
    return Platform.load(document=document, clock=clock)


# -- reaching the cluster ---------------------------------------------------------------------------------


@pytest.fixture(params=["in-process", pytest.param("http", marks=pytest.mark.integration)])
def kube_access(request: pytest.FixtureRequest) -> str:
    """How the executor reaches the local cluster: its in-process client, or lightkube over HTTP."""
    return str(request.param)


@contextlib.asynccontextmanager
async def kube_client_for(
    cluster: LocalCluster, access: str, tmp_path: Path, *, request_timeout: float = 10.0
) -> AsyncIterator[KubeClient]:
    if access == "in-process":
        yield cluster.client()
        return
    await cluster.serve_http()
    kubeconfig = cluster.kubeconfig(tmp_path / "kubeconfig")
    client = LightkubeClient(kubeconfig, timeout=request_timeout)
    try:
        yield client
    finally:
        await client.close()


# -- what the cluster saw ---------------------------------------------------------------------------------


class PodLedger:
    """Every pod the API server stored, by name: the uid of each ADDED (one per successful create)."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.added: dict[str, list[str]] = defaultdict(list)
        self.deleted: set[str] = set()
        cluster.store.observers.append(self._observe)

    def _observe(self, rtype: ResourceType, event: StoredEvent) -> None:
        if rtype.plural != POD.plural:
            return
        meta = event.obj["metadata"]
        if event.type == "ADDED":
            self.added[meta["name"]].append(meta["uid"])
        elif event.type == "DELETED":
            self.deleted.add(meta["name"])

    def created_twice(self) -> dict[str, list[str]]:
        return {name: uids for name, uids in self.added.items() if len(uids) != 1}


def pods_in(cluster: LocalCluster, namespace: str = NAMESPACE) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p for p in cluster.store.iter(POD, namespace)}


# -- waiting ------------------------------------------------------------------------------------------------


def phase_of(ex: Executor, key: str) -> Phase:
    return Phase(ex.status(key).task_phase)


async def advance_until(
    clock: FakeClock, predicate: Callable[[], bool], *, step: float = 1.0, max_steps: int = 600
) -> None:
    """Move fake time forward ``step`` at a time, letting I/O (HTTP) catch up in between, until
    ``predicate`` holds. Bounded by ``max_steps`` fake steps."""
    for _ in range(max_steps):
        if predicate():
            return
        await clock.advance(step)
        await asyncio.sleep(0.005)
    raise AssertionError(f"not within {step * max_steps} fake seconds: {predicate}")


async def advance_until_done(clock: FakeClock, ex: Executor, key: str, **options: Any) -> ExecutionResult:
    """:func:`advance_until` the execution ends; its result."""
    waiter = asyncio.ensure_future(ex.wait(key))
    try:
        await advance_until(clock, waiter.done, **options)
        return waiter.result()
    finally:
        waiter.cancel()
