"""Build and serialize 10,000 pods through the full pipeline; print microseconds per pod.

The workload: image, command and args, 3 env vars, cpu/memory requests and limits, a GPU limit, 2 default
labels and annotations, a default toleration, a node selector, and a base pod template (label, annotation,
service account, priority class, dnsPolicy, pod securityContext, 2 volumes, a primary container with 1 env
var, 2 mounts and a securityContext) to merge.

Timed per pod: the pod plugin's build_resource (every piece of platform config, template merge), the plugin
manager's object metadata (name, namespace, labels, annotations, finalizer), and JSON serialization.

    .venv/bin/python benchmarks/render_pods.py [N]
"""

from __future__ import annotations

import gc
import statistics
import sys
import time
from dataclasses import replace

import orjson

from taskplug.core import StaticTaskExecutionContext, TaskExecutionID
from taskplug.executor import Platform, parse_spec, task_context_for
from taskplug.k8s import K8S_SECTION, POD, PodTemplateStore, build_object

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


def main(n: int) -> None:
    from taskplug.core import PluginRegistry
    from taskplug.plugins.pod import plugin_entries

    registry = PluginRegistry()
    for entry in plugin_entries():
        registry.register(entry)
    platform = Platform.load(registry=registry, document=CONFIG)
    store = PodTemplateStore("flyte")
    store.store(TEMPLATE)
    platform.pod_templates = store
    spec = parse_spec(SPEC)
    plugin = platform.k8s_entry_for(spec.template.type).load_plugin(platform.k8s_setup())
    k8s_config = platform.config.get(K8S_SECTION)

    # One task context per pod, made before timing (the executor builds it once per execution anyway).
    contexts = []
    for i in range(n + 200):
        meta = spec.metadata
        meta = replace(
            meta, task_execution_id=TaskExecutionID(f"bench-{i}-n0-0", meta.task_execution_id.id, "n0")
        )
        contexts.append(task_context_for(replace(spec, metadata=meta), "/data"))

    def build(tctx: StaticTaskExecutionContext) -> bytes:
        # The plugin manager's own path: launch metadata, build_resource, object metadata, kind.
        return orjson.dumps(build_object(plugin, tctx, k8s_config, watched=POD))

    for tctx in contexts[:200]:  # warm-up
        build(tctx)
    sample = orjson.loads(build(contexts[0]))
    assert sample["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1", sample
    assert sample["spec"]["priorityClassName"] == "high"

    runs = []
    for _ in range(3):
        gc.collect()
        start = time.perf_counter()
        for tctx in contexts[200:]:
            build(tctx)
        runs.append((time.perf_counter() - start) / n * 1e6)
    print(
        f"render_pods N={n} runs(us/pod)={', '.join(f'{r:.1f}' for r in runs)} median={statistics.median(runs):.1f} us/pod"
    )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000)
