"""The SparkApplication type and its states (spark-operator v1beta2), shared by the plugin and the operator."""

from __future__ import annotations

from typing import Final

from taskplug.k8s import ResourceType

__all__ = [
    "COMPLETED_STATE",
    "FAILED_STATE",
    "FAILED_SUBMISSION_STATE",
    "NEW_STATE",
    "RUNNING_STATE",
    "SPARK_APPLICATION",
    "SUBMITTED_STATE",
]

SPARK_APPLICATION: Final = ResourceType(
    "sparkoperator.k8s.io/v1beta2", "SparkApplication", "sparkapplications"
)

NEW_STATE: Final = ""
SUBMITTED_STATE: Final = "SUBMITTED"
RUNNING_STATE: Final = "RUNNING"
COMPLETED_STATE: Final = "COMPLETED"
FAILED_STATE: Final = "FAILED"
FAILED_SUBMISSION_STATE: Final = "SUBMISSION_FAILED"
