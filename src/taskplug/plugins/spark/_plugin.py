"""The Spark plugin: a ``spark`` task as a spark-operator ``SparkApplication``.

Follows flyteplugins/go/tasks/plugins/k8s/spark/spark.go. The task's ``custom`` is a
``flyteidl.plugins.SparkJob`` (flytekit writes it as a JSON struct with camelCase keys). The driver and the
executor pod specs each go through the full pod pipeline (``taskplug.k8s``), the driver always as
non-interruptible; the operator then builds the pods from the SparkApplication. Everything here is a pure
function of the task context, the config and the time handed in.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from flyteidl.core import tasks_pb2
from flyteidl.plugins import spark_pb2
from google.protobuf import json_format

from taskplug.core import (
    BadTaskSpecification,
    Clock,
    ErrorCode,
    PhaseInfo,
    PluginError,
    SystemClock,
    TaskExecutionContext,
    TaskExecutionMetadata,
    TaskInfo,
    TaskLog,
)
from taskplug.k8s import (
    K8sPluginConfig,
    K8sPluginProperties,
    LogConfig,
    LogInput,
    PlatformPodConfig,
    PluginContext,
    PluginTaskExecutionContext,
    deep_copy,
    get_container,
    maybe_update_phase_version,
    merge_overlay_pod_spec_onto_base,
    parse_k8s_time,
    pod_spec_from_struct,
    task_logs,
    to_k8s_pod_spec,
)
from taskplug.plugins.spark._config import SparkConfig
from taskplug.plugins.spark._states import (
    COMPLETED_STATE,
    FAILED_STATE,
    FAILED_SUBMISSION_STATE,
    NEW_STATE,
    RUNNING_STATE,
    SPARK_APPLICATION,
    SUBMITTED_STATE,
)

__all__ = [
    "SPARK_APPLICATION",
    "SparkPlugin",
    "build_spark_application",
    "spark_conf",
    "spark_task_info",
    "spark_task_phase",
]


DEFAULT_SERVICE_ACCOUNT = "spark"
SUBMISSION_FAILURE_RETRIES = 14
SPARK_HISTORY_UI = "sparkHistoryUI"
SPARK_DRIVER_UI = "sparkDriverUI"

DRIVER_LOG_NAME = "(Driver Logs)"
USER_LOG_NAME = "(User Logs)"
SYSTEM_LOG_NAME = "(System Logs)"
ALL_USER_LOG_NAME = "(Spark-Submit/All User Logs)"

# Flyte's ``^spark.((flyteorg)|(flyte)).(.+).enabled$``, dots unescaped and all (``spark-flyte-x-enabled``
# matches too); used with fullmatch, since Python's ``$`` also matches before a trailing newline.
FEATURE_REGEX = re.compile(r"spark.((flyteorg)|(flyte)).(.+).enabled")

DRIVER_LIMIT_CORES = "spark.kubernetes.driver.limit.cores"
DRIVER_REQUEST_CORES = "spark.kubernetes.driver.request.cores"
EXECUTOR_LIMIT_CORES = "spark.kubernetes.executor.limit.cores"
EXECUTOR_REQUEST_CORES = "spark.kubernetes.executor.request.cores"

_APPLICATION_TYPES = {
    spark_pb2.SparkApplication.PYTHON: "Python",
    spark_pb2.SparkApplication.JAVA: "Java",
    spark_pb2.SparkApplication.SCALA: "Scala",
    spark_pb2.SparkApplication.R: "R",
}

# What Go's strconv.ParseInt(s, 10, 32) accepts.
_GO_INT = re.compile(r"[+-]?[0-9]+")
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1

# Go's zero time, which ``metav1.Time.Unix()`` gives for an object without a creationTimestamp.
_GO_ZERO_UNIX = -62135596800
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

KubeObject = dict[str, Any]


# -- the SparkJob -----------------------------------------------------------------------------------------


def _spark_job(template: tasks_pb2.TaskTemplate) -> spark_pb2.SparkJob:
    job = spark_pb2.SparkJob()
    custom = template.custom if template.HasField("custom") else None
    if custom is not None:
        try:
            # Go's UnmarshalStruct goes through jsonpb with unknown fields allowed.
            json_format.ParseDict(json_format.MessageToDict(custom), job, ignore_unknown_fields=True)
        except (json_format.ParseError, ValueError, TypeError) as e:
            raise BadTaskSpecification(
                f"invalid TaskSpecification [{_compact(custom)}], failed to unmarshal", cause=e
            ) from e
    if not job.mainApplicationFile and not job.mainClass:
        # A task without a custom decodes to an empty job and fails here, as in Flyte.
        raise BadTaskSpecification(
            f"invalid TaskSpecification [{_compact(custom)}].",
            cause=ValueError("either MainApplicationFile or MainClass must be set"),
        )
    return job


def _compact(custom: Any) -> str:
    # Deviation: Flyte prints the Struct with Go's %v (its internal field dump); compact JSON is readable.
    if custom is None:
        return "<nil>"
    return str(json_format.MessageToJson(custom, indent=None, sort_keys=True))


# -- Spark conf -------------------------------------------------------------------------------------------


def _epoch_millis(now: datetime) -> int:
    return (now - _EPOCH) // timedelta(milliseconds=1)


def _add_feature_config(conf: dict[str, str], key: str, value: str, config: SparkConfig) -> None:
    """A ``spark.flyte.<feature>.enabled`` entry: "true" copies the feature's conf in (the key itself is not
    set); anything else, or an unknown feature, sets the key as it is."""
    if value.strip().lower() != "true":
        conf[key] = value
        return
    match = FEATURE_REGEX.fullmatch(key)
    if match is None:
        conf[key] = value
        return
    name = match.group(4)
    for feature in config.features:  # the first feature of that name wins
        if feature.name == name:
            conf.update(feature.spark_config)
            return
    conf[key] = value


def spark_conf(
    job: spark_pb2.SparkJob, config: SparkConfig, *, generated_name: str, now: datetime
) -> dict[str, str]:
    """The SparkApplication's ``sparkConf``: config defaults < executor path < the job's conf (with features),
    then core limits copied from requests, the executor pod name prefix and the driver's start time."""
    conf = dict(config.spark_config_default)
    if job.executorPath:
        conf["spark.pyspark.python"] = job.executorPath
        conf["spark.pyspark.driver.python"] = job.executorPath
    for key, value in job.sparkConf.items():
        if FEATURE_REGEX.fullmatch(key):
            _add_feature_config(conf, key, value, config)
        else:
            conf[key] = value
    for limit, request, cores in (
        (DRIVER_LIMIT_CORES, DRIVER_REQUEST_CORES, "spark.driver.cores"),
        (EXECUTOR_LIMIT_CORES, EXECUTOR_REQUEST_CORES, "spark.executor.cores"),
    ):
        if not conf.get(limit):
            # The Kubernetes request key takes precedence over spark.<role>.cores.
            if conf.get(request):
                conf[limit] = conf[request]
            elif conf.get(cores):
                conf[limit] = conf[cores]
    conf["spark.kubernetes.executor.podNamePrefix"] = generated_name
    conf["spark.kubernetes.driverEnv.FLYTE_START_TIME"] = str(_epoch_millis(now))
    return conf


