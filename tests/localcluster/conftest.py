"""Fixtures and builders shared by the local-cluster tests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from taskplug.core import FakeClock
from taskplug.localcluster import LocalCluster


def pod_manifest(
    name: str,
    *,
    command: list[str] | None = None,
    image: str = "python:3.11",
    namespace: str = "default",
    restart: str = "Never",
    resources: dict[str, Any] | None = None,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    spec: dict[str, Any] | None = None,
    **container: Any,
) -> dict[str, Any]:
    main: dict[str, Any] = {"name": "main", "image": image, "command": command or ["true"], **container}
    if resources is not None:
        main["resources"] = resources
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if annotations:
        metadata["annotations"] = annotations
    if labels:
        metadata["labels"] = labels
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {"restartPolicy": restart, "containers": [main], **(spec or {})},
    }


async def settle(rounds: int = 50) -> None:
    """Let the cluster's controllers drain what is queued (no time passes)."""
    for _ in range(rounds):
        await asyncio.sleep(0)


def phase_in(*phases: str) -> Any:
    return lambda obj: (obj.get("status") or {}).get("phase") in phases


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == type_), None)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def sim(clock: FakeClock) -> AsyncIterator[LocalCluster]:
    """A simulated-mode cluster on a fake clock."""
    async with LocalCluster(mode="simulated", clock=clock) as cluster:
        yield cluster


@pytest.fixture
async def proc() -> AsyncIterator[LocalCluster]:
    """A process-mode cluster on the real clock (processes take real time)."""
    async with LocalCluster(mode="process", memory_poll_interval=0.02, kill_grace_seconds=1.0) as cluster:
        yield cluster
