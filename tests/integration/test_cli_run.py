"""``taskplug run`` as a user runs it: a subprocess, its exit code, its ``-o json`` document, its state file,
and Ctrl-C.

Where the test must see the cluster (resume, interrupt), the cluster is a process-mode LocalCluster in the
test's own event loop, served over HTTP on 127.0.0.1 and handed to ``taskplug run --kubeconfig``; its pods
run as processes of the test. Every wait on the command has a deadline.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.waiting import wait_until
from taskplug.core import Phase
from taskplug.engine.k8s._plugin_manager import FINALIZER
from taskplug.k8s import POD
from taskplug.localcluster import LocalCluster

from .conftest import WRITE_OUTPUT, PodLedger, container_spec_document, pods_in

pytestmark = pytest.mark.integration

TASKPLUG = str(Path(sys.executable).parent / "taskplug")
DEADLINE = 30.0


def _write(path: Path, document: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


async def _start(tmp_path: Path, *args: str | Path) -> Any:
    """``taskplug run ARGS`` in ``tmp_path`` (where its data root ``.taskplug/data`` lives)."""
    return await asyncio.create_subprocess_exec(
        TASKPLUG,
        "run",
        *map(str, args),
        cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def _finish(proc: Any) -> tuple[int, str, str]:
    try:
        out, err = await asyncio.wait_for(proc.communicate(), DEADLINE)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    return proc.returncode, out.decode(), err.decode()


async def _run(tmp_path: Path, *args: str | Path) -> tuple[int, str, str]:
    return await _finish(await _start(tmp_path, *args))


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[LocalCluster, Path]]:
    """A process-mode local cluster on 127.0.0.1 and a kubeconfig for it; stopped at the end."""
    async with LocalCluster(mode="process", kill_grace_seconds=1.0) as cluster:
        await cluster.serve_http()
        yield cluster, cluster.kubeconfig(tmp_path / "kubeconfig")


async def test_json_output_on_success_is_one_document_with_phase_attempts_error_outputs_and_events(
    tmp_path: Path,
) -> None:
    spec = _write(tmp_path / "ok.yaml", container_spec_document("cli-ok", WRITE_OUTPUT, greeting=True))
    code, out, err = await _run(tmp_path, spec, "-o", "json", "--state-db", tmp_path / "state.db")
    assert code == 0, err
    document = json.loads(out)
    assert list(document) == ["execution", "phase", "attempts", "error", "outputs", "events", "node"]
    assert (document["phase"], document["attempts"], document["error"]) == ("Success", 1, None)
    assert document["outputs"] == {"greeting": "hello, world"}
    for event in document["events"]:
        assert {"phase", "version", "reason", "occurredAt"} <= set(event)
        assert Phase.from_name(event["phase"]) is not None
        assert isinstance(event["version"], int) and isinstance(event["reason"], str)
    assert document["events"][-1]["phase"] == "Success"


async def test_a_failed_task_exits_1_with_the_error_in_the_document(tmp_path: Path) -> None:
    spec = _write(
        tmp_path / "fails.yaml",
        container_spec_document("cli-fails", "import sys; sys.exit(3)", max_attempts=2),
    )
    code, out, _ = await _run(tmp_path, spec, "-o", "json", "--state-db", tmp_path / "state.db")
    assert code == 1
    document = json.loads(out)
    assert (document["phase"], document["attempts"]) == ("PermanentFailure", 2)
    assert set(document["error"]) == {"code", "message", "kind"}
    assert document["error"]["code"].startswith("RetriesExhausted|")
    assert document["error"]["message"].startswith("[2/2] currentAttempt done. Last Error: USER::")
    assert document["error"]["kind"] == "USER"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda d: d["execution"].update(maxAttempts=0), "execution.maxAttempts"),
        (lambda d: d["execution"].update(retries=2), "execution.retries"),
        (lambda d: d["template"]["container"].pop("image"), "template.container.image"),
    ],
    ids=["bad-value", "unknown-field", "missing-field"],
)
async def test_a_bad_spec_exits_2_with_a_message_naming_the_field(
    change: Any, field: str, tmp_path: Path
) -> None:
    document = container_spec_document("cli-bad")
    change(document)
    code, out, err = await _run(tmp_path, _write(tmp_path / "bad.yaml", document), "-o", "json")
    assert code == 2
    assert out == ""
    assert field in err
    assert "Traceback" not in err


async def test_a_rerun_with_the_same_state_db_resumes_instead_of_starting_over(
    served: tuple[LocalCluster, Path], tmp_path: Path
) -> None:
    cluster, kubeconfig = served
    ledger = PodLedger(cluster)
    spec = _write(
        tmp_path / "resume.yaml",
        container_spec_document("cli-resume", "import time; time.sleep(1.5)\n" + WRITE_OUTPUT, greeting=True),
    )
    args = (spec, "-o", "json", "--kubeconfig", kubeconfig, "--state-db", tmp_path / "state.db")

    # Killed while its pod runs: the rerun adopts that pod instead of creating another.
    first = await _start(tmp_path, *args)
    try:
        await cluster.wait_for(
            POD,
            "it-dev",
            "cli-resume-n0-0",
            lambda pod: (pod.get("status") or {}).get("phase") == "Running",
            within=DEADLINE,
        )
        first.send_signal(signal.SIGKILL)
    finally:
        await _finish(first)
    code, out, err = await _run(tmp_path, *args)
    assert code == 0, err
    resumed = json.loads(out)
    assert (resumed["phase"], resumed["attempts"]) == ("Success", 1)
    assert resumed["outputs"] == {"greeting": "hello, world"}

    # Run again once finished: the same result, read from the state file; the cluster is not touched.
    code, out, _ = await _run(tmp_path, *args)
    assert code == 0
    assert json.loads(out) == resumed
    assert list(ledger.added) == ["cli-resume-n0-0"] and ledger.created_twice() == {}


async def test_sigint_during_a_running_task_aborts_it_and_leaves_nothing_behind(
    served: tuple[LocalCluster, Path], tmp_path: Path
) -> None:
    cluster, kubeconfig = served
    config = _write(tmp_path / "config.yaml", {"plugins": {"k8s": {"inject-finalizer": True}}})
    spec = _write(tmp_path / "long.yaml", container_spec_document("cli-long", "import time; time.sleep(120)"))
    proc = await _start(
        tmp_path, spec, "-o", "json", "--config", config, "--kubeconfig", kubeconfig, "--state-db", "s.db"
    )
    try:
        pod = await cluster.wait_for(
            POD,
            "it-dev",
            "cli-long-n0-0",
            lambda pod: (pod.get("status") or {}).get("phase") == "Running",
            within=DEADLINE,
        )
        assert pod["metadata"]["finalizers"] == [FINALIZER]
        proc.send_signal(signal.SIGINT)
    finally:
        code, out, err = await _finish(proc)
    assert code == 1, err
    document = json.loads(out)
    assert document["phase"] == "Aborted"
    assert document["error"]["code"] == "Aborted"
    # Deleted, finalizer removed, so the object is gone; its container process was stopped.
    await wait_until(lambda: pods_in(cluster) == {}, within=5, what="the pod is gone")
    assert cluster.kubelet is not None
    await wait_until(lambda: not cluster.kubelet.runs, within=5, what="no container left running")


async def test_on_a_cluster_reached_by_kubeconfig_a_failure_shows_its_pods_last_log_lines(
    served: tuple[LocalCluster, Path], tmp_path: Path
) -> None:
    _, kubeconfig = served
    script = "import sys\nfor i in range(40):\n    print(f'step {i}', flush=True)\nsys.exit('gave up')"
    spec = _write(tmp_path / "fails.yaml", container_spec_document("cli-remote-log", script))
    code, out, err = await _run(
        tmp_path, spec, "--kubeconfig", kubeconfig, "--state-db", tmp_path / "state.db"
    )
    assert code == 1, err
    # Read through the API's pods/log (the embedded cluster here, a real API server the same way).
    assert "pod it-dev/cli-remote-log-n0-0" in out and "kubectl logs -n it-dev cli-remote-log-n0-0" in out
    assert "  | step 39\n" in out and "  | step 10\n" not in out
    assert "Traceback" not in err
    # taskplug logs reads the same pods through the API, found by the execution's labels.
    proc = await asyncio.create_subprocess_exec(
        TASKPLUG,
        "logs",
        "it/dev/cli-remote-log/n0",
        "--kubeconfig",
        str(kubeconfig),
        "--follow",
        cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    code, out, err = await _finish(proc)
    assert code == 0, err
    assert out.splitlines() == [f"step {i}" for i in range(40)] + ["gave up"]
    proc = await asyncio.create_subprocess_exec(
        TASKPLUG,
        "logs",
        "cli-remote-log",
        "--namespace",
        "it-dev",
        "--kubeconfig",
        str(kubeconfig),
        "--attempt",
        "0",
        "--tail",
        "2",
        cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    code, out, err = await _finish(proc)
    assert (code, out) == (0, "step 39\ngave up\n"), err
