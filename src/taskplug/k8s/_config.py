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
    key: str = ""
    operator: Literal["", "Equal", "Exists"] = ""
    value: str = ""
    effect: Literal["", "NoSchedule", "PreferNoSchedule", "NoExecute"] = ""
    toleration_seconds: int | None = Field(default=None, alias="tolerationSeconds")

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
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
    values: list[str] = Field(default_factory=list)

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
    name: str = "flyte-copilot-"
    image: str = "cr.flyte.org/flyteorg/flytecopilot:v0.0.15"
    default_input_path: str = "/var/flyte/inputs"
    default_output_path: str = "/var/flyte/outputs"
    input_vol_name: str = "flyte-inputs"
    output_vol_name: str = "flyte-outputs"
    start_timeout: GoDuration = timedelta(0)
    timeout: GoDuration = timedelta(hours=1)
    cpu: str = "500m"
    memory: str = "128Mi"
    storage: str = ""


class K8sPluginConfig(StrictModel):
    """Every ``plugins.k8s`` key with Flyte's default (k8s-machinery.md §6)."""

    inject_finalizer: bool = False
    default_annotations: StrMap = Field(
        default_factory=lambda: {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}
    )
    default_labels: StrMap = Field(default_factory=dict)
    default_env_vars: StrMap = Field(default_factory=dict)
    default_env_vars_from_env: StrMap = Field(default_factory=dict)
    default_env_from_configmaps: list[str] = Field(default_factory=list)
    default_env_from_secrets: list[str] = Field(default_factory=list)
    default_cpus: QuantityField = Quantity("1000m")
    default_memory: QuantityField = Quantity("1024Mi")
    default_tolerations: TolerationList = Field(default_factory=list)
    default_node_selector: StrMap = Field(default_factory=dict)
    default_affinity: K8sObject | None = None
    scheduler_name: str = ""
    interruptible_tolerations: TolerationList = Field(default_factory=list)
    interruptible_node_selector: StrMap = Field(default_factory=dict)
    interruptible_node_selector_requirement: NodeSelectorRequirement | None = None
    non_interruptible_node_selector_requirement: NodeSelectorRequirement | None = None
    resource_tolerations: Annotated[dict[str, TolerationList], BeforeValidator(list_of_maps_to_map)] = Field(
        default_factory=dict
    )
    co_pilot: CoPilotConfig = Field(default_factory=CoPilotConfig)
    delete_resource_on_finalize: bool = False
    create_container_error_grace_period: GoDuration = timedelta(minutes=3)
    create_container_config_error_grace_period: GoDuration = timedelta(0)
    image_pull_backoff_grace_period: GoDuration = timedelta(minutes=3)
    image_pull_policy: Literal["", "Always", "IfNotPresent", "Never"] = ""
    pod_pending_timeout: GoDuration = timedelta(0)
    gpu_device_node_label: str = "k8s.amazonaws.com/accelerator"
    gpu_partition_size_node_label: str = "k8s.amazonaws.com/gpu-partition-size"
    gpu_unpartitioned_node_selector_requirement: NodeSelectorRequirement | None = None
    gpu_unpartitioned_toleration: Toleration | None = None
    gpu_resource_name: str = "nvidia.com/gpu"
    default_pod_security_context: K8sObject | None = None
    default_security_context: K8sObject | None = None
    enable_host_networking_pod: bool | None = None
    default_pod_dns_config: K8sObject | None = None
    default_pod_template_name: str = ""
    default_pod_template_resync: GoDuration = timedelta(seconds=30)
    send_object_events: bool = False
    update_base_backoff_duration: int = 10
    update_backoff_retries: int = 5
    add_tolerations_for_extended_resources: list[str] = Field(default_factory=list)
    enable_distributed_error_aggregation: bool = False

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
    """One log link template (Flyte's tasklog.TemplateLogPlugin)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, alias_generator=None)

    display_name: str = Field(default="", alias="displayName")
    template_uris: list[str] = Field(default_factory=list, alias="templateUris")
    message_format: Literal["UNKNOWN", "CSV", "JSON", 0, 1, 2] = Field(
        default="UNKNOWN", alias="messageFormat"
    )
    scheme: str = ""
    show_while_pending: bool = Field(default=False, alias="showWhilePending")
    hide_once_finished: bool = Field(default=False, alias="hideOnceFinished")


class LogConfig(StrictModel):
    """``plugins.logs``: which log links to show for a task's pod."""

    cloudwatch_enabled: bool = False
    cloudwatch_region: str = ""
    cloudwatch_log_group: str = ""
    cloudwatch_template_uri: str = ""
    kubernetes_enabled: bool = True
    kubernetes_url: str = ""
    kubernetes_template_uri: str = (
        "http://localhost:30082/#!/log/{{ .namespace }}/{{ .podName }}/pod?namespace={{ .namespace }}"
    )
    stackdriver_enabled: bool = False
    gcp_project: str = ""
    stackdriver_logresourcename: str = ""
    stackdriver_template_uri: str = ""
    dynamic_log_links: Annotated[dict[str, TemplateLogPluginConfig], BeforeValidator(list_of_maps_to_map)] = (
        Field(default_factory=dict)
    )
    templates: list[TemplateLogPluginConfig] = Field(default_factory=list)


class PluginsRootConfig(StrictModel):
    """Keys directly under ``plugins`` (Flyte's testdata sets a legacy ``enabled-plugins`` there)."""

    enabled_plugins: list[str] = Field(default_factory=list)


K8S_SECTION = ConfigSection("plugins.k8s", K8sPluginConfig)
LOGS_SECTION = ConfigSection("plugins.logs", LogConfig)
PLUGINS_ROOT_SECTION = ConfigSection("plugins", PluginsRootConfig)
