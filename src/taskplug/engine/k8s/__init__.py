"""What runs Kubernetes plugins (flytepropeller's ``nodes/task/k8s`` and ``nodes/task/backoff``): the plugin
manager, the shared informer, Kubernetes events, the resource-level monitor, quota-aware back-off, and the
lightkube adapter that talks to a real cluster
(:func:`connect`)."""

from taskplug.engine.k8s._backoff import (
    BackOffController,
    BackOffError,
    ComputeResourceAwareBackOffHandler,
    ComputeResourceCeilings,
    SimpleBackOffBlocker,
    get_compute_resource_and_quantity,
    is_back_off_error,
    is_etcd_error,
    is_resource_quota_exceeded,
    is_resource_requests_eligible,
)
from taskplug.engine.k8s._connect import connect
from taskplug.engine.k8s._events import EventInfo, EventWatcher
from taskplug.engine.k8s._informer import Informer, InformerFactory, ObjectKey, object_key
from taskplug.engine.k8s._monitor import K8sMetrics, ResourceLevelMonitor
from taskplug.engine.k8s._plugin_manager import (
    PLUGIN_STATE_VERSION,
    ManagerState,
    PluginManager,
    PluginPhase,
    SharedK8sMachinery,
    compose_resource_key,
    effective_pod_limits,
    k8s_core_entry,
)

__all__ = [
    "PLUGIN_STATE_VERSION",
    "BackOffController",
    "BackOffError",
    "ComputeResourceAwareBackOffHandler",
    "ComputeResourceCeilings",
    "EventInfo",
    "EventWatcher",
    "Informer",
    "InformerFactory",
    "K8sMetrics",
    "ManagerState",
    "ObjectKey",
    "PluginManager",
    "PluginPhase",
    "ResourceLevelMonitor",
    "SharedK8sMachinery",
    "SimpleBackOffBlocker",
    "compose_resource_key",
    "connect",
    "effective_pod_limits",
    "get_compute_resource_and_quantity",
    "is_back_off_error",
    "is_etcd_error",
    "is_resource_quota_exceeded",
    "is_resource_requests_eligible",
    "k8s_core_entry",
    "object_key",
]
