"""KubeRay's resource types and RayJob states (``ray-operator/apis/ray/v1`` at KubeRay v1.5.1)."""

from __future__ import annotations

from typing import Final

from taskplug.k8s import ResourceType

__all__ = [
    "COMPLETE",
    "FAILED",
    "INITIALIZING",
    "JOB",
    "JOB_FAILED",
    "JOB_PENDING",
    "JOB_RUNNING",
    "JOB_STOPPED",
    "JOB_SUCCEEDED",
    "NEW",
    "RAY_CLUSTER",
    "RAY_JOB",
    "RETRYING",
    "RUNNING",
    "SERVICE",
    "SUSPENDED",
    "SUSPENDING",
    "VALIDATION_FAILED",
    "WAITING",
]

RAY_JOB: Final = ResourceType("ray.io/v1", "RayJob", "rayjobs")
RAY_CLUSTER: Final = ResourceType("ray.io/v1", "RayCluster", "rayclusters")
JOB: Final = ResourceType("batch/v1", "Job", "jobs")
SERVICE: Final = ResourceType("v1", "Service", "services")

# status.jobDeploymentStatus
NEW: Final = ""
INITIALIZING: Final = "Initializing"
RUNNING: Final = "Running"
COMPLETE: Final = "Complete"
FAILED: Final = "Failed"
VALIDATION_FAILED: Final = "ValidationFailed"
SUSPENDING: Final = "Suspending"
SUSPENDED: Final = "Suspended"
RETRYING: Final = "Retrying"
WAITING: Final = "Waiting"

# status.jobStatus (Ray's own job states)
JOB_PENDING: Final = "PENDING"
JOB_RUNNING: Final = "RUNNING"
JOB_STOPPED: Final = "STOPPED"
JOB_SUCCEEDED: Final = "SUCCEEDED"
JOB_FAILED: Final = "FAILED"
