"""Nodes: their configuration, their API object, and the pure fit rules of the scheduler.

Follows the default scheduler's filter plugins, in their order (pkg/scheduler/framework/plugins):
NodeUnschedulable (``node(s) were unschedulable``), TaintToleration (NoSchedule/NoExecute taints must be
tolerated: ``node(s) had untolerated taint {key: value}``), NodeAffinity (``nodeSelector`` and required
node affinity — terms OR-ed, expressions AND-ed, operators In/NotIn/Exists/DoesNotExist/Gt/Lt:
``node(s) didn't match Pod's node affinity/selector``), NodeResourcesFit (requests against allocatable
minus what bound, non-terminal pods request: ``Insufficient cpu``, ``Too many pods``). A node stops at its
first failing plugin; the FitError message is ``0/N nodes are available: <count> <reason>, ….`` with the
"count reason" strings sorted.

Deviation: no scoring (the first fitting node in name order wins) and no preemption, so the message has no
``preemption: …`` suffix.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from taskplug.core import Quantity, QuantityError
from taskplug.localcluster._podres import ResourceList

__all__ = [
    "DEFAULT_NODE",
    "NodeConfig",
    "filter_node",
    "fit_error_message",
    "node_object",
    "tolerates",
]

_AFFINITY_MSG: Final = "node(s) didn't match Pod's node affinity/selector"


@dataclass(frozen=True, slots=True)
class NodeConfig:
    """A node of the local cluster."""

    name: str
    #: Capacity in Kubernetes quantities (``{"cpu": "8", "memory": "32Gi", "pods": "110"}``).
    capacity: Mapping[str, str] = field(
        default_factory=lambda: {"cpu": "1000", "memory": "4Ti", "pods": "100000"}
    )
    #: Allocatable; defaults to the capacity.
    allocatable: Mapping[str, str] | None = None
    #: Labels beside the well-known ``kubernetes.io/hostname``, ``kubernetes.io/os``, ``kubernetes.io/arch``.
    labels: Mapping[str, str] = field(default_factory=dict)
    #: Taints as API dicts: ``{"key": "k", "value": "v", "effect": "NoSchedule"}``.
    taints: Sequence[Mapping[str, str]] = ()


DEFAULT_NODE: Final = NodeConfig("local-node")


def node_object(cfg: NodeConfig, *, now: str) -> dict[str, Any]:
    labels = {
        "kubernetes.io/hostname": cfg.name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": "taskplug-local",
        **cfg.labels,
    }
    capacity = {k: str(Quantity(v)) for k, v in cfg.capacity.items()}
    allocatable = {k: str(Quantity(v)) for k, v in (cfg.allocatable or cfg.capacity).items()}
    spec: dict[str, Any] = {}
    if cfg.taints:
        spec["taints"] = [dict(t) for t in cfg.taints]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": cfg.name, "labels": labels},
        "spec": spec,
        "status": {
            "capacity": capacity,
            "allocatable": allocatable,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": now,
                }
            ],
            "addresses": [
                {"type": "InternalIP", "address": "127.0.0.1"},
                {"type": "Hostname", "address": cfg.name},
            ],
            "nodeInfo": {
                "kubeletVersion": "v1.37.0-taskplug",
                "operatingSystem": "linux",
                "architecture": "amd64",
                "containerRuntimeVersion": "taskplug://local",
            },
        },
    }


def tolerates(tolerations: Sequence[Mapping[str, Any]], taint: Mapping[str, Any]) -> bool:
    """v1.Toleration.ToleratesTaint."""
    for tol in tolerations:
        if tol.get("effect") and tol.get("effect") != taint.get("effect"):
            continue
        operator = tol.get("operator") or "Equal"
        key = tol.get("key") or ""
        if operator == "Exists":
            if not key or key == taint.get("key"):
                return True
        elif key == taint.get("key") and (tol.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def _expression_matches(expr: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, op, values = expr.get("key", ""), expr.get("operator", ""), expr.get("values") or []
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op in ("Gt", "Lt"):
        try:
            have, want = int(labels[key]), int(values[0])
        except (KeyError, IndexError, ValueError):
            return False
        return have > want if op == "Gt" else have < want
    return False


def _term_matches(term: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    labels = node["metadata"].get("labels") or {}
    fields = {"metadata.name": node["metadata"]["name"]}
    exprs, field_exprs = term.get("matchExpressions") or [], term.get("matchFields") or []
    if not exprs and not field_exprs:
        return False  # an empty term matches nothing
    return all(_expression_matches(e, labels) for e in exprs) and all(
        _expression_matches(e, fields) for e in field_exprs
    )


def _affinity_matches(spec: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    labels = node["metadata"].get("labels") or {}
    for key, value in (spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms")
    if terms is None:
        return True
    return any(_term_matches(term, node) for term in terms)


def filter_node(
    spec: Mapping[str, Any],
    requests: ResourceList,
    node: Mapping[str, Any],
    used: ResourceList,
    pods_on_node: int,
) -> list[str]:
    """Why ``node`` cannot take the pod (empty: it fits)."""
    tolerations = spec.get("tolerations") or []
    node_spec = node.get("spec") or {}
    if node_spec.get("unschedulable") and not tolerates(
        tolerations, {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
    ):
        return ["node(s) were unschedulable"]
    for taint in node_spec.get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(tolerations, taint):
            return [f"node(s) had untolerated taint {{{taint.get('key', '')}: {taint.get('value', '')}}}"]
    if not _affinity_matches(spec, node):
        return [_AFFINITY_MSG]
    allocatable: dict[str, Quantity] = {}
    for key, value in ((node.get("status") or {}).get("allocatable") or {}).items():
        try:
            allocatable[key] = Quantity(str(value))
        except QuantityError:
            continue
    reasons = []
    if "pods" in allocatable and pods_on_node + 1 > allocatable["pods"].value():
        reasons.append("Too many pods")
    for res in sorted(requests):
        want = requests[res]
        if want.is_zero():
            continue
        free = allocatable.get(res, Quantity(0)).nanos - used.get(res, Quantity(0)).nanos
        if want.nanos > free:
            reasons.append(f"Insufficient {res}")
    return reasons


def fit_error_message(total_nodes: int, reasons_per_node: Sequence[Sequence[str]]) -> str:
    histogram = Counter(reason for reasons in reasons_per_node for reason in reasons)
    listing = sorted(f"{count} {reason}" for reason, count in histogram.items())
    message = f"0/{total_nodes} nodes are available"
    return message + (f": {', '.join(listing)}." if listing else ".")
