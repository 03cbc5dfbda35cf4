"""The Spark plugin (task type ``spark``): a spark-operator SparkApplication, and an operator for the embedded
local cluster that runs each application's driver pod with Spark in local mode (pyspark and Java 17), plus the
older simulated operator (``SparkLocalOperator``: states stepped by annotations, for tests needing no Spark).

Only the registration (``plugin_entries``) loads at once; the plugin, its config's models and its operator for the
embedded cluster load on first use: discovering plugins (every command) never imports them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from taskplug.core import lazy_exports
from taskplug.plugins.spark._entries import SPARK_SECTION, SPARK_TASK_TYPE, plugin_entries
from taskplug.plugins.spark._states import SPARK_APPLICATION

if TYPE_CHECKING:
    from taskplug.plugins.spark._config import SparkConfig, SparkFeature, SparkLogConfig
    from taskplug.plugins.spark._local_driver import SparkDriverOperator
    from taskplug.plugins.spark._local_operator import (
        ANNOTATION_SIMULATE_FAILURE,
        ANNOTATION_SIMULATE_SUBMISSION_FAILURE,
        SparkLocalOperator,
        next_status,
    )
    from taskplug.plugins.spark._plugin import (
        SparkPlugin,
        build_spark_application,
        spark_conf,
        spark_task_info,
        spark_task_phase,
    )

__all__ = [
    "ANNOTATION_SIMULATE_FAILURE",
    "ANNOTATION_SIMULATE_SUBMISSION_FAILURE",
    "SPARK_APPLICATION",
    "SPARK_SECTION",
    "SPARK_TASK_TYPE",
    "SparkConfig",
    "SparkDriverOperator",
    "SparkFeature",
    "SparkLocalOperator",
    "SparkLogConfig",
    "SparkPlugin",
    "build_spark_application",
    "next_status",
    "plugin_entries",
    "spark_conf",
    "spark_task_info",
    "spark_task_phase",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "ANNOTATION_SIMULATE_FAILURE": "taskplug.plugins.spark._local_operator",
        "ANNOTATION_SIMULATE_SUBMISSION_FAILURE": "taskplug.plugins.spark._local_operator",
        "SparkConfig": "taskplug.plugins.spark._config",
        "SparkDriverOperator": "taskplug.plugins.spark._local_driver",
        "SparkFeature": "taskplug.plugins.spark._config",
        "SparkLocalOperator": "taskplug.plugins.spark._local_operator",
        "SparkLogConfig": "taskplug.plugins.spark._config",
        "SparkPlugin": "taskplug.plugins.spark._plugin",
        "build_spark_application": "taskplug.plugins.spark._plugin",
        "next_status": "taskplug.plugins.spark._local_operator",
        "spark_conf": "taskplug.plugins.spark._plugin",
        "spark_task_info": "taskplug.plugins.spark._plugin",
        "spark_task_phase": "taskplug.plugins.spark._plugin",
    },
)
