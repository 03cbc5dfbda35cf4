"""The Ray plugin (task type ``ray``): a KubeRay RayJob, and an operator for the embedded local cluster that
runs the Ray cluster's pods (small stand-ins for the Ray processes) and the job's entrypoint as local
processes.

Its operator for the embedded cluster loads on first use: discovering plugins (every command) never imports it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from taskplug.core import lazy_exports
from taskplug.plugins.ray._config import (
    RAY_SECTION,
    RayAuthConfig,
    RayConfig,
    RayDefaultsConfig,
    RayLogConfig,
    RayNodeConfig,
    RemoteClusterConfig,
)
from taskplug.plugins.ray._plugin import (
    GENERATED_NAME_MAX_LENGTH,
    RAY_TASK_TYPE,
    RayPlugin,
    build_ray_job,
    head_start_params,
    plugin_entries,
    ray_job_of,
    ray_task_info,
    ray_task_phase,
    runtime_env_yaml,
    worker_start_params,
)
from taskplug.plugins.ray._states import JOB, RAY_CLUSTER, RAY_JOB

if TYPE_CHECKING:
    from taskplug.plugins.ray._local_operator import FINALIZER, RayLocalOperator, validate_ray_job

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
        "RayLocalOperator": "taskplug.plugins.ray._local_operator",
        "validate_ray_job": "taskplug.plugins.ray._local_operator",
    },
)
