"""The PyTorch plugin: a ``pytorch`` task as a training-operator ``PyTorchJob`` (master + workers, or elastic).

Follows flyteplugins/go/tasks/plugins/k8s/kfoperators/pytorch/pytorch.go. ``custom`` is a
``flyteidl.plugins.DistributedPyTorchTrainingTask`` (task type version 0: a worker count and an optional
elastic config) or a ``flyteidl.plugins.kubeflow.DistributedPyTorchTrainingTask`` (version 1, what flytekit
1.16 sends: one replica spec for the master and one for the workers, a run policy, an elastic config).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flyteidl.plugins import pytorch_pb2
from flyteidl.plugins.kubeflow import pytorch_pb2 as kf_pytorch_pb2

from taskplug.core import BadTaskSpecification, PluginError, TaskExecutionContext
from taskplug.k8s import ErrorAggregationStrategy, PlatformPodConfig
from taskplug.plugins.kubeflow._common import (
    LogTarget,
    ReplicaSpecs,
    copy_with_replicas,
    decode_custom,
    parse_run_policy,
    read_template,
    replica_count,
    to_replica_spec,
    wrap_build_error,
)
from taskplug.plugins.kubeflow._kinds import PYTORCH

__all__ = ["build_pytorch_job", "elastic_policy", "pytorch_log_targets"]

KubeObject = dict[str, Any]

# flytekit names error files after the worker pod and picks the aggregation strategy from these.
WORKER_NAME_ENV = "_F_WN"
ERROR_STRATEGY_ENV = "_F_DES"


def elastic_policy(config: pytorch_pb2.ElasticConfig | kf_pytorch_pb2.ElasticConfig) -> KubeObject:
    """The job's ``elasticPolicy`` (Flyte's ParseElasticConfig): all five fields, zeros included."""
    return {
        "minReplicas": config.min_replicas,
        "maxReplicas": config.max_replicas,
        "rdzvBackend": config.rdzv_backend,
        "nProcPerNode": config.nproc_per_node,
        "maxRestarts": config.max_restarts,
    }


def _add_worker_env(worker: KubeObject, strategy: ErrorAggregationStrategy) -> None:
    """The worker's name (and the error aggregation strategy) for flytekit's error files.

    Deviation: Flyte appends these to the worker pod's *first* container, which is a sidecar when a pod
    template puts one first; here they go to the ``pytorch`` container, the one running the task.
    """
    containers = worker["template"]["spec"].get("containers") or []
    target = next((c for c in containers if c.get("name") == PYTORCH.container_name), None)
    if target is None:
        if not containers:
            return
        target = containers[0]
    env = list(target.get("env") or [])
    env.append({"name": WORKER_NAME_ENV, "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}})
    if strategy is ErrorAggregationStrategy.EARLIEST:
        env.append({"name": ERROR_STRATEGY_ENV, "value": str(ErrorAggregationStrategy.EARLIEST)})
    target["env"] = env


def build_pytorch_job(
    tctx: TaskExecutionContext,
    *,
    platform: PlatformPodConfig,
    error_aggregation: ErrorAggregationStrategy = ErrorAggregationStrategy.DEFAULT,
) -> KubeObject:
    """The PyTorchJob for a ``pytorch`` task (Flyte's BuildResource). Name, namespace, labels and the like
    are the plugin manager's to add."""
    template = read_template(tctx)
    version = template.task_type_version
    run_policy: KubeObject = {}
    elastic: KubeObject | None = None
    container = PYTORCH.container_name
    if version == 0:
        task = decode_custom(template, pytorch_pb2.DistributedPyTorchTrainingTask())
        try:
            replica = to_replica_spec(tctx, platform, container)
        except PluginError as e:
            raise wrap_build_error("Unable to create replica spec", e) from e
        master = copy_with_replicas(replica, 1)
        worker = copy_with_replicas(replica, task.workers)
        if task.HasField("elastic_config"):
            elastic = elastic_policy(task.elastic_config)
    elif version == 1:
        kf_task = decode_custom(template, kf_pytorch_pb2.DistributedPyTorchTrainingTask())
        replica_specs = ReplicaSpecs(tctx, platform, container)
        try:
            master = replica_specs.with_overrides(kf_task.master_replicas, is_master=True)
        except PluginError as e:
            raise wrap_build_error("Unable to create master replica spec", e) from e
        try:
            worker = replica_specs.with_overrides(kf_task.worker_replicas, is_master=False)
        except PluginError as e:
            raise wrap_build_error("Unable to create worker replica spec", e) from e
        _add_worker_env(worker, error_aggregation)
        if kf_task.HasField("run_policy"):
            run_policy = parse_run_policy(kf_task.run_policy)
        if kf_task.HasField("elastic_config"):
            elastic = elastic_policy(kf_task.elastic_config)
    else:
        raise BadTaskSpecification(
            f"Invalid TaskSpecification, unsupported task template version [{version}] key"
        )

    specs: KubeObject = {"Master": master}
    if worker["replicas"] > 0:
        specs["Worker"] = worker
    spec: KubeObject = {"runPolicy": run_policy}
    if elastic is not None:
        # An elastic job has no master: every worker joins the rendezvous.
        del specs["Master"]
        if "Worker" not in specs:
            # Deviation: Flyte builds a job with no replica specs at all, which the operator rejects, so the
            # task waits out the operator timeout; it is refused here instead.
            raise BadTaskSpecification("number of workers must be greater than 0 for an elastic job")
        spec["elasticPolicy"] = elastic
    spec["pytorchReplicaSpecs"] = specs
    return {"apiVersion": PYTORCH.resource.api_version, "kind": PYTORCH.kind, "spec": spec}


def pytorch_log_targets(job: Mapping[str, Any]) -> list[LogTarget]:
    """The master (when the job has one), then every worker."""
    specs = (job.get("spec") or {}).get("pytorchReplicaSpecs") or {}
    name = str((job.get("metadata") or {}).get("name") or "")
    targets: list[LogTarget] = []
    if "Master" in specs:
        targets.append(LogTarget(f"{name}-master-0", "master"))
    targets += [LogTarget(f"{name}-worker-{i}") for i in range(replica_count(specs, "Worker"))]
    return targets