def _go_int32(value: str | None) -> int | None:
    """Go's ``strconv.ParseInt(value, 10, 32)``, then Flyte's ``intPtr``: unparseable or 0 gives None."""
    if value is None or not _GO_INT.fullmatch(value):
        return None
    parsed = int(value)
    if parsed < _INT32_MIN or parsed > _INT32_MAX or parsed == 0:
        return None
    return parsed


# -- driver and executor ----------------------------------------------------------------------------------


def _service_account(meta: TaskExecutionMetadata) -> str:
    return (
        meta.security_context.run_as.k8s_service_account
        or meta.k8s_service_account
        or DEFAULT_SERVICE_ACCOUNT
    )


def _overlaid_pod(
    tctx: TaskExecutionContext, platform: PlatformPodConfig, overlay: tasks_pb2.K8sPod | None, role: str
) -> tuple[KubeObject, KubeObject, dict[str, str], dict[str, str]]:
    """The role's pod spec and primary container after the pod pipeline and the SparkJob's pod overlay,
    with the metadata the SparkPodSpec gets (the pipeline's, then the overlay's)."""
    raw = to_k8s_pod_spec(tctx, platform)
    spec, primary = raw.spec, raw.primary
    annotations: dict[str, str] = dict(raw.meta.get("annotations") or {})
    labels: dict[str, str] = dict(raw.meta.get("labels") or {})
    overlay_annotations: dict[str, str] = {}
    overlay_labels: dict[str, str] = {}
    if overlay is not None:
        if overlay.HasField("pod_spec"):
            custom = pod_spec_from_struct(overlay.pod_spec, f"{role} pod spec")
            spec = merge_overlay_pod_spec_onto_base(spec, custom)
        if overlay.primary_container_name:
            primary = overlay.primary_container_name
        overlay_annotations = dict(overlay.metadata.annotations)
        overlay_labels = dict(overlay.metadata.labels)
    container = get_container(spec, primary)
    meta = tctx.metadata
    k8s: K8sPluginConfig = platform.k8s
    # K8sPod metadata wins over everything else.
    all_annotations = {**k8s.default_annotations, **annotations, **meta.annotations, **overlay_annotations}
    all_labels = {**k8s.default_labels, **labels, **meta.labels, **overlay_labels}
    return spec, container, all_annotations, all_labels


