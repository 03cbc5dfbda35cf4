"""The Dask plugin (task type ``dask``): a dask-kubernetes DaskJob, and an operator for the embedded local
cluster that really runs the Dask scheduler, workers and job runner as local processes.

Its operator for the embedded cluster loads on first use: discovering plugins (every command) never imports it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from taskplug.core import lazy_exports
from taskplug.plugins.dask._config import DASK_SECTION, DaskConfig
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

if TYPE_CHECKING:
    from taskplug.plugins.dask._local_operator import DaskLocalOperator, runner_pod_name

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

__getattr__ = lazy_exports(
    __name__,
    {
        "DaskLocalOperator": "taskplug.plugins.dask._local_operator",
        "runner_pod_name": "taskplug.plugins.dask._local_operator",
    },
)
