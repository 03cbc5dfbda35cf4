"""Status → phase for the three kinds, log links, custom info."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from kubeflow_helpers import NAMESPACE, NOW, condition, job_object, plugin_context, template

from taskplug.core import ErrorCode, ErrorKind, Phase, PluginError
from taskplug.k8s import LogConfig, PluginState
from taskplug.plugins.kubeflow import (
    MPI,
    PYTORCH,
    TENSORFLOW,
    JobKind,
    KfOperatorConfig,
    current_condition,
    kubeflow_task_phase,
    mpi_log_targets,
    pytorch_log_targets,
    tf_log_targets,
)

PT_SPEC = {
    "runPolicy": {},
    "pytorchReplicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": 2}},
}
STARTED = {"startTime": "2026-03-01T11:59:05Z"}
NO_LOGS = LogConfig(kubernetes_enabled=False)
TASK = template("pytorch", {"workerReplicas": {"replicas": 2}})


def phase_of(
    job: dict[str, Any],
    *,
    kind: JobKind = PYTORCH,
    state: PluginState | None = None,
    config: KfOperatorConfig | None = None,
    log_config: LogConfig = NO_LOGS,
    now: Any = NOW,
) -> Any:
    targets = {PYTORCH: pytorch_log_targets, TENSORFLOW: tf_log_targets, MPI: mpi_log_targets}[kind](job)
    return kubeflow_task_phase(
        plugin_context(TASK, state=state, now=now),
        job,
        kind=kind,
        targets=targets,
        config=config or KfOperatorConfig(),
        log_config=log_config,
    )


@pytest.mark.parametrize(
    ("conditions", "phase", "reason"),
    [
        (None, Phase.QUEUED, "JobCreated"),
        ([condition("Created", reason="PyTorchJobCreated")], Phase.QUEUED, "JobCreated"),
        ([condition("Created"), condition("Running", at="2026-03-01T11:59:40Z")], Phase.RUNNING, ""),
        ([condition("Created"), condition("Restarting", at="2026-03-01T11:59:40Z")], Phase.RUNNING, ""),
        ([condition("Created"), condition("Succeeded", at="2026-03-01T11:59:40Z")], Phase.SUCCESS, ""),
        (
            [condition("Created"), condition("Suspended", at="2026-03-01T11:59:40Z")],
            Phase.QUEUED,
            "Suspended",
        ),
    ],
)
def test_the_current_condition_decides_the_phase(
    conditions: list[dict[str, Any]] | None, phase: Phase, reason: str
) -> None:
    status: dict[str, Any] = dict(STARTED)
    if conditions is not None:
        status["conditions"] = conditions
    info = phase_of(job_object("PyTorchJob", PT_SPEC, status))
    assert (info.phase, info.version, info.reason, info.err) == (phase, 0, reason, None)


def test_a_failed_job_is_a_retryable_downstream_failure_with_the_operators_words() -> None:
    failed = condition(
        "Failed",
        at="2026-03-01T11:59:50Z",
        reason="PyTorchJobFailed",
        message="PyTorchJob exec1-n0-0 is failed because 1 Worker replica(s) failed.",
    )
    status = {**STARTED, "conditions": [condition("Created"), condition("Running", "False"), failed]}
    info = phase_of(job_object("PyTorchJob", PT_SPEC, status))
    assert info.phase is Phase.RETRYABLE_FAILURE
    assert info.err is not None
    assert (info.err.code, info.err.kind) == (ErrorCode.DOWNSTREAM_SYSTEM_ERROR, ErrorKind.USER)
    assert info.err.message == (
        "Job failed:\n\tPyTorchJobFailed - PyTorchJob exec1-n0-0 is failed because 1 Worker replica(s) failed."
    )


def test_an_unknown_condition_type_is_an_error_not_a_phase() -> None:
    status = {**STARTED, "conditions": [condition("Evicted")]}
    with pytest.raises(PluginError, match=r"unknown PyTorchJob condition type \[Evicted\]"):
        phase_of(job_object("PyTorchJob", PT_SPEC, status))


def test_the_first_created_after_launch_bumps_the_queued_version() -> None:
    status = {**STARTED, "conditions": [condition("Created")]}
    state = PluginState(Phase.QUEUED, 0, "task submitted to K8s")
    info = phase_of(job_object("PyTorchJob", PT_SPEC, status), state=state)
    assert (info.phase, info.version, info.reason) == (Phase.QUEUED, 1, "JobCreated")
    # The same report again is not another version (the engine drops it as already seen).
    again = phase_of(
        job_object("PyTorchJob", PT_SPEC, status), state=PluginState(Phase.QUEUED, 1, "JobCreated")
    )
    assert (again.phase, again.version) == (Phase.QUEUED, 0)


# -- the operator timeout ---------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", [PYTORCH, TENSORFLOW, MPI], ids=lambda k: k.task_type)
def test_a_job_the_operator_never_started_errors_after_the_timeout(kind: JobKind) -> None:
    job = job_object(kind.kind, {}, {"conditions": [condition("Created")]}, created="2026-03-01T11:58:59Z")
    with pytest.raises(PluginError) as info:
        phase_of(job, kind=kind)
    assert info.value.message == (
        f"kubeflow operator hasn't updated the {kind.task_type} custom resource since creation time "
        "2026-03-01 11:58:59 +0000 UTC"
    )


def test_within_the_timeout_a_job_without_start_time_is_queued() -> None:
    job = job_object("PyTorchJob", PT_SPEC, None, created="2026-03-01T11:59:00Z")
    assert phase_of(job).phase is Phase.QUEUED
    # The configured timeout decides.
    with pytest.raises(PluginError):
        phase_of(job, config=KfOperatorConfig(timeout=timedelta(seconds=30)))


def test_a_suspended_job_never_times_out() -> None:
    spec = {**PT_SPEC, "runPolicy": {"suspend": True}}
    status = {
        "conditions": [
            condition("Created", at="2026-03-01T10:00:00Z"),
            condition("Suspended", at="2026-03-01T10:00:01Z"),
        ]
    }
    job = job_object("PyTorchJob", spec, status, created="2026-03-01T10:00:00Z")
    assert (phase_of(job).phase, phase_of(job).reason) == (Phase.QUEUED, "Suspended")


# -- the current condition --------------------------------------------------------------------------------


def test_the_newest_true_condition_is_current_whatever_the_list_order() -> None:
    conditions = [
        condition("Succeeded", at="2026-03-01T11:59:50Z"),
        condition("Created", at="2026-03-01T11:59:00Z"),
        condition("Running", "False", at="2026-03-01T11:59:59Z"),
    ]
    found = current_condition(conditions)
    assert found is not None and found["type"] == "Succeeded"


def test_within_one_second_the_condition_later_in_the_list_is_current() -> None:
    # Deviation (Q5): Flyte keeps list order on equal timestamps, so the older Created would win.
    same = "2026-03-01T11:59:30Z"
    found = current_condition([condition("Created", at=same), condition("Running", at=same)])
    assert found is not None and found["type"] == "Running"


def test_an_empty_condition_list_is_no_condition_yet() -> None:
    # Deviation (Q5): Flyte errors every round on a present but empty list.
    assert current_condition([]) is None
    assert phase_of(job_object("PyTorchJob", PT_SPEC, {**STARTED, "conditions": []})).phase is Phase.QUEUED


def test_no_true_condition_is_an_error_listing_the_conditions() -> None:
    with pytest.raises(PluginError, match=r"^\[SystemError\] found no current condition\. Conditions: \[\{"):
        current_condition([condition("Running", "False")])


# -- log links and custom info ----------------------------------------------------------------------------

TIMED = LogConfig.model_validate(
    {
        "kubernetes-enabled": False,
        "templates": [
            {
                "displayName": "L",
                "templateUris": [
                    "/{{ .namespace }}/{{ .podName }}/{{ .containerName }}/{{ .podUnixStartTime }}-{{ .podUnixFinishTime }}"
                    "/{{ .podRFC3339StartTime }}"
                ],
            }
        ],
    }
)
T0 = 1772366340  # 2026-03-01T11:59:00Z, the job's creation
T1 = 1772366400  # NOW


def uris(info: Any) -> list[str]:
    return [log.uri for log in info.info.logs]


def test_pytorch_links_the_master_then_every_worker_with_the_jobs_times() -> None:
    info = phase_of(job_object("PyTorchJob", PT_SPEC, STARTED), log_config=TIMED)
    start = f"{T0}-{T1}/2026-03-01T11:59:00Z"
    assert uris(info) == [
        f"/{NAMESPACE}/exec1-n0-0-master-0/pytorch/{start}",
        f"/{NAMESPACE}/exec1-n0-0-worker-0/pytorch/{start}",
        f"/{NAMESPACE}/exec1-n0-0-worker-1/pytorch/{start}",
    ]
    assert [log.name for log in info.info.logs] == ["Lmaster", "L", "L"]


def test_the_default_kubernetes_links_are_named_as_flyte_names_them() -> None:
    info = phase_of(job_object("PyTorchJob", PT_SPEC, STARTED), log_config=LogConfig())
    assert [log.name for log in info.info.logs] == [
        "Kubernetes Logsmaster",
        "Kubernetes Logs",
        "Kubernetes Logs",
    ]
    assert info.info.logs[0].uri == (
        f"http://localhost:30082/#!/log/{NAMESPACE}/exec1-n0-0-master-0/pod?namespace={NAMESPACE}"
    )


def test_an_elastic_pytorch_job_links_workers_only() -> None:
    spec = {"elasticPolicy": {"minReplicas": 2}, "pytorchReplicaSpecs": {"Worker": {"replicas": 2}}}
    info = phase_of(job_object("PyTorchJob", spec, STARTED), log_config=LogConfig())
    assert [log.uri.split("/")[6] for log in info.info.logs] == ["exec1-n0-0-worker-0", "exec1-n0-0-worker-1"]


def test_tensorflow_links_the_pods_the_operator_really_creates() -> None:
    # Deviation (Q4): Flyte links -psReplica-N, -chiefReplica-0, -evaluatorReplica-0, without times.
    spec = {
        "tfReplicaSpecs": {
            "Chief": {"replicas": 1},
            "Worker": {"replicas": 2},
            "PS": {"replicas": 2},
            "Evaluator": {"replicas": 1},
        }
    }
    info = phase_of(job_object("TFJob", spec, STARTED), kind=TENSORFLOW, log_config=TIMED)
    start = f"{T0}-{T1}/2026-03-01T11:59:00Z"
    assert uris(info) == [
        f"/{NAMESPACE}/exec1-n0-0-{pod}/tensorflow/{start}"
        for pod in ("worker-0", "worker-1", "ps-0", "ps-1", "chief-0", "evaluator-0")
    ]


def test_mpi_links_the_launcher_then_the_workers() -> None:
    # Deviation (Q4): Flyte has no launcher link.
    spec = {"mpiReplicaSpecs": {"Launcher": {"replicas": 1}, "Worker": {"replicas": 2}}}
    info = phase_of(job_object("MPIJob", spec, STARTED), kind=MPI, log_config=LogConfig())
    assert [(log.uri.split("/")[6], log.name) for log in info.info.logs] == [
        ("exec1-n0-0-launcher", "Kubernetes Logslauncher"),
        ("exec1-n0-0-worker-0", "Kubernetes Logs"),
        ("exec1-n0-0-worker-1", "Kubernetes Logs"),
    ]


def test_the_jobs_status_is_the_custom_info_and_now_the_occurrence() -> None:
    status = {
        **STARTED,
        "conditions": [condition("Created")],
        "replicaStatuses": {"Master": {"active": 1}, "Worker": {"active": 2}},
    }
    info = phase_of(job_object("PyTorchJob", PT_SPEC, status))
    assert info.info.custom_info == status
    assert info.info.occurred_at == NOW
