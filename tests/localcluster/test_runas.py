"""Pods run as the user they ask for, or not at all: the merged security context (pure), and real processes
switched to it when the kubelet is root."""

from __future__ import annotations

import os
from typing import Any

import pytest

from taskplug.k8s import EVENT, POD
from taskplug.localcluster import LocalCluster
from taskplug.localcluster._runas import NOGROUP, RunAs, RunAsError, run_as

from .conftest import phase_in, pod_manifest

DONE = phase_in("Succeeded", "Failed")
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root (CI runs as root)")


def _pod(spec_context: dict[str, Any] | None = None, **container_context: Any) -> dict[str, Any]:
    pod = pod_manifest("p", spec={"securityContext": spec_context} if spec_context else None)
    pod["metadata"]["uid"] = "u1"
    if container_context:
        pod["spec"]["containers"][0]["securityContext"] = container_context
    return pod


def _waiting_reason(pod: dict[str, Any]) -> str | None:
    statuses = (pod.get("status") or {}).get("containerStatuses") or [{}]
    reason = statuses[0].get("state", {}).get("waiting", {}).get("reason")
    return None if reason in (None, "ContainerCreating") else str(reason)


def _run_as(pod: dict[str, Any], *, euid: int, egid: int = 0, groups: tuple[int, ...] = ()) -> RunAs:
    return run_as(
        pod, pod["spec"]["containers"][0], "spec.containers[0]", euid=euid, egid=egid, groups=groups
    )


def test_the_containers_run_as_user_overrides_the_pods_and_supplemental_groups_are_the_pods() -> None:
    pod = _pod({"runAsUser": 1000, "runAsGroup": 1000, "supplementalGroups": [5, 6]}, runAsUser=2000)
    assert _run_as(pod, euid=0) == RunAs(uid=2000, gid=1000, groups=(5, 6))


def test_a_user_switch_without_a_group_takes_no_group_of_root() -> None:
    pod = _pod(runAsUser=123456)  # in no user database
    assert _run_as(pod, euid=0) == RunAs(uid=123456, gid=NOGROUP, groups=())


def test_root_asking_for_nothing_or_for_root_runs_unswitched() -> None:
    assert not _run_as(_pod(), euid=0).switches
    assert not _run_as(_pod(runAsUser=0), euid=0).switches


@pytest.mark.parametrize(
    ("pod", "message"),
    [
        (
            _pod(runAsNonRoot=True),
            'container has runAsNonRoot and image will run as root (pod: "p_default(u1)", container: main)',
        ),
        (
            _pod({"runAsNonRoot": True}, runAsUser=0),
            'container\'s runAsUser breaks non-root policy (pod: "p_default(u1)", container: main)',
        ),
    ],
)
def test_run_as_non_root_for_a_root_user_is_the_kubelets_error(pod: dict[str, Any], message: str) -> None:
    with pytest.raises(RunAsError) as caught:
        _run_as(pod, euid=0)
    assert str(caught.value) == message


def test_run_as_non_root_with_a_non_root_user_runs() -> None:
    assert _run_as(_pod({"runAsNonRoot": True, "runAsUser": 65534}), euid=0).uid == 65534
    assert not _run_as(_pod({"runAsNonRoot": True}), euid=1000, egid=1000).switches


@pytest.mark.parametrize(
    ("pod", "field"),
    [
        (_pod({"runAsUser": 65534}), "spec.securityContext.runAsUser=65534"),
        (_pod(runAsUser=65534), "spec.containers[0].securityContext.runAsUser=65534"),
        (_pod(runAsGroup=7), "spec.containers[0].securityContext.runAsGroup=7"),
        (_pod({"supplementalGroups": [7]}), "spec.securityContext.supplementalGroups"),
    ],
)
def test_a_kubelet_that_is_not_root_refuses_another_identity_naming_the_field(
    pod: dict[str, Any], field: str
) -> None:
    with pytest.raises(RunAsError, match="not being root") as caught:
        _run_as(pod, euid=1000, egid=1000, groups=(1000,))
    assert field in str(caught.value)


