"""Building ray tasks, contexts and platforms for the Ray plugin tests."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from taskplug.core import StaticTaskExecutionContext
from taskplug.k8s import K8sPluginConfig, PlatformPodConfig, PluginState, StaticPluginContext
from taskplug.plugins.ray import RayConfig, build_ray_job
from taskplug.testing import fake_plugin_context, fake_task_context

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
IMAGE = "ghcr.io/org/ray:v1"
ARGS = ["pyflyte-execute", "--inputs", "{{.input}}", "--output-prefix", "{{.outputPrefix}}"]
GENERATED_NAME = "exec1-n0-0"
NAMESPACE = "testproject-development"


def group(name: str = "g", replicas: int = 2, **extra: Any) -> dict[str, Any]:
    """A worker group as flytekit writes it (min/max default to replicas)."""
    return {
        "groupName": name,
        "replicas": float(replicas),
        "minReplicas": float(extra.pop("minReplicas", replicas)),
        "maxReplicas": float(extra.pop("maxReplicas", replicas)),
        **extra,
    }


def ray_custom(
    *, head: Mapping[str, Any] | None = None, groups: list[dict[str, Any]] | None = None, **job: Any
) -> dict[str, Any]:
    """A RayJob as flytekit writes it into ``custom`` (camelCase JSON)."""
    cluster: dict[str, Any] = {"headGroupSpec": dict(head or {})}
    if groups:
        cluster["workerGroupSpec"] = groups
    for key in ("enableAutoscaling", "autoscalerOptions"):
        if key in job:
            cluster[key] = job.pop(key)
    return {"rayCluster": cluster, **job}


def ray_template(custom: Mapping[str, Any] | None = None, **container: Any) -> dict[str, Any]:
    template: dict[str, Any] = {
        "id": {"resourceType": "TASK", "project": "p", "domain": "d", "name": "ray_task", "version": "v1"},
        "type": "ray",
        "container": {
            "image": IMAGE,
            "args": list(ARGS),
            "resources": {"requests": [{"name": "CPU", "value": "500m"}, {"name": "MEMORY", "value": "1Gi"}]},
            "env": [{"key": "FOO", "value": "bar"}],
            **container,
        },
    }
    if custom is not None:
        template["custom"] = dict(custom)
    return template


def platform(**k8s: Any) -> PlatformPodConfig:
    return PlatformPodConfig(k8s=K8sPluginConfig.model_validate(k8s), environ={})


def ray_config(**values: Any) -> RayConfig:
    return RayConfig.model_validate(values)


def tctx_for(template: Mapping[str, Any] | None = None, **options: Any) -> StaticTaskExecutionContext:
    return fake_task_context(template if template is not None else ray_template(ray_custom()), **options)


def build(
    custom: Mapping[str, Any] | None = None,
    *,
    template: Mapping[str, Any] | None = None,
    config: RayConfig | None = None,
    pod: PlatformPodConfig | None = None,
    **options: Any,
) -> dict[str, Any]:
    if template is None:
        template = ray_template(custom if custom is not None else ray_custom(groups=[group()]))
    return build_ray_job(
        tctx_for(template, **options), platform=pod or platform(), config=config or RayConfig()
    )


def plugin_context(
    *, state: PluginState | None = None, template: Mapping[str, Any] | None = None
) -> StaticPluginContext:
    return fake_plugin_context(tctx_for(template), state=state, now=NOW)


def job_object(status: Mapping[str, Any] | None = None, *, name: str = GENERATED_NAME) -> dict[str, Any]:
    """A RayJob as the API reports it, ``status`` as KubeRay writes it."""
    job: dict[str, Any] = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": name, "namespace": NAMESPACE, "creationTimestamp": "2026-03-01T11:59:00Z"},
        "spec": {},
    }
    if status is not None:
        job["status"] = dict(status)
    return job
