"""A simulated spark-operator: a pure state machine over a SparkApplication's ``status``, with no driver.

The real operator (kubeflow/spark-operator) runs ``spark-submit`` for each SparkApplication and reports
the driver's progress in ``status``; so does :class:`taskplug.plugins.spark._local_driver.SparkDriverOperator`,
the operator the embedded cluster runs (its driver pod really runs Spark on the process kubelet, and is
scripted on the simulated one). This one runs nothing and creates nothing: it walks each application through
the states the Spark plugin reads, one step per change it sees, for tests of the plugin's status mapping
that need neither a driver pod nor Spark::

    ""  ->  SUBMITTED  ->  RUNNING  ->  COMPLETED
                                   \\->  FAILED             (annotation taskplug.io/simulate-spark-failure)
    ""  ->  SUBMISSION_FAILED                              (annotation taskplug.io/simulate-spark-submission-failure)

* SUBMITTED sets ``submissionTime`` and ``driverInfo.podName`` (``<app>-driver``).
* RUNNING sets ``sparkApplicationId`` (``spark-<uid hex>``) and ``driverInfo.webUIIngressAddress``.
* COMPLETED / FAILED set ``terminationTime``; FAILED and SUBMISSION_FAILED set ``errorMessage`` to the
  annotation's value.

Knobs (annotations on the SparkApplication; a task gets them through the execution's ``annotations``,
which the plugin manager puts on the object; the driver-pod operator honours them too):

* ``taskplug.io/simulate-spark-failure: "<message>"`` — the application fails after running, with
  ``errorMessage`` = message (the plugin reports a retryable ``DownstreamSystemError``).
* ``taskplug.io/simulate-spark-submission-failure: "<message>"`` — submission fails (``SUBMISSION_FAILED``).

Deviation: no driver or executor pods are created and the application's code never runs; the driver pod
name is reported so log links render, but there are no logs behind it.

The state machine is the pure function :func:`next_status`; :class:`SparkLocalOperator` applies it with
the cluster's in-process client (``LocalCluster.register_operator(SPARK_APPLICATION, SparkLocalOperator())``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from taskplug.core import Clock
from taskplug.k8s import StatusStepOperator
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
    "ANNOTATION_SIMULATE_FAILURE",
    "ANNOTATION_SIMULATE_SUBMISSION_FAILURE",
    "SparkLocalOperator",
    "next_status",
]

ANNOTATION_SIMULATE_FAILURE = "taskplug.io/simulate-spark-failure"
ANNOTATION_SIMULATE_SUBMISSION_FAILURE = "taskplug.io/simulate-spark-submission-failure"

_TERMINAL = frozenset({COMPLETED_STATE, FAILED_STATE, FAILED_SUBMISSION_STATE})


def _rfc3339(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _app_id(meta: Mapping[str, Any]) -> str:
    uid = str(meta.get("uid") or meta.get("name") or "")
    return "spark-" + "".join(ch for ch in uid if ch.isalnum())[:32]


def next_status(app: Mapping[str, Any], now: datetime) -> dict[str, Any] | None:
    """The ``status`` merge patch that moves ``app`` one step on, or None when it stays where it is
    (terminal, or being deleted)."""
    meta = app.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return None
    annotations = meta.get("annotations") or {}
    status = app.get("status") or {}
    state = str((status.get("applicationState") or {}).get("state") or NEW_STATE)
    name = str(meta.get("name") or "")
    namespace = str(meta.get("namespace") or "")
    at = _rfc3339(now)
    if state == NEW_STATE:
        if ANNOTATION_SIMULATE_SUBMISSION_FAILURE in annotations:
            return {
                "applicationState": {
                    "state": FAILED_SUBMISSION_STATE,
                    "errorMessage": str(annotations[ANNOTATION_SIMULATE_SUBMISSION_FAILURE]),
                },
                "submissionAttempts": 1,
                "lastSubmissionAttemptTime": at,
                "terminationTime": at,
            }
        return {
            "applicationState": {"state": SUBMITTED_STATE},
            "submissionAttempts": 1,
            "lastSubmissionAttemptTime": at,
            "submissionTime": at,
            "driverInfo": {"podName": f"{name}-driver"},
        }
    if state == SUBMITTED_STATE:
        return {
            "applicationState": {"state": RUNNING_STATE},
            "sparkApplicationId": _app_id(meta),
            "executionAttempts": 1,
            "driverInfo": {
                "podName": f"{name}-driver",
                "webUIIngressAddress": f"{name}-ui.{namespace}.spark.local",
            },
        }
    if state in _TERMINAL:
        return None
    # RUNNING, or any state this operator does not produce itself (set by hand in a test): finish.
    if ANNOTATION_SIMULATE_FAILURE in annotations:
        return {
            "applicationState": {
                "state": FAILED_STATE,
                "errorMessage": str(annotations[ANNOTATION_SIMULATE_FAILURE]),
            },
            "terminationTime": at,
        }
    return {"applicationState": {"state": COMPLETED_STATE}, "terminationTime": at}


class SparkLocalOperator(StatusStepOperator):
    """Applies :func:`next_status` to each SparkApplication it is told about (one step per change)."""

    def __init__(self, clock: Clock | None = None) -> None:
        super().__init__(SPARK_APPLICATION, next_status, clock=clock)
