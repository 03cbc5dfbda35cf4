"""Building kubeflow tasks, contexts, platforms and observed jobs for the kubeflow plugin tests."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from taskplug.core import StaticTaskExecutionContext
from taskplug.executor import parse_spec, task_context_for
from taskplug.k8s import K8sPluginConfig, PlatformPodConfig, PluginState, StaticPluginContext

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
DATA_ROOT = "s3://bucket/data"
NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
GENERATED_NAME = "exec1-n0-0"
NAMESPACE = "p-d"
IMAGE = "ghcr.io/org/train:v1"
ARGS = ["pyflyte-execute", "--inputs", "{{.input}}", "--output-prefix", "{{.outputPrefix}}"]
RENDERED_INPUTS = f"{DATA_ROOT}/metadata/p/d/exec1/n0/inputs.pb"


def template(
    task_type: str,
    custom: Mapping[str, Any] | None,
    *,
    version: int = 1,
    config: Mapping[str, str] | None = None,
    pod_spec: Mapping[str, Any] | None = None,
    **container: Any,
) -> dict[str, Any]:
    """A task template of ``task_type`` with a Container target (or a K8sPod target given ``pod_spec``)."""
    out: dict[str, Any] = {
        "id": {"resourceType": "TASK", "project": "p", "domain": "d", "name": "train", "version": "v1"},
        "type": task_type,
        "taskTypeVersion": version,
    }
    if pod_spec is not None:
        out["k8sPod"] = {"podSpec": dict(pod_spec)}
        out["config"] = {"primary_container_name": "primary", **(config or {})}
    else:
        out["container"] = {
            "image": IMAGE,
            "args": list(ARGS),
            "resources": {"requests": [{"name": "CPU", "value": "1"}, {"name": "MEMORY", "value": "1Gi"}]},
            "env": [{"key": "FOO", "value": "bar"}],
            **container,
        }
        if config:
            out["config"] = dict(config)
    if custom is not None:
        out["custom"] = copy.deepcopy(dict(custom))
    return out


def execution(**kw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": {"project": "p", "domain": "d", "name": "exec1", "nodeId": "n0", "retryAttempt": 0},
        "namespace": NAMESPACE,
        "maxAttempts": 2,
    }
    out.update(kw)
    return out


def tctx_for(task: Mapping[str, Any], **exec_kw: Any) -> StaticTaskExecutionContext:
    spec = parse_spec({"template": dict(task), "execution": execution(**exec_kw)})
    return task_context_for(spec, DATA_ROOT)


def platform(**k8s: Any) -> PlatformPodConfig:
    return PlatformPodConfig(k8s=K8sPluginConfig.model_validate(k8s), environ={})


def plugin_context(
    task: Mapping[str, Any], *, state: PluginState | None = None, now: datetime = NOW, **exec_kw: Any
) -> StaticPluginContext:
    tctx = tctx_for(task, **exec_kw)
    return StaticPluginContext(
        metadata=tctx.metadata,
        task_reader=tctx.task_reader,
        input_reader=tctx.input_reader,
        output_writer=tctx.output_writer,
        plugin_state=state or PluginState(),
        now=now,
    )


def replica(spec: Mapping[str, Any], name: str) -> dict[str, Any]:
    """A replica spec of a built job."""
    result: dict[str, Any] = dict(spec)[name]
    return result


def container_of(replica_spec: Mapping[str, Any], name: str) -> dict[str, Any]:
    for container in replica_spec["template"]["spec"]["containers"]:
        if container["name"] == name:
            return container  # type: ignore[no-any-return]
    raise AssertionError(f"no container {name}")


def env_of(container: Mapping[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env") or []}


def condition(
    type_: str, status: str = "True", at: str = "2026-03-01T11:59:30Z", reason: str = "", message: str = ""
) -> dict[str, Any]:
    """A job condition as the training operator writes it."""
    out: dict[str, Any] = {"type": type_, "status": status}
    if reason:
        out["reason"] = reason
    if message:
        out["message"] = message
    out["lastUpdateTime"] = at
    out["lastTransitionTime"] = at
    return out


def job_object(
    kind: str,
    spec: Mapping[str, Any],
    status: Mapping[str, Any] | None = None,
    *,
    name: str = GENERATED_NAME,
    created: str = "2026-03-01T11:59:00Z",
) -> dict[str, Any]:
    """A training job as the API reports it."""
    job: dict[str, Any] = {
        "apiVersion": "kubeflow.org/v1",
        "kind": kind,
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "uid": "0f7f5c1e-0000-4000-8000-000000000001",
            "creationTimestamp": created,
        },
        "spec": copy.deepcopy(dict(spec)),
    }
    if status is not None:
        job["status"] = copy.deepcopy(dict(status))
    return job
