"""Shared fixtures for the k8s machinery tests: the local cluster as the real API, and a counting client.

Fixture names say what they are: ``local_cluster`` (an in-process LocalCluster), ``counting_kube_client``
(its client behind a proxy that counts calls and can hold watches or fail connections).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Literal

import pytest

from taskplug.k8s import KubeClient, ResourceType, WatchEvent


class CountingKubeClient:
    """A KubeClient proxy: counts API calls per verb, records watch versions, and can script trouble the
    API itself cannot produce (refused connections) or hold new watches until released."""

    def __init__(self, inner: KubeClient) -> None:
        self.inner = inner
        self.calls: Counter[str] = Counter()
        self.watch_versions: list[str | None] = []
        self.watch_gate = asyncio.Event()
        self.watch_gate.set()
        self._connection_failures: dict[str, int] = {}

    def refuse_connections(self, verb: str, times: int) -> None:
        self._connection_failures[verb] = times

    def _maybe_refuse(self, verb: str) -> None:
        left = self._connection_failures.get(verb, 0)
        if left > 0:
            self._connection_failures[verb] = left - 1
            raise ConnectionRefusedError(f"connection refused ({verb})")

    async def create(self, rtype: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        self.calls["create"] += 1
        self._maybe_refuse("create")
        return await self.inner.create(rtype, obj)

    async def get(self, rtype: ResourceType, namespace: str, name: str) -> dict[str, Any]:
        self.calls["get"] += 1
        self._maybe_refuse("get")
        return await self.inner.get(rtype, namespace, name)

    async def list(
        self, rtype: ResourceType, namespace: str | None = None, *, label_selector: str | None = None
    ) -> tuple[list[dict[str, Any]], str]:
        self.calls["list"] += 1
        self._maybe_refuse("list")
        return await self.inner.list(rtype, namespace, label_selector=label_selector)

    async def watch(
        self,
        rtype: ResourceType,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        label_selector: str | None = None,
        timeout_seconds: int | None = None,
    ) -> AsyncIterator[WatchEvent]:
        self.calls["watch"] += 1
        self.watch_versions.append(resource_version)
        await self.watch_gate.wait()
        self._maybe_refuse("watch")
        async for event in self.inner.watch(
            rtype,
            namespace,
            resource_version=resource_version,
            label_selector=label_selector,
            timeout_seconds=timeout_seconds,
        ):
            yield event

    async def patch(
        self,
        rtype: ResourceType,
        namespace: str,
        name: str,
        patch: Mapping[str, Any],
        *,
        patch_type: Literal["merge", "json", "strategic"] = "merge",
    ) -> dict[str, Any]:
        self.calls["patch"] += 1
        self._maybe_refuse("patch")
        return await self.inner.patch(rtype, namespace, name, patch, patch_type=patch_type)

    async def replace(self, rtype: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        self.calls["replace"] += 1
        return await self.inner.replace(rtype, obj)

    async def delete(self, rtype: ResourceType, namespace: str, name: str) -> dict[str, Any] | None:
        self.calls["delete"] += 1
        self._maybe_refuse("delete")
        return await self.inner.delete(rtype, namespace, name)

    async def close(self) -> None:
        await self.inner.close()


async def eventually(predicate: Callable[[], bool], *, rounds: int = 2000) -> None:
    """Let other tasks run until ``predicate`` holds (bounded by loop iterations, not by time)."""
    for _ in range(rounds):
        if predicate():
            return
        await asyncio.sleep(0)
    assert predicate(), "condition never became true"


@pytest.fixture
async def local_cluster() -> AsyncIterator[Any]:
    """An in-process LocalCluster (simulated mode), stopped at the end of the test."""
    localcluster = pytest.importorskip("taskplug.localcluster")
    async with localcluster.LocalCluster(mode="simulated") as cluster:
        yield cluster


@pytest.fixture
def counting_kube_client(local_cluster: Any) -> CountingKubeClient:
    """The local cluster's in-process client behind a :class:`CountingKubeClient`."""
    return CountingKubeClient(local_cluster.client())


@pytest.fixture
def eventually_fn() -> Callable[..., Any]:
    return eventually
