"""A TensorFlow task really running on the embedded cluster: chief, two workers and a parameter server are
local processes that find each other through the TF_CONFIG the operator gave them."""

from __future__ import annotations

import asyncio
from pathlib import Path

from kubeflow_local_run import (
    DEADLINE,
    NAMESPACE,
    WRITE_OUTPUTS,
    platform_for,
    pod_phases,
    process_cluster,
    run_task,
    task_spec,
)

from taskplug.core import Phase
from taskplug.executor import MemoryStateStore, open_executor
from taskplug.plugins.kubeflow import SERVICE, TF_JOB

# Every replica checks that TF_CONFIG names its own pod; the chief listens on its own TF_CONFIG address
# and waits until every other replica has connected to it and said who it is.
SCRIPT = (
    WRITE_OUTPUTS
    + """
import json, os, socket, sys, time
config = json.loads(os.environ["TF_CONFIG"])
task = config["task"]
me = f"{task['type']}-{task['index']}"
assert os.environ["HOSTNAME"].endswith(me), (os.environ["HOSTNAME"], me)
cluster = config["cluster"]
host, port = cluster["chief"][0].rsplit(":", 1)
if task["type"] == "chief":
    expected = sum(len(v) for v in cluster.values()) - 1
    joined = []
    with socket.create_server((host, int(port))) as server:
        server.settimeout(30)
        while len(joined) < expected:
            conn, _ = server.accept()
            with conn:
                joined.append(conn.makefile().readline().strip())
    print("joined:", sorted(joined), flush=True)
    write_outputs(sys.argv[1], joined=",".join(sorted(joined)), replicas=expected + 1)
else:
    deadline = time.monotonic() + 30
    while True:
        try:
            with socket.create_connection((host, int(port)), timeout=1) as conn:
                conn.sendall((me + "\\n").encode())
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
"""
)

CUSTOM = {
    "chiefReplicas": {"replicas": 1},
    "workerReplicas": {"replicas": 2},
    "psReplicas": {"replicas": 1},
}


async def test_a_tensorflow_task_runs_its_replicas_which_meet_through_tf_config(tmp_path: Path) -> None:
    platform = platform_for(tmp_path)
    spec = task_spec(
        "tfmeet", "tensorflow", CUSTOM, SCRIPT, outputs={"joined": "STRING", "replicas": "INTEGER"}
    )
    async with process_cluster(platform) as cluster:
        result = await run_task(cluster, platform, spec)
        phases = pod_phases(cluster)
        chief_log = cluster.logs(NAMESPACE, "tfmeet-n0-0-chief-0")
    assert result.phase == "Success", (result.error, chief_log)
    assert result.outputs == {"joined": "ps-0,worker-0,worker-1", "replicas": 4}
    assert phases == {
        "tfmeet-n0-0-chief-0": "Succeeded",
        "tfmeet-n0-0-ps-0": "Succeeded",
        "tfmeet-n0-0-worker-0": "Succeeded",
        "tfmeet-n0-0-worker-1": "Succeeded",
    }
    assert [e["phase"] for e in result.events][-1] == "Success"
    assert "Running" in [e["phase"] for e in result.events]


FAILING = """
import os, sys, time
if os.environ["HOSTNAME"].endswith("worker-1"):
    sys.exit(3)
time.sleep(60)
"""


async def test_a_failing_tensorflow_worker_fails_the_task_as_the_operator_decides(tmp_path: Path) -> None:
    platform = platform_for(tmp_path)
    spec = task_spec("tffail", "tensorflow", CUSTOM, FAILING)
    async with process_cluster(platform) as cluster:
        result = await run_task(cluster, platform, spec)
        phases = pod_phases(cluster)
    # The budget is spent: Flyte fails the node with RetriesExhausted|<the last code>, the last error after "::".
    assert result.phase == "PermanentFailure"
    assert result.error is not None
    assert result.error["code"] == "RetriesExhausted|DownstreamSystemError"
    assert result.error["message"].split("::", 1)[1] == (
        f"Job failed:\n\tTFJobFailed - TFJob {NAMESPACE}/tffail-n0-0 has failed because 1 Worker replica(s) failed."
    )
    assert phases["tffail-n0-0-worker-1"] == "Failed"


async def test_aborting_a_running_tensorflow_task_deletes_the_job_and_its_pods(tmp_path: Path) -> None:
    platform = platform_for(tmp_path)
    spec = task_spec(
        "tfabort", "tensorflow", {"workerReplicas": {"replicas": 2}}, "import time; time.sleep(120)"
    )
    async with (
        process_cluster(platform) as cluster,
        open_executor(platform, kube_client=cluster.client(), store=MemoryStateStore()) as ex,
    ):
        key = await ex.submit(spec)
        async with asyncio.timeout(DEADLINE):
            while Phase(ex.status(key).task_phase) is not Phase.RUNNING:
                await asyncio.sleep(0.02)
        assert sorted(pod_phases(cluster)) == ["tfabort-n0-0-worker-0", "tfabort-n0-0-worker-1"]
        ex.abort(key)
        result = await asyncio.wait_for(ex.wait(key), DEADLINE)
        assert result.phase == "Aborted"
        async with asyncio.timeout(DEADLINE):
            while pod_phases(cluster) or list(cluster.store.iter(SERVICE, NAMESPACE)):
                await asyncio.sleep(0.02)
        assert cluster.store.try_get(TF_JOB, NAMESPACE, "tfabort-n0-0") is None
