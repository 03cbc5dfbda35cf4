"""The Spark plugin (task type ``spark``): a spark-operator SparkApplication, and a simulated operator for
the embedded local cluster."""

from taskplug.plugins.spark._config import SPARK_SECTION, SparkConfig, SparkFeature, SparkLogConfig
from taskplug.plugins.spark._local_operator import (
    ANNOTATION_SIMULATE_FAILURE,
    ANNOTATION_SIMULATE_SUBMISSION_FAILURE,
    SparkLocalOperator,
    next_status,
)
from taskplug.plugins.spark._plugin import (
    SPARK_TASK_TYPE,
    SparkPlugin,
    build_spark_application,
    plugin_entries,
    spark_conf,
    spark_task_info,
    spark_task_phase,
)
from taskplug.plugins.spark._states import SPARK_APPLICATION

__all__ = [
    "ANNOTATION_SIMULATE_FAILURE",
    "ANNOTATION_SIMULATE_SUBMISSION_FAILURE",
    "SPARK_APPLICATION",
    "SPARK_SECTION",
    "SPARK_TASK_TYPE",
    "SparkConfig",
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
