"""What a Kubernetes plugin author uses (Flyte's ``pluginmachinery/k8s`` and ``flytek8s``).

Implement :class:`K8sPlugin` and register a :class:`K8sPluginEntry`; build pods with :func:`to_k8s_pod_spec`
(or :func:`build_raw_pod` then :func:`apply_flyte_pod_configuration`) over the platform's
:class:`PlatformPodConfig`; map a Pod's status with :func:`get_task_phase_with_logs` or the ``demystify_*``
helpers; report with :func:`maybe_update_phase_version`; render log links with :func:`task_logs`. The object
the plugin manager creates is :func:`build_object`'s; a simulated operator for the embedded cluster is a
:class:`StatusStepOperator`, or a :class:`ReconcilingOperator` when it creates pods and follows them. What
runs plugins (plugin manager, informer, back-off) is ``taskplug.engine``.
See ``docs/plugins.md``.
"""

from typing import TYPE_CHECKING

from taskplug.core import (
    EVENT,
    POD,
    FollowsPodLogs,
    KubeClient,
    ReadsPodLogs,
    ResourceType,
    WatchEvent,
    lazy_exports,
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
from taskplug.k8s._errors import (
    KubeApiError,
    api_error_of,
    is_already_exists,
    is_bad_request,
    is_conflict,
    is_forbidden,
    is_invalid,
    is_not_found,
    is_request_entity_too_large,
    is_server_timeout,
    is_too_many_requests,
)
from taskplug.k8s._exec_context import PluginTaskExecutionContext
from taskplug.k8s._names import convert_to_dns1123_subdomain_compatible, fixed_length_unique_id
from taskplug.k8s._object import (
    ATTEMPT_ANNOTATION,
    EXECUTION_ID_LABEL,
    FINALIZER,
    MACHINERY_ANNOTATIONS,
    MACHINERY_LABELS,
    add_object_metadata,
    attempt_of,
    build_object,
    execution_labels,
    is_attempts_object,
    owner_key,
    owner_key_of,
    registered_kind,
    stamp_attempt,
)
from taskplug.k8s._observed import ObservedObjectError, describe_object
from taskplug.k8s._operator import NextStatus, Operator, StatusStepOperator
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
    add_tolerations_for_extended_resources,
    apply_flyte_pod_configuration,
    build_identity_pod,
    build_raw_pod,
    get_container,
    pod_spec_from_struct,
    service_account_name,
    to_k8s_pod_spec,
)
from taskplug.k8s._pod_spec_model import PodSpecModel
from taskplug.k8s._pod_status import (
    demystify_failure,
    demystify_pending,
    demystify_pod_status,
    demystify_success,
    get_last_transition_occurred_at,
    get_reported_at,
    get_task_phase_with_logs,
)
from taskplug.k8s._pod_template import PodTemplateStore, deep_copy, merge_overlay_pod_spec_onto_base
from taskplug.k8s._resources import (
    Resources,
    apply_k8s_resource_overrides,
    resources_to_k8s,
    to_k8s_resource_requirements,
)
from taskplug.k8s._secrets import k8s_task_execution_metadata, sanitize_label_value
from taskplug.k8s._tasklog import LogInput, parse_k8s_time, task_logs

if TYPE_CHECKING:
    from taskplug.k8s._reconciling import (
        ObjectKey,
        ReconcilingOperator,
        Requeue,
        create_or_get,
        delete_if_present,
        loopback_port,
        owned_by,
        owner_reference,
    )

__all__ = [
    "ATTEMPT_ANNOTATION",
    "EVENT",
    "EXECUTION_ID_LABEL",
    "FINALIZER",
    "K8S_SECTION",
    "LOGS_SECTION",
    "MACHINERY_ANNOTATIONS",
    "MACHINERY_LABELS",
    "PLUGINS_ROOT_SECTION",
    "POD",
    "PRIMARY_CONTAINER_KEY",
    "AbortBehavior",
    "CoPilotConfig",
    "ErrorAggregationStrategy",
    "FollowsPodLogs",
    "K8sPlugin",
    "K8sPluginConfig",
    "K8sPluginEntry",
    "K8sPluginProperties",
    "K8sPluginSetup",
    "KubeApiError",
    "KubeClient",
    "LogConfig",
    "LogInput",
    "NextStatus",
    "NodeSelectorRequirement",
    "ObjectKey",
    "ObservedObjectError",
    "Operator",
    "PlatformPodConfig",
    "PluginAbortOverride",
    "PluginContext",
    "PluginState",
    "PluginTaskExecutionContext",
    "PluginsRootConfig",
    "PodSpecModel",
    "PodTemplateStore",
    "RawPod",
    "ReadsPodLogs",
    "ReconcilingOperator",
    "Requeue",
    "ResourceType",
    "Resources",
    "StaticPluginContext",
    "StatusStepOperator",
    "TemplateLogPluginConfig",
    "Toleration",
    "WatchEvent",
    "add_object_metadata",
    "add_tolerations_for_extended_resources",
    "api_error_of",
    "apply_flyte_pod_configuration",
    "apply_k8s_resource_overrides",
    "attempt_of",
    "build_identity_pod",
    "build_object",
    "build_raw_pod",
    "convert_to_dns1123_subdomain_compatible",
    "create_or_get",
    "deep_copy",
    "delete_if_present",
    "demystify_failure",
    "demystify_pending",
    "demystify_pod_status",
    "demystify_success",
    "describe_object",
    "execution_labels",
    "fixed_length_unique_id",
    "get_container",
    "get_last_transition_occurred_at",
    "get_reported_at",
    "get_task_phase_with_logs",
    "is_already_exists",
    "is_attempts_object",
    "is_bad_request",
    "is_conflict",
    "is_forbidden",
    "is_invalid",
    "is_not_found",
    "is_request_entity_too_large",
    "is_server_timeout",
    "is_too_many_requests",
    "k8s_task_execution_metadata",
    "loopback_port",
    "maybe_update_phase_version",
    "merge_overlay_pod_spec_onto_base",
    "owned_by",
    "owner_key",
    "owner_key_of",
    "owner_reference",
    "parse_k8s_time",
    "pod_spec_from_struct",
    "registered_kind",
    "resources_to_k8s",
    "sanitize_label_value",
    "service_account_name",
    "stamp_attempt",
    "task_logs",
    "to_k8s_pod_spec",
    "to_k8s_resource_requirements",
]

# The reconciling operator kit needs asyncio: it loads when an operator uses it, not with every command.
__getattr__ = lazy_exports(
    __name__,
    {
        name: "taskplug.k8s._reconciling"
        for name in (
            "ObjectKey",
            "ReconcilingOperator",
            "Requeue",
            "create_or_get",
            "delete_if_present",
            "loopback_port",
            "owned_by",
            "owner_reference",
        )
    },
)
