"""An example taskplug Kubernetes plugin: ``batchjob`` tasks as ``batch.example.com/v1alpha1`` BatchJobs,
with a simulated operator for the embedded local cluster. See ``docs/plugins.md`` in taskplug."""

from taskplug_batchjob._config import BATCHJOB_SECTION, BatchJobConfig
from taskplug_batchjob._operator import ANNOTATION_SIMULATE_FAILURE, BatchJobLocalOperator, next_status
from taskplug_batchjob._plugin import (
    BATCHJOB_TASK_TYPE,
    FAILED_ERROR_CODE,
    BatchJobPlugin,
    batch_job_phase,
    build_batch_job,
    plugin_entries,
)
from taskplug_batchjob._resource import BATCH_JOB

__all__ = [
    "ANNOTATION_SIMULATE_FAILURE",
    "BATCHJOB_SECTION",
    "BATCHJOB_TASK_TYPE",
    "BATCH_JOB",
    "FAILED_ERROR_CODE",
    "BatchJobConfig",
    "BatchJobLocalOperator",
    "BatchJobPlugin",
    "batch_job_phase",
    "build_batch_job",
    "next_status",
    "plugin_entries",
]
