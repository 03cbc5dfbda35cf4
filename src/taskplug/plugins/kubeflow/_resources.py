"""Per-replica resources: flyteidl ``Resources`` to Kubernetes requirements, with platform defaults applied.

Follows flyteplugins/go/tasks/pluginmachinery/flytek8s/{utils.go (ToK8sResourceRequirements,
ApplyK8sResourceOverrides), container_helper.go (ApplyResourceOverrides, assign mode)}: exactly what
``taskplug.k8s`` computes for a container's overrides, which that package does not export. A replica's
resources become the task's override resources, so they are first completed the way Flyte completes them:
an unset request takes the limit (else the platform default), an unset limit copies the request, both are
capped at the platform limit.
"""

from __future__ import annotations

from collections.abc import Iterable

from flyteidl.core import tasks_pb2
from google.protobuf import json_format

from taskplug.core import (
    BadTaskSpecification,
    Quantity,
    QuantityError,
    ResourceRequirements,
    TaskExecutionMetadata,
)
from taskplug.k8s import K8sPluginConfig

__all__ = ["replica_resources"]

_ZERO = Quantity(0)
_NAMES = {
    tasks_pb2.Resources.CPU: "cpu",
    tasks_pb2.Resources.MEMORY: "memory",
    # Hard-coded in Flyte, whatever GPU resource name the platform configures.
    tasks_pb2.Resources.GPU: "nvidia.com/gpu",
    tasks_pb2.Resources.EPHEMERAL_STORAGE: "ephemeral-storage",
}


def _resource_list(entries: Iterable[tasks_pb2.Resources.ResourceEntry]) -> dict[str, Quantity]:
    out: dict[str, Quantity] = {}
    for entry in entries:
        name = _NAMES.get(entry.name)
        if name is None:
            continue  # STORAGE and UNKNOWN have no Kubernetes counterpart
        quantity = Quantity(entry.value)
        if not quantity.is_zero():
            out[name] = quantity
    return out


def _min(a: Quantity, b: Quantity) -> Quantity:
    # A zero on either side means "unset": no minimum is taken.
    if a.is_zero() or b.is_zero():
        return a
    return b if b < a else a


def _assign(
    name: str,
    requests: dict[str, Quantity],
    limits: dict[str, Quantity],
    platform_requests: dict[str, Quantity],
    platform_limits: dict[str, Quantity],
) -> None:
    request, limit = requests.get(name, _ZERO), limits.get(name, _ZERO)
    platform_limit = platform_limits.get(name, _ZERO)
    if request.is_zero():
        request = limit if not limit.is_zero() else platform_requests.get(name, _ZERO)
    if limit.is_zero():
        limit = request
    request = _min(request, platform_limit)
    limit = _min(limit, platform_limit)
    request = _min(request, limit)
    # Both keys are written back, zero or not, as Flyte does.
    requests[name], limits[name] = request, limit


def replica_resources(
    resources: tasks_pb2.Resources, meta: TaskExecutionMetadata, k8s: K8sPluginConfig
) -> ResourceRequirements:
    """A replica's resources as the override resources its pods are built with (Flyte's
    ``ToK8sResourceRequirements`` then ``ApplyK8sResourceOverrides``)."""
    try:
        requests, limits = _resource_list(resources.requests), _resource_list(resources.limits)
    except QuantityError as e:
        shown = json_format.MessageToJson(resources, indent=None, sort_keys=True)
        raise BadTaskSpecification(
            f"invalid TaskSpecification on Resources [{shown}], "
            f"Err: [Failed to parse resource as a valid quantity. {e}]"
        ) from e
    platform = meta.platform_resources
    platform_requests = dict(platform.requests) if platform is not None else {}
    platform_limits = dict(platform.limits) if platform is not None else {}
    # The config defaults apply only where the platform has no request of that name at all.
    platform_requests.setdefault("cpu", k8s.default_cpus)
    platform_requests.setdefault("memory", k8s.default_memory)
    for name in ("cpu", "memory"):
        _assign(name, requests, limits, platform_requests, platform_limits)
    for name in ("ephemeral-storage", k8s.gpu_resource_name):
        if name in requests or name in limits:
            _assign(name, requests, limits, platform_requests, platform_limits)
    return ResourceRequirements(requests, limits)
