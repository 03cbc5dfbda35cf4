"""Resource requirements: conversion, merging, defaulting and clamping (Flyte's flytek8s/container_helper.go
and flytek8s/utils.go)."""

from __future__ import annotations

from typing import Any

import pytest
from flyteidl.core import tasks_pb2
from hypothesis import given
from hypothesis import strategies as st

from taskplug.core import BadTaskSpecification, Quantity, ResourceRequirements
from taskplug.k8s._resources import (
    Resources,
    adjust_or_default_resource,
    apply_resource_overrides,
    ensure_resource_range,
    merge_resources,
    merge_resources_if_missing,
    resources_from_container,
    resources_from_requirements,
    resources_to_k8s,
    sanitize_gpu_resource_requirements,
    to_k8s_resource_list,
    to_k8s_resource_requirements,
)

R = tasks_pb2.Resources
GPU = "nvidia.com/gpu"
DEFAULT_CPU = Quantity("1000m")
DEFAULT_MEMORY = Quantity("1024Mi")


def q(text: str | int) -> Quantity:
    return Quantity(text)


def res(requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None) -> Resources:
    """Requirements from plain strings; ``None`` leaves the map out entirely."""
    out: Resources = {}
    if requests is not None:
        out["requests"] = {k: q(v) for k, v in requests.items()}
    if limits is not None:
        out["limits"] = {k: q(v) for k, v in limits.items()}
    return out


def as_text(resources: Resources) -> dict[str, dict[str, str]]:
    """Requirements as canonical strings, every map present (zero values kept)."""
    return {
        kind: {k: str(v) for k, v in (resources.get(kind) or {}).items()} for kind in ("requests", "limits")
    }


def apply(
    resources: Resources,
    platform: Resources,
    *,
    assign: bool = True,
    default_cpu: Quantity = DEFAULT_CPU,
    default_memory: Quantity = DEFAULT_MEMORY,
    gpu: str = GPU,
) -> dict[str, dict[str, str]]:
    return as_text(
        apply_resource_overrides(
            resources,
            platform,
            assign_if_unset=assign,
            default_cpu=default_cpu,
            default_memory=default_memory,
            gpu_resource_name=gpu,
        )
    )


def entry(name: int, value: str) -> tasks_pb2.Resources.ResourceEntry:
    return R.ResourceEntry(name=name, value=value)


# -- flytek8s/utils.go ToK8sResourceList / ToK8sResourceRequirements -----------------------------------


@pytest.mark.parametrize(
    ("entries", "expected"),
    [
        pytest.param([entry(R.CPU, "500m")], {"cpu": "500m"}, id="cpu"),
        pytest.param([entry(R.MEMORY, "1Gi")], {"memory": "1Gi"}, id="memory"),
        pytest.param([entry(R.GPU, "1")], {GPU: "1"}, id="gpu-is-nvidia-gpu"),
        pytest.param(
            [entry(R.EPHEMERAL_STORAGE, "10Gi")], {"ephemeral-storage": "10Gi"}, id="ephemeral-storage"
        ),
        pytest.param([entry(R.STORAGE, "10Gi")], {}, id="storage-ignored"),
        pytest.param([entry(R.UNKNOWN, "10")], {}, id="unknown-ignored"),
        pytest.param([entry(R.CPU, "0"), entry(R.MEMORY, "0Gi")], {}, id="zero-values-dropped"),
        pytest.param([entry(R.CPU, "1"), entry(R.CPU, "2")], {"cpu": "2"}, id="later-duplicate-overwrites"),
        pytest.param(
            [entry(R.CPU, "1.5"), entry(R.MEMORY, "0.5Gi")],
            {"cpu": "1500m", "memory": "512Mi"},
            id="canonical",
        ),
    ],
)
def test_to_k8s_resource_list_maps_flyte_names_and_drops_zero_values(
    entries: list[tasks_pb2.Resources.ResourceEntry], expected: dict[str, str]
) -> None:
    assert {k: str(v) for k, v in to_k8s_resource_list(entries).items()} == expected


def test_to_k8s_resource_list_rejects_an_invalid_quantity() -> None:
    with pytest.raises(BadTaskSpecification) as e:
        to_k8s_resource_list([entry(R.CPU, "lots")])
    assert e.value.message.startswith("Failed to parse resource as a valid quantity.")


def test_to_k8s_resource_requirements_of_nothing_is_empty() -> None:
    assert to_k8s_resource_requirements(None) == {"requests": {}, "limits": {}}


def test_to_k8s_resource_requirements_converts_requests_and_limits() -> None:
    resources = R(requests=[entry(R.CPU, "1")], limits=[entry(R.MEMORY, "2Gi")])
    assert as_text(to_k8s_resource_requirements(resources)) == {
        "requests": {"cpu": "1"},
        "limits": {"memory": "2Gi"},
    }


