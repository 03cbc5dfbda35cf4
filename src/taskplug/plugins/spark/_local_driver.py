"""The spark-operator for the embedded local cluster: it really runs the application, in Spark local mode.

Follows kubeflow/spark-operator at commit 38082f3318e9 (``internal/controller/sparkapplication/{controller.go,
submission.go}``, ``internal/webhook/sparkpod_defaulter.go``, ``pkg/util/sparkapplication.go``) and the driver
pod Spark's own Kubernetes submission builds (``BasicDriverFeatureStep``). The real operator runs
``spark-submit --deploy-mode cluster`` for each new SparkApplication; Spark creates the driver pod, whose
container runs ``spark-submit --deploy-mode client`` with the application; the operator's webhook adds the
owner reference and the driver's env, and the application's status follows the driver pod:

* ``""`` (new): submission. The driver pod ``<app>-driver`` (``spec.driver.podName``, else the sparkConf's
  ``spark.kubernetes.driver.pod.name``, else ``<app>-driver``) is created, owned by the SparkApplication,
  then ``status``: ``submissionID``, ``lastSubmissionAttemptTime``, ``submissionAttempts`` and
  ``executionAttempts`` + 1, ``driverInfo.podName``, ``applicationState.state: SUBMITTED``. A driver pod the
  API refuses (a quota, an invalid spec), or an application spark-submit refuses (neither
  ``mainApplicationFile`` nor ``mainClass``, no image, a malformed memory size or count), is
  ``SUBMISSION_FAILED`` with the operator's ``errorMessage``.
* SUBMITTED / RUNNING / UNKNOWN: the driver's state (``GetDriverState``: pod Pending → PENDING, Running →
  RUNNING unless the ``spark-kubernetes-driver`` container has terminated, Succeeded → COMPLETED, Failed →
  FAILED unless that container exited 0) gives the application's (``DriverStateToApplicationState``:
  PENDING → SUBMITTED, RUNNING → RUNNING, COMPLETED → SUCCEEDING, FAILED → FAILING, else UNKNOWN);
  ``sparkApplicationId`` is the driver pod's ``spark-app-selector`` label; a terminated driver sets
  ``terminationTime``; a failed one sets ``errorMessage: "driver container failed with ExitCode: N, Reason:
  R"``; a driver pod that is gone is FAILING with ``errorMessage: "driver pod not found"``.
* SUCCEEDING → COMPLETED, FAILING → FAILED (Flyte's restart policy, ``OnFailure`` with no
  ``onFailureRetries``, never reruns a failed application).
* A SparkApplication being deleted (an abort) gets its driver pod deleted; once it is gone, what it owned
  is deleted (the operator stands in for the garbage collector, which the local cluster does not have).

The driver pod is what Spark's submission makes of the SparkApplication: container
``spark-kubernetes-driver`` with the driver's image (``spec.driver.image``, else ``spec.image``), env
``SPARK_APPLICATION_ID``, the sparkConf's ``spark.kubernetes.driverEnv.*``, then ``spec.driver.env`` (the
webhook's), ``restartPolicy: Never``, requests ``cpu`` = ``spark.kubernetes.driver.request.cores`` else
``spark.driver.cores`` (1), ``memory`` (request and limit) = ``spark.driver.memory`` (1g) + overhead
(``spark.driver.memoryOverhead``, else the overhead factor × memory, at least 384 MiB; the factor is
``spark.driver.memoryOverheadFactor``, else ``spark.kubernetes.memoryOverheadFactor``, else 0.4 for a Python
or R application and 0.1 otherwise), a ``cpu`` limit from ``spark.kubernetes.driver.limit.cores``; labels:
the SparkApplication's (not Kueue's), ``spec.driver.labels``, ``sparkoperator.k8s.io/{app-name,
launched-by-spark-operator,mutated-by-spark-operator,submission-id}``, ``spark-app-selector`` (``spark-`` +
32 hex digits, as Spark names a Kubernetes application) and ``spark-role: driver``; annotations
``spec.driver.annotations``; the SparkPodSpec's service account, node selector (with ``spec.nodeSelector``),
tolerations, affinity, scheduler name, priority class, DNS config, host network and security contexts.

The embedded cluster's process kubelet runs it as a local process, so the application really runs: its
``spark-submit`` is pyspark's (on the kubelet's ``PATH``, this Python's ``bin``), with Java from the host
(``java`` on ``PATH``, or the host's ``JAVA_HOME``). Without pyspark the driver cannot start (``StartError``:
``spark-submit`` not found; ``pip install pyspark``). On the simulated kubelet nothing runs: the driver pod
goes through its phases as scripted by its annotations (``taskplug.io/simulate-exit-code``), and so does the
application. The driver's logs and exit code are the pod's, as on a cluster.

Fault injection, as the simulated operator (:mod:`taskplug.plugins.spark._local_operator`) offers it, on
the SparkApplication's annotations (a task gets them through the execution's ``annotations``):
``taskplug.io/simulate-spark-submission-failure: "<message>"`` makes the submission fail
(``SUBMISSION_FAILED``, no driver pod); ``taskplug.io/simulate-spark-failure: "<message>"`` fails the
application with that ``errorMessage`` once its driver has ended, whatever it returned.

Deviation: the driver runs Spark in local mode, ``spark-submit --master local[N] --deploy-mode client``,
where a cluster runs it against the Kubernetes API; N is what the executors would have had,
``spark.executor.instances`` (2) × ``spark.executor.cores`` (1). Its executors are threads of the driver
JVM and its Python workers processes of the driver pod, so no executor pods are created and
``executorState`` stays empty; the driver pod's resources are the driver's alone, as Spark sizes them.

Deviation: the container image's paths are mapped to this host, as the kubelet runs commands from
taskplug's virtualenv. The Python the image would run (``spark.pyspark.python`` /
``spark.pyspark.driver.python``, which flytekit sets to the image's interpreter such as
``/opt/venv/bin/python3``) is this Python. A ``local://`` ``mainApplicationFile`` that does not exist here and
is flytekit's ``entrypoint.py`` (flytekit writes ``local:///usr/local/bin/entrypoint.py`` for an ImageSpec,
else ``entrypoint.py`` beside the image's interpreter, ``local:///opt/venv/bin/entrypoint.py`` by default)
is the ``entrypoint.py`` flytekit installed beside this Python; any other ``local://`` file is taken as a
path on this host; other URIs are given to ``spark-submit`` as they are. The application's arguments
(``pyflyte-execute …`` for a flytekit task) are unchanged.

Deviation: loopback where a cluster has pod IPs. The driver gets ``SPARK_LOCAL_IP=127.0.0.1``,
``spark.driver.bindAddress`` / ``spark.driver.host`` = 127.0.0.1, and its UI a port free on 127.0.0.1
(``spark.ui.port``) reported as ``driverInfo.webUIAddress: 127.0.0.1:<port>`` and ``webUIPort``, where the
operator reports its UI Service's cluster IP; no Service or Ingress is created. Nothing listens beyond
127.0.0.1.

Deviation: Spark's scratch space (``SPARK_LOCAL_DIRS``), an emptyDir at ``/var/data/spark-<uuid>`` in a
driver pod, is ``spark-local-dir`` in the driver's working directory, which the process kubelet gives each
pod and removes with the cluster, so a driver killed before it cleaned up leaves nothing behind.

Deviation: in local mode Spark names the application ``local-<millis>``; ``sparkApplicationId`` is the id a
Kubernetes submission would have given it (the driver pod's ``spark-app-selector``, ``SPARK_APPLICATION_ID``).

Deviation: a submission that fails is not retried (the operator resubmits up to ``onSubmissionFailureRetries``
times, but Flyte fails the attempt on the first ``SUBMISSION_FAILED`` it sees), and restart policies that
rerun an application (``Always``, ``onFailureRetries``), which Flyte never writes, are not followed.

Deviation: when the failed driver container has a termination message (a ``StartError``'s reason, or what
the application wrote to its termination message path), ``errorMessage`` ends with ``, Message: <message>``,
so that ``taskplug run`` says why without opening the pod; the real operator leaves it in the pod.
"""

