"""A pod's resource arithmetic, shared by the scheduler and quota admission.

Follows k8s.io/component-helpers/resource (``PodRequests``/``PodLimits``: the sum over regular containers,
raised to the largest init container) and pkg/quota/v1/evaluator/core/pods.go (``podComputeUsageHelper``:
which quota resource names a pod uses — ``pods``, ``cpu``/``requests.cpu``, ``limits.cpu``, memory alike,
``requests.<extended>``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from taskplug.core import Quantity, QuantityError

__all__ = [
    "ResourceList",
    "add_resources",
    "container_usage_names",
    "format_resources",
    "is_extended_resource",
    "pod_limits",
    "pod_quota_usage",
    "pod_requests",
    "quantity_sum",
]

ResourceList = dict[str, Quantity]

_STANDARD: Final = frozenset({"cpu", "memory", "ephemeral-storage"})


def _parse(values: Mapping[str, Any] | None) -> ResourceList:
    out: ResourceList = {}
    for key, value in (values or {}).items():
        try:
            out[key] = Quantity(str(value))
        except QuantityError:
            continue  # the API server would have refused it; nothing sensible to count
    return out


def quantity_sum(a: Quantity, b: Quantity) -> Quantity:
    """``a + b`` keeping the format of whichever is non-zero first, as ``resource.Quantity.Add`` shows it."""
    return Quantity.from_nanos(a.nanos + b.nanos, b.format if a.is_zero() else a.format)


def add_resources(total: ResourceList, more: Mapping[str, Quantity], sign: int = 1) -> None:
    for key, value in more.items():
        current = total.get(key, Quantity(0))
        total[key] = quantity_sum(current, value if sign > 0 else -value)


def _aggregate(spec: Mapping[str, Any], field: str) -> ResourceList:
    total: ResourceList = {}
    for container in spec.get("containers") or []:
        add_resources(total, _parse((container.get("resources") or {}).get(field)))
    for container in spec.get("initContainers") or []:
        for key, value in _parse((container.get("resources") or {}).get(field)).items():
            if key not in total or value > total[key]:
                total[key] = value
    return total


def pod_requests(spec: Mapping[str, Any]) -> ResourceList:
    return _aggregate(spec, "requests")


def pod_limits(spec: Mapping[str, Any]) -> ResourceList:
    return _aggregate(spec, "limits")


def is_extended_resource(name: str) -> bool:
    return "/" in name and not name.startswith(("kubernetes.io/", "requests.")) and name not in _STANDARD


def _usage(requests: ResourceList, limits: ResourceList) -> ResourceList:
    usage: ResourceList = {"pods": Quantity(1), "count/pods": Quantity(1)}
    for res in _STANDARD:
        if res in requests:
            usage[res] = requests[res]
            usage[f"requests.{res}"] = requests[res]
        if res in limits:
            usage[f"limits.{res}"] = limits[res]
    for res, value in requests.items():
        if is_extended_resource(res) or res.startswith("hugepages-"):
            usage[f"requests.{res}"] = value
    return usage


def pod_quota_usage(spec: Mapping[str, Any]) -> ResourceList:
    return _usage(pod_requests(spec), pod_limits(spec))


def container_usage_names(container: Mapping[str, Any]) -> set[str]:
    resources = container.get("resources") or {}
    return set(_usage(_parse(resources.get("requests")), _parse(resources.get("limits"))))


def format_resources(resources: Mapping[str, Quantity], names: Iterable[str]) -> str:
    """``limits.cpu=2,limits.memory=1Gi``: sorted, comma-joined, canonical (Kubernetes' quota prettyPrint)."""
    return ",".join(f"{name}={resources.get(name, Quantity(0))}" for name in sorted(names))
