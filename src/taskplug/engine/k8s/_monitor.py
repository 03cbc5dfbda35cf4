"""Prometheus metrics of the Kubernetes machinery, and the resource-level monitor.

Follows flytepropeller/pkg/controller/nodes/task/k8s/plugin_collector.go (``k8s_resources`` per
namespace and kind, ``k8s_collection_cycle``) and the plugin manager's counters. Metrics live in the
registry handed in, never in prometheus-client's global one.

Deviation: Flyte leaves a namespace's gauge at its last value when the namespace empties; here it drops
to 0, so a dashboard does not show objects that are gone.
"""

from __future__ import annotations

import asyncio
import weakref
from collections import Counter as _Tally
from typing import ClassVar, Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from taskplug.core import Clock
from taskplug.engine.k8s._informer import Informer, InformerFactory

__all__ = ["COLLECTION_INTERVAL_SECONDS", "K8sMetrics", "ResourceLevelMonitor"]

COLLECTION_INTERVAL_SECONDS: Final = 10.0


class K8sMetrics:
    """Every metric of the machinery, registered once per registry."""

    _by_registry: ClassVar[weakref.WeakKeyDictionary[CollectorRegistry, K8sMetrics]] = (
        weakref.WeakKeyDictionary()
    )

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.resources = Gauge(
            "k8s_resources",
            "Objects of a kind per namespace, from the informer cache",
            ["namespace", "kind"],
            registry=registry,
        )
        self.collection_cycle = Histogram(
            "k8s_collection_cycle_seconds", "Time to count the objects of a kind", ["kind"], registry=registry
        )
        self.task_pod_errors = Counter(
            "task_pod_errors",
            "Phases reported with an error",
            ["plugin", "phase", "error_code"],
            registry=registry,
        )
        self.informer_updates = Counter(
            "k8s_informer_updates",
            "Update events seen by a plugin manager",
            ["plugin", "outcome"],
            registry=registry,
        )

    @classmethod
    def for_registry(cls, registry: CollectorRegistry | None) -> K8sMetrics:
        """The metrics of ``registry`` (a private registry when None: counted, never exported)."""
        if registry is None:
            return cls(CollectorRegistry(auto_describe=True))
        metrics = cls._by_registry.get(registry)
        if metrics is None:
            metrics = cls(registry)
            cls._by_registry[registry] = metrics
        return metrics


class ResourceLevelMonitor:
    """Counts a kind's objects per namespace from the informer cache, every 10 s once synced."""

    def __init__(
        self,
        informer: Informer,
        *,
        metrics: K8sMetrics,
        clock: Clock,
        interval: float = COLLECTION_INTERVAL_SECONDS,
    ) -> None:
        self.informer = informer
        self.kind = informer.rtype.kind.lower()
        self.metrics = metrics
        self.clock = clock
        self.interval = interval
        self._seen: set[str] = set()

    @classmethod
    def start(
        cls, informers: InformerFactory, informer: Informer, *, metrics: K8sMetrics
    ) -> ResourceLevelMonitor:
        """The monitor of ``informer``'s kind for this factory and registry, run once in its TaskGroup."""
        key = ("taskplug.k8s.resource-monitor", informer.rtype, id(metrics.registry))
        monitor = informers.extensions.get(str(key))
        if monitor is None:
            monitor = cls(informer, metrics=metrics, clock=informers.clock)
            informers.extensions[str(key)] = monitor
            informers.spawn_once(key, monitor.run)
        assert isinstance(monitor, ResourceLevelMonitor)
        return monitor

    def collect_once(self) -> dict[str, int]:
        started = self.clock.monotonic()
        counts = _Tally(ns for ns, _ in self.informer.keys())  # noqa: SIM118 - keys() is the informer's API
        for namespace in self._seen - counts.keys():
            self.metrics.resources.labels(namespace=namespace, kind=self.kind).set(0)
        for namespace, count in counts.items():
            self.metrics.resources.labels(namespace=namespace, kind=self.kind).set(count)
        self._seen = set(counts)
        self.metrics.collection_cycle.labels(kind=self.kind).observe(self.clock.monotonic() - started)
        return dict(counts)

    async def run(self) -> None:
        await self.informer.wait_synced()
        while True:
            self.collect_once()
            await self.clock.sleep(self.interval)
            await asyncio.sleep(0)
