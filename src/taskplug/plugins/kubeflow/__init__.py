"""The kubeflow plugins (task types ``pytorch``, ``tensorflow``, ``mpi``): training-operator PyTorchJobs,
TFJobs and MPIJobs, and a training operator for the embedded local cluster that really runs them.

Only the registrations (``plugin_entries`` and one per plugin) and the job kinds load at once; the plugins, their
config's model and the operator for the embedded cluster load on first use: discovering plugins (every command)
never imports them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from taskplug.core import lazy_exports
from taskplug.plugins.kubeflow._entries import (
    mpi_entries,
    plugin_entries,
    pytorch_entries,
    tensorflow_entries,
)
from taskplug.plugins.kubeflow._kinds import (
    JOB_NAME_LABEL,
    JOB_ROLE_LABEL,
    MPI,
    MPI_JOB,
    OPERATOR_NAME_LABEL,
    PYTORCH,
    PYTORCH_JOB,
    REPLICA_INDEX_LABEL,
    REPLICA_TYPE_LABEL,
    TENSORFLOW,
    TF_JOB,
    JobKind,
)
from taskplug.plugins.kubeflow._section import KF_OPERATOR_SECTION

if TYPE_CHECKING:
    from taskplug.plugins.kubeflow._common import LogTarget, current_condition, kubeflow_task_phase
    from taskplug.plugins.kubeflow._config import KfOperatorConfig
    from taskplug.plugins.kubeflow._local_operator import (
        CONFIG_MAP,
        SERVICE,
        MPIJobOperator,
        PyTorchJobOperator,
        TFJobOperator,
        TrainingOperator,
    )
    from taskplug.plugins.kubeflow._mpi import WORKER_SPEC_COMMAND_KEY, build_mpi_job, mpi_log_targets
    from taskplug.plugins.kubeflow._plugin import MPIPlugin, PyTorchPlugin, TensorFlowPlugin
    from taskplug.plugins.kubeflow._pytorch import build_pytorch_job, elastic_policy, pytorch_log_targets
    from taskplug.plugins.kubeflow._reconcile import (
        HOSTFILE_PATH,
        LOOPBACK,
        Plan,
        ServiceWanted,
        hostfile,
        reconcile_job,
        services_wanted,
    )
    from taskplug.plugins.kubeflow._tensorflow import build_tf_job, tf_log_targets

__all__ = [
    "CONFIG_MAP",
    "HOSTFILE_PATH",
    "JOB_NAME_LABEL",
    "JOB_ROLE_LABEL",
    "KF_OPERATOR_SECTION",
    "LOOPBACK",
    "MPI",
    "MPI_JOB",
    "OPERATOR_NAME_LABEL",
    "PYTORCH",
    "PYTORCH_JOB",
    "REPLICA_INDEX_LABEL",
    "REPLICA_TYPE_LABEL",
    "SERVICE",
    "TENSORFLOW",
    "TF_JOB",
    "WORKER_SPEC_COMMAND_KEY",
    "JobKind",
    "KfOperatorConfig",
    "LogTarget",
    "MPIJobOperator",
    "MPIPlugin",
    "Plan",
    "PyTorchJobOperator",
    "PyTorchPlugin",
    "ServiceWanted",
    "TFJobOperator",
    "TensorFlowPlugin",
    "TrainingOperator",
    "build_mpi_job",
    "build_pytorch_job",
    "build_tf_job",
    "current_condition",
    "elastic_policy",
    "hostfile",
    "kubeflow_task_phase",
    "mpi_entries",
    "mpi_log_targets",
    "plugin_entries",
    "pytorch_entries",
    "pytorch_log_targets",
    "reconcile_job",
    "services_wanted",
    "tensorflow_entries",
    "tf_log_targets",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "CONFIG_MAP": "taskplug.plugins.kubeflow._local_operator",
        "HOSTFILE_PATH": "taskplug.plugins.kubeflow._reconcile",
        "LOOPBACK": "taskplug.plugins.kubeflow._reconcile",
        "SERVICE": "taskplug.plugins.kubeflow._local_operator",
        "WORKER_SPEC_COMMAND_KEY": "taskplug.plugins.kubeflow._mpi",
        "KfOperatorConfig": "taskplug.plugins.kubeflow._config",
        "LogTarget": "taskplug.plugins.kubeflow._common",
        "MPIJobOperator": "taskplug.plugins.kubeflow._local_operator",
        "MPIPlugin": "taskplug.plugins.kubeflow._plugin",
        "Plan": "taskplug.plugins.kubeflow._reconcile",
        "PyTorchJobOperator": "taskplug.plugins.kubeflow._local_operator",
        "PyTorchPlugin": "taskplug.plugins.kubeflow._plugin",
        "ServiceWanted": "taskplug.plugins.kubeflow._reconcile",
        "TFJobOperator": "taskplug.plugins.kubeflow._local_operator",
        "TensorFlowPlugin": "taskplug.plugins.kubeflow._plugin",
        "TrainingOperator": "taskplug.plugins.kubeflow._local_operator",
        "build_mpi_job": "taskplug.plugins.kubeflow._mpi",
        "build_pytorch_job": "taskplug.plugins.kubeflow._pytorch",
        "build_tf_job": "taskplug.plugins.kubeflow._tensorflow",
        "current_condition": "taskplug.plugins.kubeflow._common",
        "elastic_policy": "taskplug.plugins.kubeflow._pytorch",
        "hostfile": "taskplug.plugins.kubeflow._reconcile",
        "kubeflow_task_phase": "taskplug.plugins.kubeflow._common",
        "mpi_log_targets": "taskplug.plugins.kubeflow._mpi",
        "pytorch_log_targets": "taskplug.plugins.kubeflow._pytorch",
        "reconcile_job": "taskplug.plugins.kubeflow._reconcile",
        "services_wanted": "taskplug.plugins.kubeflow._reconcile",
        "tf_log_targets": "taskplug.plugins.kubeflow._tensorflow",
    },
)