def _spark_pod_spec(
    meta: TaskExecutionMetadata,
    spec: Mapping[str, Any],
    container: Mapping[str, Any],
    annotations: Mapping[str, str],
    labels: Mapping[str, str],
) -> KubeObject:
    """A spark-operator ``SparkPodSpec``; optional fields Go leaves out when empty (omitempty) are left out."""
    env = deep_copy(list(container.get("env") or []))
    env.append({"name": "FLYTE_MAX_ATTEMPTS", "value": str(meta.max_attempts)})
    out: KubeObject = {"image": container.get("image", ""), "env": env}
    if labels:
        out["labels"] = dict(labels)
    if annotations:
        out["annotations"] = dict(annotations)
    # Pointers in Go: present when set, even if empty. The tolerations slice is left out when empty.
    if spec.get("affinity") is not None:
        out["affinity"] = deep_copy(spec["affinity"])
    if spec.get("tolerations"):
        out["tolerations"] = deep_copy(spec["tolerations"])
    if spec.get("securityContext") is not None:
        out["podSecurityContext"] = deep_copy(spec["securityContext"])
    if container.get("securityContext") is not None:
        out["securityContext"] = deep_copy(container["securityContext"])
    # Go sets these through pointers, so they are always present (an empty scheduler name included).
    out["schedulerName"] = spec.get("schedulerName") or ""
    out["hostNetwork"] = bool(spec.get("hostNetwork"))
    if spec.get("nodeSelector"):
        out["nodeSelector"] = dict(spec["nodeSelector"])
    if spec.get("dnsConfig") is not None:
        out["dnsConfig"] = deep_copy(spec["dnsConfig"])
    out["serviceAccount"] = _service_account(meta)
    return out


def _role_spec(
    tctx: TaskExecutionContext,
    platform: PlatformPodConfig,
    overlay: tasks_pb2.K8sPod | None,
    role: str,
    conf: Mapping[str, str],
) -> tuple[KubeObject, KubeObject]:
    spec, container, annotations, labels = _overlaid_pod(tctx, platform, overlay, role)
    out: KubeObject = {}
    cores = _go_int32(conf.get(f"spark.{role}.cores"))
    if cores is not None:
        out["cores"] = cores
    memory = conf.get(f"spark.{role}.memory")
    if memory:
        out["memory"] = memory
    out.update(_spark_pod_spec(tctx.metadata, spec, container, annotations, labels))
    if role == "executor":
        instances = _go_int32(conf.get("spark.executor.instances"))
        if instances is not None:
            out["instances"] = instances
    if spec.get("priorityClassName"):
        out["priorityClassName"] = spec["priorityClassName"]
    return out, container


# -- the SparkApplication ---------------------------------------------------------------------------------


