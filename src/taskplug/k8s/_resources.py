"""Resource requirements: platform defaults, clamping, GPU renaming, and flyteidl → Kubernetes conversion.

Follows flyteplugins/go/tasks/pluginmachinery/flytek8s/container_helper.go and utils.go. Requirements are
handled as ``{"requests": {name: Quantity}, "limits": {name: Quantity}}`` while they are being computed and
written back into the container as canonical strings at the end.

The three customization modes (container_helper.go):

* ``ASSIGN``: task overrides alone, with platform defaults filled in and clamped;
* ``MERGE_EXISTING`` (primary and init containers): overrides > the container's own > pod template > platform
  defaults, then clamped;
* ``ENSURE_IN_RANGE`` (other containers): only capped at the platform limits with request ≤ limit — which
  writes explicit ``0`` cpu/memory entries where there were none, as Flyte does.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Iterable, Mapping
from typing import Any

from flyteidl.core import tasks_pb2

from taskplug.core import (
    BadTaskSpecification,
    Quantity,
    QuantityError,
    ResourceRequirements,
    TaskExecutionMetadata,
)
from taskplug.k8s._config import K8sPluginConfig

__all__ = [
    "GPU_KEY",
    "RESOURCE_NVIDIA_GPU",
    "ResourceCustomizationMode",
    "Resources",
    "adjust_or_default_resource",
    "apply_k8s_resource_overrides",
    "apply_resource_overrides",
    "ensure_resource_range",
    "merge_resources",
    "merge_resources_if_missing",
    "resources_from_container",
    "resources_from_requirements",
    "resources_to_k8s",
    "sanitize_gpu_resource_requirements",
    "to_k8s_resource_list",
    "to_k8s_resource_requirements",
    "to_k8s_resources_block",
]

GPU_KEY = "gpu"
RESOURCE_NVIDIA_GPU = "nvidia.com/gpu"

Resources = dict[str, dict[str, Quantity]]
_ZERO = Quantity(0)

_FLYTE_RESOURCE_NAMES = {
    tasks_pb2.Resources.CPU: "cpu",
    tasks_pb2.Resources.MEMORY: "memory",
    tasks_pb2.Resources.GPU: RESOURCE_NVIDIA_GPU,  # hard-coded in Flyte, not the configured GPU name
    tasks_pb2.Resources.EPHEMERAL_STORAGE: "ephemeral-storage",
}


class ResourceCustomizationMode(enum.IntEnum):
    ASSIGN = 0
    MERGE_EXISTING = 1
    ENSURE_IN_RANGE = 2


def to_k8s_resource_list(entries: Iterable[tasks_pb2.Resources.ResourceEntry]) -> dict[str, Quantity]:
    """flyteidl resource entries → a Kubernetes resource list; zero values dropped, STORAGE ignored."""
    out: dict[str, Quantity] = {}
    for entry in entries:
        name = _FLYTE_RESOURCE_NAMES.get(entry.name)
        if name is None:
            continue
        try:
            quantity = Quantity(entry.value)
        except QuantityError as e:
            raise BadTaskSpecification(
                f"Failed to parse resource as a valid quantity. [{tasks_pb2.Resources.ResourceName.Name(entry.name)}: "
                f"{entry.value!r}]",
                cause=e,
            ) from e
        if quantity.is_zero():
            continue
        out[name] = quantity
    return out


def to_k8s_resource_requirements(resources: tasks_pb2.Resources | None) -> Resources:
    if resources is None:
        return {"requests": {}, "limits": {}}
    # Every execution of a task converts the same message: remember the answer by its wire bytes (computed
    # from those bytes alone, so equal messages written differently only miss the cache).
    cached = _converted(resources.SerializeToString())
    return {"requests": dict(cached[0]), "limits": dict(cached[1])}


@functools.lru_cache(maxsize=1024)
def _converted(wire: bytes) -> tuple[dict[str, Quantity], dict[str, Quantity]]:
    resources = tasks_pb2.Resources.FromString(wire)
    return to_k8s_resource_list(resources.requests), to_k8s_resource_list(resources.limits)


def to_k8s_resources_block(resources: tasks_pb2.Resources | None) -> dict[str, dict[str, str]]:
    """A task's flyteidl resources as a container's ``resources`` block (canonical strings; empty when the
    task sets none): ``resources_to_k8s(to_k8s_resource_requirements(resources))``, a fresh copy."""
    if resources is None:
        return {}
    cached = _encoded(resources.SerializeToString())  # (as to_k8s_resource_requirements)
    return {kind: dict(values) for kind, values in cached}


@functools.lru_cache(maxsize=1024)
def _encoded(wire: bytes) -> tuple[tuple[str, tuple[tuple[str, str], ...]], ...]:
    requests, limits = _converted(wire)
    encoded = resources_to_k8s({"requests": requests, "limits": limits})
    return tuple((kind, tuple(values.items())) for kind, values in encoded.items())


def resources_from_requirements(req: ResourceRequirements | None) -> Resources:
    if req is None:
        return {"requests": {}, "limits": {}}
    return {"requests": dict(req.requests), "limits": dict(req.limits)}


def resources_from_container(container: Mapping[str, Any], path: str = "resources") -> Resources:
    """Parse a container's ``resources`` block; a bad quantity names the container and the key."""
    raw = container.get("resources") or {}
    requests, limits = raw.get("requests"), raw.get("limits")
    if not requests and not limits:
        return {"requests": {}, "limits": {}}
    out: Resources = {"requests": {}, "limits": {}}
    for kind, values in (("requests", requests), ("limits", limits)):
        if not values:
            continue
        parsed = out[kind]
        for name, value in values.items():
            try:
                parsed[name] = Quantity.from_json(value)
            except QuantityError as e:
                raise BadTaskSpecification(
                    f"container [{container.get('name', '')}] {path}.{kind}.{name}: {e}", cause=e
                ) from e
    return out