from __future__ import annotations

import os
import re
import sys
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from taskplug.core import Clock
from taskplug.k8s import (
    POD,
    KubeClient,
    ObjectKey,
    ReconcilingOperator,
    Requeue,
    api_error_of,
    create_or_get,
    deep_copy,
    delete_if_present,
    is_not_found,
    loopback_port,
    owned_by,
    owner_reference,
)
from taskplug.plugins.spark._local_operator import (
    ANNOTATION_SIMULATE_FAILURE,
    ANNOTATION_SIMULATE_SUBMISSION_FAILURE,
)
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
    "DRIVER_CONTAINER",
    "HostSpark",
    "SparkDriverOperator",
    "Submission",
    "SubmissionError",
    "application_state",
    "build_driver_pod",
    "driver_pod_name",
    "driver_state",
    "follow_driver",
    "host_application_file",
    "submitted_status",
]

KubeObject = dict[str, Any]

# spark-operator's application states beyond those the plugin names (v1beta2).
SUCCEEDING_STATE: Final = "SUCCEEDING"
FAILING_STATE: Final = "FAILING"
UNKNOWN_STATE: Final = "UNKNOWN"

# Its driver states (v1beta2.DriverState).
DRIVER_PENDING: Final = "PENDING"
DRIVER_RUNNING: Final = "RUNNING"
DRIVER_COMPLETED: Final = "COMPLETED"
DRIVER_FAILED: Final = "FAILED"
DRIVER_UNKNOWN: Final = "UNKNOWN"

