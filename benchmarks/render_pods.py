"""Build and serialize 10,000 objects through the full pipeline; print microseconds per object.

Three workloads, each through ``taskplug.k8s.build_object`` (the plugin manager's own path) and orjson:
a pod (below), a PyTorchJob (master + 3 workers) and a RayJob (head + 2 worker groups), both with the same
platform config and resources, so every replica's pod goes through the pod pipeline.

The workload: image, command and args, 3 env vars, cpu/memory requests and limits, a GPU limit, 2 default
labels and annotations, a default toleration, a node selector, and a base pod template (label, annotation,
service account, priority class, dnsPolicy, pod securityContext, 2 volumes, a primary container with 1 env
var, 2 mounts and a securityContext) to merge.

Timed per object: what the plugin manager's ``launch_resource`` does before it sends the object: the plugin's
build_resource (every piece of platform config, template merge, per replica for the jobs), the object
metadata (name, namespace, labels, annotations, finalizer), the attempt annotation (``stamp_attempt``), and
JSON serialization (orjson, as the lightkube client sends the body); beside it, alternating with it 50 objects
at a time, a plain-dict JSON copy of the same object (the built object through ``json.loads(json.dumps(...))``,
then orjson as the pipeline): target ≤ 2.0× that copy.

    .venv/bin/python benchmarks/render_pods.py [N]
"""

from __future__ import annotations

import copy
import gc
import json
import statistics
import sys
import time
from dataclasses import replace
from typing import Any

import orjson
from google.protobuf import json_format
from google.protobuf.message import Message

from taskplug.core import StaticTaskExecutionContext, TaskExecutionID
from taskplug.executor import Platform, parse_spec, task_context_for
from taskplug.k8s import K8S_SECTION, PodTemplateStore, build_object, stamp_attempt

TARGET = 2.0
"""The pipeline's time per object, at most this many times a plain-dict JSON copy of the same object."""
CHUNK = 50
"""Objects built, then copied, at a time: the two sides alternate this finely within each run."""

SPEC = {
    "template": {
        "id": {"resourceType": "TASK", "project": "p", "domain": "d", "name": "train", "version": "v1"},
        "type": "python-task",
        "container": {
            "image": "ghcr.io/org/trainer:v1",
            "command": ["python", "-m", "train"],
            "args": ["--epochs", "3", "--out", "{{.outputPrefix}}"],
            "env": [{"key": "A", "value": "1"}, {"key": "B", "value": "2"}, {"key": "C", "value": "3"}],
            "resources": {
                "requests": [{"name": "CPU", "value": "2"}, {"name": "MEMORY", "value": "4Gi"}],
                "limits": [
                    {"name": "CPU", "value": "4"},
                    {"name": "MEMORY", "value": "8Gi"},
                    {"name": "GPU", "value": "1"},
                ],
            },
        },
    },
    "execution": {"id": {"project": "p", "domain": "d", "name": "bench", "nodeId": "n0"}},
}

CONFIG = {
    "plugins": {
        "k8s": {
            "default-labels": {"team": "ml", "tier": "batch"},
            "default-annotations": {"a1": "x", "a2": "y"},
            "default-tolerations": [
                {"key": "dedicated", "operator": "Equal", "value": "flyte", "effect": "NoSchedule"}
            ],
            "default-node-selector": {"pool": "gpu"},
            "default-pod-template-name": "base",
        }
    }
}

TEMPLATE = {
    "apiVersion": "v1",
    "kind": "PodTemplate",
    "metadata": {"name": "base", "namespace": "flyte"},
    "template": {
        "metadata": {"labels": {"tmpl": "1"}, "annotations": {"tmpl/a": "1"}},
        "spec": {
            "serviceAccountName": "trainer",
            "priorityClassName": "high",
            "dnsPolicy": "ClusterFirst",
            "securityContext": {"fsGroup": 2000},
            "volumes": [{"name": "data", "emptyDir": {}}, {"name": "cache", "emptyDir": {}}],
            "containers": [
                {
                    "name": "primary",
                    "image": "placeholder",
                    "env": [{"name": "FROM_TEMPLATE", "value": "1"}],
                    "volumeMounts": [
                        {"name": "data", "mountPath": "/data"},
                        {"name": "cache", "mountPath": "/cache"},
                    ],
                    "securityContext": {"allowPrivilegeEscalation": False},
                }
            ],
        },
    },
}


def _custom(message: Message) -> dict[str, Any]:
    return json_format.MessageToDict(message)


def _job_spec(task_type: str, version: int, custom: dict[str, Any]) -> dict[str, Any]:
    document = copy.deepcopy(SPEC)
    document["template"]["type"] = task_type
    document["template"]["taskTypeVersion"] = version
    document["template"]["custom"] = custom
    return document


def _pytorch_custom() -> dict[str, Any]:
    from flyteidl.plugins.kubeflow import pytorch_pb2

    replica = pytorch_pb2.DistributedPyTorchTrainingReplicaSpec
    return _custom(
        pytorch_pb2.DistributedPyTorchTrainingTask(
            master_replicas=replica(replicas=1), worker_replicas=replica(replicas=3)
        )
    )


