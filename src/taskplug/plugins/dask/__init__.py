"""The Dask plugin (task type ``dask``): a dask-kubernetes DaskJob, and an operator for the embedded local
cluster that really runs the Dask scheduler, workers and job runner as local processes."""

from taskplug.plugins.dask._config import DASK_SECTION, DaskConfig
from taskplug.plugins.dask._local_operator import DaskLocalOperator, runner_pod_name
from taskplug.plugins.dask._plugin import (
    DASK_TASK_TYPE,
    DaskPlugin,
    build_dask_job,
    dask_job_of,
    dask_task_info,
    dask_task_phase,
    plugin_entries,
    worker_args,
)
from taskplug.plugins.dask._states import DASK_CLUSTER, DASK_JOB

__all__ = [
    "DASK_CLUSTER",
    "DASK_JOB",
    "DASK_SECTION",
    "DASK_TASK_TYPE",
    "DaskConfig",
    "DaskLocalOperator",
    "DaskPlugin",
    "build_dask_job",
    "dask_job_of",
    "dask_task_info",
    "dask_task_phase",
    "plugin_entries",
    "runner_pod_name",
    "worker_args",
]