DRIVER_CONTAINER: Final = "spark-kubernetes-driver"
UI_PORT_NAME: Final = "spark-ui"

LABEL_APP_SELECTOR: Final = "spark-app-selector"
LABEL_ROLE: Final = "spark-role"
LABEL_APP_NAME: Final = "sparkoperator.k8s.io/app-name"
LABEL_LAUNCHED: Final = "sparkoperator.k8s.io/launched-by-spark-operator"
LABEL_MUTATED: Final = "sparkoperator.k8s.io/mutated-by-spark-operator"
LABEL_SUBMISSION_ID: Final = "sparkoperator.k8s.io/submission-id"
_KUEUE_PREFIX: Final = "kueue.x-k8s.io/"

DRIVER_POD_NAME_CONF: Final = "spark.kubernetes.driver.pod.name"
DRIVER_ENV_PREFIX: Final = "spark.kubernetes.driverEnv."
_LOOPBACK: Final = "127.0.0.1"
LOCAL_DIRS: Final = "spark-local-dir"
_MIN_OVERHEAD_MIB: Final = 384
_NON_JVM_TYPES: Final = frozenset({"Python", "R"})
# What the operator's error reads when spark-submit fails (three wrappings, as controller.go and
# submission.go write them).
_SUBMIT_FAILED: Final = (
    "failed to submit spark application: failed to run spark-submit: failed to run spark-submit: "
)

_STATE_OF_DRIVER: Final = {
    DRIVER_PENDING: SUBMITTED_STATE,
    DRIVER_RUNNING: RUNNING_STATE,
    DRIVER_COMPLETED: SUCCEEDING_STATE,
    DRIVER_FAILED: FAILING_STATE,
}
_FOLLOWING: Final = frozenset({SUBMITTED_STATE, RUNNING_STATE, UNKNOWN_STATE})


class SubmissionError(ValueError):
    """What makes ``spark-submit`` refuse an application (the operator reports ``SUBMISSION_FAILED``)."""