def build_spark_application(
    tctx: TaskExecutionContext, *, platform: PlatformPodConfig, config: SparkConfig, now: datetime
) -> KubeObject:
    """The SparkApplication for a ``spark`` task (Flyte's BuildResource). Name, namespace, labels,
    annotations, owner references and finalizers are the plugin manager's to add."""
    template: tasks_pb2.TaskTemplate | None
    try:
        template = tctx.task_reader.read()
    except PluginError:
        raise
    except Exception as e:
        raise BadTaskSpecification(f"unable to fetch task specification [{e}]", cause=e) from e
    if template is None:
        raise BadTaskSpecification("nil task specification")
    job = _spark_job(template)
    conf = spark_conf(job, config, generated_name=tctx.metadata.task_execution_id.generated_name, now=now)
    # Spark driver pods always run non-interruptible: losing the driver loses the whole application.
    driver_ctx = PluginTaskExecutionContext(tctx, interruptible=False)
    driver, _ = _role_spec(
        driver_ctx, platform, job.driverPod if job.HasField("driverPod") else None, "driver", conf
    )
    executor, executor_container = _role_spec(
        tctx, platform, job.executorPod if job.HasField("executorPod") else None, "executor", conf
    )

    spec: KubeObject = {
        "type": _APPLICATION_TYPES.get(job.applicationType, "Python"),
        "mode": "cluster",
        "image": executor_container.get("image", ""),
    }
    if job.mainClass:
        spec["mainClass"] = job.mainClass
    if job.mainApplicationFile:
        spec["mainApplicationFile"] = job.mainApplicationFile
    if executor_container.get("args"):
        spec["arguments"] = list(executor_container["args"])
    spec["sparkConf"] = conf
    if job.hadoopConf:
        spec["hadoopConf"] = dict(job.hadoopConf)
    spec["driver"] = driver
    spec["executor"] = executor
    # Submission failures are retried by the operator (e.g. a quota hit); task failures by Flyte.
    spec["restartPolicy"] = {"type": "OnFailure", "onSubmissionFailureRetries": SUBMISSION_FAILURE_RETRIES}
    if "spark.batchScheduler" in conf:
        spec["batchScheduler"] = conf["spark.batchScheduler"]
    return {"apiVersion": SPARK_APPLICATION.api_version, "kind": SPARK_APPLICATION.kind, "spec": spec}


# -- status -----------------------------------------------------------------------------------------------


