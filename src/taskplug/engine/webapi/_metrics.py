"""Prometheus metrics of the web-API machinery, with Flyte's names.

Follows flyteplugins/go/tasks/pluginmachinery/internal/webapi/metrics.go and flytestdlib/cache's
``metrics``. Flyte's scopes become a metric-name prefix: ``<namespace>_<name>`` for the plugin and
``<namespace>_cache_<name>`` for its status cache, where the namespace is ``webapi_<plugin id>`` with
characters Prometheus does not allow replaced by ``_``.

The registry is always injected: nothing registers on prometheus-client's global registry, so two plugins
(or two tests) never collide.

Deviation: Flyte's ``resource_wait_time`` is a summary with quantiles 0.5/0.9/0.99/1.0; prometheus-client's
Summary exports count and sum only, so quantiles are left to the query side.
"""

from __future__ import annotations

import re

from prometheus_client import CollectorRegistry, Counter, Gauge, Summary

__all__ = ["CacheMetrics", "WebApiMetrics", "metric_namespace"]


def metric_namespace(plugin_id: str) -> str:
    """``webapi_<plugin id>`` with every character Prometheus rejects turned into ``_``."""
    return "webapi_" + re.sub(r"[^a-zA-Z0-9_]", "_", plugin_id)


class CacheMetrics:
    """The AutoRefresh cache's metrics: sync_errors, lru_evictions, latency, cache_hit, cache_miss, size."""

    def __init__(self, registry: CollectorRegistry, namespace: str) -> None:
        def counter(name: str, doc: str) -> Counter:
            return Counter(name, doc, namespace=namespace, subsystem="cache", registry=registry)

        self.sync_errors = counter("sync_errors", "Batches whose sync function failed.")
        self.lru_evictions = counter("lru_evictions", "Items dropped because the cache was full.")
        self.cache_hit = counter("cache_hit", "Lookups that found the item.")
        self.cache_miss = counter("cache_miss", "Lookups that did not find the item.")
        self.latency = Summary(
            "latency",
            "Seconds one sync batch took.",
            namespace=namespace,
            subsystem="cache",
            registry=registry,
        )
        self.size = Gauge(
            "size", "Items in the cache.", namespace=namespace, subsystem="cache", registry=registry
        )


class WebApiMetrics:
    """The web-API core's metrics (token grants and releases, state decoding)."""

    def __init__(self, registry: CollectorRegistry, namespace: str) -> None:
        def counter(name: str, doc: str) -> Counter:
            return Counter(name, doc, namespace=namespace, registry=registry)

        self.resource_release_success = counter("resource_release_success", "Allocation tokens released.")
        self.resource_release_failed = counter(
            "resource_release_failed", "Allocation token releases that failed."
        )
        self.allocation_grant_success = counter("allocation_grant_success", "Allocation tokens granted.")
        self.allocation_grant_failed = counter(
            "allocation_grant_failed", "Allocation requests refused (quota)."
        )
        self.unmarshal_state_failed = counter(
            "unmarshal_state_failed", "Plugin states that could not be decoded."
        )
        self.resource_wait_time = Summary(
            "resource_wait_time",
            "Milliseconds from the first allocation request to the grant.",
            namespace=namespace,
            registry=registry,
        )
        self.unmarshal_state_success = Summary(
            "unmarshal_state_success",
            "Milliseconds spent decoding plugin state.",
            namespace=namespace,
            registry=registry,
        )