def _rfc3339(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _state(app: Mapping[str, Any]) -> str:
    return str(((app.get("status") or {}).get("applicationState") or {}).get("state") or NEW_STATE)


# -- the driver pod ---------------------------------------------------------------------------------------


def driver_pod_name(app: Mapping[str, Any]) -> str:
    """``GetDriverPodName``: ``spec.driver.podName``, else the sparkConf's driver pod name, else ``<app>-driver``."""
    spec = app.get("spec") or {}
    named = str((spec.get("driver") or {}).get("podName") or "")
    if named:
        return named
    conf = spec.get("sparkConf") or {}
    if conf.get(DRIVER_POD_NAME_CONF):
        return str(conf[DRIVER_POD_NAME_CONF])
    return f"{(app.get('metadata') or {}).get('name', '')}-driver"


@dataclass(frozen=True, slots=True)
class HostSpark:
    """What runs a driver on this host: the Python the image's interpreter stands for, the ``bin`` folder
    flytekit installed ``entrypoint.py`` into, and the host's ``JAVA_HOME`` (None: ``java`` on ``PATH``)."""

    python: str = field(default_factory=lambda: sys.executable)
    bin_dir: Path = field(default_factory=lambda: Path(sys.executable).parent)
    java_home: str | None = field(default_factory=lambda: os.environ.get("JAVA_HOME") or None)


def host_application_file(uri: str, host: HostSpark) -> str:
    """The ``mainApplicationFile`` as ``spark-submit`` finds it on this host (see the module docstring)."""
    scheme, sep, rest = uri.partition("://")
    if sep and scheme != "local":
        return uri
    path = Path(rest if sep else uri)
    if path.exists():
        return str(path)
    if path.name == "entrypoint.py" and (host.bin_dir / "entrypoint.py").exists():
        return str(host.bin_dir / "entrypoint.py")
    return str(path)


@dataclass(frozen=True, slots=True)
class Submission:
    """One submission of an application: its ids, the UI port (None: the UI is off), the host mapping and
    the application file as this host finds it."""

    app_id: str
    submission_id: str
    ui_port: int | None
    host: HostSpark
    application_file: str


_MEMORY = re.compile(r"([0-9]+)([a-z]*)")
_MEMORY_UNITS: Final = {
    "b": 1 / 2**20,
    "k": 1 / 2**10,
    "kb": 1 / 2**10,
    "m": 1,
    "mb": 1,
    "g": 2**10,
    "gb": 2**10,
    "t": 2**20,
    "tb": 2**20,
    "p": 2**30,
    "pb": 2**30,
}


def _mib(key: str, value: str) -> int:
    """A Spark memory setting in MiB (``JavaUtils.byteStringAs`` with MiB as the default unit)."""
    match = _MEMORY.fullmatch(value.strip().lower())
    if match is None or match.group(2) not in ("", *_MEMORY_UNITS):
        raise SubmissionError(
            f"{key}={value!r}: a size must be an integer with an optional unit (b, k, m, g, t, p)"
        )
    return int(int(match.group(1)) * _MEMORY_UNITS.get(match.group(2) or "m", 1))


def _factor(key: str, value: str) -> float:
    try:
        return float(value)
    except ValueError as e:
        raise SubmissionError(f"{key}={value!r}: not a number") from e


def _count(key: str, value: Any, default: int) -> int:
    if value in (None, ""):
        return default
    try:
        return int(str(value))
    except ValueError as e:
        raise SubmissionError(f"{key}={value!r}: not an integer") from e


def _effective_conf(app: Mapping[str, Any]) -> dict[str, str]:
    """The Spark conf spark-submit gets from the operator: sparkConf, hadoopConf as ``spark.hadoop.*``, then
    the driver and executor fields of the spec (later ``--conf`` wins)."""
    spec = app.get("spec") or {}
    conf = {str(k): str(v) for k, v in (spec.get("sparkConf") or {}).items()}
    for key, value in (spec.get("hadoopConf") or {}).items():
        conf[f"spark.hadoop.{key}"] = str(value)
    driver, executor = spec.get("driver") or {}, spec.get("executor") or {}
    for source, key, target in (
        (driver, "cores", "spark.driver.cores"),
        (driver, "coreRequest", "spark.kubernetes.driver.request.cores"),
        (driver, "coreLimit", "spark.kubernetes.driver.limit.cores"),
        (driver, "memory", "spark.driver.memory"),
        (driver, "memoryOverhead", "spark.driver.memoryOverhead"),
        (executor, "instances", "spark.executor.instances"),
        (executor, "cores", "spark.executor.cores"),
        (executor, "memory", "spark.executor.memory"),
    ):
        if source.get(key) not in (None, ""):
            conf[target] = str(source[key])
    for key, value in (driver.get("envVars") or {}).items():
        conf[f"{DRIVER_ENV_PREFIX}{key}"] = str(value)
    return conf


def _driver_resources(conf: Mapping[str, str], app_type: str) -> dict[str, Any]:
    """The driver container's resources as ``BasicDriverFeatureStep`` sets them."""
    cores = conf.get("spark.kubernetes.driver.request.cores") or str(
        _count("spark.driver.cores", conf.get("spark.driver.cores"), 1)
    )
    memory = _mib("spark.driver.memory", conf.get("spark.driver.memory") or "1g")
    if conf.get("spark.driver.memoryOverhead"):
        overhead = _mib("spark.driver.memoryOverhead", conf["spark.driver.memoryOverhead"])
    else:
        if conf.get("spark.driver.memoryOverheadFactor"):
            factor = _factor("spark.driver.memoryOverheadFactor", conf["spark.driver.memoryOverheadFactor"])
        elif conf.get("spark.kubernetes.memoryOverheadFactor"):
            factor = _factor(
                "spark.kubernetes.memoryOverheadFactor", conf["spark.kubernetes.memoryOverheadFactor"]
            )
        else:
            factor = 0.4 if app_type in _NON_JVM_TYPES else 0.1
        overhead = max(int(factor * memory), _MIN_OVERHEAD_MIB)
    quantity = f"{memory + overhead}Mi"
    limits: dict[str, str] = {"memory": quantity}
    if conf.get("spark.kubernetes.driver.limit.cores"):
        limits["cpu"] = conf["spark.kubernetes.driver.limit.cores"]
    return {"requests": {"cpu": cores, "memory": quantity}, "limits": limits}


def _escape(value: str) -> str:
    # The kubelet expands $(VAR) in args; Spark reads its conf from a properties file, unexpanded.
    return value.replace("$", "$$")


def _local_conf(conf: Mapping[str, str], submission: Submission) -> dict[str, str]:
    """The conf the local driver runs with: the application's, bound to loopback, on this host's Python."""
    local = {k: v for k, v in conf.items() if k not in ("spark.master", "spark.submit.deployMode")}
    local["spark.driver.bindAddress"] = _LOOPBACK
    local["spark.driver.host"] = _LOOPBACK
    if submission.ui_port is not None:
        local["spark.ui.port"] = str(submission.ui_port)
    local["spark.pyspark.python"] = submission.host.python
    local["spark.pyspark.driver.python"] = submission.host.python
    return local


def ui_enabled(app: Mapping[str, Any]) -> bool:
    conf = (app.get("spec") or {}).get("sparkConf") or {}
    return str(conf.get("spark.ui.enabled", "true")).strip().lower() != "false"


def build_driver_pod(app: Mapping[str, Any], submission: Submission) -> KubeObject:
    """The driver pod of ``app`` for this submission (see the module docstring). Raises
    :class:`SubmissionError` where spark-submit would refuse the application."""
    meta = app.get("metadata") or {}
    spec = app.get("spec") or {}
    name, namespace = str(meta.get("name") or ""), str(meta.get("namespace") or "")
    driver = spec.get("driver") or {}
    if not spec.get("mainApplicationFile") and not spec.get("mainClass"):
        raise SubmissionError("Error: Must specify a primary resource (JAR or Python or R file)")
    image = str(driver.get("image") or spec.get("image") or "")
    if not image:
        raise SubmissionError("Must specify the driver container image")
    app_type = str(spec.get("type") or "Python")
    conf = _effective_conf(app)
    instances = _count("spark.executor.instances", conf.get("spark.executor.instances"), 2)
    executor_cores = _count("spark.executor.cores", conf.get("spark.executor.cores"), 1)
    threads = max(1, instances * executor_cores)

    args = ["--master", f"local[{threads}]", "--deploy-mode", "client"]
    if spec.get("mainClass"):
        args += ["--class", str(spec["mainClass"])]
    args += ["--name", name]
    for key, value in _local_conf(conf, submission).items():
        args += ["--conf", _escape(f"{key}={value}")]
    args.append(_escape(submission.application_file))
    args += [_escape(str(a)) for a in spec.get("arguments") or []]

    env: list[dict[str, Any]] = [{"name": "SPARK_APPLICATION_ID", "value": submission.app_id}]
    env += [
        {"name": key[len(DRIVER_ENV_PREFIX) :], "value": value}
        for key, value in conf.items()
        if key.startswith(DRIVER_ENV_PREFIX) and len(key) > len(DRIVER_ENV_PREFIX)
    ]
    env += deep_copy(list(driver.get("env") or []))
    env += [
        {"name": "PYSPARK_PYTHON", "value": submission.host.python},
        {"name": "PYSPARK_DRIVER_PYTHON", "value": submission.host.python},
        {"name": "SPARK_LOCAL_IP", "value": _LOOPBACK},
        # Relative: in the pod's working directory, which goes with the pod as an emptyDir would.
        {"name": "SPARK_LOCAL_DIRS", "value": LOCAL_DIRS},
    ]
    if submission.host.java_home:
        env.append({"name": "JAVA_HOME", "value": submission.host.java_home})

    container: KubeObject = {
        "name": DRIVER_CONTAINER,
        "image": image,
        "command": ["spark-submit"],
        "args": args,
        "env": env,
        "resources": _driver_resources(conf, app_type),
    }
    if submission.ui_port is not None:
        container["ports"] = [{"name": UI_PORT_NAME, "containerPort": submission.ui_port, "protocol": "TCP"}]
    if driver.get("securityContext") is not None:
        container["securityContext"] = deep_copy(driver["securityContext"])

    labels = {
        k: str(v) for k, v in (meta.get("labels") or {}).items() if not str(k).startswith(_KUEUE_PREFIX)
    }
    labels.update({str(k): str(v) for k, v in (driver.get("labels") or {}).items()})
    labels.update(
        {
            LABEL_APP_NAME: name,
            LABEL_LAUNCHED: "true",
            LABEL_MUTATED: "true",
            LABEL_SUBMISSION_ID: submission.submission_id,
            LABEL_APP_SELECTOR: submission.app_id,
            LABEL_ROLE: "driver",
        }
    )
    pod_spec: KubeObject = {"restartPolicy": "Never", "containers": [container]}
    if driver.get("serviceAccount"):
        pod_spec["serviceAccountName"] = str(driver["serviceAccount"])
    node_selector = {**(spec.get("nodeSelector") or {}), **(driver.get("nodeSelector") or {})}
    if node_selector:
        pod_spec["nodeSelector"] = node_selector
    for source, target in (
        ("tolerations", "tolerations"),
        ("affinity", "affinity"),
        ("dnsConfig", "dnsConfig"),
        ("podSecurityContext", "securityContext"),
    ):
        if driver.get(source):
            pod_spec[target] = deep_copy(driver[source])
    for key in ("schedulerName", "priorityClassName"):
        if driver.get(key):
            pod_spec[key] = str(driver[key])
    if driver.get("hostNetwork"):
        pod_spec["hostNetwork"] = True
    pod_meta: KubeObject = {
        "name": driver_pod_name(app),
        "namespace": namespace,
        "labels": labels,
        "ownerReferences": [owner_reference(app)],
    }
    if driver.get("annotations"):
        pod_meta["annotations"] = {str(k): str(v) for k, v in driver["annotations"].items()}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": pod_spec}


# -- the status -------------------------------------------------------------------------------------------


def submission_failed_status(app: Mapping[str, Any], message: str, now: datetime) -> KubeObject:
    """The status of a submission that failed (``submitSparkApplication``'s deferred branch)."""
    status = app.get("status") or {}
    return {
        "applicationState": {"state": FAILED_SUBMISSION_STATE, "errorMessage": message},
        "submissionAttempts": int(status.get("submissionAttempts") or 0) + 1,
        "lastSubmissionAttemptTime": _rfc3339(now),
        "driverInfo": {"podName": driver_pod_name(app)},
    }


def submitted_status(app: Mapping[str, Any], pod: Mapping[str, Any], now: datetime) -> KubeObject:
    """The status of an application whose driver pod ``pod`` was created (``submitSparkApplication``)."""
    status = app.get("status") or {}
    labels = (pod.get("metadata") or {}).get("labels") or {}
    driver_info: KubeObject = {"podName": str((pod.get("metadata") or {}).get("name") or "")}
    for container in (pod.get("spec") or {}).get("containers") or []:
        for port in container.get("ports") or []:
            if port.get("name") == UI_PORT_NAME:
                driver_info["webUIAddress"] = f"{_LOOPBACK}:{port['containerPort']}"
                driver_info["webUIPort"] = int(port["containerPort"])
    return {
        "submissionID": str(labels.get(LABEL_SUBMISSION_ID) or ""),
        "lastSubmissionAttemptTime": _rfc3339(now),
        "submissionAttempts": int(status.get("submissionAttempts") or 0) + 1,
        "executionAttempts": int(status.get("executionAttempts") or 0) + 1,
        "driverInfo": driver_info,
        "applicationState": {"state": SUBMITTED_STATE},
    }


def _driver_terminated(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for container in (pod.get("status") or {}).get("containerStatuses") or []:
        if container.get("name") == DRIVER_CONTAINER:
            terminated = (container.get("state") or {}).get("terminated")
            return terminated if terminated else None
    return None


def driver_state(pod: Mapping[str, Any]) -> str:
    """``GetDriverState``: the driver's state from its pod's phase and its container's termination."""
    phase = str((pod.get("status") or {}).get("phase") or "")
    terminated = _driver_terminated(pod)
    if phase == "Pending":
        return DRIVER_PENDING
    if phase == "Running":
        if terminated is not None:
            return DRIVER_COMPLETED if int(terminated.get("exitCode") or 0) == 0 else DRIVER_FAILED
        return DRIVER_RUNNING
    if phase == "Succeeded":
        return DRIVER_COMPLETED
    if phase == "Failed":
        if terminated is not None and int(terminated.get("exitCode") or 0) == 0:
            return DRIVER_COMPLETED
        return DRIVER_FAILED
    return DRIVER_UNKNOWN


def application_state(state_of_driver: str) -> str:
    """``DriverStateToApplicationState``."""
    return _STATE_OF_DRIVER.get(state_of_driver, UNKNOWN_STATE)


def _failure_message(pod: Mapping[str, Any]) -> str:
    terminated = _driver_terminated(pod)
    if terminated is None:
        return "driver container status missing"
    message = (
        f"driver container failed with ExitCode: {int(terminated.get('exitCode') or 0)}, "
        f"Reason: {terminated.get('reason') or ''}"
    )
    if terminated.get("message"):
        message += f", Message: {str(terminated['message']).strip()}"
    return message


def follow_driver(app: Mapping[str, Any], pod: Mapping[str, Any] | None, now: datetime) -> KubeObject | None:
    """The ``status`` merge patch that moves a submitted ``app`` on, given its driver pod (None: not found),
    or None when nothing changes."""
    state = _state(app)
    status = app.get("status") or {}
    annotations = (app.get("metadata") or {}).get("annotations") or {}
    if state == SUCCEEDING_STATE:
        return {"applicationState": {"state": COMPLETED_STATE}}
    if state == FAILING_STATE:
        return {"applicationState": {"state": FAILED_STATE}}
    if state not in _FOLLOWING:
        return None
    at = _rfc3339(now)
    if pod is None:
        return {
            "applicationState": {"state": FAILING_STATE, "errorMessage": "driver pod not found"},
            "terminationTime": at,
        }
    patch: KubeObject = {}
    app_id = str(((pod.get("metadata") or {}).get("labels") or {}).get(LABEL_APP_SELECTOR) or "")
    if app_id and app_id != status.get("sparkApplicationId"):
        patch["sparkApplicationId"] = app_id
    ds = driver_state(pod)
    new_state = application_state(ds)
    if ds in (DRIVER_COMPLETED, DRIVER_FAILED):
        if not status.get("terminationTime"):
            patch["terminationTime"] = at
        if ANNOTATION_SIMULATE_FAILURE in annotations:
            new_state = FAILING_STATE
            patch["applicationState"] = {"errorMessage": str(annotations[ANNOTATION_SIMULATE_FAILURE])}
        elif ds == DRIVER_FAILED:
            patch["applicationState"] = {"errorMessage": _failure_message(pod)}
    if new_state != state:
        patch.setdefault("applicationState", {})["state"] = new_state
    return patch or None


# -- the operator -----------------------------------------------------------------------------------------


class SparkDriverOperator(ReconcilingOperator):
    """Runs SparkApplications on the embedded cluster through a driver pod (see the module docstring)."""

    def __init__(self, clock: Clock | None = None, *, host: HostSpark | None = None) -> None:
        super().__init__(SPARK_APPLICATION, clock=clock)
        self.host = host if host is not None else HostSpark()

    def owner_of_pod(self, pod: Mapping[str, Any]) -> ObjectKey | None:
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        if labels.get(LABEL_ROLE) != "driver" or not labels.get(LABEL_APP_NAME):
            return None
        return str(meta.get("namespace") or ""), str(labels[LABEL_APP_NAME])

    async def reconcile(self, client: KubeClient, obj: KubeObject) -> Requeue | None:
        meta = obj.get("metadata") or {}
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        if meta.get("deletionTimestamp"):
            # handleSparkApplicationDeletion: the driver goes first (an abort stops the application).
            await self._delete_drivers(client, namespace, name, str(meta.get("uid") or ""))
            return None
        state = _state(obj)
        patch: KubeObject | None
        if state == NEW_STATE:
            patch = await self._submit(client, obj)
        elif state in _FOLLOWING:
            driver_info = (obj.get("status") or {}).get("driverInfo") or {}
            pod_name = str(driver_info.get("podName") or driver_pod_name(obj))
            pod = await self._driver_pod(client, namespace, pod_name)
            patch = follow_driver(obj, pod, self.clock.now())
        else:  # SUCCEEDING / FAILING move on without the driver; terminal states stay
            patch = follow_driver(obj, None, self.clock.now())
        if patch:
            await client.patch(SPARK_APPLICATION, namespace, name, {"status": patch})
        return None

    async def cleanup(self, client: KubeClient, namespace: str, name: str, uid: str) -> None:
        await self._delete_drivers(client, namespace, name, uid)

    async def _submit(self, client: KubeClient, app: KubeObject) -> KubeObject:
        now = self.clock.now()
        annotations = (app.get("metadata") or {}).get("annotations") or {}
        if ANNOTATION_SIMULATE_SUBMISSION_FAILURE in annotations:
            message = str(annotations[ANNOTATION_SIMULATE_SUBMISSION_FAILURE])
            return submission_failed_status(app, message, now)
        spec = app.get("spec") or {}
        submission = Submission(
            app_id="spark-" + uuid.uuid4().hex,
            submission_id=str(uuid.uuid4()),
            ui_port=loopback_port() if ui_enabled(app) else None,
            host=self.host,
            application_file=host_application_file(str(spec.get("mainApplicationFile") or ""), self.host),
        )
        try:
            pod = build_driver_pod(app, submission)
        except SubmissionError as e:
            return submission_failed_status(app, _SUBMIT_FAILED + str(e), now)
        try:
            # A pod left by a submission whose status write was lost is this submission's (create_or_get).
            created = await create_or_get(client, POD, pod)
        except Exception as e:
            api = api_error_of(e)
            if api is None or api.status >= 500 or api.status in (409, 429):
                raise  # the API's trouble, not the application's: reconcile again
            # What Spark's submission client reports when the API refuses the driver pod.
            return submission_failed_status(app, _SUBMIT_FAILED + str(api), now)
        return submitted_status(app, created, now)

    async def _driver_pod(self, client: KubeClient, namespace: str, name: str) -> KubeObject | None:
        try:
            return await client.get(POD, namespace, name)
        except Exception as e:
            if is_not_found(e):
                return None
            raise

    async def _delete_drivers(self, client: KubeClient, namespace: str, name: str, uid: str) -> None:
        pods, _ = await client.list(
            POD, namespace, label_selector=f"{LABEL_APP_NAME}={name},{LABEL_ROLE}=driver"
        )
        for pod in pods:
            if owned_by(pod, uid):
                await delete_if_present(client, POD, namespace, str(pod["metadata"]["name"]))
