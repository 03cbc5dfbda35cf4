"""The resource types the local cluster serves, and small helpers on object metadata.

Follows the built-in REST mappings of a real API server (``/api/v1`` pods, nodes, namespaces,
resourcequotas, podtemplates; ``/apis/events.k8s.io/v1`` events) plus any custom resource type registered
at run time, as a CRD would register it.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any, Final

import orjson

from taskplug.k8s import EVENT, POD, ResourceType

__all__ = [
    "BUILTIN_TYPES",
    "EVENT",
    "NAMESPACE",
    "NODE",
    "POD",
    "POD_TEMPLATE",
    "RESOURCE_QUOTA",
    "TERMINAL_PHASES",
    "TypeRegistry",
    "deep_copy",
    "format_micro_time",
    "format_time",
    "set_condition",
    "type_key",
]

NODE: Final = ResourceType("v1", "Node", "nodes", namespaced=False)
NAMESPACE: Final = ResourceType("v1", "Namespace", "namespaces", namespaced=False)
RESOURCE_QUOTA: Final = ResourceType("v1", "ResourceQuota", "resourcequotas")
POD_TEMPLATE: Final = ResourceType("v1", "PodTemplate", "podtemplates")
BUILTIN_TYPES: Final = (POD, NODE, NAMESPACE, RESOURCE_QUOTA, POD_TEMPLATE, EVENT)
TERMINAL_PHASES: Final = frozenset({"Succeeded", "Failed"})

_SHORT_NAMES: Final = {
    "pods": ["po"],
    "nodes": ["no"],
    "namespaces": ["ns"],
    "resourcequotas": ["quota"],
    "events": ["ev"],
}


def type_key(rtype: ResourceType) -> tuple[str, str]:
    """A resource type's identity in the store: ``(apiVersion, plural)``."""
    return (rtype.api_version, rtype.plural)


def deep_copy(obj: Any) -> Any:
    """A copy sharing nothing with ``obj``; an orjson round trip is several times faster than deepcopy."""
    return orjson.loads(orjson.dumps(obj))


def format_time(when: datetime) -> str:
    """RFC 3339 at second resolution, as metav1.Time marshals."""
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def format_micro_time(when: datetime) -> str:
    """RFC 3339 with microseconds, as metav1.MicroTime marshals (events' ``eventTime``)."""
    return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class TypeRegistry:
    """The types the cluster knows, by ``(apiVersion, plural)`` and by ``(group, kind)``."""

    def __init__(self, types: Iterable[ResourceType] = BUILTIN_TYPES) -> None:
        self._by_key: dict[tuple[str, str], ResourceType] = {}
        for rtype in types:
            self.register(rtype)

    def register(self, rtype: ResourceType) -> ResourceType:
        return self._by_key.setdefault(type_key(rtype), rtype)

    def get(self, api_version: str, plural: str) -> ResourceType | None:
        return self._by_key.get((api_version, plural))

    def resolve(self, rtype: ResourceType) -> ResourceType:
        """The registered twin of ``rtype`` (the registration decides the scope), registering it if new."""
        return self._by_key.get(type_key(rtype)) or self.register(rtype)

    def all(self) -> list[ResourceType]:
        return list(self._by_key.values())

    def group_versions(self) -> dict[str, list[str]]:
        """Group → versions, for ``/apis`` discovery (the core group ``""`` included)."""
        groups: dict[str, list[str]] = {}
        for rtype in self._by_key.values():
            versions = groups.setdefault(rtype.group, [])
            if rtype.version not in versions:
                versions.append(rtype.version)
        return groups

    def in_group_version(self, api_version: str) -> list[ResourceType]:
        return [t for t in self._by_key.values() if t.api_version == api_version]

    @staticmethod
    def short_names(rtype: ResourceType) -> list[str]:
        return list(_SHORT_NAMES.get(rtype.plural, []) if not rtype.group or rtype == EVENT else [])


def set_condition(
    status: dict[str, Any],
    type_: str,
    value: str,
    now: str,
    reason: str | None = None,
    message: str | None = None,
) -> None:
    """Set a status condition in place; ``lastTransitionTime`` moves only when the status flips."""
    conditions: list[dict[str, Any]] = status.setdefault("conditions", [])
    for cond in conditions:
        if cond.get("type") == type_:
            if cond.get("status") != value:
                cond["lastTransitionTime"] = now
            cond["status"] = value
            break
    else:
        cond = {"type": type_, "status": value, "lastProbeTime": None, "lastTransitionTime": now}
        conditions.append(cond)
    for key, text in (("reason", reason), ("message", message)):
        if text:
            cond[key] = text
        else:
            cond.pop(key, None)
