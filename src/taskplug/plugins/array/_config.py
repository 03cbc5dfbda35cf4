"""The ``plugins.k8s-array`` config section, with Flyte's keys and defaults.

Follows flyteplugins/go/tasks/plugins/array/k8s/config.go (and pluginmachinery/workqueue/config.go for the two
assembler sections, whose keys are the Go field names ``OutputAssembler`` / ``ErrorAssembler``: they have no
JSON tag).
"""

from __future__ import annotations

from pydantic import Field

from taskplug.core import StrictModel, StrMap
from taskplug.k8s import LogConfig, Toleration

__all__ = [
    "ArrayLogConfig",
    "ClusterAuth",
    "K8sArrayConfig",
    "RemoteClusterConfig",
    "ResourceConfig",
    "WorkQueueConfig",
]


class ResourceConfig(StrictModel):
    """``plugins.k8s-array.resourceConfig``: an allocation-token quota over the sub-task pods of every map
    task (Flyte's ``ResourceConfig``). Set when either key is set (Flyte's ``IsResourceConfigSet``)."""

    primary_label: str = Field(default="", alias="primaryLabel")
    """Name of the quota (the resource manager's namespace) the sub-tasks draw their tokens from."""
    limit: int = 0
    """Tokens in the quota: sub-task pods that may exist at once across all map tasks (a count)."""

    @property
    def is_set(self) -> bool:
        return bool(self.primary_label) or self.limit != 0


class ClusterAuth(StrictModel):
    """``plugins.k8s-array.remoteClusterConfig.auth``: how to reach the remote cluster."""

    type: str = ""
    """Authentication type."""
    token_path: str = Field(default="", alias="tokenPath")
    """File holding the bearer token."""
    cert_path: str = Field(default="", alias="certPath")
    """File holding the cluster's CA certificate."""


class RemoteClusterConfig(StrictModel):
    """``plugins.k8s-array.remoteClusterConfig``: run the sub-task pods on another cluster (Flyte's
    ``ClusterConfig``). Not supported yet: enabling it fails when the plugin loads."""

    name: str = ""
    """Friendly name of the remote cluster."""
    endpoint: str = ""
    """The remote cluster's API server URL."""
    auth: ClusterAuth = Field(default_factory=ClusterAuth)
    """Credentials for the remote cluster."""
    enabled: bool = False
    """Send the sub-task pods to the remote cluster (without owner references)."""


class WorkQueueConfig(StrictModel):
    """``plugins.k8s-array.OutputAssembler`` / ``ErrorAssembler``: how outputs and errors of the sub-tasks are
    gathered (Flyte's ``workqueue.Config``)."""

    workers: int = Field(default=10, ge=1)
    """Sub-task documents read at once while assembling (a count)."""
    max_retries: int = Field(default=5, alias="maxRetries", ge=0)
    """Rounds an assembly that failed (storage error) is tried again before the map task fails retryably."""
    max_items: int = Field(default=100000, alias="maxItems", ge=1)
    """Size of Flyte's work-item index; kept for parity (an assembly here is done in the round itself)."""


class ArrayLogConfig(StrictModel):
    """``plugins.k8s-array.logs``: log links of the sub-task pods."""

    config: LogConfig = Field(default_factory=LogConfig)
    """The links, as ``plugins.logs`` writes them (Flyte's default: a Kubernetes dashboard link)."""


class K8sArrayConfig(StrictModel):
    """``plugins.k8s-array``: how the k8s array plugin (task type ``container_array``, flytekit's legacy map
    task) runs its sub-task pods (flyteplugins/go/tasks/plugins/array/k8s/config.go)."""

    scheduler: str = ""
    """When set, the ``schedulerName`` of every sub-task pod."""
    max_error_length: int = Field(default=1000, alias="maxErrorLength")
    """Characters of the error summary of a failed map task (sub-task errors grouped by message)."""
    max_array_job_size: int = Field(default=5000, alias="maxArrayJobSize")
    """Largest number of sub-tasks; a larger map task fails permanently."""
    resource_config: ResourceConfig = Field(default_factory=ResourceConfig, alias="resourceConfig")
    """An allocation-token quota over sub-task pods (one token per launched sub-task)."""
    remote_cluster_config: RemoteClusterConfig = Field(
        default_factory=RemoteClusterConfig, alias="remoteClusterConfig"
    )
    """A remote cluster for the sub-task pods (not supported yet)."""
    node_selector: StrMap = Field(default_factory=dict)
    """When non-empty, *replaces* every sub-task pod's ``nodeSelector`` (Flyte's legacy behaviour: the
    interruptible and default selectors the pod pipeline added are dropped)."""
    tolerations: list[Toleration] = Field(default_factory=list)
    """When non-empty, *replaces* every sub-task pod's tolerations (the computed ones are dropped)."""
    namespace_template: str = Field(default="", alias="namespaceTemplate")
    """Namespace of the sub-task pods: ``{{.namespace}}`` (any case) is replaced by the map task's
    namespace; a template without it is used as is; empty: the map task's namespace."""
    output_assembler: WorkQueueConfig = Field(default_factory=WorkQueueConfig, alias="OutputAssembler")
    """How the sub-tasks' outputs are gathered into lists."""
    error_assembler: WorkQueueConfig = Field(default_factory=WorkQueueConfig, alias="ErrorAssembler")
    """How the failed sub-tasks' errors are gathered into one summary."""
    logs: ArrayLogConfig = Field(default_factory=ArrayLogConfig)
    """Log links of the sub-task pods."""
