"""The dask-kubernetes operator's resource types and DaskJob states (the operator at commit abd02cd17b26,
``dask_kubernetes/operator/go_client/pkg/apis/kubernetes.dask.org/v1/types.go``)."""

from __future__ import annotations

from typing import Final

from taskplug.k8s import ResourceType

__all__ = [
    "CLUSTER_CREATED",
    "DASK_CLUSTER",
    "DASK_JOB",
    "FAILED",
    "JOB_CREATED",
    "RUNNING",
    "SERVICE",
    "SUCCESSFUL",
]

DASK_JOB: Final = ResourceType("kubernetes.dask.org/v1", "DaskJob", "daskjobs")
DASK_CLUSTER: Final = ResourceType("kubernetes.dask.org/v1", "DaskCluster", "daskclusters")
SERVICE: Final = ResourceType("v1", "Service", "services")

# status.jobStatus
JOB_CREATED: Final = "JobCreated"
CLUSTER_CREATED: Final = "ClusterCreated"
RUNNING: Final = "Running"
SUCCESSFUL: Final = "Successful"
FAILED: Final = "Failed"
