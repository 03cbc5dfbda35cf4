"""The ``plugins.ray`` config section, with Flyte's keys (camelCase, as Flyte's JSON tags spell them) and
defaults.

Follows flyteplugins/go/tasks/plugins/k8s/ray/config.go. After loading, Flyte copies the deprecated
``nodeIPAddress`` into ``defaults.headNode.ipAddress`` / ``defaults.workerNode.ipAddress`` when those are
empty; :meth:`RayConfig.head_ip_address` and :meth:`RayConfig.worker_ip_address` give the result.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from taskplug.core import StrictModel, StrMap
from taskplug.k8s import LogConfig, TemplateLogPluginConfig

__all__ = [
    "RayAuthConfig",
    "RayConfig",
    "RayDefaultsConfig",
    "RayLogConfig",
    "RayNodeConfig",
    "RemoteClusterConfig",
]

Int32 = Annotated[int, Field(ge=-(2**31), le=2**31 - 1)]

# StrictModel's settings with Flyte's Ray keys: camelCase (the Go struct's JSON tags), not kebab-case.
_CAMEL = ConfigDict(
    extra="forbid",
    frozen=True,
    populate_by_name=True,
    alias_generator=to_camel,
    arbitrary_types_allowed=True,
)


class RayLogConfig(LogConfig):
    """``plugins.ray.logs``: log links of Ray jobs. Unlike ``plugins.logs``, every source is off unless the
    file turns it on (Flyte starts this config from Go's zero value)."""

    kubernetes_enabled: bool = False
    """Add a Kubernetes (dashboard) link."""
    kubernetes_template_uri: str = ""
    """URI template of the Kubernetes link (Ray jobs have no pod name: ``{{ .podName }}`` stays as is)."""


class RayAuthConfig(StrictModel):
    """``plugins.ray.remoteClusterConfig.auth``: how to reach the remote cluster (``Auth`` in
    flyteplugins/go/tasks/pluginmachinery/k8s/config.go)."""

    model_config = _CAMEL

    token_path: str = ""
    """File holding the bearer token."""
    ca_cert_path: str = ""
    """File holding the cluster's CA certificate (PEM)."""


class RemoteClusterConfig(StrictModel):
    """``plugins.ray.remoteClusterConfig``: run RayJobs in another Kubernetes cluster (``ClusterConfig`` in
    flyteplugins/go/tasks/pluginmachinery/k8s/config.go)."""

    model_config = _CAMEL

    name: str = ""
    """Friendly name of the remote cluster."""
    endpoint: str = ""
    """API server URL of the remote cluster."""
    auth: RayAuthConfig = Field(default_factory=RayAuthConfig)
    """Credentials for the remote cluster."""
    enabled: bool = False
    """Create RayJobs in the remote cluster instead of the one the executor uses (not supported yet: must
    stay false)."""

    @field_validator("enabled")
    @classmethod
    def _not_yet(cls, enabled: bool) -> bool:
        # Deviation: Flyte's Ray entry builds a kube client for the remote cluster from this section; a
        # taskplug entry's custom_kube_client is called without the config (and only the engine may
        # create a lightkube client), so a remote cluster would be silently ignored. Refused instead.
        if enabled:
            raise ValueError("running Ray jobs in a remote cluster is not supported by taskplug yet")
        return enabled


class RayNodeConfig(StrictModel):
    """Defaults of a Ray head or worker node: ``plugins.ray.defaults.headNode`` / ``.workerNode``."""

    model_config = _CAMEL

    start_parameters: StrMap = Field(default_factory=lambda: {"disable-usage-stats": "true"})
    """``ray start`` parameters used when the task gives none."""
    ip_address: str = "$MY_POD_IP"
    """The ``node-ip-address`` start parameter when the task does not set it."""


class RayDefaultsConfig(StrictModel):
    """``plugins.ray.defaults``: start parameters of head and worker nodes."""

    model_config = _CAMEL

    head_node: RayNodeConfig = Field(default_factory=RayNodeConfig)
    """Defaults of the head node."""
    worker_node: RayNodeConfig = Field(default_factory=RayNodeConfig)
    """Defaults of every worker group."""


class RayConfig(StrictModel):
    """``plugins.ray``: defaults of every RayJob the Ray plugin creates
    (flyteplugins/go/tasks/plugins/k8s/ray/config.go)."""

    model_config = _CAMEL

    shutdown_after_job_finishes: bool = True
    """Delete the Ray cluster once the job has finished, unless the task says so itself."""
    ttl_seconds_after_finished: Int32 = 3600
    """Seconds after the job finished before the Ray cluster is deleted (with ``shutdownAfterJobFinishes``),
    unless the task says so itself."""
    service_type: str = "NodePort"
    """Kubernetes Service type of the head node's service (``ClusterIP``, ``NodePort``, ``LoadBalancer``)."""
    enable_ingress: bool = False
    """Have KubeRay create an Ingress for the head service."""
    include_dashboard: bool = True
    """The head's ``include-dashboard`` start parameter when the task does not set it."""
    dashboard_host: str = "0.0.0.0"
    """The head's ``dashboard-host`` start parameter when the task does not set it."""
    node_ip_address: str = Field(default="", alias="nodeIPAddress")
    """Deprecated in Flyte: used as a node's ``ipAddress`` when ``defaults`` leaves it empty."""
    remote_cluster_config: RemoteClusterConfig = Field(default_factory=RemoteClusterConfig)
    """A remote Kubernetes cluster for Ray jobs."""
    logs: RayLogConfig = Field(default_factory=RayLogConfig)
    """Log links of Ray jobs (none by default)."""
    logs_sidecar: dict[str, Any] | None = None
    """A container (Kubernetes JSON) added to every head pod to collect Ray's logs from ``/tmp/ray``."""
    dashboard_url_template: TemplateLogPluginConfig | None = Field(default=None, alias="dashboardURLTemplate")
    """A link to the Ray dashboard, shown while the Ray job runs (``{{ .rayClusterName }}``,
    ``{{ .rayJobID }}`` and the usual variables are substituted)."""
    defaults: RayDefaultsConfig = Field(default_factory=RayDefaultsConfig)
    """Start parameters of head and worker nodes when the task gives none."""
    enable_usage_stats: bool = False
    """Let Ray send usage statistics; when false, ``disable-usage-stats: "true"`` is added to every node."""
    service_account: str = ""
    """Kubernetes service account of every Ray pod; empty: the execution's."""

    def head_ip_address(self) -> str:
        """``defaults.headNode.ipAddress``, or the deprecated ``nodeIPAddress`` when that is empty."""
        return self.defaults.head_node.ip_address or self.node_ip_address

    def worker_ip_address(self) -> str:
        """``defaults.workerNode.ipAddress``, or the deprecated ``nodeIPAddress`` when that is empty."""
        return self.defaults.worker_node.ip_address or self.node_ip_address