def test_a_kubelet_that_is_not_root_runs_a_pod_asking_for_its_own_identity() -> None:
    pod = _pod({"runAsUser": 1000, "runAsGroup": 1000, "supplementalGroups": [1000, 4]})
    assert not _run_as(pod, euid=1000, egid=1000, groups=(1000, 4)).switches


async def test_run_as_non_root_on_a_root_kubelet_is_a_create_container_config_error(
    proc: LocalCluster,
) -> None:
    if os.geteuid() != 0:
        pytest.skip("the image user is the kubelet's: root only when it runs as root")
    pod = pod_manifest(
        "nonroot", command=["sh", "-c", "echo ran > ran"], spec={"securityContext": {"runAsNonRoot": True}}
    )
    await proc.client().create(POD, pod)
    seen = await proc.wait_for(POD, "default", "nonroot", lambda o: _waiting_reason(o) is not None, within=30)
    waiting = seen["status"]["containerStatuses"][0]["state"]["waiting"]
    assert waiting["reason"] == "CreateContainerConfigError"
    assert waiting["message"].startswith("container has runAsNonRoot and image will run as root (pod: ")
    events, _ = await proc.client().list(EVENT, "default")
    assert any(e["reason"] == "Failed" and "runAsNonRoot" in e["note"] for e in events)


@as_root
async def test_a_pod_asking_for_a_user_runs_as_that_user_and_can_use_its_folders(proc: LocalCluster) -> None:
    script = (
        "id -u; id -g; id -G; echo data > $VOL/f && cat $VOL/f; echo w > here && cat here; "
        "printf done > $TERMINATION_MESSAGE_PATH"
    )
    pod = pod_manifest(
        "as-nobody",
        command=["sh", "-c", script],
        env=[{"name": "VOL", "value": "/data"}],
        volumeMounts=[{"name": "v", "mountPath": "/data"}],
        spec={
            "securityContext": {"runAsUser": 65534, "runAsGroup": 65534, "supplementalGroups": [4242]},
            "volumes": [{"name": "v", "emptyDir": {}}],
        },
    )
    await proc.client().create(POD, pod)
    done = await proc.wait_for(POD, "default", "as-nobody", DONE, within=30)
    log = proc.logs("default", "as-nobody")
    assert done["status"]["phase"] == "Succeeded", log
    uid, gid, groups, data, here = log.split("\n")[:5]
    assert (uid, gid, sorted(groups.split()), data, here) == (
        "65534",
        "65534",
        ["4242", "65534"],
        "data",
        "w",
    )
    assert done["status"]["containerStatuses"][0]["state"]["terminated"]["message"] == "done"


@as_root
async def test_a_container_keeps_root_while_its_sibling_runs_as_the_user_it_asks_for(
    proc: LocalCluster,
) -> None:
    pod = pod_manifest("mixed", command=["sh", "-c", "id -u"])
    pod["spec"]["containers"].append(
        {
            "name": "other",
            "image": "busybox",
            "command": ["sh", "-c", "id -u"],
            "securityContext": {"runAsUser": 4321},
        }
    )
    await proc.client().create(POD, pod)
    await proc.wait_for(POD, "default", "mixed", DONE, within=30)
    assert (proc.logs("default", "mixed", "main"), proc.logs("default", "mixed", "other")) == (
        "0\n",
        "4321\n",
    )


async def test_a_negative_run_as_user_is_invalid(proc: LocalCluster) -> None:
    from taskplug.k8s import KubeApiError

    with pytest.raises(KubeApiError) as caught:
        await proc.client().create(POD, _pod({"runAsUser": -1}, runAsGroup=2**31))
    assert caught.value.status == 422
    assert (
        "spec.containers[0].securityContext.runAsGroup: Invalid value: 2147483648: must be between 0"
        in str(caught.value)
    )
    assert "spec.securityContext.runAsUser: Invalid value: -1" in str(caught.value)
