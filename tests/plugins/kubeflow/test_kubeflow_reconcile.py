"""The training operator's rules (training-operator v1.8.0), as pure functions: the pods,
services and status one reconcile asks for, and what the plugins read from that status."""

from __future__ import annotations

import copy
import json
from datetime import timedelta
from typing import Any

import pytest
from kubeflow_helpers import NAMESPACE, NOW, env_of, platform, plugin_context, tctx_for, template

from taskplug.core import Phase
from taskplug.k8s import LogConfig
from taskplug.plugins.kubeflow import (
    HOSTFILE_PATH,
    MPI,
    PYTORCH,
    TENSORFLOW,
    JobKind,
    KfOperatorConfig,
    build_mpi_job,
    build_pytorch_job,
    build_tf_job,
    hostfile,
    kubeflow_task_phase,
    mpi_log_targets,
    pytorch_log_targets,
    reconcile_job,
    services_wanted,
    tf_log_targets,
)

UID = "7d1c0a52-0000-4000-8000-00000000abcd"
LATER = NOW + timedelta(seconds=5)


def with_meta(obj: dict[str, Any], name: str = "job1") -> dict[str, Any]:
    obj["metadata"] = {
        "name": name,
        "namespace": NAMESPACE,
        "uid": UID,
        "creationTimestamp": "2026-03-01T11:59:59Z",
    }
    return obj


def pytorch_job(custom: dict[str, Any] | None = None) -> dict[str, Any]:
    custom = custom or {"masterReplicas": {"replicas": 1}, "workerReplicas": {"replicas": 2}}
    return with_meta(build_pytorch_job(tctx_for(template("pytorch", custom)), platform=platform()))


def tf_job(custom: dict[str, Any]) -> dict[str, Any]:
    return with_meta(build_tf_job(tctx_for(template("tensorflow", custom)), platform=platform()))


def mpi_job(custom: dict[str, Any], **container: Any) -> dict[str, Any]:
    return with_meta(build_mpi_job(tctx_for(template("mpi", custom, **container)), platform=platform()))


def ports_for(kind: JobKind, job: dict[str, Any]) -> dict[str, int]:
    return {w.name: 40000 + i for i, w in enumerate(services_wanted(kind, job))}


def pod_named(pods: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(p for p in pods if p["metadata"]["name"] == name)


def set_phase(
    pod: dict[str, Any], phase: str, *, exit_code: int | None = None, restarts: int = 0, container: str = ""
) -> dict[str, Any]:
    pod = copy.deepcopy(pod)
    name = container or pod["spec"]["containers"][0]["name"]
    state: dict[str, Any] = {"running": {"startedAt": "2026-03-01T12:00:01Z"}}
    if exit_code is not None:
        state = {"terminated": {"exitCode": exit_code, "reason": "Completed" if exit_code == 0 else "Error"}}
    pod["status"] = {
        "phase": phase,
        "containerStatuses": [{"name": name, "state": state, "restartCount": restarts}],
    }
    return pod


def run(
    kind: JobKind, job: dict[str, Any], pods: list[dict[str, Any]], now: Any = NOW
) -> tuple[dict[str, Any], Any]:
    """One reconcile; the job with the plan's status applied, and the plan."""
    plan = reconcile_job(kind, job, pods, ports_for(kind, job), now)
    job = copy.deepcopy(job)
    if plan.status is not None:
        job["status"] = plan.status
    return job, plan


def condition_types(job: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c["type"], c["status"]) for c in job["status"]["conditions"]]