def _ray_custom() -> dict[str, Any]:
    from flyteidl.plugins import ray_pb2

    return _custom(
        ray_pb2.RayJob(
            ray_cluster=ray_pb2.RayCluster(
                head_group_spec=ray_pb2.HeadGroupSpec(ray_start_params={"num-cpus": "1"}),
                worker_group_spec=[
                    ray_pb2.WorkerGroupSpec(group_name="small", replicas=2, min_replicas=1, max_replicas=4),
                    ray_pb2.WorkerGroupSpec(group_name="large", replicas=1, min_replicas=1, max_replicas=2),
                ],
            ),
            runtime_env_yaml="pip: [numpy]",
        )
    )


def bench(label: str, platform: Platform, document: dict[str, Any], n: int, check: Any) -> None:
    """Time ``n`` objects of one workload (after 200 warm-ups); print the three runs and the median."""
    spec = parse_spec(document)
    entry = platform.k8s_entry_for(spec.template.type)
    plugin = entry.load_plugin(platform.k8s_setup())
    k8s_config = platform.config.get(K8S_SECTION)

    # One task context per object, made before timing (the executor builds it once per execution anyway).
    contexts = []
    for i in range(n + 200):
        meta = spec.metadata
        meta = replace(
            meta, task_execution_id=TaskExecutionID(f"bench-{i}-n0-0", meta.task_execution_id.id, "n0")
        )
        contexts.append(task_context_for(replace(spec, metadata=meta), "/data"))

    def built_object(tctx: StaticTaskExecutionContext) -> dict[str, Any]:
        # The plugin manager's own path: launch metadata, build_resource, object metadata, kind, attempt.
        obj = build_object(plugin, tctx, k8s_config, watched=entry.resource_to_watch)
        return stamp_attempt(obj, tctx.metadata)

    def build(tctx: StaticTaskExecutionContext) -> bytes:
        return orjson.dumps(built_object(tctx))

    for tctx in contexts[:200]:  # warm-up
        build(tctx)
    check(orjson.loads(build(contexts[0])))

    # The baseline: the same object, already built, copied as plain dicts through JSON and serialized as the
    # pipeline serializes it — what an object costs when nothing is decided about it. Timed in alternation.
    built = built_object(contexts[0])

    def plain_copy() -> bytes:
        return orjson.dumps(json.loads(json.dumps(built)))

    # Each run alternates the two CHUNK objects at a time, so that a change in the machine's load (it is
    # shared) falls on both sides alike; a run's figure per side is its total time over the n objects.
    runs, copies = [], []
    for _ in range(3):
        gc.collect()
        build_time = copy_time = 0.0
        for first in range(200, n + 200, CHUNK):
            batch = contexts[first : first + CHUNK]
            start = time.perf_counter()
            for tctx in batch:
                build(tctx)
            middle = time.perf_counter()
            for _ in batch:
                plain_copy()
            build_time += middle - start
            copy_time += time.perf_counter() - middle
        runs.append(build_time / n * 1e6)
        copies.append(copy_time / n * 1e6)
    median, baseline = statistics.median(runs), statistics.median(copies)
    verdict = "met" if median <= TARGET * baseline else "MISSED"
    print(
        f"render {label:<32} N={n} runs(us/object)={', '.join(f'{r:.1f}' for r in runs)} "
        f"median={median:.1f} us/object; plain-dict JSON copy {baseline:.1f} us/object: "
        f"{median / baseline:.2f}x (target <= {TARGET:.1f}x: {verdict})"
    )


def _check_pod(pod: dict[str, Any]) -> None:
    assert pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1", pod
    assert pod["spec"]["priorityClassName"] == "high"


def _check_pytorch(job: dict[str, Any]) -> None:
    specs = job["spec"]["pytorchReplicaSpecs"]
    assert (specs["Master"]["replicas"], specs["Worker"]["replicas"]) == (1, 3), specs


def _check_ray(job: dict[str, Any]) -> None:
    groups = job["spec"]["rayClusterSpec"]["workerGroupSpecs"]
    assert [g["groupName"] for g in groups] == ["small", "large"], groups


def main(n: int) -> None:
    from taskplug.core import PluginRegistry
    from taskplug.plugins.kubeflow import pytorch_entries
    from taskplug.plugins.pod import plugin_entries
    from taskplug.plugins.ray import plugin_entries as ray_entries

    registry = PluginRegistry()
    for entry in [*plugin_entries(), *pytorch_entries(), *ray_entries()]:
        registry.register(entry)
    document = copy.deepcopy(CONFIG)
    document.setdefault("tasks", {})["task-plugins"] = {
        "enabled-plugins": ["container", "sidecar", "pytorch", "ray"],
        "default-for-task-types": {"container": "container", "sidecar": "sidecar"},
    }
    platform = Platform.load(registry=registry, document=document)
    store = PodTemplateStore("flyte")
    store.store(TEMPLATE)
    platform.pod_templates = store
    bench("pod", platform, SPEC, n, _check_pod)
    bench(
        "PyTorchJob (master + 3 workers)",
        platform,
        _job_spec("pytorch", 1, _pytorch_custom()),
        n,
        _check_pytorch,
    )
    bench("RayJob (head + 2 worker groups)", platform, _job_spec("ray", 0, _ray_custom()), n, _check_ray)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000)