def test_resources_from_requirements_copies_the_maps() -> None:
    req = ResourceRequirements(requests={"cpu": q(1)}, limits={"memory": q("1Gi")})
    out = resources_from_requirements(req)
    out["requests"]["cpu"] = q(5)
    assert req.requests["cpu"] == q(1)
    assert resources_from_requirements(None) == {"requests": {}, "limits": {}}


def test_resources_from_container_names_the_container_and_key_of_a_bad_quantity() -> None:
    with pytest.raises(BadTaskSpecification) as e:
        resources_from_container({"name": "c", "resources": {"limits": {"cpu": "x"}}})
    assert e.value.message.startswith("container [c] resources.limits.cpu:")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(2.0, "2", id="integral-double"),
        pytest.param(0.5, "500m", id="fraction"),
        pytest.param(1e16, "10P", id="large"),
        pytest.param(3, "3", id="int"),
        pytest.param("1.5Gi", "1536Mi", id="string"),
    ],
)
def test_resources_from_container_accepts_json_numbers(value: Any, expected: str) -> None:
    # Pod specs arrive as protobuf Structs, where every number is a double; Kubernetes (and Flyte's Go
    # unmarshalling) accept numeric quantities such as `cpu: 2`.
    got = resources_from_container({"name": "c", "resources": {"limits": {"cpu": value}}})
    assert str(got["limits"]["cpu"]) == expected


def test_resources_to_k8s_leaves_out_empty_maps_and_keeps_zero_values() -> None:
    assert resources_to_k8s({"requests": {}, "limits": {}}) == {}
    assert resources_to_k8s(res({"cpu": "0"}, {})) == {"requests": {"cpu": "0"}}


# -- MergeResources / MergeResourcesIfMissing ---------------------------------------------------------


@pytest.mark.parametrize(
    ("src", "dst", "expected"),
    [
        pytest.param(
            res({"cpu": "2"}, {"cpu": "4"}),
            res(),
            {"requests": {"cpu": "2"}, "limits": {"cpu": "4"}},
            id="dst-unset-takes-src",
        ),
        pytest.param(
            res({"cpu": "2"}, {"memory": "4Gi"}),
            res({"cpu": "1", "memory": "1Gi"}, {"memory": "2Gi", "cpu": "3"}),
            {"requests": {"cpu": "2", "memory": "1Gi"}, "limits": {"memory": "4Gi", "cpu": "3"}},
            id="src-wins-per-key",
        ),
        pytest.param(
            res({}, {}),
            res({"cpu": "1"}),
            {"requests": {"cpu": "1"}, "limits": {}},
            id="empty-src-changes-nothing",
        ),
    ],
)
def test_merge_resources_copies_every_incoming_key_over(
    src: Resources, dst: Resources, expected: dict[str, Any]
) -> None:
    merge_resources(src, dst)
    assert as_text(dst) == expected


@pytest.mark.parametrize(
    ("src", "dst", "expected"),
    [
        pytest.param(
            res({"cpu": "2"}, {"cpu": "4"}),
            res(),
            {"requests": {"cpu": "2"}, "limits": {"cpu": "4"}},
            id="creates-maps",
        ),
        pytest.param(
            res({"cpu": "2", "memory": "2Gi"}, {"cpu": "4"}),
            res({"cpu": "1"}, {"memory": "1Gi"}),
            {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"memory": "1Gi", "cpu": "4"}},
            id="dst-wins-per-key",
        ),
    ],
)
def test_merge_resources_if_missing_only_fills_absent_keys(
    src: Resources, dst: Resources, expected: dict[str, Any]
) -> None:
    merge_resources_if_missing(src, dst)
    assert as_text(dst) == expected


# -- ensureResourceRange / AdjustOrDefaultResource ----------------------------------------------------


@pytest.mark.parametrize(
    ("request_", "limit", "platform_limit", "expected"),
    [
        pytest.param("1", "2", "4", ("1", "2"), id="in-range-unchanged"),
        pytest.param("3", "2", "4", ("2", "2"), id="request-pulled-down-to-limit"),
        pytest.param("6", "8", "4", ("4", "4"), id="platform-limit-caps-both"),
        pytest.param("6", "3", "4", ("3", "3"), id="cap-then-request-to-limit"),
        pytest.param("6", "8", "0", ("6", "8"), id="no-platform-limit"),
        pytest.param("6", "0", "4", ("4", "0"), id="unset-limit-stays-unset"),
        pytest.param("0", "8", "4", ("0", "4"), id="unset-request-stays-unset"),
        pytest.param("0", "0", "0", ("0", "0"), id="all-unset"),
    ],
)
def test_ensure_resource_range_caps_at_platform_limit_and_keeps_request_at_most_limit(
    request_: str, limit: str, platform_limit: str, expected: tuple[str, str]
) -> None:
    got = ensure_resource_range(q(request_), q(limit), q(platform_limit))
    assert (str(got[0]), str(got[1])) == expected


