"""Building dask tasks, contexts and platforms for the Dask plugin tests."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from taskplug.core import StaticTaskExecutionContext
from taskplug.k8s import K8sPluginConfig, PlatformPodConfig, PluginState, StaticPluginContext
from taskplug.plugins.dask import DaskConfig, build_dask_job
from taskplug.testing import fake_plugin_context, fake_task_context

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
IMAGE = "ghcr.io/org/dask:v1"
ARGS = ["pyflyte-execute", "--inputs", "{{.input}}", "--output-prefix", "{{.outputPrefix}}"]
GENERATED_NAME = "exec1-n0-0"
NAMESPACE = "testproject-development"


def dask_custom(
    *,
    workers: int | None = 1,
    worker_image: str = "",
    worker_resources: Mapping[str, Any] | None = None,
    scheduler_image: str = "",
    scheduler_resources: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A DaskJob as flytekit writes it into ``custom`` (camelCase JSON, numbers as floats)."""
    scheduler: dict[str, Any] = {"resources": dict(scheduler_resources or {})}
    if scheduler_image:
        scheduler["image"] = scheduler_image
    worker_group: dict[str, Any] = {"resources": dict(worker_resources or {})}
    if workers is not None:
        worker_group["numberOfWorkers"] = float(workers)
    if worker_image:
        worker_group["image"] = worker_image
    return {"scheduler": scheduler, "workers": worker_group}


def dask_template(custom: Mapping[str, Any] | None = None, **container: Any) -> dict[str, Any]:
    template: dict[str, Any] = {
        "id": {"resourceType": "TASK", "project": "p", "domain": "d", "name": "dask_task", "version": "v1"},
        "type": "dask",
        "container": {
            "image": IMAGE,
            "args": list(ARGS),
            "resources": {
                "requests": [{"name": "CPU", "value": "500m"}, {"name": "MEMORY", "value": "512Mi"}],
                "limits": [{"name": "CPU", "value": "1500m"}, {"name": "MEMORY", "value": "1Gi"}],
            },
            "env": [{"key": "FOO", "value": "bar"}],
            **container,
        },
    }
    if custom is not None:
        template["custom"] = dict(custom)
    return template


def platform(**k8s: Any) -> PlatformPodConfig:
    return PlatformPodConfig(k8s=K8sPluginConfig.model_validate(k8s), environ={})


def tctx_for(template: Mapping[str, Any] | None = None, **options: Any) -> StaticTaskExecutionContext:
    return fake_task_context(template if template is not None else dask_template(dask_custom()), **options)


def build(
    custom: Mapping[str, Any] | None = None,
    *,
    template: Mapping[str, Any] | None = None,
    pod: PlatformPodConfig | None = None,
    **options: Any,
) -> dict[str, Any]:
    if template is None:
        template = dask_template(custom if custom is not None else dask_custom())
    return build_dask_job(tctx_for(template, **options), platform=pod or platform())


def plugin_context(
    *, state: PluginState | None = None, template: Mapping[str, Any] | None = None
) -> StaticPluginContext:
    return fake_plugin_context(tctx_for(template), state=state, now=NOW)


def job_object(status: Mapping[str, Any] | None = None, *, name: str = GENERATED_NAME) -> dict[str, Any]:
    """A DaskJob as the API reports it, ``status`` as the dask operator writes it."""
    job: dict[str, Any] = {
        "apiVersion": "kubernetes.dask.org/v1",
        "kind": "DaskJob",
        "metadata": {"name": name, "namespace": NAMESPACE, "creationTimestamp": "2026-03-01T11:59:00Z"},
        "spec": {},
    }
    if status is not None:
        job["status"] = dict(status)
    return job


def config(**values: Any) -> DaskConfig:
    return DaskConfig.model_validate(values)
