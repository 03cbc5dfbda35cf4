"""Pod Security admission at the baseline level: what it refuses, in Pod Security admission's words, and the
flag that admits everything."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from taskplug.k8s import POD, KubeApiError
from taskplug.localcluster import LocalCluster
from taskplug.localcluster._podsecurity import baseline_violations

from .conftest import phase_in, pod_manifest


def _hostile() -> dict[str, Any]:
    pod = pod_manifest(
        "x",
        spec={"hostNetwork": True, "volumes": [{"name": "v", "hostPath": {"path": "/"}}]},
        securityContext={"privileged": True},
        volumeMounts=[{"name": "v", "mountPath": "/host"}],
    )
    pod["spec"]["containers"][0]["name"] = "c"
    return pod


async def test_a_pod_violating_the_baseline_level_is_forbidden_naming_every_violation(
    sim: LocalCluster,
) -> None:
    with pytest.raises(KubeApiError) as caught:
        await sim.client().create(POD, _hostile())
    assert (caught.value.status, caught.value.reason) == (403, "Forbidden")
    assert str(caught.value.message) == (
        'pods "x" is forbidden: violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true), '
        'privileged (container "c" must not set securityContext.privileged=true), hostPath volumes (volume "v")'
    )
    assert sim.store.try_get(POD, "default", "x") is None


@pytest.mark.parametrize(
    ("spec", "container", "expected"),
    [
        ({"hostPID": True, "hostIPC": True}, {}, "host namespaces (hostPID=true, hostIPC=true)"),
        (
            {},
            {"ports": [{"containerPort": 80, "hostPort": 8080}, {"containerPort": 9, "hostPort": 10}]},
            'hostPort (container "main" uses hostPorts 10, 8080)',
        ),
        (
            {},
            {"securityContext": {"capabilities": {"add": ["SYS_ADMIN", "CHOWN", "NET_RAW"]}}},
            'non-default capabilities (container "main" must not include "NET_RAW", "SYS_ADMIN" in '
            "securityContext.capabilities.add)",
        ),
        (
            {
                "volumes": [
                    {"name": "a", "hostPath": {"path": "/etc"}},
                    {"name": "b", "hostPath": {"path": "/"}},
                ]
            },
            {},
            'hostPath volumes (volumes "a", "b")',
        ),
    ],
)
def test_each_baseline_check_is_worded_as_pod_security_admission_words_it(
    spec: dict[str, Any], container: dict[str, Any], expected: str
) -> None:
    pod = pod_manifest("x", spec=spec, **container)
    assert baseline_violations(pod["spec"]) == [expected]


def test_what_taskplugs_own_pods_ask_for_passes_the_baseline_level() -> None:
    pod = pod_manifest(
        "ok",
        spec={
            "hostNetwork": False,
            "volumes": [{"name": "v", "emptyDir": {}}],
            "securityContext": {"runAsUser": 1000, "runAsNonRoot": True},
        },
        securityContext={"privileged": False, "capabilities": {"add": ["NET_BIND_SERVICE"], "drop": ["ALL"]}},
        ports=[{"containerPort": 8080}],
    )
    assert baseline_violations(pod["spec"]) == []


async def test_an_update_that_would_violate_the_baseline_level_is_forbidden(sim: LocalCluster) -> None:
    await sim.client().create(POD, pod_manifest("later"))
    with pytest.raises(KubeApiError) as caught:
        await sim.client().patch(POD, "default", "later", {"spec": {"hostPID": True}})
    assert caught.value.status == 403 and "host namespaces (hostPID=true)" in str(caught.value)


async def test_a_cluster_started_privileged_admits_what_baseline_refuses() -> None:
    async with LocalCluster(mode="simulated", pod_security="privileged") as cluster:
        created = await cluster.client().create(POD, _hostile())
    assert created["spec"]["hostNetwork"] is True
    assert created["spec"]["volumes"][0]["hostPath"] == {"path": "/"}


def test_an_unknown_pod_security_level_is_refused_at_construction() -> None:
    with pytest.raises(ValueError, match="pod_security must be one of"):
        LocalCluster(pod_security="restricted")  # type: ignore[arg-type]


async def test_a_privileged_cluster_gives_a_host_path_volume_to_the_container(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("from the host\n")
    pod = pod_manifest(
        "host",
        command=["cat", "/host/f"],
        volumeMounts=[{"name": "v", "mountPath": "/host"}],
        spec={"volumes": [{"name": "v", "hostPath": {"path": str(tmp_path)}}]},
    )
    async with LocalCluster(mode="process", pod_security="privileged", workdir=tmp_path / "work") as cluster:
        await cluster.client().create(POD, pod)
        done = await cluster.wait_for(POD, "default", "host", phase_in("Succeeded", "Failed"), within=30)
        assert done["status"]["phase"] == "Succeeded", cluster.logs("default", "host")
        assert cluster.logs("default", "host") == "from the host\n"