def last(job: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = job["status"]["conditions"][-1]
    return result


def flyte_phase(kind: JobKind, job: dict[str, Any]) -> Any:
    targets = {PYTORCH: pytorch_log_targets, TENSORFLOW: tf_log_targets, MPI: mpi_log_targets}[kind](job)
    return kubeflow_task_phase(
        plugin_context(template(kind.task_type, {})),
        job,
        kind=kind,
        targets=targets,
        config=KfOperatorConfig(),
        log_config=LogConfig(),
    )


# -- PyTorch ----------------------------------------------------------------------------------------------


def test_the_first_reconcile_creates_the_replica_pods_and_marks_the_job_created_and_started() -> None:
    job = pytorch_job()
    job, plan = run(PYTORCH, job, [])
    names = [p["metadata"]["name"] for p in plan.create_pods]
    assert names == ["job1-master-0", "job1-worker-0", "job1-worker-1"]
    assert condition_types(job) == [("Created", "True")]
    assert last(job)["reason"] == "PyTorchJobCreated"
    assert last(job)["message"] == "PyTorchJob job1 is created."
    assert job["status"]["startTime"] == "2026-03-01T12:00:00Z"
    assert job["status"]["replicaStatuses"]["Master"] == {
        "selector": "training.kubeflow.org/job-name=job1,training.kubeflow.org/operator-name=pytorchjob-controller,"
        "training.kubeflow.org/replica-type=master"
    }
    phase = flyte_phase(PYTORCH, job)
    assert (phase.phase, phase.reason) == (Phase.QUEUED, "JobCreated")


def test_replica_pods_carry_the_operators_labels_owner_and_restart_policy() -> None:
    job = pytorch_job(
        {
            "masterReplicas": {},
            "workerReplicas": {"replicas": 1, "restartPolicy": "RESTART_POLICY_ON_FAILURE"},
        }
    )
    _, plan = run(PYTORCH, job, [])
    master, worker = plan.create_pods
    assert (
        master["metadata"]["labels"].items()
        >= {
            "training.kubeflow.org/operator-name": "pytorchjob-controller",
            "training.kubeflow.org/job-name": "job1",
            "training.kubeflow.org/replica-type": "master",
            "training.kubeflow.org/replica-index": "0",
            "training.kubeflow.org/job-role": "master",
        }.items()
    )
    assert "training.kubeflow.org/job-role" not in worker["metadata"]["labels"]
    assert worker["metadata"]["labels"]["task-name"] == "train"  # the template's own labels stay
    assert master["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "name": "job1",
            "uid": UID,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert (master["spec"]["restartPolicy"], worker["spec"]["restartPolicy"]) == ("Never", "OnFailure")
    assert master["spec"]["containers"][0]["ports"] == [{"name": "pytorchjob-port", "containerPort": 23456}]


def test_every_replica_learns_the_masters_loopback_address_its_rank_and_the_world_size() -> None:
    job = pytorch_job()
    ports = ports_for(PYTORCH, job)
    _, plan = run(PYTORCH, job, [])
    master_port = str(ports["job1-master-0"])
    for pod, rank in zip(plan.create_pods, (0, 1, 2), strict=True):
        env = env_of(pod["spec"]["containers"][0])
        assert {k: env[k] for k in ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "PET_NODE_RANK")} == {
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": master_port,
            "WORLD_SIZE": "3",
            "RANK": str(rank),
            "PET_NODE_RANK": str(rank),
        }
        assert (env["PET_MASTER_ADDR"], env["PET_MASTER_PORT"]) == ("127.0.0.1", master_port)
        assert (env["PYTHONUNBUFFERED"], env["PET_NPROC_PER_NODE"], env["PET_NNODES"]) == ("1", "auto", "3")
        assert env["FOO"] == "bar"  # the task's own env comes first


def test_each_replica_gets_a_headless_service_of_its_own_name() -> None:
    wanted = services_wanted(PYTORCH, pytorch_job())
    assert [w.name for w in wanted] == ["job1-master-0", "job1-worker-0", "job1-worker-1"]
    assert wanted[1].labels["training.kubeflow.org/replica-index"] == "0"


def test_an_elastic_job_rendezvous_at_worker_0() -> None:
    custom = {
        "workerReplicas": {"replicas": 2},
        "elasticConfig": {
            "rdzvBackend": "c10d",
            "minReplicas": 1,
            "maxReplicas": 3,
            "nprocPerNode": 2,
            "maxRestarts": 4,
        },
    }
    job = pytorch_job(custom)
    ports = ports_for(PYTORCH, job)
    _, plan = run(PYTORCH, job, [])
    assert [p["metadata"]["name"] for p in plan.create_pods] == ["job1-worker-0", "job1-worker-1"]
    env = env_of(plan.create_pods[1]["spec"]["containers"][0])
    assert env["PET_RDZV_ENDPOINT"] == f"127.0.0.1:{ports['job1-worker-0']}"
    assert (
        env["PET_RDZV_BACKEND"],
        env["PET_NNODES"],
        env["PET_MAX_RESTARTS"],
        env["PET_NPROC_PER_NODE"],
    ) == (
        "c10d",
        "1:3",
        "4",
        "2",
    )
    assert "MASTER_ADDR" not in env and "RANK" not in env
    # Worker 0 leads an elastic job.
    assert plan.create_pods[0]["metadata"]["labels"]["training.kubeflow.org/job-role"] == "master"


def test_a_running_master_makes_the_job_running() -> None:
    job, plan = run(PYTORCH, pytorch_job(), [])
    pods = [set_phase(p, "Running") for p in plan.create_pods]
    job, plan = run(PYTORCH, job, pods, LATER)
    assert not plan.create_pods
    assert condition_types(job) == [("Created", "True"), ("Running", "True")]
    assert (last(job)["reason"], last(job)["message"]) == ("PyTorchJobRunning", "PyTorchJob job1 is running.")
    assert job["status"]["replicaStatuses"]["Worker"]["active"] == 2
    assert flyte_phase(PYTORCH, job).phase is Phase.RUNNING


def test_the_master_succeeding_completes_the_job() -> None:
    job, plan = run(PYTORCH, pytorch_job(), [])
    job, _ = run(PYTORCH, job, [set_phase(p, "Running") for p in plan.create_pods], LATER)
    pods = [set_phase(plan.create_pods[0], "Succeeded", exit_code=0)] + [
        set_phase(p, "Running") for p in plan.create_pods[1:]
    ]
    job, _ = run(PYTORCH, job, pods, LATER + timedelta(seconds=5))
    assert condition_types(job) == [("Created", "True"), ("Running", "False"), ("Succeeded", "True")]
    assert last(job)["message"] == "PyTorchJob job1 is successfully completed."
    assert job["status"]["completionTime"] == "2026-03-01T12:00:10Z"
    assert flyte_phase(PYTORCH, job).phase is Phase.SUCCESS


def test_a_worker_failing_under_restart_policy_never_fails_the_job() -> None:
    job, plan = run(PYTORCH, pytorch_job(), [])
    pods = [set_phase(p, "Running") for p in plan.create_pods]
    pods[2] = set_phase(plan.create_pods[2], "Failed", exit_code=1)
    job, plan = run(PYTORCH, job, pods, LATER)
    assert last(job)["type"] == "Failed"
    assert (last(job)["reason"], last(job)["message"]) == (
        "PyTorchJobFailed",
        "PyTorchJob job1 is failed because 1 Worker replica(s) failed.",
    )
    assert not plan.delete_pods  # cleanPodPolicy None (Flyte's default run policy)
    phase = flyte_phase(PYTORCH, job)
    assert phase.phase is Phase.RETRYABLE_FAILURE
    assert phase.err is not None
    assert (
        phase.err.message
        == "Job failed:\n\tPyTorchJobFailed - PyTorchJob job1 is failed because 1 Worker replica(s) failed."
    )
    # Once failed, nothing moves the conditions any more.
    again, _ = run(
        PYTORCH, job, [set_phase(p, "Succeeded", exit_code=0) for p in pods], LATER + timedelta(seconds=9)
    )
    assert again["status"]["conditions"] == job["status"]["conditions"]


def test_a_failed_pod_under_on_failure_is_deleted_and_the_job_restarts() -> None:
    job = pytorch_job(
        {
            "masterReplicas": {},
            "workerReplicas": {"replicas": 1, "restartPolicy": "RESTART_POLICY_ON_FAILURE"},
        }
    )
    job, plan = run(PYTORCH, job, [])
    master = set_phase(plan.create_pods[0], "Running")
    job, plan2 = run(PYTORCH, job, [master, set_phase(plan.create_pods[1], "Failed", exit_code=1)], LATER)
    assert plan2.delete_pods == ("job1-worker-0",)
    # The Restarting condition replaces Running; its message is the type's restart message.
    assert last(job)["type"] == "Restarting"
    assert last(job)["message"] == "PyTorchJob job1 is restarting because 1 Worker replica(s) failed."
    assert flyte_phase(PYTORCH, job).phase is Phase.RUNNING
    job, plan3 = run(PYTORCH, job, [master], LATER + timedelta(seconds=1))
    assert [p["metadata"]["name"] for p in plan3.create_pods] == ["job1-worker-0"]


@pytest.mark.parametrize(("exit_code", "restarts"), [(137, True), (1, False)])
def test_restart_policy_exit_code_restarts_only_retryable_exit_codes(exit_code: int, restarts: bool) -> None:
    job = pytorch_job()
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] = "ExitCode"
    job, plan = run(PYTORCH, job, [])
    assert plan.create_pods[1]["spec"]["restartPolicy"] == "Never"
    pods = [set_phase(p, "Running") for p in plan.create_pods]
    pods[1] = set_phase(plan.create_pods[1], "Failed", exit_code=exit_code, container="pytorch")
    job, plan = run(PYTORCH, job, pods, LATER)
    if restarts:
        assert plan.delete_pods == ("job1-worker-0",)
        assert any(c["type"] == "Restarting" for c in job["status"]["conditions"])
    else:
        assert not plan.delete_pods
        assert last(job)["type"] == "Failed"
        assert last(job)["message"] == 'job "job1" is failing because "Worker" replica(s) failed.'


