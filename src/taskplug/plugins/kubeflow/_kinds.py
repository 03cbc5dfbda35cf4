"""The three kubeflow training-operator job types and the names the operator and the plugins share.

Follows github.com/kubeflow/training-operator v1.8.0 ``pkg/apis/kubeflow.org/v1`` (kinds, default container
names and ports, label keys) and flyteplugins/go/tasks/plugins/k8s/kfoperators/common (task types).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from taskplug.k8s import ResourceType

__all__ = [
    "JOB_NAME_LABEL",
    "JOB_ROLE_LABEL",
    "KINDS",
    "MPI",
    "MPI_JOB",
    "OPERATOR_NAME_LABEL",
    "PYTORCH",
    "PYTORCH_JOB",
    "REPLICA_INDEX_LABEL",
    "REPLICA_TYPE_LABEL",
    "TENSORFLOW",
    "TF_JOB",
    "JobKind",
]

API_VERSION: Final = "kubeflow.org/v1"
PYTORCH_JOB: Final = ResourceType(API_VERSION, "PyTorchJob", "pytorchjobs")
TF_JOB: Final = ResourceType(API_VERSION, "TFJob", "tfjobs")
MPI_JOB: Final = ResourceType(API_VERSION, "MPIJob", "mpijobs")

REPLICA_INDEX_LABEL: Final = "training.kubeflow.org/replica-index"
REPLICA_TYPE_LABEL: Final = "training.kubeflow.org/replica-type"
OPERATOR_NAME_LABEL: Final = "training.kubeflow.org/operator-name"
JOB_NAME_LABEL: Final = "training.kubeflow.org/job-name"
JOB_ROLE_LABEL: Final = "training.kubeflow.org/job-role"


@dataclass(frozen=True, slots=True)
class JobKind:
    """One job type: its Flyte task type, its resource, where its replica specs live, and what the operator
    calls things."""

    task_type: str
    resource: ResourceType
    replica_specs_key: str
    container_name: str
    """The container the operator configures (Flyte renames the task's primary container to this)."""
    port_name: str
    default_port: int
    controller_name: str

    @property
    def kind(self) -> str:
        return self.resource.kind


PYTORCH: Final = JobKind(
    "pytorch",
    PYTORCH_JOB,
    "pytorchReplicaSpecs",
    "pytorch",
    "pytorchjob-port",
    23456,
    "pytorchjob-controller",
)
TENSORFLOW: Final = JobKind(
    "tensorflow", TF_JOB, "tfReplicaSpecs", "tensorflow", "tfjob-port", 2222, "tfjob-controller"
)
MPI: Final = JobKind("mpi", MPI_JOB, "mpiReplicaSpecs", "mpi", "mpi-port", 9999, "mpijob-controller")

KINDS: Final = (PYTORCH, TENSORFLOW, MPI)