@pytest.mark.parametrize(
    ("request_", "limit", "platform_default", "platform_limit", "expected"),
    [
        pytest.param("1", "2", "3", "4", ("1", "2"), id="both-set"),
        pytest.param("0", "2", "3", "4", ("2", "2"), id="unset-request-takes-limit"),
        pytest.param("0", "0", "3", "4", ("3", "3"), id="unset-request-takes-platform-default"),
        pytest.param("1", "0", "3", "4", ("1", "1"), id="unset-limit-copies-request-not-platform-limit"),
        pytest.param("0", "0", "8", "4", ("4", "4"), id="platform-default-capped-at-platform-limit"),
        pytest.param("0", "0", "0", "4", ("0", "0"), id="nothing-to-assign"),
        pytest.param("5", "0", "3", "4", ("4", "4"), id="request-copied-then-capped"),
    ],
)
def test_adjust_or_default_resource_assigns_then_clamps(
    request_: str, limit: str, platform_default: str, platform_limit: str, expected: tuple[str, str]
) -> None:
    got = adjust_or_default_resource(q(request_), q(limit), q(platform_default), q(platform_limit))
    assert (str(got[0]), str(got[1])) == expected


# -- ApplyResourceOverrides -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("resources", "platform", "assign", "expected"),
    [
        pytest.param(
            res(),
            res(),
            True,
            {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
            id="config-defaults-when-platform-keys-absent",
        ),
        pytest.param(
            res(),
            res({"cpu": "0", "memory": "0"}, {}),
            True,
            {"requests": {"cpu": "0", "memory": "0"}, "limits": {"cpu": "0", "memory": "0"}},
            id="no-config-default-when-platform-key-present-even-zero",
        ),
        pytest.param(
            res(),
            res({"cpu": "500m"}, {}),
            True,
            {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "500m", "memory": "1Gi"}},
            id="platform-request-beats-config-default",
        ),
        pytest.param(
            res({"cpu": "8", "memory": "16Gi"}, {}),
            res({}, {"cpu": "4", "memory": "8Gi"}),
            True,
            {"requests": {"cpu": "4", "memory": "8Gi"}, "limits": {"cpu": "4", "memory": "8Gi"}},
            id="requests-clamped-to-platform-limits",
        ),
        pytest.param(
            res({"cpu": "2"}, {"cpu": "1"}),
            res(),
            True,
            {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
            id="request-clamped-down-to-limit",
        ),
        pytest.param(
            res({"cpu": "2"}, {}),
            res({}, {"cpu": "16"}),
            True,
            {"requests": {"cpu": "2", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "1Gi"}},
            id="unset-limit-copies-request-not-platform-limit",
        ),
        pytest.param(
            res({}, {}),
            res({"cpu": "1", "memory": "1Gi"}, {"cpu": "4"}),
            False,
            {"requests": {"cpu": "0", "memory": "0"}, "limits": {"cpu": "0", "memory": "0"}},
            id="ensure-mode-writes-explicit-zero",
        ),
        pytest.param(
            res({"cpu": "8"}, {"cpu": "10"}),
            res({"cpu": "1"}, {"cpu": "4"}),
            False,
            {"requests": {"cpu": "4", "memory": "0"}, "limits": {"cpu": "4", "memory": "0"}},
            id="ensure-mode-only-caps",
        ),
        pytest.param(
            res({"ephemeral-storage": "20Gi"}, {}),
            res({"ephemeral-storage": "1Gi"}, {"ephemeral-storage": "10Gi"}),
            True,
            {
                "requests": {"ephemeral-storage": "10Gi", "cpu": "1", "memory": "1Gi"},
                "limits": {"ephemeral-storage": "10Gi", "cpu": "1", "memory": "1Gi"},
            },
            id="ephemeral-storage-when-present",
        ),
        pytest.param(
            res({}, {}),
            res({"ephemeral-storage": "1Gi", GPU: "1"}, {"ephemeral-storage": "10Gi", GPU: "2"}),
            True,
            {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
            id="no-storage-or-gpu-default-unless-asked",
        ),
        pytest.param(
            res({}, {GPU: "4"}),
            res({}, {GPU: "2"}),
            True,
            {
                "requests": {"cpu": "1", "memory": "1Gi", GPU: "2"},
                "limits": {GPU: "2", "cpu": "1", "memory": "1Gi"},
            },
            id="gpu-when-present-request-takes-limit",
        ),
        pytest.param(
            res({"example.com/fpga": "9"}, {}),
            res({}, {"example.com/fpga": "1"}),
            True,
            {
                "requests": {"example.com/fpga": "9", "cpu": "1", "memory": "1Gi"},
                "limits": {"cpu": "1", "memory": "1Gi"},
            },
            id="other-resources-untouched",
        ),
    ],
)
def test_apply_resource_overrides(
    resources: Resources, platform: Resources, assign: bool, expected: dict[str, Any]
) -> None:
    assert apply(resources, platform, assign=assign, default_memory=q("1Gi")) == expected


def test_apply_resource_overrides_uses_the_configured_gpu_name() -> None:
    got = apply(res({}, {"amd.com/gpu": "1", GPU: "3"}), res({}, {"amd.com/gpu": "4"}), gpu="amd.com/gpu")
    assert got["requests"]["amd.com/gpu"] == "1"
    # nvidia.com/gpu is just another resource when it is not the configured GPU name.
    assert GPU not in got["requests"]


def test_apply_resource_overrides_does_not_change_the_platform_resources() -> None:
    platform = res({"cpu": "1"}, {"cpu": "2"})
    apply(res(), platform)
    assert as_text(platform) == {"requests": {"cpu": "1"}, "limits": {"cpu": "2"}}


# -- SanitizeGPUResourceRequirements ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        pytest.param(
            res({"gpu": "1"}, {"gpu": "2"}), {"requests": {GPU: "1"}, "limits": {GPU: "2"}}, id="renamed"
        ),
        pytest.param(
            res({"gpu": "1", GPU: "5"}, {}), {"requests": {GPU: "1"}, "limits": {}}, id="overwrites-existing"
        ),
        pytest.param(res({"cpu": "1"}, {}), {"requests": {"cpu": "1"}, "limits": {}}, id="no-gpu-untouched"),
    ],
)
def test_sanitize_gpu_renames_the_generic_key(resources: Resources, expected: dict[str, Any]) -> None:
    sanitize_gpu_resource_requirements(resources, GPU)
    assert as_text(resources) == expected


