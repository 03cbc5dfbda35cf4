"""``taskplug cluster serve``: serves until SIGTERM, prints the URL and a kubeconfig kubectl accepts."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from taskplug.cli._cluster import cluster

pytestmark = pytest.mark.integration


def test_the_cluster_group_offers_serve_with_its_options() -> None:
    result = CliRunner().invoke(cluster, ["serve", "--help"])
    assert result.exit_code == 0
    for option in ("--port", "--kubeconfig-out", "--mode"):
        assert option in result.output


def test_a_bad_mode_is_refused_naming_the_option() -> None:
    result = CliRunner().invoke(cluster, ["serve", "--mode", "virtual"])
    assert result.exit_code == 2
    assert "--mode" in result.output


async def test_serve_runs_until_sigterm_and_kubectl_can_use_it(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kc.yaml"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "taskplug.cli._cluster",
        "serve",
        "--port",
        "0",
        "--kubeconfig-out",
        str(kubeconfig),
        "--mode",
        "simulated",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        first = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
        second = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
        assert "serving at https://127.0.0.1:" in first
        assert second.strip() == f"kubeconfig: {kubeconfig}"
        kubectl = await asyncio.create_subprocess_exec(
            str(Path(sys.executable).parent / "kubectl"),
            "--kubeconfig",
            str(kubeconfig),
            "--cache-dir",
            str(tmp_path / "cache"),
            "get",
            "nodes",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, _ = await asyncio.wait_for(kubectl.communicate(), 30)
        assert kubectl.returncode == 0
        assert b"local-node" in out
        # The kubeconfig holds the token: its owner alone may read it, and the server never printed it.
        assert kubeconfig.stat().st_mode & 0o777 == 0o600
        token = yaml.safe_load(kubeconfig.read_text())["users"][0]["user"]["token"]
        assert len(token) >= 32 and token not in first + second
        os.kill(proc.pid, signal.SIGTERM)
        await asyncio.wait_for(proc.wait(), 30)
        assert proc.returncode == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


@pytest.mark.parametrize("allow", [False, True], ids=["baseline", "allow-privileged-pods"])
async def test_serve_refuses_privileged_pods_unless_allowed(tmp_path: Path, allow: bool) -> None:
    kubeconfig = tmp_path / "kc.yaml"
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "root-fs"},
                "spec": {
                    "containers": [{"name": "c", "image": "busybox", "command": ["true"]}],
                    "volumes": [{"name": "v", "hostPath": {"path": "/"}}],
                },
            }
        )
    )
    flags = ["--allow-privileged-pods"] if allow else []
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "taskplug.cli._cluster",
        "serve",
        "--port",
        "0",
        "--kubeconfig-out",
        str(kubeconfig),
        "--mode",
        "simulated",
        *flags,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        assert proc.stdout is not None
        for _ in range(2):  # the URL, then the kubeconfig: written by then
            await asyncio.wait_for(proc.stdout.readline(), 30)
        kubectl = await asyncio.create_subprocess_exec(
            str(Path(sys.executable).parent / "kubectl"),
            "--kubeconfig",
            str(kubeconfig),
            "--cache-dir",
            str(tmp_path / "cache"),
            "create",
            "--validate=false",  # the embedded cluster serves no OpenAPI schema
            "-f",
            str(manifest),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(kubectl.communicate(), 30)
        if allow:
            assert kubectl.returncode == 0, err
            assert b"pod/root-fs created" in out
        else:
            assert kubectl.returncode != 0
            assert (
                b'pods "root-fs" is forbidden: violates PodSecurity "baseline:latest": '
                b'hostPath volumes (volume "v")' in err
            )
        os.kill(proc.pid, signal.SIGTERM)
        await asyncio.wait_for(proc.wait(), 30)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
