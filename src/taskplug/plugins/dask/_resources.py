"""Resource requirements from a flyteidl ``Resources`` message, with the platform's defaults applied.

Follows flyteplugins/go/tasks/pluginmachinery/flytek8s/{utils.go ToK8sResourceRequirements,
container_helper.go ApplyK8sResourceOverrides}. ``taskplug.k8s`` has these rules (``_resources``) but does
not export them yet, and a plugin may not import another package's underscored module; this module repeats
them for the Dask plugin until it does (the Ray plugin carries the same copy).
"""

from __future__ import annotations

from collections.abc import Iterable

from flyteidl.core import tasks_pb2

from taskplug.core import BadTaskSpecification, Quantity, QuantityError, TaskExecutionMetadata
from taskplug.k8s import K8sPluginConfig

__all__ = ["Resources", "apply_k8s_resource_overrides", "resources_to_k8s", "to_k8s_resource_requirements"]

Resources = dict[str, dict[str, Quantity]]

_ZERO = Quantity(0)
_NAMES = {
    tasks_pb2.Resources.CPU: "cpu",
    tasks_pb2.Resources.MEMORY: "memory",
    tasks_pb2.Resources.GPU: "nvidia.com/gpu",  # hard-coded in Flyte, not the configured GPU name
    tasks_pb2.Resources.EPHEMERAL_STORAGE: "ephemeral-storage",
}


def _resource_list(entries: Iterable[tasks_pb2.Resources.ResourceEntry]) -> dict[str, Quantity]:
    out: dict[str, Quantity] = {}
    for entry in entries:
        try:
            quantity = Quantity(entry.value)
        except QuantityError as e:
            raise BadTaskSpecification("Failed to parse resource as a valid quantity.", cause=e) from e
        name = _NAMES.get(entry.name)
        if name is not None and not quantity.is_zero():
            out[name] = quantity
    return out


def to_k8s_resource_requirements(resources: tasks_pb2.Resources | None) -> Resources:
    """flyteidl requests and limits as Kubernetes resource lists; zero values and STORAGE are dropped."""
    if resources is None:
        return {"requests": {}, "limits": {}}
    return {"requests": _resource_list(resources.requests), "limits": _resource_list(resources.limits)}


def _min(value: Quantity, limit: Quantity) -> Quantity:
    if value.is_zero() or limit.is_zero():
        return value
    return limit if value > limit else value


def _adjust(name: str, resources: Resources, platform: Resources) -> None:
    requests, limits = resources["requests"], resources["limits"]
    request, limit = requests.get(name, _ZERO), limits.get(name, _ZERO)
    platform_limit = platform["limits"].get(name, _ZERO)
    # AdjustOrDefaultResource: an unset request takes the limit (else the platform default), an unset limit
    # the request; then both are capped at the platform limit and the request at the limit.
    if request.is_zero():
        request = limit if not limit.is_zero() else platform["requests"].get(name, _ZERO)
    if limit.is_zero():
        limit = request
    request = _min(request, platform_limit)
    limit = _min(limit, platform_limit)
    requests[name] = _min(request, limit)
    limits[name] = limit


def apply_k8s_resource_overrides(
    meta: TaskExecutionMetadata, resources: Resources, k8s: K8sPluginConfig
) -> Resources:
    """Requests and limits both set, defaulted from the execution's platform resources (then the
    ``plugins.k8s`` default cpu/memory) and capped by them (Flyte's ApplyK8sResourceOverrides)."""
    platform = meta.platform_resources
    platform_requests = dict(platform.requests) if platform is not None else {}
    platform_requests.setdefault("cpu", k8s.default_cpus)
    platform_requests.setdefault("memory", k8s.default_memory)
    resolved: Resources = {
        "requests": platform_requests,
        "limits": dict(platform.limits) if platform is not None else {},
    }
    out: Resources = {"requests": dict(resources["requests"]), "limits": dict(resources["limits"])}
    _adjust("cpu", out, resolved)
    _adjust("memory", out, resolved)
    for optional in ("ephemeral-storage", k8s.gpu_resource_name):
        if optional in out["requests"] or optional in out["limits"]:
            _adjust(optional, out, resolved)
    return out


def resources_to_k8s(resources: Resources) -> dict[str, dict[str, str]]:
    """The container's ``resources`` block (empty lists left out, as Go's omitempty does)."""
    out: dict[str, dict[str, str]] = {}
    if resources.get("limits"):
        out["limits"] = {k: str(v) for k, v in resources["limits"].items()}
    if resources.get("requests"):
        out["requests"] = {k: str(v) for k, v in resources["requests"].items()}
    return out
