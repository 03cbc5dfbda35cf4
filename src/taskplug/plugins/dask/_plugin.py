"""The Dask plugin: a ``dask`` task as a dask-kubernetes ``DaskJob``.

Follows flyteplugins/go/tasks/plugins/k8s/dask/dask.go. The task's ``custom`` is a
``flyteidl.plugins.DaskJob``. The job runner (the task's own container), the scheduler and the workers are
three copies of the task's pod after the full pod pipeline (``taskplug.k8s``); the runner and the scheduler
are always built non-interruptible (losing either loses the job), the workers follow the task. The dask
operator turns the DaskJob into a DaskCluster (scheduler + workers) and the runner pod, and reports the
runner's progress in ``status.jobStatus``. Everything here is a pure function of the task context, the
config and the time handed in.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from flyteidl.core import tasks_pb2
from flyteidl.plugins import dask_pb2
from google.protobuf import json_format

from taskplug.core import (
    BadTaskSpecification,
    ErrorCode,
    PhaseInfo,
    PluginError,
    Quantity,
    QuantityError,
    TaskExecutionContext,
    TaskExecutionMetadata,
    TaskInfo,
)
from taskplug.k8s import (
    K8sPluginProperties,
    LogInput,
    PlatformPodConfig,
    PluginContext,
    PluginTaskExecutionContext,
    Resources,
    apply_k8s_resource_overrides,
    deep_copy,
    get_container,
    maybe_update_phase_version,
    resources_to_k8s,
    task_logs,
    to_k8s_pod_spec,
    to_k8s_resource_requirements,
)
from taskplug.plugins.dask._config import DaskConfig
from taskplug.plugins.dask._states import CLUSTER_CREATED, DASK_JOB, FAILED, JOB_CREATED, SUCCESSFUL

__all__ = [
    "DaskPlugin",
    "build_dask_job",
    "dask_job_of",
    "dask_task_info",
    "dask_task_phase",
    "worker_args",
]

WORKER_CONTAINER = "dask-worker"
SCHEDULER_CONTAINER = "scheduler"
JOB_RUNNER_CONTAINER = "job-runner"
RUNNER_LOG_NAME = "(Dask Runner Logs)"
SCHEDULER_PORT = 8786
DASHBOARD_PORT = 8787

KubeObject = dict[str, Any]


# -- the DaskJob custom -----------------------------------------------------------------------------------


def _compact(custom: Any) -> str:
    # Deviation: Flyte prints the Struct with Go's %v (its internal field dump); compact JSON is readable.
    if custom is None:
        return "<nil>"
    return str(json_format.MessageToJson(custom, indent=None, sort_keys=True))


def dask_job_of(template: tasks_pb2.TaskTemplate) -> dask_pb2.DaskJob:
    """The task's ``custom`` as a DaskJob, decoded as Flyte's UnmarshalStructToPb does (jsonpb with unknown
    fields ignored; lowerCamel or original field names; integral numbers or numeric strings for integers)."""
    custom = template.custom if template.HasField("custom") else None
    job = dask_pb2.DaskJob()
    cause: Exception | None = None
    if custom is None:
        cause = ValueError("nil Struct object passed")
    else:
        try:
            json_format.ParseDict(json_format.MessageToDict(custom), job, ignore_unknown_fields=True)
        except (json_format.ParseError, ValueError, TypeError) as e:
            cause = ValueError(f"Failed to unmarshal json obj into proto: {e}")
    if cause is not None:
        raise BadTaskSpecification(
            f"invalid TaskSpecification [{_compact(custom)}], failed to unmarshal", cause=cause
        ) from cause
    return job


# -- the three pods ---------------------------------------------------------------------------------------


def _replace_primary(spec: KubeObject, primary: str, container: KubeObject) -> None:
    containers = spec.get("containers") or []
    for i, c in enumerate(containers):
        if c.get("name") == primary:
            containers[i] = container
            return
    raise BadTaskSpecification(f"primary container [{primary}] not found in pod spec")


def _replica_resources(
    container: Mapping[str, Any],
    resources: tasks_pb2.Resources,
    meta: TaskExecutionMetadata,
    platform: PlatformPodConfig,
) -> dict[str, dict[str, str]]:
    """The container's resources, replaced wholesale by the replica's own when it declares any (after the
    pod pipeline: tolerations and GPU selectors stay those of the task's resources, as in Flyte)."""
    if not resources.requests and not resources.limits:
        current: dict[str, dict[str, str]] = deep_copy(dict(container.get("resources") or {}))
        return current
    return resources_to_k8s(apply_k8s_resource_overrides(meta, _requirements(resources), platform.k8s))


def _requirements(resources: tasks_pb2.Resources) -> Resources:
    """Flyte's ToK8sResourceRequirements; a value that is no quantity is a BadTaskSpecification."""
    # Flyte's ToK8sResourceList parses every value before it looks at the name, so a value that is no
    # quantity fails the task even on an entry with no Kubernetes name (STORAGE); taskplug.k8s's conversion
    # skips such entries unparsed, so every value is parsed here first.
    for entry in (*resources.requests, *resources.limits):
        try:
            Quantity(entry.value)
        except QuantityError as e:
            raise BadTaskSpecification("Failed to parse resource as a valid quantity.", cause=e) from e
    return to_k8s_resource_requirements(resources)


def _quantity(value: Any) -> Quantity:
    # Go's ResourceList.Cpu() / Memory() read a missing entry as zero.
    return Quantity(0) if value is None else Quantity.from_json(value)


def worker_args(resources: Mapping[str, Any]) -> list[str]:
    """``dask-worker --name $(DASK_WORKER_NAME) --nthreads N --memory-limit M``: the CPU limit rounded up,
    the memory limit as Kubernetes prints it, ``0`` for a missing limit (dask reads 0 as "no limit")."""
    limits = resources.get("limits") or {}
    return [
        "dask-worker",
        "--name",
        "$(DASK_WORKER_NAME)",
        # After the pod pipeline the limits map is never nil in Go, so both flags are always written.
        "--nthreads",
        str(_quantity(limits.get("cpu")).value()),
        "--memory-limit",
        str(_quantity(limits.get("memory"))),
    ]


def _worker_spec(
    job: dask_pb2.DaskJob,
    spec: KubeObject,
    primary: str,
    meta: TaskExecutionMetadata,
    platform: PlatformPodConfig,
) -> KubeObject:
    pod = deep_copy(spec)
    container = deep_copy(get_container(pod, primary))
    container["name"] = WORKER_CONTAINER
    workers = job.workers
    if workers.image:
        container["image"] = workers.image
    resources = _replica_resources(container, workers.resources, meta, platform)
    if resources:
        container["resources"] = resources
    else:
        container.pop("resources", None)
    container["args"] = worker_args(resources)
    _replace_primary(pod, primary, container)
    # Workers run as a Deployment, whose pods must restart.
    pod["restartPolicy"] = "Always"
    return {"replicas": workers.number_of_workers, "spec": pod}


def _scheduler_spec(
    job: dask_pb2.DaskJob,
    cluster_name: str,
    spec: KubeObject,
    primary: str,
    meta: TaskExecutionMetadata,
    platform: PlatformPodConfig,
) -> KubeObject:
    pod = deep_copy(spec)
    container = deep_copy(get_container(pod, primary))
    container["name"] = SCHEDULER_CONTAINER
    scheduler = job.scheduler
    if scheduler.image:
        container["image"] = scheduler.image
    resources = _replica_resources(container, scheduler.resources, meta, platform)
    if resources:
        container["resources"] = resources
    else:
        container.pop("resources", None)
    container["args"] = ["dask-scheduler"]
    container["ports"] = [
        {"name": "tcp-comm", "containerPort": SCHEDULER_PORT, "protocol": "TCP"},
        {"name": "dashboard", "containerPort": DASHBOARD_PORT, "protocol": "TCP"},
    ]
    pod["restartPolicy"] = "Always"
    _replace_primary(pod, primary, container)
    service = {
        "type": "NodePort",
        "selector": {"dask.org/cluster-name": cluster_name, "dask.org/component": "scheduler"},
        "ports": [
            {"name": "tcp-comm", "protocol": "TCP", "port": SCHEDULER_PORT, "targetPort": "tcp-comm"},
            {"name": "dashboard", "protocol": "TCP", "port": DASHBOARD_PORT, "targetPort": "dashboard"},
        ],
    }
    return {"spec": pod, "service": service}


def _job_runner_spec(spec: KubeObject, primary: str) -> KubeObject:
    pod: KubeObject = deep_copy(spec)
    pod["restartPolicy"] = "Never"
    container = deep_copy(get_container(pod, primary))
    container["name"] = JOB_RUNNER_CONTAINER
    _replace_primary(pod, primary, container)
    return pod


def _object_meta(meta: Mapping[str, Any], exec_meta: TaskExecutionMetadata) -> KubeObject:
    """The pod pipeline's metadata with the execution's annotations and labels merged in (overwriting);
    Go leaves empty maps out."""
    annotations = {**(meta.get("annotations") or {}), **exec_meta.annotations}
    labels = {**(meta.get("labels") or {}), **exec_meta.labels}
    out: KubeObject = {}
    if annotations:
        out["annotations"] = annotations
    if labels:
        out["labels"] = labels
    return out


def build_dask_job(tctx: TaskExecutionContext, *, platform: PlatformPodConfig) -> KubeObject:
    """The DaskJob for a ``dask`` task (Flyte's BuildResource). Name, namespace, labels, annotations, owner
    references and finalizers of the DaskJob itself are the plugin manager's to add."""
    try:
        template = tctx.task_reader.read()
    except PluginError:
        raise
    except Exception as e:
        raise BadTaskSpecification(f"unable to fetch task specification [{e}]", cause=e) from e
    if template is None:
        raise BadTaskSpecification("nil task specification")
    job = dask_job_of(template)

    raw = to_k8s_pod_spec(tctx, platform)
    non_interruptible = to_k8s_pod_spec(PluginTaskExecutionContext(tctx, interruptible=False), platform)
    meta = tctx.metadata
    object_meta = _object_meta(raw.meta, meta)

    workers = _worker_spec(job, raw.spec, raw.primary, meta, platform)
    cluster_name = meta.task_execution_id.generated_name
    scheduler = _scheduler_spec(job, cluster_name, non_interruptible.spec, raw.primary, meta, platform)
    runner = _job_runner_spec(non_interruptible.spec, raw.primary)
    return {
        "apiVersion": DASK_JOB.api_version,
        "kind": DASK_JOB.kind,
        "metadata": deep_copy(object_meta),
        "spec": {
            "job": {"spec": runner},
            "cluster": {
                "metadata": deep_copy(object_meta),
                "spec": {"worker": workers, "scheduler": scheduler},
            },
        },
    }


# -- status -----------------------------------------------------------------------------------------------


def dask_task_info(pctx: PluginContext, job: Mapping[str, Any], config: DaskConfig) -> TaskInfo:
    """The job runner's log links (``Kubernetes Logs(Dask Runner Logs)`` by default; until the operator
    names the runner pod, ``{{ .podName }}`` stays in the link as Flyte leaves it)."""
    meta = job.get("metadata") or {}
    status = job.get("status") or {}
    template = pctx.task_reader.read()
    inp = LogInput(
        pod_name=str(status.get("jobRunnerPodName") or ""),
        namespace=str(meta.get("namespace") or ""),
        log_name=RUNNER_LOG_NAME,
        task_execution_id=pctx.metadata.task_execution_id,
        task_template_config=dict(template.config),
    )
    now = pctx.now if isinstance(pctx.now, datetime) else None
    return TaskInfo(logs=task_logs(config.logs, inp), occurred_at=now)


def dask_task_phase(pctx: PluginContext, job: Mapping[str, Any], config: DaskConfig) -> PhaseInfo:
    """The phase of a DaskJob from ``status.jobStatus`` (Flyte's GetTaskPhase), version-bumped against the
    last report."""
    info = dask_task_info(pctx, job, config)
    status = str((job.get("status") or {}).get("jobStatus") or "")
    if status == "":
        phase = PhaseInfo.initializing(0, "unknown", info)
    elif status == JOB_CREATED:
        phase = PhaseInfo.initializing(0, "job created", info)
    elif status == CLUSTER_CREATED:
        phase = PhaseInfo.initializing(0, "cluster created", info)
    elif status == FAILED:
        phase = PhaseInfo.retryable_failure(ErrorCode.DOWNSTREAM_SYSTEM_ERROR, "Dask Job failed", info)
    elif status == SUCCESSFUL:
        phase = PhaseInfo.success(info)
    else:  # Running, and anything a later operator adds
        phase = PhaseInfo.running(0, info)
    return maybe_update_phase_version(phase, pctx.plugin_state)


# -- the plugin -------------------------------------------------------------------------------------------


class DaskPlugin:
    """Builds a DaskJob for a ``dask`` task and reports its phase."""

    def __init__(self, platform: PlatformPodConfig, config: DaskConfig | None = None) -> None:
        self.platform = platform
        self.config = config if config is not None else DaskConfig()

    def get_properties(self) -> K8sPluginProperties:
        return K8sPluginProperties()

    def build_identity_resource(self, meta: TaskExecutionMetadata) -> KubeObject:
        return {"apiVersion": DASK_JOB.api_version, "kind": DASK_JOB.kind}

    def build_resource(self, tctx: TaskExecutionContext) -> KubeObject:
        return build_dask_job(tctx, platform=self.platform)

    def get_task_phase(self, pctx: PluginContext, resource: KubeObject) -> PhaseInfo:
        return dask_task_phase(pctx, resource, self.config)