def test_an_elastic_job_succeeds_when_any_worker_does() -> None:
    job = pytorch_job(
        {"workerReplicas": {"replicas": 2}, "elasticConfig": {"minReplicas": 2, "maxReplicas": 2}}
    )
    job, plan = run(PYTORCH, job, [])
    pods = [
        set_phase(plan.create_pods[0], "Succeeded", exit_code=0),
        set_phase(plan.create_pods[1], "Running"),
    ]
    job, _ = run(PYTORCH, job, pods, LATER)
    assert (last(job)["type"], last(job)["message"]) == (
        "Succeeded",
        f"PyTorchJob {NAMESPACE}/job1 successfully completed.",
    )


def test_pods_beyond_the_replica_count_are_deleted() -> None:
    job, plan = run(PYTORCH, pytorch_job(), [])
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 1
    _, plan = run(PYTORCH, job, [set_phase(p, "Running") for p in plan.create_pods], LATER)
    assert plan.delete_pods == ("job1-worker-1",)


# -- finishing, TTL, deadlines, back-off, suspension ---------------------------------------------------------


def finished(policy: str, ttl: int | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    job = pytorch_job()
    job["spec"]["runPolicy"] = {"cleanPodPolicy": policy} | ({"ttlSecondsAfterFinished": ttl} if ttl else {})
    job, plan = run(PYTORCH, job, [])
    pods = [
        set_phase(plan.create_pods[0], "Succeeded", exit_code=0),
        set_phase(plan.create_pods[1], "Running"),
        set_phase(plan.create_pods[2], "Succeeded", exit_code=0),
    ]
    job, _ = run(PYTORCH, job, pods, NOW)
    assert last(job)["type"] == "Succeeded"
    return job, pods


@pytest.mark.parametrize(
    ("policy", "deleted"),
    [
        ("None", ()),
        ("Running", ("job1-worker-0",)),
        ("All", ("job1-master-0", "job1-worker-0", "job1-worker-1")),
    ],
)
def test_a_finished_jobs_pods_and_services_are_cleaned_up_per_policy(
    policy: str, deleted: tuple[str, ...]
) -> None:
    job, pods = finished(policy)
    job, plan = run(PYTORCH, job, pods, LATER)
    assert (plan.delete_pods, plan.delete_services) == (deleted, deleted)
    assert not plan.create_pods
    # A succeeded job reports its still-active replicas as succeeded.
    assert job["status"]["replicaStatuses"]["Worker"] == {
        "succeeded": 2,
        "selector": job["status"]["replicaStatuses"]["Worker"]["selector"],
    }


def test_a_finished_job_is_deleted_once_its_ttl_is_over() -> None:
    job, pods = finished("None", ttl=60)
    _, plan = run(PYTORCH, job, pods, NOW + timedelta(seconds=20))
    assert (plan.delete_job, plan.wake_after) == (False, 40.0)
    _, plan = run(PYTORCH, job, pods, NOW + timedelta(seconds=60))
    assert plan.delete_job


def test_a_job_active_longer_than_its_deadline_fails_and_loses_its_pods() -> None:
    job = pytorch_job()
    job["spec"]["runPolicy"] = {"activeDeadlineSeconds": 30}
    job, plan = run(PYTORCH, job, [])
    assert plan.wake_after == 30.0
    pods = [set_phase(p, "Running") for p in plan.create_pods]
    job, plan = run(PYTORCH, job, pods, NOW + timedelta(seconds=29))
    assert last(job)["type"] == "Running" and plan.wake_after == 1.0
    job, plan = run(PYTORCH, job, pods, NOW + timedelta(seconds=30))
    assert (last(job)["type"], last(job)["reason"], last(job)["message"]) == (
        "Failed",
        "PyTorchJobFailed",
        "Job job1 has failed because it was active longer than specified deadline",
    )
    assert plan.delete_pods == ("job1-master-0", "job1-worker-0", "job1-worker-1")
    assert job["status"]["completionTime"] == "2026-03-01T12:00:30Z"


def test_restarts_past_the_backoff_limit_fail_the_job() -> None:
    job = pytorch_job(
        {"masterReplicas": {"restartPolicy": "RESTART_POLICY_ON_FAILURE"}, "workerReplicas": {"replicas": 1}}
    )
    job["spec"]["runPolicy"] = {"backoffLimit": 2}
    job, plan = run(PYTORCH, job, [])
    master, worker = plan.create_pods
    job, _ = run(
        PYTORCH, job, [set_phase(master, "Running", restarts=1), set_phase(worker, "Running")], LATER
    )
    assert last(job)["type"] == "Running"
    job, plan = run(
        PYTORCH, job, [set_phase(master, "Running", restarts=2), set_phase(worker, "Running")], LATER
    )
    assert last(job)["message"] == "Job job1 has failed because it has reached the specified backoff limit"
    assert set(plan.delete_pods) == {"job1-master-0", "job1-worker-0"}


def test_a_suspended_job_loses_its_pods_and_resumes_with_a_new_start_time() -> None:
    job, plan = run(PYTORCH, pytorch_job(), [])
    pods = [set_phase(p, "Running") for p in plan.create_pods]
    job, _ = run(PYTORCH, job, pods, LATER)
    job["spec"]["runPolicy"] = {"suspend": True}
    job, plan = run(PYTORCH, job, pods, LATER + timedelta(seconds=1))
    assert plan.delete_pods == ("job1-master-0", "job1-worker-0", "job1-worker-1")
    assert condition_types(job) == [("Created", "True"), ("Running", "False"), ("Suspended", "True")]
    assert last(job)["message"] == "PyTorchJob job1 is suspended."
    assert services_wanted(PYTORCH, job) == []
    phase = flyte_phase(PYTORCH, job)
    assert (phase.phase, phase.reason) == (Phase.QUEUED, "Suspended")
    job["spec"]["runPolicy"] = {}
    job, plan = run(PYTORCH, job, [], LATER + timedelta(seconds=20))
    suspended = next(c for c in job["status"]["conditions"] if c["type"] == "Suspended")
    assert (suspended["status"], suspended["reason"]) == ("False", "PyTorchJobResumed")
    assert job["status"]["startTime"] == "2026-03-01T12:00:25Z"
    assert len(plan.create_pods) == 3


def test_a_job_being_deleted_is_left_alone() -> None:
    job = pytorch_job()
    job["metadata"]["deletionTimestamp"] = "2026-03-01T12:00:00Z"
    plan = reconcile_job(PYTORCH, job, [], {}, NOW)
    assert plan == type(plan)()


# -- TensorFlow -------------------------------------------------------------------------------------------


def test_each_tf_replica_gets_tf_config_with_the_whole_cluster_on_loopback() -> None:
    job = tf_job(
        {"workerReplicas": {"replicas": 2}, "psReplicas": {"replicas": 1}, "chiefReplicas": {"replicas": 1}}
    )
    ports = ports_for(TENSORFLOW, job)
    _, plan = run(TENSORFLOW, job, [])
    names = [p["metadata"]["name"] for p in plan.create_pods]
    assert names == ["job1-chief-0", "job1-ps-0", "job1-worker-0", "job1-worker-1"]
    worker1 = pod_named(list(plan.create_pods), "job1-worker-1")
    raw = env_of(worker1["spec"]["containers"][0])["TF_CONFIG"]
    addr = {name: f"127.0.0.1:{port}" for name, port in ports.items()}
    assert json.loads(raw) == {
        "cluster": {
            "chief": [addr["job1-chief-0"]],
            "ps": [addr["job1-ps-0"]],
            "worker": [addr["job1-worker-0"], addr["job1-worker-1"]],
        },
        "task": {"type": "worker", "index": 1},
        "environment": "cloud",
    }
    assert raw.startswith('{"cluster":{"chief":')  # Go's compact JSON with sorted map keys
    assert (
        pod_named(list(plan.create_pods), "job1-chief-0")["metadata"]["labels"][
            "training.kubeflow.org/job-role"
        ]
        == "master"
    )


def test_a_single_replica_tf_job_gets_no_tf_config() -> None:
    _, plan = run(TENSORFLOW, tf_job({"workerReplicas": {"replicas": 1}}), [])
    assert "TF_CONFIG" not in env_of(plan.create_pods[0]["spec"]["containers"][0])


def test_tf_config_goes_to_the_tensorflow_container_only() -> None:
    pod_spec = {
        "containers": [
            {"name": "side", "image": "s", "args": ["x"]},
            {"name": "primary", "image": "t", "args": ["y"]},
        ]
    }
    task = template("tensorflow", {"workerReplicas": {"replicas": 2}}, pod_spec=pod_spec)
    job = with_meta(build_tf_job(tctx_for(task), platform=platform()))
    _, plan = run(TENSORFLOW, job, [])
    side, main = plan.create_pods[0]["spec"]["containers"]
    assert "TF_CONFIG" in env_of(main) and "TF_CONFIG" not in env_of(side)


def test_a_tf_job_with_a_chief_completes_when_the_chief_does() -> None:
    job = tf_job({"workerReplicas": {"replicas": 2}, "chiefReplicas": {"replicas": 1}})
    job, plan = run(TENSORFLOW, job, [])
    chief, w0, w1 = plan.create_pods
    job, _ = run(
        TENSORFLOW,
        job,
        [set_phase(chief, "Running"), set_phase(w0, "Running"), set_phase(w1, "Running")],
        LATER,
    )
    assert (last(job)["type"], last(job)["message"]) == ("Running", f"TFJob {NAMESPACE}/job1 is running.")
    job, _ = run(
        TENSORFLOW,
        job,
        [set_phase(chief, "Succeeded", exit_code=0), set_phase(w0, "Running"), set_phase(w1, "Running")],
        LATER,
    )
    assert (last(job)["type"], last(job)["message"]) == (
        "Succeeded",
        f"TFJob {NAMESPACE}/job1 successfully completed.",
    )
    assert flyte_phase(TENSORFLOW, job).phase is Phase.SUCCESS


@pytest.mark.parametrize(("policy", "done"), [(None, True), ("AllWorkers", False)])
def test_without_a_chief_worker_0_completes_the_job_unless_all_workers_must(
    policy: str | None, done: bool
) -> None:
    job = tf_job({"workerReplicas": {"replicas": 2}})
    if policy:
        job["spec"]["successPolicy"] = policy
    job, plan = run(TENSORFLOW, job, [])
    pods = [
        set_phase(plan.create_pods[0], "Succeeded", exit_code=0, container="tensorflow"),
        set_phase(plan.create_pods[1], "Running"),
    ]
    job, _ = run(TENSORFLOW, job, pods, LATER)
    assert (last(job)["type"] == "Succeeded") is done


def test_a_failed_tf_replica_fails_the_job_with_the_operators_message() -> None:
    job = tf_job({"workerReplicas": {"replicas": 1}, "psReplicas": {"replicas": 1}})
    job, plan = run(TENSORFLOW, job, [])
    ps, worker = plan.create_pods
    job, _ = run(TENSORFLOW, job, [set_phase(ps, "Failed", exit_code=2), set_phase(worker, "Running")], LATER)
    assert (last(job)["reason"], last(job)["message"]) == (
        "TFJobFailed",
        f"TFJob {NAMESPACE}/job1 has failed because 1 PS replica(s) failed.",
    )
    assert flyte_phase(TENSORFLOW, job).phase is Phase.RETRYABLE_FAILURE


# -- MPI --------------------------------------------------------------------------------------------------


def test_the_mpi_launcher_gets_the_hostfile_and_the_workers_wait_for_it() -> None:
    job = mpi_job(
        {"launcherReplicas": {}, "workerReplicas": {"replicas": 2}, "slots": 2}, command=["python", "-c"]
    )
    assert services_wanted(MPI, job) == []
    assert hostfile(job) == "job1-worker-0 slots=2\njob1-worker-1 slots=2\n"
    _, plan = run(MPI, job, [])
    launcher, w0, _ = plan.create_pods
    assert [p["metadata"]["name"] for p in plan.create_pods] == [
        "job1-launcher",
        "job1-worker-0",
        "job1-worker-1",
    ]
    env = env_of(launcher["spec"]["containers"][0])
    assert env["OMPI_MCA_orte_default_hostfile"] == HOSTFILE_PATH
    assert (env["I_MPI_HYDRA_BOOTSTRAP"], env["NVIDIA_VISIBLE_DEVICES"]) == ("rsh", "")
    init = launcher["spec"]["initContainers"][-1]
    assert env_of(init)["HOSTFILE"] == hostfile(job)
    assert launcher["spec"]["serviceAccountName"] == "job1-launcher"
    assert launcher["metadata"]["labels"]["training.kubeflow.org/job-role"] == "master"
    # A worker with a command runs it (Flyte's task container has one here).
    assert w0["spec"]["containers"][0]["command"] == ["python", "-c"]


def test_an_mpi_worker_without_a_command_sleeps_for_the_launcher() -> None:
    job = mpi_job({"workerReplicas": {"replicas": 1}})
    _, plan = run(MPI, job, [])
    worker = pod_named(list(plan.create_pods), "job1-worker-0")["spec"]["containers"][0]
    assert (worker["command"], worker["args"]) == (["sleep"], ["365d"])


def test_the_mpi_launcher_decides_the_job() -> None:
    job = mpi_job({"workerReplicas": {"replicas": 1}})
    job, plan = run(MPI, job, [])
    launcher, worker = plan.create_pods
    job, _ = run(MPI, job, [set_phase(launcher, "Running"), set_phase(worker, "Running")], LATER)
    assert (last(job)["type"], last(job)["message"]) == ("Running", "MPIJob job1 is running.")
    job, _ = run(
        MPI, job, [set_phase(launcher, "Succeeded", exit_code=0), set_phase(worker, "Running")], LATER
    )
    assert (last(job)["type"], last(job)["reason"], last(job)["message"]) == (
        "Succeeded",
        "MPIJobSucceeded",
        "MPIJob job1 is successfully completed.",
    )


def test_a_failed_mpi_worker_fails_the_job_with_the_doubled_reason() -> None:
    job = mpi_job({"workerReplicas": {"replicas": 1}})
    job, plan = run(MPI, job, [])
    launcher, worker = plan.create_pods
    job, _ = run(MPI, job, [set_phase(launcher, "Running"), set_phase(worker, "Failed", exit_code=3)], LATER)
    assert (last(job)["reason"], last(job)["message"]) == (
        "MPIJobMPIJobFailed",
        "MPIJob job1 is failed because 1 Worker replica(s) failed.",
    )
    phase = flyte_phase(MPI, job)
    assert phase.phase is Phase.RETRYABLE_FAILURE
    assert phase.err is not None and "MPIJobMPIJobFailed" in phase.err.message
