"""Building spark tasks, contexts and platforms for the Spark plugin tests (through the execution spec)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from taskplug.core import StaticTaskExecutionContext
from taskplug.executor import parse_spec, task_context_for
from taskplug.k8s import K8sPluginConfig, PluginState, StaticPluginContext
from taskplug.k8s._pod_builder import PlatformPodConfig
from taskplug.plugins.spark import SparkConfig, build_spark_application
from taskplug.testing import fake_plugin_context

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
DATA_ROOT = "s3://bucket/data"
NOW = datetime(2026, 3, 1, 12, 0, 0, 123000, tzinfo=UTC)
NOW_MILLIS = "1772366400123"
GENERATED_NAME = "exec1-n0-0"
IMAGE = "ghcr.io/org/spark:v1"
ARGS = ["pyflyte-execute", "--inputs", "{{.input}}", "--output-prefix", "{{.outputPrefix}}"]


def spark_job(
    *,
    conf: Mapping[str, str] | None = None,
    hadoop: Mapping[str, str] | None = None,
    main_application_file: str = "local:///opt/venv/bin/entrypoint.py",
    main_class: str = "",
    executor_path: str = "",
    application_type: str | None = None,
    driver_pod: Mapping[str, Any] | None = None,
    executor_pod: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A SparkJob as flytekit writes it into ``custom`` (camelCase JSON)."""
    job: dict[str, Any] = {}
    if main_application_file:
        job["mainApplicationFile"] = main_application_file
    if main_class:
        job["mainClass"] = main_class
    if executor_path:
        job["executorPath"] = executor_path
    if conf:
        job["sparkConf"] = dict(conf)
    if hadoop:
        job["hadoopConf"] = dict(hadoop)
    if application_type is not None:
        job["applicationType"] = application_type
    if driver_pod is not None:
        job["driverPod"] = dict(driver_pod)
    if executor_pod is not None:
        job["executorPod"] = dict(executor_pod)
    return job


def spark_template(custom: Mapping[str, Any] | None = None, **container: Any) -> dict[str, Any]:
    template: dict[str, Any] = {
        "id": {"resourceType": "TASK", "project": "p", "domain": "d", "name": "spark_task", "version": "v1"},
        "type": "spark",
        "container": {
            "image": IMAGE,
            "args": list(ARGS),
            "resources": {"requests": [{"name": "CPU", "value": "1"}, {"name": "MEMORY", "value": "1Gi"}]},
            "env": [{"key": "FOO", "value": "bar"}],
            **container,
        },
    }
    if custom is not None:
        template["custom"] = dict(custom)
    return template


def execution(**kw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": {"project": "p", "domain": "d", "name": "exec1", "nodeId": "n0", "retryAttempt": 0},
        "namespace": "p-d",
        "maxAttempts": 3,
    }
    out.update(kw)
    return out


def tctx_for(
    template: Mapping[str, Any] | None = None, *, custom: Mapping[str, Any] | None = None, **exec_kw: Any
) -> StaticTaskExecutionContext:
    if template is None:
        template = spark_template(custom if custom is not None else spark_job())
    spec = parse_spec({"template": dict(template), "execution": execution(**exec_kw)})
    return task_context_for(spec, DATA_ROOT)


def platform(**k8s: Any) -> PlatformPodConfig:
    return PlatformPodConfig(k8s=K8sPluginConfig.model_validate(k8s), environ={})


def spark_config(**values: Any) -> SparkConfig:
    return SparkConfig.model_validate({k.replace("_", "-"): v for k, v in values.items()})


def build(
    custom: Mapping[str, Any] | None = None,
    *,
    config: SparkConfig | None = None,
    pod: PlatformPodConfig | None = None,
    template: Mapping[str, Any] | None = None,
    **exec_kw: Any,
) -> dict[str, Any]:
    tctx = tctx_for(template, custom=custom, **exec_kw)
    return build_spark_application(tctx, platform=pod or platform(), config=config or SparkConfig(), now=NOW)


def plugin_context(
    *, template: Mapping[str, Any] | None = None, state: PluginState | None = None, **exec_kw: Any
) -> StaticPluginContext:
    return fake_plugin_context(tctx_for(template, **exec_kw), state=state, now=NOW)


def app_object(
    state: str | None = None,
    *,
    driver_pod: str = "",
    error_message: str = "",
    app_id: str = "",
    web_ui: str = "",
    termination_time: str = "",
    name: str = "exec1-n0-0",
    namespace: str = "p-d",
) -> dict[str, Any]:
    """A SparkApplication as the API reports it, with the status fields the plugin reads."""
    app: dict[str, Any] = {
        "apiVersion": "sparkoperator.k8s.io/v1beta2",
        "kind": "SparkApplication",
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": "2026-03-01T11:59:00Z"},
        "spec": {},
    }
    if state is None:
        return app
    status: dict[str, Any] = {"applicationState": {"state": state}}
    if error_message:
        status["applicationState"]["errorMessage"] = error_message
    driver: dict[str, Any] = {}
    if driver_pod:
        driver["podName"] = driver_pod
    if web_ui:
        driver["webUIIngressAddress"] = web_ui
    if driver:
        status["driverInfo"] = driver
    if app_id:
        status["sparkApplicationId"] = app_id
    if termination_time:
        status["terminationTime"] = termination_time
    app["status"] = status
    return app
