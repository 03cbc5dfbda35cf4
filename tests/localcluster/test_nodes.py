"""The scheduler's pure fit rules."""

from __future__ import annotations

from typing import Any

import pytest

from taskplug.core import Quantity
from taskplug.localcluster import NodeConfig
from taskplug.localcluster._nodes import filter_node, fit_error_message, node_object, tolerates


def node(
    labels: dict[str, str] | None = None, taints: list[dict[str, str]] | None = None, **capacity: str
) -> dict[str, Any]:
    cfg = NodeConfig(
        "n1",
        capacity=capacity or {"cpu": "4", "memory": "8Gi", "pods": "10"},
        labels=labels or {},
        taints=taints or [],
    )
    return node_object(cfg, now="2026-01-01T00:00:00Z")


def req(**values: str) -> dict[str, Quantity]:
    return {k.replace("_", "/").replace("nvidia/", "nvidia.com/"): Quantity(v) for k, v in values.items()}


def affinity(*terms: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": list(t)} for t in terms]
                }
            }
        }
    }


def test_requests_beyond_what_is_free_are_insufficient() -> None:
    assert filter_node({}, req(cpu="3"), node(), req(cpu="2"), 1) == ["Insufficient cpu"]
    assert filter_node({}, req(cpu="2"), node(), req(cpu="2"), 1) == []
    assert filter_node({}, req(cpu="5", memory="9Gi"), node(), {}, 0) == [
        "Insufficient cpu",
        "Insufficient memory",
    ]


def test_an_extended_resource_the_node_lacks_is_insufficient() -> None:
    assert filter_node({}, req(nvidia_gpu="1"), node(), {}, 0) == ["Insufficient nvidia.com/gpu"]


def test_the_pod_count_is_a_resource() -> None:
    assert filter_node({}, {}, node(pods="2", cpu="1"), {}, 2) == ["Too many pods"]


def test_node_selector_must_match_labels() -> None:
    assert filter_node({"nodeSelector": {"disk": "ssd"}}, {}, node({"disk": "ssd"}), {}, 0) == []
    assert filter_node({"nodeSelector": {"disk": "ssd"}}, {}, node(), {}, 0) == [
        "node(s) didn't match Pod's node affinity/selector"
    ]


@pytest.mark.parametrize(
    ("expression", "fits"),
    [
        ({"key": "zone", "operator": "In", "values": ["a", "b"]}, True),
        ({"key": "zone", "operator": "In", "values": ["c"]}, False),
        ({"key": "zone", "operator": "NotIn", "values": ["c"]}, True),
        ({"key": "zone", "operator": "NotIn", "values": ["a"]}, False),
        ({"key": "zone", "operator": "Exists"}, True),
        ({"key": "gpu", "operator": "Exists"}, False),
        ({"key": "gpu", "operator": "DoesNotExist"}, True),
        ({"key": "zone", "operator": "DoesNotExist"}, False),
        ({"key": "cores", "operator": "Gt", "values": ["8"]}, True),
        ({"key": "cores", "operator": "Gt", "values": ["16"]}, False),
        ({"key": "cores", "operator": "Lt", "values": ["32"]}, True),
        ({"key": "cores", "operator": "Lt", "values": ["16"]}, False),
    ],
)
def test_required_node_affinity_operators(expression: dict[str, Any], fits: bool) -> None:
    spec = affinity([expression])
    assert (filter_node(spec, {}, node({"zone": "a", "cores": "16"}), {}, 0) == []) is fits


def test_affinity_terms_are_ored_and_expressions_anded() -> None:
    labels = {"zone": "a", "disk": "hdd"}
    both = affinity(
        [
            {"key": "zone", "operator": "In", "values": ["a"]},
            {"key": "disk", "operator": "In", "values": ["ssd"]},
        ]
    )
    either = affinity(
        [{"key": "disk", "operator": "In", "values": ["ssd"]}], [{"key": "zone", "operator": "Exists"}]
    )
    assert filter_node(both, {}, node(labels), {}, 0) != []
    assert filter_node(either, {}, node(labels), {}, 0) == []


def test_untolerated_no_schedule_taints_block_and_prefer_no_schedule_does_not() -> None:
    gpu = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    soft = {"key": "soft", "value": "x", "effect": "PreferNoSchedule"}
    assert filter_node({}, {}, node(taints=[gpu]), {}, 0) == [
        "node(s) had untolerated taint {nvidia.com/gpu: present}"
    ]
    assert filter_node({}, {}, node(taints=[soft]), {}, 0) == []
    tolerated = {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}
    assert filter_node(tolerated, {}, node(taints=[gpu]), {}, 0) == []


@pytest.mark.parametrize(
    ("toleration", "ok"),
    [
        ({"key": "k", "operator": "Equal", "value": "v", "effect": "NoExecute"}, True),
        ({"key": "k", "value": "v"}, True),
        ({"key": "k", "value": "other"}, False),
        ({"key": "k", "operator": "Exists"}, True),
        ({"operator": "Exists"}, True),
        ({"key": "k", "operator": "Exists", "effect": "NoSchedule"}, False),
    ],
)
def test_toleration_matching(toleration: dict[str, str], ok: bool) -> None:
    assert tolerates([toleration], {"key": "k", "value": "v", "effect": "NoExecute"}) is ok


def test_the_fit_error_counts_and_sorts_reasons() -> None:
    message = fit_error_message(
        3,
        [
            ["Insufficient cpu"],
            ["Insufficient cpu", "Insufficient memory"],
            ["node(s) had untolerated taint {a: b}"],
        ],
    )
    assert (
        message
        == "0/3 nodes are available: 1 Insufficient memory, 1 node(s) had untolerated taint {a: b}, 2 Insufficient cpu."
    )
