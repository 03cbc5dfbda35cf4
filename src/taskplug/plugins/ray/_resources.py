"""Two pod-building rules ``taskplug.k8s`` has but does not export yet: flyteidl ``Resources`` as Kubernetes
requirements, and tolerations for the extended resources a pod requests.

Follows flyteplugins/go/tasks/pluginmachinery/flytek8s/{utils.go ToK8sResourceRequirements,
k8s_resource_adds.go AddTolerationsForExtendedResources}. A plugin may not import another package's
underscored module, so the Ray plugin repeats them here until ``taskplug.k8s`` exports them (the Dask
plugin carries the same conversion).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from flyteidl.core import tasks_pb2

from taskplug.core import BadTaskSpecification, Quantity, QuantityError
from taskplug.k8s import K8sPluginConfig

__all__ = ["add_tolerations_for_extended_resources", "resources_to_k8s", "to_k8s_resource_requirements"]

Resources = dict[str, dict[str, Quantity]]
KubeObject = dict[str, Any]

_NAMES = {
    tasks_pb2.Resources.CPU: "cpu",
    tasks_pb2.Resources.MEMORY: "memory",
    tasks_pb2.Resources.GPU: "nvidia.com/gpu",  # hard-coded in Flyte, not the configured GPU name
    tasks_pb2.Resources.EPHEMERAL_STORAGE: "ephemeral-storage",
}
_TOLERATION_KEYS = ("key", "operator", "value", "effect")


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


def resources_to_k8s(resources: Resources) -> dict[str, dict[str, str]]:
    """A ``resources`` block (empty lists left out, as Go's omitempty does)."""
    out: dict[str, dict[str, str]] = {}
    if resources.get("limits"):
        out["limits"] = {k: str(v) for k, v in resources["limits"].items()}
    if resources.get("requests"):
        out["requests"] = {k: str(v) for k, v in resources["requests"].items()}
    return out


def add_tolerations_for_extended_resources(spec: KubeObject, k8s: K8sPluginConfig) -> KubeObject:
    """An ``Exists``/``NoSchedule`` toleration for each configured extended resource some container requests;
    a toleration already there is not repeated."""
    wanted = k8s.add_tolerations_for_extended_resources
    if not wanted:
        return spec
    requested: set[str] = set()
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        requests = (container.get("resources") or {}).get("requests") or {}
        requested.update(name for name in wanted if name in requests)
    tolerations = list(spec.get("tolerations") or [])
    for name in sorted(requested):
        toleration = {"key": name, "operator": "Exists", "effect": "NoSchedule"}
        if not any(all(toleration.get(k, "") == t.get(k, "") for k in _TOLERATION_KEYS) for t in tolerations):
            tolerations.append(toleration)
    if tolerations:
        spec["tolerations"] = tolerations
    return spec
