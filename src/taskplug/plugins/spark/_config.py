"""The ``plugins.spark`` config section, with Flyte's keys and defaults.

Follows flyteplugins/go/tasks/plugins/k8s/spark/config.go: default Spark conf, the history server, named
features (Spark conf switched on by ``spark.flyte.<name>.enabled``) and four log-link configs.
"""

from __future__ import annotations

from pydantic import Field

from taskplug.core import StrictModel, StrMap
from taskplug.k8s import LogConfig

__all__ = ["SparkConfig", "SparkFeature", "SparkLogConfig", "UnsetLogConfig"]

DEFAULT_MIXED_TEMPLATE_URI = (
    "http://localhost:30082/#!/log/{{ .namespace }}/{{ .podName }}/pod?namespace={{ .namespace }}"
)


class UnsetLogConfig(LogConfig):
    """A log config whose every source is off unless the file turns it on: ``plugins.spark.logs.user``,
    ``.system`` and ``.all-user``.

    Flyte's spark ``user``/``system``/``all-user`` log configs start from Go's zero value (nothing enabled,
    no template), unlike ``plugins.logs``, whose defaults enable Kubernetes links.
    """

    kubernetes_enabled: bool = False
    """Add a Kubernetes (dashboard) link."""
    kubernetes_template_uri: str = ""
    """URI template of the Kubernetes link."""


class SparkLogConfig(StrictModel):
    """``plugins.spark.logs``: links for the driver (``mixed``, or ``user`` + ``system``) and the app
    (``LogConfig`` in flyteplugins/go/tasks/plugins/k8s/spark/config.go)."""

    mixed: LogConfig = Field(
        default_factory=lambda: LogConfig(
            kubernetes_enabled=True, kubernetes_template_uri=DEFAULT_MIXED_TEMPLATE_URI
        )
    )
    """Links to the driver pod's logs, not split into user and system logs (named ``(Driver Logs)``)."""
    user: UnsetLogConfig = Field(default_factory=UnsetLogConfig)
    """Links to the driver pod's user logs (named ``(User Logs)``)."""
    system: UnsetLogConfig = Field(default_factory=UnsetLogConfig)
    """Links to the Spark application's system logs, with the application name as pod name (named
    ``(System Logs)``)."""
    all_user: UnsetLogConfig = Field(default_factory=UnsetLogConfig)
    """Links to the user logs of the driver and every executor, shown while pending too (named
    ``(Spark-Submit/All User Logs)``)."""


class SparkFeature(StrictModel):
    """A named bundle of Spark conf, copied in when a task sets ``spark.flyte.<name>.enabled: "true"``: an
    item of ``plugins.spark.features`` (``Feature`` in flyteplugins/go/tasks/plugins/k8s/spark/config.go)."""

    name: str
    """Feature name, as in the task's ``spark.flyte.<name>.enabled`` conf key."""
    spark_config: StrMap = Field(default_factory=dict)
    """Spark conf (key → value) copied into the application when the feature is enabled."""


class SparkConfig(StrictModel):
    """``plugins.spark``: defaults of every SparkApplication the Spark plugin creates
    (flyteplugins/go/tasks/plugins/k8s/spark/config.go)."""

    spark_config_default: StrMap = Field(default_factory=dict)
    """Spark conf (key → value) applied to every Spark job before the task's own conf, which wins."""
    spark_history_server_url: str = ""
    """Base URL of the Spark History Server; when set, a finished job gets a ``Spark History UI`` link to
    ``<url>/history/<application id>``."""
    features: list[SparkFeature] = Field(default_factory=list)
    """Optional features a task switches on by name."""
    logs: SparkLogConfig = Field(default_factory=SparkLogConfig)
    """Log links of Spark applications."""
