"""``taskplug run --kubeconfig`` when the Kubernetes API cannot be reached or fails: the run ends.

Flyte's rules (propeller's node executor and workflow handler): an error a round
cannot get past is retried, a failing attempt spends the system-retry budget, each API call has a timeout,
and a finalize that keeps failing is retried only until ``max-workflow-retries``. taskplug bounds both the
same way (``executor.max-round-errors`` rounds, ``executor.max-system-failures`` attempts), then ends with a
system error naming the API's address and lists, on stderr and under ``leftovers`` in ``-o json``, every
object that may be left behind (kind, namespace, name). No traceback for this expected trouble.

Each case is a real ``taskplug run`` process against a real socket: a closed port, the embedded cluster
served over HTTP whose create answers 500, and ``taskplug cluster serve`` stopped while the task runs. Every
wait has a deadline (a hang fails the test, nothing asserts a duration).
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.waiting import wait_until
from taskplug.core import FakeClock
from taskplug.k8s import POD
from taskplug.localcluster import LocalCluster

pytestmark = pytest.mark.integration

TASKPLUG = (sys.executable, "-m", "taskplug.cli")
DEADLINE = 90.0  # a run that does not end by then hangs: the test fails instead of waiting for ever
NAMESPACE = "demo-development"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port  # nothing listens there once the socket is closed


def _spec(tmp_path: Path, name: str, script: str) -> Path:
    document: dict[str, Any] = {
        "template": {
            "id": {
                "resourceType": "TASK",
                "project": "demo",
                "domain": "development",
                "name": "t",
                "version": "v",
            },
            "type": "container",
            "container": {"image": "python:3.11-slim", "command": ["python", "-c"], "args": [script]},
        },
        "execution": {"id": {"project": "demo", "domain": "development", "name": name, "nodeId": "n0"}},
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def _config(tmp_path: Path, **k8s: Any) -> Path:
    document: dict[str, Any] = {
        "executor": {
            "data-root": str(tmp_path / "data"),
            "max-round-errors": 2,
            "max-system-failures": 1,
            "resync-period": "500ms",
        },
        "propeller": {"kube-client-config": {"timeout": "5s"}},
    }
    if k8s:
        document["plugins"] = {"k8s": k8s}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def _kubeconfig(tmp_path: Path, server: str) -> Path:
    return LocalCluster.write_kubeconfig(tmp_path / "kubeconfig.yaml", server)


async def _run(
    tmp_path: Path, *args: str | Path, started: asyncio.Event | None = None
) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        *TASKPLUG,
        "run",
        *map(str, args),
        "--state-db",
        str(tmp_path / "state.db"),
        cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), DEADLINE)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def _assert_no_traceback(stderr: str) -> None:
    assert "Traceback" not in stderr, stderr


async def test_a_closed_port_ends_the_run_within_the_bound_naming_the_address_and_what_may_be_left(
    tmp_path: Path,
) -> None:
    server = f"http://127.0.0.1:{_closed_port()}"
    spec = _spec(tmp_path, "closed-1", "print('never runs')")
    code, out, err = await _run(
        tmp_path,
        spec,
        "--kubeconfig",
        _kubeconfig(tmp_path, server),
        "--config",
        _config(tmp_path),
        "-o",
        "json",
    )
    assert code == 1, err
    result = json.loads(out)
    assert result["phase"] == "PermanentFailure"
    # The create could not be sent (round errors, then the attempt failed as a system error); the cleanup a
    # system retry needs first could not reach the API either: the execution ends, naming it.
    assert [e["phase"] for e in result["events"]] == ["RetryableFailure", "PermanentFailure"]
    assert f"cannot reach the Kubernetes API at {server}" in result["events"][0]["reason"]
    error = result["error"]
    assert (error["code"], error["kind"]) == ("CleanupFailed", "SYSTEM")
    assert server in error["message"]
    leftover = {"kind": "Pod", "namespace": NAMESPACE, "name": "closed-1-n0-0"}
    assert result["leftovers"] == [leftover]
    assert f"left behind: Pod {NAMESPACE}/closed-1-n0-0" in err
    _assert_no_traceback(err)


async def test_the_live_view_prints_the_address_and_the_leftovers_too(tmp_path: Path) -> None:
    server = f"http://127.0.0.1:{_closed_port()}"
    spec = _spec(tmp_path, "closed-2", "print('never runs')")
    code, out, err = await _run(
        tmp_path, spec, "--kubeconfig", _kubeconfig(tmp_path, server), "--config", _config(tmp_path)
    )
    assert code == 1, err
    assert "CleanupFailed" in out and server in out
    assert f"left behind: Pod {NAMESPACE}/closed-2-n0-0" in err
    _assert_no_traceback(err)


@pytest.fixture
async def served() -> Any:
    async with LocalCluster(mode="process", clock=FakeClock()) as cluster:
        yield cluster, await cluster.serve_http()


async def test_an_api_that_answers_500_spends_the_system_retry_budget_then_fails_naming_it(
    served: tuple[LocalCluster, str], tmp_path: Path
) -> None:
    cluster, url = served
    cluster.faults.fail("create", 500, times=None)
    spec = _spec(tmp_path, "failing-1", "print('never runs')")
    code, out, err = await _run(
        tmp_path,
        spec,
        "--kubeconfig",
        cluster.kubeconfig(tmp_path / "kubeconfig.yaml"),
        "--config",
        _config(tmp_path),
        "-o",
        "json",
    )
    assert code == 1, err
    result = json.loads(out)
    # max-system-failures 1: the first attempt and one system retry, then the execution fails for good.
    assert (result["phase"], result["attempts"]) == ("PermanentFailure", 2)
    assert result["error"]["code"] == "RetriesExhausted|InternalError"
    assert f"the Kubernetes API at {url} answered 500" in result["error"]["message"]
    assert "leftovers" not in result  # the cleanup could reach the API: nothing was created, nothing is left
    assert list(cluster.store.iter(POD, NAMESPACE)) == []
    _assert_no_traceback(err)


async def test_a_cluster_stopped_while_the_task_runs_ends_the_run_listing_the_pod_it_left(
    tmp_path: Path,
) -> None:
    # ``taskplug cluster serve`` in its own process, stopped as a server goes away: its sockets close.
    kubeconfig = tmp_path / "kubeconfig.yaml"
    server = await asyncio.create_subprocess_exec(
        *TASKPLUG,
        "cluster",
        "serve",
        "--port",
        "0",
        "--kubeconfig-out",
        str(kubeconfig),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        assert server.stdout is not None
        first = (await asyncio.wait_for(server.stdout.readline(), DEADLINE)).decode()
        url = first.rsplit(" ", 1)[-1].strip()
        assert url.startswith("https://127.0.0.1:"), first
        await wait_until(kubeconfig.exists, within=DEADLINE, what="the kubeconfig")
        started = tmp_path / "started"
        spec = _spec(tmp_path, "stopped-1", f"import time; open({str(started)!r}, 'w'); time.sleep(300)")
        config = _config(tmp_path, **{"delete-resource-on-finalize": True})
        running = asyncio.ensure_future(
            _run(tmp_path, spec, "--kubeconfig", kubeconfig, "--config", config, "-o", "json")
        )
        await wait_until(lambda: started.exists() or running.done(), within=DEADLINE, what="the task to run")
        assert not running.done(), running.result()
        server.terminate()  # the API goes away mid-run
        await asyncio.wait_for(server.wait(), DEADLINE)
        code, out, err = await running
    finally:
        if server.returncode is None:
            server.kill()
            await server.wait()
    assert code == 1, err
    result = json.loads(out)
    assert result["phase"] == "PermanentFailure"
    assert f"cannot reach the Kubernetes API at {url}" in result["events"][-2]["reason"]
    assert result["error"]["code"] == "CleanupFailed"
    assert f"failed to delete resource with name [{NAMESPACE}/stopped-1-n0-0]" in result["error"]["message"]
    assert url in result["error"]["message"]
    assert result["leftovers"] == [{"kind": "Pod", "namespace": NAMESPACE, "name": "stopped-1-n0-0"}]
    assert f"left behind: Pod {NAMESPACE}/stopped-1-n0-0" in err
    _assert_no_traceback(err)
