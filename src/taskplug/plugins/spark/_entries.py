"""The Spark plugin's registration: what the ``taskplug.plugins`` entry point loads.

Discovery runs on every command (``taskplug render`` too), so this module imports neither the plugin nor its
config's models: the plugin — the SparkApplication builder, flyteidl's Spark messages — is imported by the loader, which runs only
when an executor loads the plugin; the ``plugins.spark`` models when a command reads the section.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from taskplug.core import ConfigSection
from taskplug.k8s import K8sPluginEntry, K8sPluginSetup, Operator, PlatformPodConfig
from taskplug.plugins.spark._states import SPARK_APPLICATION

if TYPE_CHECKING:
    from taskplug.plugins.spark._config import SparkConfig
    from taskplug.plugins.spark._plugin import SparkPlugin

__all__ = ["SPARK_SECTION", "SPARK_TASK_TYPE", "plugin_entries"]

SPARK_TASK_TYPE: Final = "spark"

SPARK_SECTION: Final[ConfigSection[SparkConfig]] = ConfigSection(
    "plugins.spark", "taskplug.plugins.spark._config:SparkConfig"
)
"""The ``plugins.spark`` config section (:class:`~taskplug.plugins.spark.SparkConfig`)."""


def _load(setup: K8sPluginSetup) -> SparkPlugin:
    # Imported here, not at the top: see the module docstring.
    from taskplug.plugins.spark._plugin import SparkPlugin

    return SparkPlugin(
        PlatformPodConfig.from_config(setup.config, setup.pod_templates, setup.environ),
        setup.config.get(SPARK_SECTION),
        setup.clock,
    )


def _local_operator() -> Operator:
    """The embedded cluster's spark-operator: a driver pod per SparkApplication, running Spark in local mode
    (the process kubelet runs it; the simulated kubelet steps it through its phases, needing no Spark)."""
    # Imported when `taskplug run` registers it on the embedded cluster: discovery (every command) never loads it.
    from taskplug.plugins.spark._local_driver import SparkDriverOperator

    return SparkDriverOperator()


def plugin_entries() -> list[K8sPluginEntry]:
    """The Spark plugin's registration: task type ``spark``, not a default, watching SparkApplications."""
    return [
        K8sPluginEntry(
            id=SPARK_TASK_TYPE,
            registered_task_types=(SPARK_TASK_TYPE,),
            resource_to_watch=SPARK_APPLICATION,
            load_plugin=_load,
            is_default=False,
            config_sections=(SPARK_SECTION,),
            local_operator=_local_operator,
        )
    ]
