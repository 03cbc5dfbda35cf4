"""The ``plugins.spark`` config section, with Flyte's keys and defaults.

Follows flyteplugins/go/tasks/plugins/k8s/spark/config.go: default Spark conf, the history server, named
features (Spark conf switched on by ``spark.flyte.<name>.enabled``) and four log-link configs.
"""

from __future__ import annotations

from pydantic import Field

from taskplug.core import ConfigSection, StrictModel, StrMap
from taskplug.k8s import LogConfig

__all__ = ["SPARK_SECTION", "SparkConfig", "SparkFeature", "SparkLogConfig", "UnsetLogConfig"]

DEFAULT_MIXED_TEMPLATE_URI = (
    "http://localhost:30082/#!/log/{{ .namespace }}/{{ .podName }}/pod?namespace={{ .namespace }}"
)


class UnsetLogConfig(LogConfig):
    """A log config whose every source is off unless the file turns it on.

    Flyte's spark ``user``/``system``/``all-user`` log configs start from Go's zero value (nothing enabled,
    no template), unlike ``plugins.logs``, whose defaults enable Kubernetes links.
    """

    kubernetes_enabled: bool = False
    kubernetes_template_uri: str = ""


class SparkLogConfig(StrictModel):
    """``plugins.spark.logs``: links for the driver (``mixed``, or ``user`` + ``system``) and the app."""

    mixed: LogConfig = Field(
        default_factory=lambda: LogConfig(
            kubernetes_enabled=True, kubernetes_template_uri=DEFAULT_MIXED_TEMPLATE_URI
        )
    )
    user: UnsetLogConfig = Field(default_factory=UnsetLogConfig)
    system: UnsetLogConfig = Field(default_factory=UnsetLogConfig)
    all_user: UnsetLogConfig = Field(default_factory=UnsetLogConfig)


class SparkFeature(StrictModel):
    """A named bundle of Spark conf, copied in when a task sets ``spark.flyte.<name>.enabled: "true"``."""

    name: str
    spark_config: StrMap = Field(default_factory=dict)


class SparkConfig(StrictModel):
    """``plugins.spark``."""

    spark_config_default: StrMap = Field(default_factory=dict)
    spark_history_server_url: str = ""
    features: list[SparkFeature] = Field(default_factory=list)
    logs: SparkLogConfig = Field(default_factory=SparkLogConfig)


SPARK_SECTION = ConfigSection("plugins.spark", SparkConfig)
