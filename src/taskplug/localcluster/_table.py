"""The ``Table`` an API server answers ``kubectl get`` with (``Accept: application/json;as=Table;v=v1;
g=meta.k8s.io``): for pods the columns of kubectl's printer, NAME, READY, STATUS, RESTARTS, AGE and, at
priority 1 (``-o wide``), IP, NODE, NOMINATED NODE, READINESS GATES; for any other resource the API server's
default, NAME and CREATED AT.

Follows k8s.io/kubernetes ``pkg/printers/internalversion/printers.go`` (``printPod``, ``podColumnDefinitions``),
k8s.io/apiserver ``pkg/registry/rest/table.go`` (the default convertor) and ``duration.HumanDuration``
(the AGE cell). Each row carries the object's metadata as a ``PartialObjectMetadata`` (``includeObject``'s
default), or the whole object with ``includeObject=Object``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from taskplug.k8s import ResourceType
from taskplug.localcluster._resources import POD

__all__ = ["human_duration", "table", "wants_table"]

_POD_COLUMNS = [
    ("Name", "string", "name", 0, "Name must be unique within a namespace."),
    ("Ready", "string", "", 0, "The aggregate readiness state of this pod for accepting traffic."),
    ("Status", "string", "", 0, "The aggregate status of the containers in this pod."),
    ("Restarts", "string", "", 0, "The number of times the containers in this pod have been restarted."),
    (
        "Age",
        "string",
        "",
        0,
        "CreationTimestamp is a timestamp representing the server time when this object was created.",
    ),
    (
        "IP",
        "string",
        "",
        1,
        "IP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.",
    ),
    ("Node", "string", "", 1, "NodeName is a request to schedule this pod onto a specific node."),
    (
        "Nominated Node",
        "string",
        "",
        1,
        "nominatedNodeName is set only when this pod preempts other pods on the node.",
    ),
    (
        "Readiness Gates",
        "string",
        "",
        1,
        "If specified, all readiness gates will be evaluated for pod readiness.",
    ),
]
_DEFAULT_COLUMNS = [
    ("Name", "string", "name", 0, "Name must be unique within a namespace."),
    (
        "Created At",
        "date",
        "",
        0,
        "CreationTimestamp is a timestamp representing the server time when this object was created.",
    ),
]


def wants_table(accept: str | None) -> bool:
    """Whether the client asks for a ``meta.k8s.io/v1`` Table first (kubectl lists it before plain JSON)."""
    for part in (accept or "").split(","):
        params = {p.strip().partition("=")[0]: p.strip().partition("=")[2] for p in part.split(";")[1:]}
        if part.split(";")[0].strip() == "application/json" and params.get("as") == "Table":
            return params.get("g") == "meta.k8s.io" and params.get("v") in ("v1", None)
        if part.strip():
            return False
    return False


def human_duration(seconds: float) -> str:
    """``duration.HumanDuration``: ``5s``, ``3m7s``, ``2m``, ``5h``, ``3d4h``, ``2y``…"""
    s = int(seconds)
    if s < 0:
        return "<invalid>"
    if s < 60 * 2:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 60 * 3:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d{hours % 24}h" if hours % 24 else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        years = hours // 24 // 365
        days = hours // 24 % 365
        return f"{years}y{days}d" if days else f"{years}y"
    return f"{hours // 24 // 365}y"


def _age(meta: Mapping[str, Any], now: datetime) -> str:
    created = meta.get("creationTimestamp")
    if not isinstance(created, str):
        return "<unknown>"
    try:
        when = datetime.fromisoformat(created.replace("Z", "+00:00"))
    except ValueError:
        return "<unknown>"
    return human_duration((now - when).total_seconds())


def _pod_cells(pod: Mapping[str, Any], now: datetime) -> list[Any]:
    """``printPod``'s cells: readiness, the reason a person reads first, restarts, age, and the wide ones."""
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    containers = spec.get("containers") or []
    reason = status.get("reason") or status.get("phase") or "Pending"
    restarts = 0
    initializing = False
    for i, cs in enumerate(status.get("initContainerStatuses") or []):
        restarts += int(cs.get("restartCount") or 0)
        state = cs.get("state") or {}
        terminated, waiting = state.get("terminated"), state.get("waiting")
        if terminated and terminated.get("exitCode") == 0:
            continue
        if terminated:
            reason = "Init:" + (terminated.get("reason") or f"ExitCode:{terminated.get('exitCode')}")
        elif waiting and waiting.get("reason") and waiting["reason"] != "PodInitializing":
            reason = "Init:" + waiting["reason"]
        else:
            reason = f"Init:{i}/{len(spec.get('initContainers') or [])}"
        initializing = True
        break
    ready = 0
    if not initializing:
        running = False
        for cs in reversed(status.get("containerStatuses") or []):
            restarts += int(cs.get("restartCount") or 0)
            state = cs.get("state") or {}
            waiting, terminated = state.get("waiting"), state.get("terminated")
            if waiting and waiting.get("reason"):
                reason = waiting["reason"]
            elif terminated and terminated.get("reason"):
                reason = terminated["reason"]
            elif terminated:
                reason = (
                    f"Signal:{terminated['signal']}"
                    if terminated.get("signal")
                    else f"ExitCode:{terminated.get('exitCode')}"
                )
            elif cs.get("ready") and "running" in state:
                running = True
                ready += 1
        if reason == "Completed" and running:
            reason = "Running"
    if meta.get("deletionTimestamp"):
        reason = "Terminating"
    gates = spec.get("readinessGates") or []
    return [
        meta.get("name", ""),
        f"{ready}/{len(containers)}",
        reason,
        str(restarts),
        _age(meta, now),
        status.get("podIP") or "<none>",
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        f"0/{len(gates)}" if gates else "<none>",
    ]


def table(
    rtype: ResourceType,
    objects: Iterable[Mapping[str, Any]],
    *,
    now: datetime,
    resource_version: str = "",
    include_object: str = "Metadata",
) -> dict[str, Any]:
    """The ``meta.k8s.io/v1`` Table of ``objects`` (one, for a get; every listed one, for a list)."""
    columns = _POD_COLUMNS if rtype == POD else _DEFAULT_COLUMNS
    rows = []
    for obj in objects:
        meta = obj.get("metadata") or {}
        cells = (
            _pod_cells(obj, now) if rtype == POD else [meta.get("name", ""), meta.get("creationTimestamp")]
        )
        row: dict[str, Any] = {"cells": cells}
        if include_object == "Object":
            row["object"] = obj
        elif include_object != "None":
            row["object"] = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": meta,
            }
        rows.append(row)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": [
            {"name": n, "type": t, "format": f, "description": d, "priority": p} for n, t, f, p, d in columns
        ],
        "rows": rows,
    }
