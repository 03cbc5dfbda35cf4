"""A simulated BatchJob operator for taskplug's embedded local cluster.

A real operator would run ``spec.parallelism`` pods from ``spec.podTemplate`` and report on them. This one
runs nothing: it walks each BatchJob through the states the plugin reads, one step per change it sees, so a
``batchjob`` task runs end to end with no cluster::

    ""  ->  Pending  ->  Running  ->  Succeeded
                                 \\->  Failed       (annotation batch.example.com/simulate-failure: "<message>")

The execution's ``annotations`` reach the BatchJob (the plugin manager puts them on every object), so a spec
can ask for a failure. The state machine is the pure function :func:`next_status`; the operator applies it
through the cluster's client (``LocalCluster.register_operator(BATCH_JOB, BatchJobLocalOperator())``, which
``taskplug run`` does for every enabled entry's ``local_operator``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from taskplug.core import Clock
from taskplug.k8s import StatusStepOperator
from taskplug_batchjob._resource import BATCH_JOB

__all__ = ["ANNOTATION_SIMULATE_FAILURE", "BatchJobLocalOperator", "next_status"]

ANNOTATION_SIMULATE_FAILURE = "batch.example.com/simulate-failure"

_TERMINAL = frozenset({"Succeeded", "Failed"})


def _rfc3339(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def next_status(job: Mapping[str, Any], now: datetime) -> dict[str, Any] | None:
    """The ``status`` that moves ``job`` one step on, or None when it stays (terminal, or being deleted)."""
    meta = job.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return None
    status = job.get("status") or {}
    phase = str(status.get("phase") or "")
    pods = int((job.get("spec") or {}).get("parallelism") or 1)
    at = _rfc3339(now)
    if phase == "":
        return {"phase": "Pending", "message": f"creating {pods} pod(s)", "startTime": at}
    if phase == "Pending":
        return {"phase": "Running", "message": f"{pods} pod(s) running", "active": pods}
    if phase in _TERMINAL:
        return None
    failure = (meta.get("annotations") or {}).get(ANNOTATION_SIMULATE_FAILURE)
    if failure is not None:
        return {
            "phase": "Failed",
            "message": str(failure),
            "active": 0,
            "failed": 1,
            "succeeded": pods - 1,
            "completionTime": at,
        }
    return {
        "phase": "Succeeded",
        "message": f"{pods}/{pods} pod(s) succeeded",
        "active": 0,
        "succeeded": pods,
        "completionTime": at,
    }


class BatchJobLocalOperator(StatusStepOperator):
    """Applies :func:`next_status` to each BatchJob it is told about (an operator for
    ``LocalCluster.register_operator``; :class:`~taskplug.localcluster.StatusStepOperator` does the
    plumbing: re-read the object, patch its status, ignore one deleted meanwhile)."""

    def __init__(self, clock: Clock | None = None) -> None:
        super().__init__(BATCH_JOB, next_status, clock=clock)
