"""Kubernetes plugin machinery: client contract, pod builders, plugin manager, back-off, informer."""

from taskplug.k8s._client import (
    EVENT,
    POD,
    KubeApiError,
    KubeClient,
    ResourceType,
    WatchEvent,
    is_already_exists,
    is_conflict,
    is_not_found,
)

__all__ = [
    "EVENT",
    "POD",
    "KubeApiError",
    "KubeClient",
    "ResourceType",
    "WatchEvent",
    "is_already_exists",
    "is_conflict",
    "is_not_found",
]