def resources_to_k8s(resources: Resources) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    limits = resources.get("limits")
    if limits:
        out["limits"] = {k: str(v) for k, v in limits.items()}
    requests = resources.get("requests")
    if requests:
        out["requests"] = {k: str(v) for k, v in requests.items()}
    return out


def merge_resources(src: Resources, dst: Resources) -> None:
    """Copy every limit and request of ``src`` over ``dst`` (src wins)."""
    for kind in ("limits", "requests"):
        incoming = src.get(kind) or {}
        if not dst.get(kind):
            dst[kind] = dict(incoming)
        else:
            dst[kind].update(incoming)


def merge_resources_if_missing(src: Resources, dst: Resources) -> None:
    """Copy only the keys ``dst`` lacks (dst wins)."""
    for kind in ("limits", "requests"):
        target = dst.setdefault(kind, {})
        for name, value in (src.get(kind) or {}).items():
            target.setdefault(name, value)


def ensure_resource_range(
    request: Quantity, limit: Quantity, platform_limit: Quantity
) -> tuple[Quantity, Quantity]:
    """Cap both at the platform limit, then pull the request down to the limit (a zero is unset: never a
    cap, never capped)."""
    return _clamped(request, limit, _ZERO, platform_limit, False)


def adjust_or_default_resource(
    request: Quantity, limit: Quantity, platform_default: Quantity, platform_limit: Quantity
) -> tuple[Quantity, Quantity]:
    """An unset request takes the limit (else the platform default); an unset limit copies the request; then
    :func:`ensure_resource_range`."""
    return _clamped(request, limit, platform_default, platform_limit, True)


def _clamped(
    request: Quantity, limit: Quantity, default: Quantity, platform_limit: Quantity, assign_if_unset: bool
) -> tuple[Quantity, Quantity]:
    """The one rule behind :func:`adjust_or_default_resource` (``assign_if_unset``) and
    :func:`ensure_resource_range`, written on the quantities' nanos: it runs for every resource of every
    container."""
    if assign_if_unset:
        if not request.nanos:
            request = limit if limit.nanos else default
        if not limit.nanos:
            limit = request
    cap = platform_limit.nanos
    if cap:
        if request.nanos and cap < request.nanos:
            request = platform_limit
        if limit.nanos and cap < limit.nanos:
            limit = platform_limit
    if request.nanos and limit.nanos and limit.nanos < request.nanos:
        request = limit
    return request, limit


def apply_resource_overrides(
    resources: Resources,
    platform: Mapping[str, Mapping[str, Quantity]],
    *,
    assign_if_unset: bool,
    default_cpu: Quantity,
    default_memory: Quantity,
    gpu_resource_name: str,
) -> Resources:
    """Flyte's ApplyResourceOverrides (with resolvePlatformDefaults); ``platform`` is only read."""
    requests = resources.setdefault("requests", {})
    limits = resources.setdefault("limits", {})
    platform_requests = platform.get("requests") or {}
    platform_limits = platform.get("limits") or {}
    for name in ("cpu", "memory", "ephemeral-storage", gpu_resource_name):
        if name == "cpu":
            # Config defaults apply only when the platform request *key* is absent.
            default = platform_requests.get(name, default_cpu)
        elif name == "memory":
            default = platform_requests.get(name, default_memory)
        elif name in requests or name in limits:  # (optional resources only when asked for)
            default = platform_requests.get(name, _ZERO)
        else:
            continue
        request, limit = _clamped(
            requests.get(name, _ZERO),
            limits.get(name, _ZERO),
            default,
            platform_limits.get(name, _ZERO),
            assign_if_unset,
        )
        # Both keys are written back even when zero, as Flyte does.
        requests[name] = request
        limits[name] = limit
    return resources


def apply_k8s_resource_overrides(
    meta: TaskExecutionMetadata, resources: Resources, k8s: K8sPluginConfig
) -> Resources:
    """Flyte's ApplyK8sResourceOverrides (utils.go): ``resources`` completed and capped, in assign mode, by
    the execution's platform resources (then ``plugins.k8s``'s default cpu/memory); ``resources`` is left
    unchanged, as Go's copy is. What a plugin applies to resources a task declares for one part of its
    object (a replica, a scheduler)."""
    copied: Resources = {kind: dict(resources.get(kind) or {}) for kind in ("requests", "limits")}
    return apply_resource_overrides(
        copied,
        resources_from_requirements(meta.platform_resources),
        assign_if_unset=True,
        default_cpu=k8s.default_cpus,
        default_memory=k8s.default_memory,
        gpu_resource_name=k8s.gpu_resource_name,
    )


def sanitize_gpu_resource_requirements(resources: Resources, gpu_resource_name: str) -> None:
    """Rename the generic ``gpu`` key to the configured GPU resource name (overwriting)."""
    for kind in ("requests", "limits"):
        values = resources.get(kind)
        if values and GPU_KEY in values:
            values[gpu_resource_name] = values.pop(GPU_KEY)
