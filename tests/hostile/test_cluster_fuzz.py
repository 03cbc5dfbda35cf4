"""Arbitrary JSON in any field of a pod, through the in-process client: the only outcomes are a created pod or
a 400/422 ``KubeApiError`` naming a field — and the cluster (a real process kubelet) still runs a good pod
afterwards, with its scheduler and kubelet alive.

Every accepted pod runs ``true`` (whatever ``command`` the example holds is given to ``true`` as arguments),
so an example can never start a program of its own on this machine; it is deleted before the next example.
The examples and the last test share one cluster (one event loop for the module): the last test is the "after".
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from taskplug.k8s import POD, KubeApiError
from taskplug.localcluster import LocalCluster

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]

Obj = dict[str, Any]

FIELDS: list[tuple[str | int, ...]] = [
    ("apiVersion",),
    ("kind",),
    ("metadata",),
    ("metadata", "name"),
    ("metadata", "generateName"),
    ("metadata", "namespace"),
    ("metadata", "labels"),
    ("metadata", "labels", "team"),
    ("metadata", "annotations"),
    ("metadata", "annotations", "taskplug.io/simulate-duration"),
    ("metadata", "finalizers"),
    ("metadata", "ownerReferences"),
    ("spec",),
    ("spec", "containers"),
    ("spec", "containers", 0),
    ("spec", "containers", 0, "name"),
    ("spec", "containers", 0, "image"),
    ("spec", "containers", 0, "command"),
    ("spec", "containers", 0, "args"),
    ("spec", "containers", 0, "workingDir"),
    ("spec", "containers", 0, "env"),
    ("spec", "containers", 0, "env", 0),
    ("spec", "containers", 0, "env", 0, "name"),
    ("spec", "containers", 0, "env", 0, "value"),
    ("spec", "containers", 0, "env", 0, "valueFrom"),
    ("spec", "containers", 0, "resources"),
    ("spec", "containers", 0, "resources", "limits"),
    ("spec", "containers", 0, "resources", "limits", "cpu"),
    ("spec", "containers", 0, "resources", "limits", "memory"),
    ("spec", "containers", 0, "resources", "requests", "memory"),
    ("spec", "containers", 0, "ports"),
    ("spec", "containers", 0, "terminationMessagePolicy"),
    ("spec", "containers", 0, "terminationMessagePath"),
    ("spec", "containers", 0, "imagePullPolicy"),
    ("spec", "containers", 0, "securityContext"),
    ("spec", "initContainers"),
    ("spec", "restartPolicy"),
    ("spec", "nodeSelector"),
    ("spec", "tolerations"),
    ("spec", "affinity"),
    ("spec", "schedulerName"),
    ("spec", "serviceAccountName"),
    ("spec", "activeDeadlineSeconds"),
    ("spec", "terminationGracePeriodSeconds"),
    ("spec", "priority"),
    ("spec", "volumes"),
    ("status",),
    ("status", "phase"),
    ("status", "conditions"),
]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=12,
)
# Strings are what most fields hold: also the ones that break things (NUL, '=', spaces, unicode, quantities).
strings = st.text(max_size=40) | st.sampled_from(
    ["", "A=B", "a\x00b", "-1", "1e999", "Main", "bad key!", "0.5"]
)
values = json_values | strings | st.lists(strings, max_size=3) | st.dictionaries(strings, strings, max_size=3)


def base_pod() -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "fuzz", "labels": {"team": "a"}, "annotations": {}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "command": ["true"],
                    "env": [{"name": "A", "value": "1"}],
                    "resources": {"limits": {"cpu": "1"}, "requests": {"memory": "1Mi"}},
                }
            ],
        },
    }


def place(pod: Obj, path: tuple[str | int, ...], value: Any) -> None:
    target: Any = pod
    for key in path[:-1]:
        target = target.setdefault(key, {}) if isinstance(key, str) else target[key]
    target[path[-1]] = value


def defang(pod: Obj) -> None:
    """Whatever a container's command is, the process is ``true``: an example never runs a program of its own."""
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return
    for key in ("containers", "initContainers"):
        listing = spec.get(key)
        if not isinstance(listing, list):
            continue
        for container in listing:
            if isinstance(container, dict):
                command = container.get("command")
                container["command"] = (
                    ["true", *command] if isinstance(command, list) else command or ["true"]
                )


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def cluster() -> AsyncIterator[LocalCluster]:
    async with LocalCluster(mode="process") as local:
        yield local


def _finished(obj: Obj) -> bool:
    return (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(field=st.sampled_from(FIELDS), value=values)
async def test_any_json_in_any_pod_field_is_a_pod_or_a_400_or_422_naming_a_field(
    cluster: LocalCluster, field: tuple[str | int, ...], value: Any
) -> None:
    pod = base_pod()
    place(pod, field, value)
    defang(pod)
    client = cluster.client()
    refused: KubeApiError | None = None
    try:
        created = await client.create(POD, pod)
    except KubeApiError as err:
        refused = err
    if refused is not None:
        assert refused.status in (400, 422), refused.to_status()
        causes = refused.details.get("causes") or []
        assert causes, refused.to_status()
        assert all(isinstance(c.get("field"), str) and c["field"] for c in causes), refused.to_status()
        event(f"refused: {refused.status}")
        return
    event("created")
    meta = created["metadata"]
    # Let the scheduler and the kubelet take it up before it goes; they must still be there after.
    await asyncio.sleep(0.02)
    await client.delete(POD, meta["namespace"], meta["name"])
    if meta.get("finalizers"):  # the example's own finalizers keep it until they are removed
        await client.patch(POD, meta["namespace"], meta["name"], {"metadata": {"finalizers": None}})
    await client.list(POD)  # a stopped controller would make this a 500 naming it


async def test_after_the_fuzz_the_cluster_runs_a_good_pod(cluster: LocalCluster) -> None:
    pod = base_pod()
    pod["metadata"]["name"] = "good"
    pod["spec"]["containers"][0]["command"] = ["sh", "-c", "echo good"]
    await cluster.client().create(POD, pod)
    done = await cluster.wait_for(POD, "default", "good", _finished, within=30)
    assert done["status"]["phase"] == "Succeeded"
    assert cluster.logs("default", "good") == "good\n"
