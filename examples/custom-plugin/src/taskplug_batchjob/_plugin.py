"""The BatchJob plugin: a ``batchjob`` task as a ``batch.example.com/v1alpha1`` BatchJob custom resource.

The BatchJob is this example's own CRD: ``spec.parallelism`` pods are run from ``spec.podTemplate``, and
the operator reports ``status.phase`` (``Pending``, ``Running``, ``Succeeded``, ``Failed``) with a
``message``. The pod template is built by taskplug's pod pipeline (``to_k8s_pod_spec``), so platform
configuration (default resources, tolerations, node selectors, pod templates, …) applies to it exactly as
to a plain container task. Everything here is a pure function of the task context and the config.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from google.protobuf import json_format

from taskplug.core import (
    BadTaskSpecification,
    PhaseInfo,
    TaskExecutionContext,
    TaskExecutionMetadata,
    TaskInfo,
)
from taskplug.k8s import (
    PRIMARY_CONTAINER_KEY,
    K8sPluginEntry,
    K8sPluginProperties,
    K8sPluginSetup,
    PlatformPodConfig,
    PluginContext,
    maybe_update_phase_version,
    parse_k8s_time,
    to_k8s_pod_spec,
)
from taskplug_batchjob._config import BATCHJOB_SECTION, BatchJobConfig
from taskplug_batchjob._operator import BatchJobLocalOperator
from taskplug_batchjob._resource import BATCH_JOB

__all__ = [
    "BATCHJOB_TASK_TYPE",
    "FAILED_ERROR_CODE",
    "BatchJobPlugin",
    "batch_job_phase",
    "build_batch_job",
    "plugin_entries",
]

BATCHJOB_TASK_TYPE = "batchjob"
FAILED_ERROR_CODE = "BatchJobFailed"

KubeObject = dict[str, Any]


def _parallelism(custom: Mapping[str, Any], config: BatchJobConfig) -> int:
    unknown = sorted(set(custom) - {"parallelism"})
    if unknown:
        raise BadTaskSpecification(f"invalid BatchJob task: unknown custom field(s) {unknown}")
    value = custom.get("parallelism", config.default_parallelism)
    # A protobuf Struct holds every number as a float: 3 arrives as 3.0.
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        raise BadTaskSpecification(f"invalid BatchJob task: parallelism must be an integer, got {value!r}")
    parallelism = int(value)
    if not 1 <= parallelism <= config.max_parallelism:
        raise BadTaskSpecification(
            f"invalid BatchJob task: parallelism must be between 1 and {config.max_parallelism}, "
            f"got {parallelism}"
        )
    return parallelism


def build_batch_job(
    tctx: TaskExecutionContext, *, platform: PlatformPodConfig, config: BatchJobConfig
) -> KubeObject:
    """The BatchJob for a ``batchjob`` task (BuildResource). Name, namespace, labels, annotations and
    finalizers are the plugin manager's to add."""
    template = tctx.task_reader.read()
    custom = json_format.MessageToDict(template.custom) if template.HasField("custom") else {}
    parallelism = _parallelism(custom, config)
    # The task's own pod (container or K8sPod target) with every piece of platform configuration applied;
    # raises BadTaskSpecification for a task without one.
    pod = to_k8s_pod_spec(tctx, platform)
    # The pods carry what the BatchJob carries (platform defaults, then the pod's own, then the
    # execution's), so they can be traced to their execution; the primary container decides each pod.
    meta, k8s = tctx.metadata, platform.k8s
    labels = {**k8s.default_labels, **pod.meta.get("labels", {}), **meta.labels}
    annotations = {
        **k8s.default_annotations,
        **pod.meta.get("annotations", {}),
        **meta.annotations,
        PRIMARY_CONTAINER_KEY: pod.primary,
    }
    return {
        "apiVersion": BATCH_JOB.api_version,
        "kind": BATCH_JOB.kind,
        "spec": {
            "parallelism": parallelism,
            "podTemplate": {
                "metadata": {"annotations": annotations, "labels": labels},
                "spec": pod.spec,
            },
        },
    }


def batch_job_phase(pctx: PluginContext, job: Mapping[str, Any]) -> PhaseInfo:
    """The phase of a BatchJob (GetTaskPhase), version-bumped when the message changes within a phase."""
    status: Mapping[str, Any] = job.get("status") or {}
    phase = str(status.get("phase") or "")
    message = str(status.get("message") or "")
    when = parse_k8s_time(status.get("completionTime")) or parse_k8s_time(status.get("startTime"))
    counts = {k: int(status.get(k) or 0) for k in ("active", "succeeded", "failed")}
    info = TaskInfo(occurred_at=when or pctx.now, custom_info=counts)
    if phase == "":
        # Created, not yet seen by the operator.
        result = PhaseInfo.queued_with_task_info(0, "BatchJob created, waiting for the operator", info)
    elif phase == "Pending":
        result = PhaseInfo.initializing(0, message or "BatchJob pending", info)
    elif phase == "Running":
        result = PhaseInfo.running(0, info)
    elif phase == "Succeeded":
        result = PhaseInfo.success(info)
    elif phase == "Failed":
        # The user's pods failed: a retryable user error (the task's retries apply).
        result = PhaseInfo.retryable_failure(FAILED_ERROR_CODE, message or "BatchJob failed", info)
    else:
        # A phase a newer operator added: keep waiting rather than guess an outcome.
        result = PhaseInfo.initializing(0, f"BatchJob phase [{phase}]: {message}", info)
    return maybe_update_phase_version(result, pctx.plugin_state)


class BatchJobPlugin:
    """Builds a BatchJob for a ``batchjob`` task and reports its phase."""

    def __init__(self, platform: PlatformPodConfig, config: BatchJobConfig | None = None) -> None:
        self.platform = platform
        self.config = config if config is not None else BatchJobConfig()

    def get_properties(self) -> K8sPluginProperties:
        return K8sPluginProperties()

    def build_identity_resource(self, meta: TaskExecutionMetadata) -> KubeObject:
        return {"apiVersion": BATCH_JOB.api_version, "kind": BATCH_JOB.kind}

    def build_resource(self, tctx: TaskExecutionContext) -> KubeObject:
        return build_batch_job(tctx, platform=self.platform, config=self.config)

    def get_task_phase(self, pctx: PluginContext, resource: KubeObject) -> PhaseInfo:
        return batch_job_phase(pctx, resource)


def _load(setup: K8sPluginSetup) -> BatchJobPlugin:
    return BatchJobPlugin(
        PlatformPodConfig.from_config(setup.config, setup.pod_templates, setup.environ),
        setup.config.get(BATCHJOB_SECTION),
    )


def plugin_entries() -> list[K8sPluginEntry]:
    """The plugin's registration (the ``taskplug.plugins`` entry point names this function)."""
    return [
        K8sPluginEntry(
            id=BATCHJOB_TASK_TYPE,
            registered_task_types=(BATCHJOB_TASK_TYPE,),
            resource_to_watch=BATCH_JOB,
            load_plugin=_load,
            config_sections=(BATCHJOB_SECTION,),
            local_operator=BatchJobLocalOperator,
        )
    ]
