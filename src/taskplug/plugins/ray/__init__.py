"""The Ray plugin (task type ``ray``): a KubeRay RayJob, and an operator for the embedded local cluster that
runs the Ray cluster's pods (small stand-ins for the Ray processes) and the job's entrypoint as local
processes.

Only the registration (``plugin_entries``) loads at once; the plugin, its config's models and its operator for the
embedded cluster load on first use: discovering plugins (every command) never imports them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from taskplug.core import lazy_exports
from taskplug.plugins.ray._entries import RAY_SECTION, RAY_TASK_TYPE, plugin_entries
from taskplug.plugins.ray._states import JOB, RAY_CLUSTER, RAY_JOB

if TYPE_CHECKING:
    from taskplug.plugins.ray._config import (
        RayAuthConfig,
        RayConfig,
        RayDefaultsConfig,
        RayLogConfig,
        RayNodeConfig,
        RemoteClusterConfig,
    )
    from taskplug.plugins.ray._local_operator import FINALIZER, RayLocalOperator, validate_ray_job
    from taskplug.plugins.ray._plugin import (
        GENERATED_NAME_MAX_LENGTH,
        RayPlugin,
        build_ray_job,
        head_start_params,
        ray_job_of,
        ray_task_info,
        ray_task_phase,
        runtime_env_yaml,
        worker_start_params,
    )

__all__ = [
    "FINALIZER",
    "GENERATED_NAME_MAX_LENGTH",
    "JOB",
    "RAY_CLUSTER",
    "RAY_JOB",
    "RAY_SECTION",
    "RAY_TASK_TYPE",
    "RayAuthConfig",
    "RayConfig",
    "RayDefaultsConfig",
    "RayLocalOperator",
    "RayLogConfig",
    "RayNodeConfig",
    "RayPlugin",
    "RemoteClusterConfig",
    "build_ray_job",
    "head_start_params",
    "plugin_entries",
    "ray_job_of",
    "ray_task_info",
    "ray_task_phase",
    "runtime_env_yaml",
    "validate_ray_job",
    "worker_start_params",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "FINALIZER": "taskplug.plugins.ray._local_operator",
        "GENERATED_NAME_MAX_LENGTH": "taskplug.plugins.ray._plugin",
        "RayAuthConfig": "taskplug.plugins.ray._config",
        "RayConfig": "taskplug.plugins.ray._config",
        "RayDefaultsConfig": "taskplug.plugins.ray._config",
        "RayLocalOperator": "taskplug.plugins.ray._local_operator",
        "RayLogConfig": "taskplug.plugins.ray._config",
        "RayNodeConfig": "taskplug.plugins.ray._config",
        "RayPlugin": "taskplug.plugins.ray._plugin",
        "RemoteClusterConfig": "taskplug.plugins.ray._config",
        "build_ray_job": "taskplug.plugins.ray._plugin",
        "head_start_params": "taskplug.plugins.ray._plugin",
        "ray_job_of": "taskplug.plugins.ray._plugin",
        "ray_task_info": "taskplug.plugins.ray._plugin",
        "ray_task_phase": "taskplug.plugins.ray._plugin",
        "runtime_env_yaml": "taskplug.plugins.ray._plugin",
        "validate_ray_job": "taskplug.plugins.ray._local_operator",
        "worker_start_params": "taskplug.plugins.ray._plugin",
    },
)
