"""The k8s array plugin (task type ``container_array``, plugin ``k8s-array``): flytekit's legacy map task run
as one pod per element of its input lists, configured by ``plugins.k8s-array``.

The registration (``plugin_entries``) and the ids load at once; the config's models, the plugin and its machinery
(state machine, sub-task pods, output assembly, pod watch) load on first use (PEP 562), so that discovering
plugins — which every command does — does not import them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from taskplug.core import lazy_exports
from taskplug.plugins.array._entries import K8S_ARRAY_SECTION, plugin_entries
from taskplug.plugins.array._id import ARRAY_TASK_TYPE, PLUGIN_ID

if TYPE_CHECKING:
    from taskplug.plugins.array._collector import ErrorMessageCollector, index_ranges
    from taskplug.plugins.array._config import (
        ArrayLogConfig,
        ClusterAuth,
        K8sArrayConfig,
        RemoteClusterConfig,
        ResourceConfig,
        WorkQueueConfig,
    )
    from taskplug.plugins.array._plugin import ArrayPlugin
    from taskplug.plugins.array._state import (
        ARRAY_JOB_GENERIC_FAILURE,
        PLUGIN_STATE_VERSION,
        ArrayJob,
        ArrayPhase,
        ArrayState,
        summary_to_phase,
        to_array_job,
        to_phase_info,
    )
    from taskplug.plugins.array._storage import ArrayDataStore, assemble_outputs, none_literal, subtask_path
    from taskplug.plugins.array._subtask import (
        ARRAY_FINALIZER,
        FLYTE_K8S_ARRAY_INDEX,
        JOB_INDEX_VAR_NAME,
        POD_TEMPLATE_FAILED,
        SubTask,
        add_metadata,
        build_subtask_pod,
        classify_create_error,
        is_interruptible,
        log_suffix,
        log_vars,
        new_subtask,
        subtask_name,
        subtask_namespace,
        subtask_phase,
        subtask_template,
    )
    from taskplug.plugins.array._watch import PodWakeups

__all__ = [
    "ARRAY_FINALIZER",
    "ARRAY_JOB_GENERIC_FAILURE",
    "ARRAY_TASK_TYPE",
    "FLYTE_K8S_ARRAY_INDEX",
    "JOB_INDEX_VAR_NAME",
    "K8S_ARRAY_SECTION",
    "PLUGIN_ID",
    "PLUGIN_STATE_VERSION",
    "POD_TEMPLATE_FAILED",
    "ArrayDataStore",
    "ArrayJob",
    "ArrayLogConfig",
    "ArrayPhase",
    "ArrayPlugin",
    "ArrayState",
    "ClusterAuth",
    "ErrorMessageCollector",
    "K8sArrayConfig",
    "PodWakeups",
    "RemoteClusterConfig",
    "ResourceConfig",
    "SubTask",
    "WorkQueueConfig",
    "add_metadata",
    "assemble_outputs",
    "build_subtask_pod",
    "classify_create_error",
    "index_ranges",
    "is_interruptible",
    "log_suffix",
    "log_vars",
    "new_subtask",
    "none_literal",
    "plugin_entries",
    "subtask_name",
    "subtask_namespace",
    "subtask_path",
    "subtask_phase",
    "subtask_template",
    "summary_to_phase",
    "to_array_job",
    "to_phase_info",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "ARRAY_FINALIZER": "taskplug.plugins.array._subtask",
        "ARRAY_JOB_GENERIC_FAILURE": "taskplug.plugins.array._state",
        "FLYTE_K8S_ARRAY_INDEX": "taskplug.plugins.array._subtask",
        "JOB_INDEX_VAR_NAME": "taskplug.plugins.array._subtask",
        "PLUGIN_STATE_VERSION": "taskplug.plugins.array._state",
        "POD_TEMPLATE_FAILED": "taskplug.plugins.array._subtask",
        "ArrayDataStore": "taskplug.plugins.array._storage",
        "ArrayJob": "taskplug.plugins.array._state",
        "ArrayLogConfig": "taskplug.plugins.array._config",
        "ArrayPhase": "taskplug.plugins.array._state",
        "ArrayPlugin": "taskplug.plugins.array._plugin",
        "ArrayState": "taskplug.plugins.array._state",
        "ClusterAuth": "taskplug.plugins.array._config",
        "ErrorMessageCollector": "taskplug.plugins.array._collector",
        "K8sArrayConfig": "taskplug.plugins.array._config",
        "PodWakeups": "taskplug.plugins.array._watch",
        "RemoteClusterConfig": "taskplug.plugins.array._config",
        "ResourceConfig": "taskplug.plugins.array._config",
        "SubTask": "taskplug.plugins.array._subtask",
        "WorkQueueConfig": "taskplug.plugins.array._config",
        "add_metadata": "taskplug.plugins.array._subtask",
        "assemble_outputs": "taskplug.plugins.array._storage",
        "build_subtask_pod": "taskplug.plugins.array._subtask",
        "classify_create_error": "taskplug.plugins.array._subtask",
        "index_ranges": "taskplug.plugins.array._collector",
        "is_interruptible": "taskplug.plugins.array._subtask",
        "log_suffix": "taskplug.plugins.array._subtask",
        "log_vars": "taskplug.plugins.array._subtask",
        "new_subtask": "taskplug.plugins.array._subtask",
        "none_literal": "taskplug.plugins.array._storage",
        "subtask_name": "taskplug.plugins.array._subtask",
        "subtask_namespace": "taskplug.plugins.array._subtask",
        "subtask_path": "taskplug.plugins.array._storage",
        "subtask_phase": "taskplug.plugins.array._subtask",
        "subtask_template": "taskplug.plugins.array._subtask",
        "summary_to_phase": "taskplug.plugins.array._state",
        "to_array_job": "taskplug.plugins.array._state",
        "to_phase_info": "taskplug.plugins.array._state",
    },
)
