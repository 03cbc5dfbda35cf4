"""The TensorFlow plugin: a ``tensorflow`` task as a training-operator ``TFJob`` (chief, workers, parameter
servers, evaluator).

Follows flyteplugins/go/tasks/plugins/k8s/kfoperators/tensorflow/tensorflow.go.
``custom`` is a ``flyteidl.plugins.DistributedTensorflowTrainingTask`` (version 0: counts) or a
``flyteidl.plugins.kubeflow.DistributedTensorflowTrainingTask`` (version 1: a replica spec per role).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flyteidl.plugins import tensorflow_pb2
from flyteidl.plugins.kubeflow import tensorflow_pb2 as kf_tensorflow_pb2

from taskplug.core import BadTaskSpecification, PluginError, TaskExecutionContext
from taskplug.k8s import PlatformPodConfig
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
from taskplug.plugins.kubeflow._kinds import TENSORFLOW

__all__ = ["TF_REPLICA_TYPES", "build_tf_job", "tf_log_targets"]

KubeObject = dict[str, Any]

TF_REPLICA_TYPES = ("Chief", "Worker", "PS", "Evaluator")


def build_tf_job(tctx: TaskExecutionContext, *, platform: PlatformPodConfig) -> KubeObject:
    """The TFJob for a ``tensorflow`` task (Flyte's BuildResource)."""
    template = read_template(tctx)
    version = template.task_type_version
    container = TENSORFLOW.container_name
    specs: KubeObject = {}
    run_policy: KubeObject = {}
    if version == 0:
        task = decode_custom(template, tensorflow_pb2.DistributedTensorflowTrainingTask())
        try:
            replica = to_replica_spec(tctx, platform, container)
        except PluginError as e:
            raise wrap_build_error("Unable to create replica spec", e) from e
        counts = (task.chief_replicas, task.workers, task.ps_replicas, task.evaluator_replicas)
        for replica_type, count in zip(TF_REPLICA_TYPES, counts, strict=True):
            if count > 0:
                specs[replica_type] = copy_with_replicas(replica, count)
    elif version == 1:
        kf_task = decode_custom(template, kf_tensorflow_pb2.DistributedTensorflowTrainingTask())
        replica_specs = ReplicaSpecs(tctx, platform, container)
        configs = (
            kf_task.chief_replicas,
            kf_task.worker_replicas,
            kf_task.ps_replicas,
            kf_task.evaluator_replicas,
        )
        # Go walks a map here (random order): which of two bad replica specs is reported is unspecified.
        for replica_type, config in zip(TF_REPLICA_TYPES, configs, strict=True):
            replicas = config.common.replicas if config.HasField("common") else config.replicas
            if replicas <= 0:
                continue
            try:
                specs[replica_type] = replica_specs.with_overrides(config, is_master=False)
            except PluginError as e:
                raise wrap_build_error("Unable to create replica spec", e) from e
        if kf_task.HasField("run_policy"):
            run_policy = parse_run_policy(kf_task.run_policy)
    else:
        raise BadTaskSpecification(
            f"Invalid TaskSpecification, unsupported task template version [{version}] key"
        )
    if replica_count(specs, "Worker") <= 0:
        # Deviation: a plain error in Flyte; a BadTaskSpecification here (so its message carries the code).
        raise BadTaskSpecification("number of workers must be greater than 0")
    return {
        "apiVersion": TENSORFLOW.resource.api_version,
        "kind": TENSORFLOW.kind,
        "spec": {"runPolicy": run_policy, "tfReplicaSpecs": specs},
    }


def tf_log_targets(job: Mapping[str, Any]) -> list[LogTarget]:
    """Every worker, every parameter server, the chief, the evaluator.

    Deviation: Flyte links ``{job}-psReplica-{i}``, ``{job}-chiefReplica-0`` and ``{job}-evaluatorReplica-0``,
    pods the operator never creates (it names them ``-ps-{i}``, ``-chief-0``, ``-evaluator-0``), and leaves
    those links without the job's times; here they point at the real pods, with times, as worker links do.
    """
    specs = (job.get("spec") or {}).get("tfReplicaSpecs") or {}
    name = str((job.get("metadata") or {}).get("name") or "")
    targets = [LogTarget(f"{name}-worker-{i}") for i in range(replica_count(specs, "Worker"))]
    targets += [LogTarget(f"{name}-ps-{i}") for i in range(replica_count(specs, "PS"))]
    if replica_count(specs, "Chief") != 0:
        targets.append(LogTarget(f"{name}-chief-0"))
    if replica_count(specs, "Evaluator") != 0:
        targets.append(LogTarget(f"{name}-evaluator-0"))
    return targets
