"""The PyTorch example really running: master + 1 worker form a torch.distributed process group (gloo,
CPU) through the MASTER_ADDR/MASTER_PORT/WORLD_SIZE/RANK the training operator gives them, all-reduce a
tensor, and the master writes the sum as the task's output. Needs torch (a test extra:
``pip install torch==2.13.0``); skipped without it.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest
import yaml
from kubeflow_local_run import DEADLINE, platform_for, pod_phases, process_cluster, run_task

from taskplug.executor import load_spec
from taskplug.k8s import POD
from taskplug.plugins.kubeflow import PYTORCH_JOB

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "pytorch"
SPEC, CONFIG, SCRIPT = EXAMPLE / "pytorch.yaml", EXAMPLE / "config.yaml", EXAMPLE / "allreduce.py"
TASKPLUG = str(Path(sys.executable).parent / "taskplug")
NAMESPACE = "demo-development"
JOB = "allreduce-1-n0-0"


def test_the_example_runs_the_script_beside_it() -> None:
    args = yaml.safe_load(SPEC.read_text())["template"]["container"]["args"]
    assert args == [SCRIPT.read_text(), "{{.OutputPrefix}}"]


async def test_master_and_worker_all_reduce_through_a_torch_process_group(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="torch is a test extra: pip install torch==2.13.0 (CPU wheel)")
    platform = platform_for(tmp_path, CONFIG)
    async with process_cluster(platform) as cluster:
        result = await run_task(cluster, platform, load_spec(SPEC))
        # The master's success completes the job; the worker may still be leaving the group.
        await cluster.wait_for(
            POD, NAMESPACE, f"{JOB}-worker-0", lambda p: p["status"]["phase"] != "Running", within=30
        )
        phases = pod_phases(cluster, NAMESPACE)
        logs = {name: cluster.logs(NAMESPACE, name, "pytorch") for name in phases}
        job = cluster.store.get(PYTORCH_JOB, NAMESPACE, JOB)
    assert result.phase == "Success", (result.error, logs)
    # 1 (rank 0) + 2 (rank 1): both ranks joined the group.
    assert result.outputs == {"total": 3.0, "world_size": 2}
    assert phases == {f"{JOB}-master-0": "Succeeded", f"{JOB}-worker-0": "Succeeded"}
    assert logs[f"{JOB}-worker-0"].strip().endswith("rank 1 of 2: all-reduced sum 3.0")
    assert logs[f"{JOB}-master-0"].strip().endswith("rank 0 of 2: all-reduced sum 3.0")
    assert [c["type"] for c in job["status"]["conditions"]] == ["Created", "Running", "Succeeded"]
    events = result.events
    assert [e["reason"] for e in events[:2]] == ["task submitted to K8s", "JobCreated"]
    assert events[-1]["phase"] == "Success"
    assert [log["name"] for log in events[-1]["logs"]] == ["Kubernetes Logsmaster", "Kubernetes Logs"]


async def test_taskplug_run_runs_the_example(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="torch is a test extra: pip install torch==2.13.0 (CPU wheel)")
    proc = await asyncio.create_subprocess_exec(
        TASKPLUG,
        "run",
        str(SPEC),
        "--config",
        str(CONFIG),
        "-o",
        "json",
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
    assert proc.returncode == 0, err.decode()[-2000:]
    document = json.loads(out)
    assert (document["phase"], document["outputs"], document["error"]) == (
        "Success",
        {"total": 3.0, "world_size": 2},
        None,
    )