def test_sanitize_gpu_uses_the_configured_name() -> None:
    resources = res({}, {"gpu": "1"})
    sanitize_gpu_resource_requirements(resources, "amd.com/gpu")
    assert as_text(resources)["limits"] == {"amd.com/gpu": "1"}


# -- clamping invariants (hypothesis) -----------------------------------------------------------------

_CPU = st.one_of(
    st.just(None),
    st.integers(min_value=0, max_value=64_000).map(lambda m: f"{m}m"),
    st.integers(min_value=0, max_value=64).map(str),
)
_MEMORY = st.one_of(
    st.just(None),
    st.integers(min_value=0, max_value=64 * 1024).map(lambda m: f"{m}Mi"),
    st.integers(min_value=0, max_value=64).map(lambda g: f"{g}Gi"),
    st.integers(min_value=0, max_value=10**11).map(str),
)


def _maybe(values: dict[str, str | None]) -> dict[str, Quantity]:
    return {k: q(v) for k, v in values.items() if v is not None}


@given(
    cpu=st.tuples(_CPU, _CPU, _CPU, _CPU),
    memory=st.tuples(_MEMORY, _MEMORY, _MEMORY, _MEMORY),
    assign=st.booleans(),
)
def test_clamping_keeps_request_at_most_limit_at_most_platform_limit(
    cpu: tuple[str | None, ...], memory: tuple[str | None, ...], assign: bool
) -> None:
    (cpu_req, cpu_lim, cpu_pdef, cpu_plim), (mem_req, mem_lim, mem_pdef, mem_plim) = cpu, memory
    resources: Resources = {
        "requests": _maybe({"cpu": cpu_req, "memory": mem_req}),
        "limits": _maybe({"cpu": cpu_lim, "memory": mem_lim}),
    }
    platform: Resources = {
        "requests": _maybe({"cpu": cpu_pdef, "memory": mem_pdef}),
        "limits": _maybe({"cpu": cpu_plim, "memory": mem_plim}),
    }
    out = apply_resource_overrides(
        resources,
        platform,
        assign_if_unset=assign,
        default_cpu=DEFAULT_CPU,
        default_memory=DEFAULT_MEMORY,
        gpu_resource_name=GPU,
    )
    for name in ("cpu", "memory"):
        request, limit = out["requests"][name], out["limits"][name]
        platform_limit = platform["limits"].get(name, Quantity(0))
        assert request.nanos >= 0
        assert limit.nanos >= 0
        if not platform_limit.is_zero():
            assert request <= platform_limit
            assert limit <= platform_limit
        if assign:
            # Assign mode never leaves a request above its limit, and sets a limit whenever it sets a request.
            assert request <= limit
            assert limit.is_zero() == request.is_zero()
        elif not limit.is_zero():
            assert request <= limit
