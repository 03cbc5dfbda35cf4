"""Kubernetes plugin machinery: client contract, plugin contract, config, pod builders, plugin manager,
back-off, informer.

For plugin authors (see ``docs/plugins.md``): implement :class:`K8sPlugin`, register a
:class:`K8sPluginEntry`; build pods with :func:`to_k8s_pod_spec` (or :func:`build_raw_pod` then
:func:`apply_flyte_pod_configuration`) over the platform's :class:`PlatformPodConfig`; map a Pod's status with
:func:`get_task_phase_with_logs` or the ``demystify_*`` helpers; report with
:func:`maybe_update_phase_version`.
"""

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
from taskplug.k8s._config import (
    K8S_SECTION,
    LOGS_SECTION,
    PLUGINS_ROOT_SECTION,
    CoPilotConfig,
    K8sPluginConfig,
    LogConfig,
    NodeSelectorRequirement,
    PluginsRootConfig,
    TemplateLogPluginConfig,
    Toleration,
)
from taskplug.k8s._plugin import (
    AbortBehavior,
    ErrorAggregationStrategy,
    K8sPlugin,
    K8sPluginEntry,
    K8sPluginProperties,
    K8sPluginSetup,
    PluginAbortOverride,
    PluginContext,
    PluginState,
    StaticPluginContext,
    maybe_update_phase_version,
)
from taskplug.k8s._pod_builder import (
    PRIMARY_CONTAINER_KEY,
    PlatformPodConfig,
    RawPod,
    apply_flyte_pod_configuration,
    build_identity_pod,
    build_raw_pod,
    service_account_name,
    to_k8s_pod_spec,
)
from taskplug.k8s._pod_status import (
    demystify_failure,
    demystify_pending,
    demystify_pod_status,
    demystify_success,
    get_last_transition_occurred_at,
    get_reported_at,
    get_task_phase_with_logs,
)
from taskplug.k8s._pod_template import PodTemplateStore
from taskplug.k8s._tasklog import parse_k8s_time

__all__ = [
    "EVENT",
    "K8S_SECTION",
    "LOGS_SECTION",
    "PLUGINS_ROOT_SECTION",
    "POD",
    "PRIMARY_CONTAINER_KEY",
    "AbortBehavior",
    "CoPilotConfig",
    "ErrorAggregationStrategy",
    "K8sPlugin",
    "K8sPluginConfig",
    "K8sPluginEntry",
    "K8sPluginProperties",
    "K8sPluginSetup",
    "KubeApiError",
    "KubeClient",
    "LogConfig",
    "NodeSelectorRequirement",
    "PlatformPodConfig",
    "PluginAbortOverride",
    "PluginContext",
    "PluginState",
    "PluginsRootConfig",
    "PodTemplateStore",
    "RawPod",
    "ResourceType",
    "StaticPluginContext",
    "TemplateLogPluginConfig",
    "Toleration",
    "WatchEvent",
    "apply_flyte_pod_configuration",
    "build_identity_pod",
    "build_raw_pod",
    "demystify_failure",
    "demystify_pending",
    "demystify_pod_status",
    "demystify_success",
    "get_last_transition_occurred_at",
    "get_reported_at",
    "get_task_phase_with_logs",
    "is_already_exists",
    "is_conflict",
    "is_not_found",
    "maybe_update_phase_version",
    "parse_k8s_time",
    "service_account_name",
    "to_k8s_pod_spec",
]