def _unix(value: Any) -> int:
    parsed = parse_k8s_time(value)
    return _GO_ZERO_UNIX if parsed is None else int(parsed.timestamp() // 1)


def spark_task_info(pctx: PluginContext, app: Mapping[str, Any], config: SparkConfig) -> TaskInfo:
    """Log links and custom info for a SparkApplication (Flyte's getEventInfoForSpark), in Flyte's order:
    driver (mixed), user, system, all-user (shown while pending), then the history or driver UI."""
    meta = app.get("metadata") or {}
    status = app.get("status") or {}
    state = str((status.get("applicationState") or {}).get("state") or "")
    driver_info = status.get("driverInfo") or {}
    driver_pod = str(driver_info.get("podName") or "")
    app_name = str(meta.get("name") or "")
    namespace = str(meta.get("namespace") or "")
    start = _unix(meta.get("creationTimestamp"))
    finish = 0
    if state in (COMPLETED_STATE, FAILED_STATE) and status.get("terminationTime"):
        finish = _unix(status.get("terminationTime"))
    task_id = pctx.metadata.task_execution_id

    def links(source: LogConfig, pod: str, log_name: str, template_config: Any = None) -> list[TaskLog]:
        inp = LogInput(
            pod_name=pod,
            namespace=namespace,
            log_name=log_name,
            pod_unix_start_time=start,
            pod_unix_finish_time=finish,
            task_execution_id=task_id,
            task_template_config=template_config,
        )
        return list(task_logs(source, inp))

    logs_config = config.logs
    logs: list[TaskLog] = []
    if driver_pod:
        template = pctx.task_reader.read()
        logs += links(logs_config.mixed, driver_pod, DRIVER_LOG_NAME, dict(template.config))
    logs += links(logs_config.user, driver_pod, USER_LOG_NAME)
    logs += links(logs_config.system, app_name, SYSTEM_LOG_NAME)
    # The spark-submit / all-user links are useful before the driver runs.
    logs += [
        TaskLog(log.uri, log.name, log.message_format, True, log.hide_once_finished)
        for log in links(logs_config.all_user, app_name, ALL_USER_LOG_NAME)
    ]

    custom: dict[str, str] = {}
    if state in (FAILED_STATE, COMPLETED_STATE):
        app_id = str(status.get("sparkApplicationId") or "")
        if app_id and config.spark_history_server_url:
            custom[SPARK_HISTORY_UI] = f"{config.spark_history_server_url}/history/{app_id}"
            # The console only reads custom info through a custom plugin; a log link always shows.
            logs.append(TaskLog(custom[SPARK_HISTORY_UI], "Spark History UI", "JSON"))
    elif state == RUNNING_STATE and driver_info.get("webUIIngressAddress"):
        uri = str(driver_info["webUIIngressAddress"])
        # Older operators report the address without a scheme.
        if not uri.startswith(("https://", "http://")):
            uri = f"https://{uri}"
        custom[SPARK_DRIVER_UI] = uri
        logs.append(TaskLog(uri, "Spark Driver UI", "JSON"))
    return TaskInfo(logs=tuple(logs), occurred_at=_now(pctx), custom_info=custom)


def _now(pctx: PluginContext) -> datetime | None:
    now = pctx.now
    return now if isinstance(now, datetime) else None


def spark_task_phase(pctx: PluginContext, app: Mapping[str, Any], config: SparkConfig) -> PhaseInfo:
    """The phase of a SparkApplication (Flyte's GetTaskPhase), version-bumped against the last report."""
    info = spark_task_info(pctx, app, config)
    app_state = (app.get("status") or {}).get("applicationState") or {}
    state = str(app_state.get("state") or "")
    error_message = str(app_state.get("errorMessage") or "")
    if state == NEW_STATE:
        phase = PhaseInfo.queued_with_task_info(0, "job queued", info)
    elif state == SUBMITTED_STATE:
        phase = PhaseInfo.initializing(0, "job submitted", info)
    elif state == FAILED_SUBMISSION_STATE:
        # Two spaces, as Flyte writes it.
        phase = PhaseInfo.retryable_failure(
            ErrorCode.DOWNSTREAM_SYSTEM_ERROR,
            f"Spark Job  Submission Failed with Error: {error_message}",
            info,
        )
    elif state == FAILED_STATE:
        phase = PhaseInfo.retryable_failure(
            ErrorCode.DOWNSTREAM_SYSTEM_ERROR, f"Spark Job Failed with Error: {error_message}", info
        )
    elif state == COMPLETED_STATE:
        phase = PhaseInfo.success(info)
    else:  # RUNNING, PENDING_RERUN, INVALIDATING, SUCCEEDING, FAILING, UNKNOWN
        phase = PhaseInfo.running(0, info)
    return maybe_update_phase_version(phase, pctx.plugin_state)


# -- the plugin -------------------------------------------------------------------------------------------


class SparkPlugin:
    """Builds a SparkApplication for a ``spark`` task and reports its phase."""

    def __init__(
        self, platform: PlatformPodConfig, config: SparkConfig | None = None, clock: Clock | None = None
    ) -> None:
        self.platform = platform
        self.config = config if config is not None else SparkConfig()
        self._clock: Clock = clock if clock is not None else SystemClock()

    def get_properties(self) -> K8sPluginProperties:
        return K8sPluginProperties()

    def build_identity_resource(self, meta: TaskExecutionMetadata) -> KubeObject:
        return {"apiVersion": SPARK_APPLICATION.api_version, "kind": SPARK_APPLICATION.kind}

    def build_resource(self, tctx: TaskExecutionContext) -> KubeObject:
        return build_spark_application(
            tctx, platform=self.platform, config=self.config, now=self._clock.now()
        )

    def get_task_phase(self, pctx: PluginContext, resource: KubeObject) -> PhaseInfo:
        return spark_task_phase(pctx, resource, self.config)
