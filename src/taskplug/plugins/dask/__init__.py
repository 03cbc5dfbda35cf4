"""The Dask plugin (task type ``dask``): a dask-kubernetes DaskJob, and an operator for the embedded local
cluster that really runs the Dask scheduler, workers and job runner as local processes.

Only the registration (``plugin_entries``) loads at once; the plugin, its config's model and its operator for the
embedded cluster load on first use: discovering plugins (every command) never imports them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from taskplug.core import lazy_exports
from taskplug.plugins.dask._entries import DASK_SECTION, DASK_TASK_TYPE, plugin_entries
from taskplug.plugins.dask._states import DASK_CLUSTER, DASK_JOB

if TYPE_CHECKING:
    from taskplug.plugins.dask._config import DaskConfig
    from taskplug.plugins.dask._local_operator import DaskLocalOperator, runner_pod_name
    from taskplug.plugins.dask._plugin import (
        DaskPlugin,
        build_dask_job,
        dask_job_of,
        dask_task_info,
        dask_task_phase,
        worker_args,
    )

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
        "DaskConfig": "taskplug.plugins.dask._config",
        "DaskLocalOperator": "taskplug.plugins.dask._local_operator",
        "DaskPlugin": "taskplug.plugins.dask._plugin",
        "build_dask_job": "taskplug.plugins.dask._plugin",
        "dask_job_of": "taskplug.plugins.dask._plugin",
        "dask_task_info": "taskplug.plugins.dask._plugin",
        "dask_task_phase": "taskplug.plugins.dask._plugin",
        "runner_pod_name": "taskplug.plugins.dask._local_operator",
        "worker_args": "taskplug.plugins.dask._plugin",
    },
)
