"""An MPI task really running on the embedded cluster: the launcher reads the hostfile the operator wrote
for it, the workers run their replica command; the launcher's exit code decides the job."""

from __future__ import annotations

from pathlib import Path

from kubeflow_local_run import (
    NAMESPACE,
    WRITE_OUTPUTS,
    platform_for,
    pod_phases,
    process_cluster,
    run_task,
    task_spec,
)

from taskplug.plugins.kubeflow import HOSTFILE_PATH

LAUNCHER = (
    WRITE_OUTPUTS
    + """
import os, sys
hostfile = open(os.environ["OMPI_MCA_orte_default_hostfile"]).read()
hosts = [line.split()[0] for line in hostfile.splitlines()]
slots = {line.split()[1] for line in hostfile.splitlines()}
print("hostfile:", hostfile, flush=True)
write_outputs(sys.argv[1], hosts=",".join(hosts), slots=",".join(sorted(slots)))
"""
)
WORKER = "import os; print('worker', os.environ['HOSTNAME'], flush=True)"


async def test_an_mpi_launcher_finds_its_workers_in_the_hostfile(tmp_path: Path) -> None:
    platform = platform_for(tmp_path)
    custom = {
        "launcherReplicas": {"replicas": 1},
        # The worker's command becomes its container's args: `python -c <WORKER>` runs.
        "workerReplicas": {"replicas": 2, "command": [WORKER]},
        "slots": 2,
    }
    spec = task_spec("mpihosts", "mpi", custom, LAUNCHER, outputs={"hosts": "STRING", "slots": "STRING"})
    async with process_cluster(platform) as cluster:
        result = await run_task(cluster, platform, spec)
        phases = pod_phases(cluster)
        launcher_log = cluster.logs(NAMESPACE, "mpihosts-n0-0-launcher", "mpi")
        worker_log = cluster.logs(NAMESPACE, "mpihosts-n0-0-worker-1", "mpi")
    assert result.phase == "Success", (result.error, launcher_log)
    assert result.outputs == {"hosts": "mpihosts-n0-0-worker-0,mpihosts-n0-0-worker-1", "slots": "slots=2"}
    assert phases["mpihosts-n0-0-launcher"] == "Succeeded"
    assert worker_log.strip() == "worker mpihosts-n0-0-worker-1"
    # The launcher read the file the operator's init container wrote (its relative path, in the pod's directory).
    assert "mpihosts-n0-0-worker-1 slots=2" in launcher_log
    assert HOSTFILE_PATH == "etc/mpi/hostfile"


async def test_a_failing_mpi_launcher_fails_the_task(tmp_path: Path) -> None:
    platform = platform_for(tmp_path)
    custom = {"launcherReplicas": {"replicas": 1}, "workerReplicas": {"replicas": 1, "command": [WORKER]}}
    spec = task_spec("mpifail", "mpi", custom, "import sys; sys.exit(5)")
    async with process_cluster(platform) as cluster:
        result = await run_task(cluster, platform, spec)
        phases = pod_phases(cluster)
    # The budget is spent: Flyte fails the node with RetriesExhausted|<the last code>, the last error after "::".
    assert result.phase == "PermanentFailure"
    assert result.error is not None
    assert result.error["message"].split("::", 1)[1] == (
        "Job failed:\n\tMPIJobMPIJobFailed - MPIJob mpifail-n0-0 is failed because 1 Launcher replica(s) failed."
    )
    assert phases["mpifail-n0-0-launcher"] == "Failed"
