"""The ``plugins.k8s`` and ``plugins.logs`` config sections, with Flyte's keys and defaults.

Follows flyteplugins/go/tasks/pluginmachinery/flytek8s/config/config.go and flyteplugins/go/tasks/logs/
config.go. Kubernetes objects inside the config (tolerations, affinity, security contexts, DNS config) keep
the API's JSON field names; the small ones are validated, the large ones are checked to be mappings and
passed through as they are.
"""

from __future__ import annotations

from datetime import timedelta
from functools import cached_property
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, ConfigDict, Field, field_validator

from taskplug.core import (
    ConfigSection,
    GoDuration,
    Quantity,
    QuantityField,
    StrictModel,
    StrMap,
    list_of_maps_to_map,
)

__all__ = [
    "K8S_SECTION",
    "LOGS_SECTION",
    "PLUGINS_ROOT_SECTION",
    "CoPilotConfig",
    "K8sPluginConfig",
    "LogConfig",
    "NodeSelectorRequirement",
    "PluginsRootConfig",
    "TemplateLogPluginConfig",
    "Toleration",
]


class _K8sObjectModel(StrictModel):
    # Kubernetes objects keep their camelCase JSON names.
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, alias_generator=None)


class Toleration(_K8sObjectModel):
    """A Kubernetes ``Toleration`` (core/v1), as written in the ``plugins.k8s`` toleration keys."""

    key: str = ""
    """Taint key the toleration matches; empty with operator ``Exists`` matches every taint."""
    operator: Literal["", "Equal", "Exists"] = ""
    """``Equal`` (also when empty) matches the taint's value; ``Exists`` matches any value."""
    value: str = ""
    """Taint value matched by ``Equal``; empty with ``Exists``."""
    effect: Literal["", "NoSchedule", "PreferNoSchedule", "NoExecute"] = ""
    """Taint effect matched; empty matches every effect."""
    toleration_seconds: int | None = Field(default=None, alias="tolerationSeconds")
    """Seconds a pod stays bound to a node after a ``NoExecute`` taint appears; unset: for ever."""

    @cached_property
    def k8s(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in ("key", "operator", "value", "effect"):
            if getattr(self, name):
                out[name] = getattr(self, name)
        if self.toleration_seconds is not None:
            out["tolerationSeconds"] = self.toleration_seconds
        return out


class NodeSelectorRequirement(_K8sObjectModel):
    """A Kubernetes ``NodeSelectorRequirement`` (core/v1), added to a pod's required node affinity."""

    key: str
    """Node label key."""
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
    """How the node's label value is compared with ``values``."""
    values: list[str] = Field(default_factory=list)
    """Label values: one or more for ``In``/``NotIn``, none for ``Exists``/``DoesNotExist``, one integer
    for ``Gt``/``Lt``."""

    @cached_property
    def k8s(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": self.key, "operator": self.operator}
        if self.values:
            out["values"] = list(self.values)
        return out


def _one_or_many(value: Any) -> Any:
    # Flyte's testdata writes a single toleration where a list is expected (viper accepts it).
    return [value] if isinstance(value, dict) else value


TolerationList = Annotated[list[Toleration], BeforeValidator(_one_or_many)]
K8sObject = dict[str, Any]


class CoPilotConfig(StrictModel):
    """``plugins.k8s.co-pilot``: the co-pilot containers that move inputs and outputs for tasks whose
    container does not run flytekit (``FlyteCoPilotConfig`` in
    flyteplugins/go/tasks/pluginmachinery/flytek8s/config/config.go)."""

    name: str = "flyte-copilot-"
    """Name prefix of the co-pilot containers (``downloader`` / ``uploader`` is appended)."""
    image: str = "cr.flyte.org/flyteorg/flytecopilot:v0.0.15"
    """Container image holding the co-pilot binary."""
    default_input_path: str = "/var/flyte/inputs"
    """Where the inputs volume is mounted when the task's data config names no input path."""
    default_output_path: str = "/var/flyte/outputs"
    """Where the outputs volume is mounted when the task's data config names no output path."""
    input_vol_name: str = "flyte-inputs"
    """Name of the volume created to hold the inputs."""
    output_vol_name: str = "flyte-outputs"
    """Name of the volume created to hold the outputs."""
    start_timeout: GoDuration = timedelta(0)
    """Go duration the sidecar would wait for the primary container to start; Flyte's pod builder does not
    pass it on, and neither does taskplug's."""
    timeout: GoDuration = timedelta(hours=1)
    """Go duration allowed for the outputs upload; also the pod's ``terminationGracePeriodSeconds``."""
    cpu: str = "500m"
    """CPU request and limit of each co-pilot container, a Kubernetes quantity."""
    memory: str = "128Mi"
    """Memory request and limit of each co-pilot container, a Kubernetes quantity."""
    storage: str = ""
    """Storage limit for inputs and outputs, a Kubernetes quantity; unused by Flyte's pod builder and
    taskplug's (the data volumes take the task's ``storage`` resource instead)."""


class K8sPluginConfig(StrictModel):
    """``plugins.k8s``: defaults applied to every pod and Kubernetes object the plugins create, and how the
    plugin manager treats them (flyteplugins/go/tasks/pluginmachinery/flytek8s/config/config.go).

    Kubernetes objects in this section (tolerations, affinity, security contexts, DNS config) use the
    Kubernetes API's camelCase JSON field names.
    """

    inject_finalizer: bool = False
    """Add the ``flyte.org/finalizer-k8s`` finalizer to every created object and remove it when the task
    is finalized."""
    default_annotations: StrMap = Field(
        default_factory=lambda: {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}
    )
    """Annotations added to every created object; the task's own annotations win."""
    default_labels: StrMap = Field(default_factory=dict)
    """Labels added to every created object; the task's own labels win."""
    default_env_vars: StrMap = Field(default_factory=dict)
    """Environment variables (name → value) added to every container the platform customizes."""
    default_env_vars_from_env: StrMap = Field(default_factory=dict)
    """Environment variables (name → variable of the taskplug process's own environment) added to every
    customized container; an unset variable gives an empty value."""
    default_env_from_configmaps: list[str] = Field(default_factory=list)
    """ConfigMaps whose keys become environment variables of every customized container (``envFrom``,
    optional)."""
    default_env_from_secrets: list[str] = Field(default_factory=list)
    """Secrets whose keys become environment variables of every customized container (``envFrom``,
    optional; listed before the ConfigMaps)."""
    default_cpus: QuantityField = Quantity("1000m")
    """CPU request, a Kubernetes quantity, for a container when the platform's resources have no CPU
    request."""
    default_memory: QuantityField = Quantity("1024Mi")
    """Memory request, a Kubernetes quantity, for a container when the platform's resources have no
    memory request."""
    default_tolerations: TolerationList = Field(default_factory=list)
    """Tolerations added to every pod (after resource and interruptible tolerations), e.g. to keep Flyte's
    pods on their own nodes in a shared cluster."""
    default_node_selector: StrMap = Field(default_factory=dict)
    """Node selector labels added to every pod; the pod's own keys win."""
    default_affinity: K8sObject | None = None
    """Affinity (Kubernetes JSON) given to every pod that has none."""
    scheduler_name: str = ""
    """Scheduler set on every pod (and object that takes one) that names none; empty: the cluster's
    default scheduler."""
    interruptible_tolerations: TolerationList = Field(default_factory=list)
    """Tolerations added to the pods of interruptible tasks (e.g. for spot nodes)."""
    interruptible_node_selector: StrMap = Field(default_factory=dict)
    """Deprecated in Flyte: node selector labels for interruptible pods, winning over the pod's own; use
    ``interruptible-node-selector-requirement``."""
    interruptible_node_selector_requirement: NodeSelectorRequirement | None = None
    """Node selector requirement added to the required node affinity of interruptible pods."""
    non_interruptible_node_selector_requirement: NodeSelectorRequirement | None = None
    """Node selector requirement added to the required node affinity of pods that are not
    interruptible."""
    resource_tolerations: Annotated[dict[str, TolerationList], BeforeValidator(list_of_maps_to_map)] = Field(
        default_factory=dict
    )
    """Resource name → tolerations added to a pod when any of its containers requests or limits that
    resource (e.g. ``nvidia.com/gpu``)."""
    co_pilot: CoPilotConfig = Field(default_factory=CoPilotConfig)
    """The co-pilot containers of tasks whose data is moved by co-pilot (raw containers)."""
    delete_resource_on_finalize: bool = False
    """Delete the created object when the task is finalized instead of leaving it to the garbage
    collector; frees cluster resources, but the Kubernetes log links stop working."""
    create_container_error_grace_period: GoDuration = timedelta(minutes=3)
    """Go duration a ``CreateContainerError`` may last before the task fails."""
    create_container_config_error_grace_period: GoDuration = timedelta(0)
    """Go duration a ``CreateContainerConfigError`` may last before the task fails; ``0`` fails at
    once."""
    image_pull_backoff_grace_period: GoDuration = timedelta(minutes=3)
    """Go duration an ``ImagePullBackOff`` may last before the task fails."""
    image_pull_policy: Literal["", "Always", "IfNotPresent", "Never"] = ""
    """Image pull policy of the container built from a task's ``container`` target; empty: Kubernetes'
    default."""
    pod_pending_timeout: GoDuration = timedelta(0)
    """Go duration a pod may stay pending before the task fails; ``0`` means no limit."""
    gpu_device_node_label: str = "k8s.amazonaws.com/accelerator"
    """Node label (and taint key) naming a node's GPU device, matched against a task's accelerator."""
    gpu_partition_size_node_label: str = "k8s.amazonaws.com/gpu-partition-size"
    """Node label (and taint key) giving a node's GPU partition (MIG) size."""
    gpu_unpartitioned_node_selector_requirement: NodeSelectorRequirement | None = None
    """Replaces the requirement added for a task asking for an unpartitioned GPU (by default the
    partition-size label ``DoesNotExist``)."""
    gpu_unpartitioned_toleration: Toleration | None = None
    """Toleration added to pods asking for an unpartitioned GPU."""
    gpu_resource_name: str = "nvidia.com/gpu"
    """Kubernetes resource name a task's ``gpu`` request becomes; also how GPU requests are
    recognized."""
    default_pod_security_context: K8sObject | None = None
    """PodSecurityContext (Kubernetes JSON) given to every pod that has none."""
    default_security_context: K8sObject | None = None
    """SecurityContext (Kubernetes JSON) given to the primary container when it has none."""
    enable_host_networking_pod: bool | None = None
    """When set, forces every pod's ``hostNetwork`` to this value; unset leaves it to the pod."""
    default_pod_dns_config: K8sObject | None = None
    """PodDNSConfig (Kubernetes JSON) given to every pod that has none."""
    default_pod_template_name: str = ""
    """Name of the PodTemplate every pod is built on (looked up in the task's namespace, then in
    ``executor.pod-template-namespace``); empty: none."""
    default_pod_template_resync: GoDuration = timedelta(seconds=30)
    """Go duration between resyncs of Flyte's PodTemplate informer; taskplug reads pod templates from
    ``--pod-templates`` files at start, so it has no effect."""
    send_object_events: bool = False
    """Watch the Kubernetes events of created objects and report them as additional reasons of the
    task's phase."""
    update_base_backoff_duration: int = 10
    """First delay, in milliseconds, of the exponential back-off between retries of a conflicting update
    (removing the finalizer); the delay doubles at each retry."""
    update_backoff_retries: int = 5
    """Attempts (a count) of a conflicting update before giving up."""
    add_tolerations_for_extended_resources: list[str] = Field(default_factory=list)
    """Extended resource names (e.g. ``nvidia.com/gpu``) for which a pod requesting them gets an
    ``Exists``/``NoSchedule`` toleration."""
    enable_distributed_error_aggregation: bool = False
    """Used by Flyte's distributed training plugins (PyTorch) to aggregate the errors of worker pods; no
    built-in taskplug plugin reads it."""

    @field_validator("default_cpus", "default_memory")
    @classmethod
    def _non_negative(cls, value: Quantity) -> Quantity:
        if value.nanos < 0:
            raise ValueError(f"must not be negative, got {value}")
        return value

    @field_validator("update_backoff_retries", "update_base_backoff_duration")
    @classmethod
    def _not_negative_int(cls, value: int) -> int:
        if value < 0:
            raise ValueError(f"must not be negative, got {value}")
        return value


class TemplateLogPluginConfig(StrictModel):
    """One log link template, an item of ``templates`` or a value of ``dynamic-log-links`` in a log config
    (``TemplateLogPlugin`` in flyteplugins/go/tasks/pluginmachinery/tasklog/plugin.go)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, alias_generator=None)

    display_name: str = Field(default="", alias="displayName")
    """Name of the link shown in the console (the pod's log name is appended)."""
    template_uris: list[str] = Field(default_factory=list, alias="templateUris")
    """URI templates, one link each; ``{{ .podName }}``, ``{{ .namespace }}``, ``{{ .containerName }}``,
    ``{{ .podUnixStartTime }}`` … are substituted (under ``dynamic-log-links``: also
    ``{{ .taskConfig.<key> }}`` from the task's config)."""
    message_format: Literal["UNKNOWN", "CSV", "JSON", 0, 1, 2] = Field(
        default="UNKNOWN", alias="messageFormat"
    )
    """Format of the log messages behind the link: ``UNKNOWN``, ``CSV`` or ``JSON`` (or 0, 1, 2)."""
    scheme: str = ""
    """Deprecated in Flyte (the templating scheme, ``Pod`` or ``TaskExecution``); accepted and ignored."""
    show_while_pending: bool = Field(default=False, alias="showWhilePending")
    """Show the link while the task is still pending."""
    hide_once_finished: bool = Field(default=False, alias="hideOnceFinished")
    """Hide the link once the task has finished."""


class LogConfig(StrictModel):
    """``plugins.logs``: which log links to show for a task's pod
    (flyteplugins/go/tasks/logs/config.go).

    Links are made in this order: Kubernetes, CloudWatch, Stackdriver, ``templates``, then
    ``dynamic-log-links``.
    """

    cloudwatch_enabled: bool = False
    """Add a CloudWatch link."""
    cloudwatch_region: str = ""
    """Deprecated in Flyte (use ``cloudwatch-template-uri``): AWS region of the logs, used when no
    template URI is given."""
    cloudwatch_log_group: str = ""
    """Deprecated in Flyte (use ``cloudwatch-template-uri``): CloudWatch log group of the streams, used
    when no template URI is given."""
    cloudwatch_template_uri: str = ""
    """URI template of the CloudWatch link; empty builds one from the region and log group."""
    kubernetes_enabled: bool = True
    """Add a Kubernetes (dashboard) link."""
    kubernetes_url: str = ""
    """Deprecated in Flyte (use ``kubernetes-template-uri``): the dashboard's base URL, used when the
    template URI is not given."""
    kubernetes_template_uri: str = (
        "http://localhost:30082/#!/log/{{ .namespace }}/{{ .podName }}/pod?namespace={{ .namespace }}"
    )
    """URI template of the Kubernetes link."""
    stackdriver_enabled: bool = False
    """Add a Stackdriver (Google Cloud Logging) link."""
    gcp_project: str = ""
    """Deprecated in Flyte (use ``stackdriver-template-uri``): the GCP project of the logs."""
    stackdriver_logresourcename: str = ""
    """Deprecated in Flyte (use ``stackdriver-template-uri``): the Stackdriver log resource name."""
    stackdriver_template_uri: str = ""
    """URI template of the Stackdriver link; empty builds one from the project and resource name."""
    dynamic_log_links: Annotated[dict[str, TemplateLogPluginConfig], BeforeValidator(list_of_maps_to_map)] = (
        Field(default_factory=dict)
    )
    """Link type → template, shown only for tasks whose config ``link_type`` (comma-separated) names
    that link type."""
    templates: list[TemplateLogPluginConfig] = Field(default_factory=list)
    """Further log link templates, shown for every task."""


class PluginsRootConfig(StrictModel):
    """``plugins``: keys directly under ``plugins`` (flyteplugins/go/tasks/config/config.go, whose root
    section has no keys of its own)."""

    enabled_plugins: list[str] = Field(default_factory=list)
    """Legacy: Flyte's sample config sets ``plugins.enabled-plugins``; accepted and ignored (the
    enabled plugins are ``tasks.task-plugins.enabled-plugins``)."""


K8S_SECTION = ConfigSection("plugins.k8s", K8sPluginConfig)
LOGS_SECTION = ConfigSection("plugins.logs", LogConfig)
PLUGINS_ROOT_SECTION = ConfigSection("plugins", PluginsRootConfig)
