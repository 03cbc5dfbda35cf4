"""The RayJob's phase and log links, for statuses as KubeRay 1.5.1 writes them."""

from __future__ import annotations

from typing import Any

import pytest
from ray_helpers import NAMESPACE, NOW, job_object, plugin_context, ray_config

from taskplug.core import ErrorKind, Phase, PluginError
from taskplug.k8s import PluginState
from taskplug.plugins.ray import RayConfig, ray_task_phase

# What KubeRay writes, step by step (rayjob_controller.go).
INITIALIZING = {
    "jobId": "exec1-n0-0-x2b4d",
    "rayClusterName": "exec1-n0-0-k9fzq",
    "jobDeploymentStatus": "Initializing",
    "startTime": "2026-03-01T11:59:01Z",
}
RUNNING = {
    **INITIALIZING,
    "jobDeploymentStatus": "Running",
    "dashboardURL": "exec1-n0-0-k9fzq-head-svc.testproject-development.svc.cluster.local:8265",
    "jobStatus": "RUNNING",
    "message": "Job is currently running.",
}
COMPLETE = {
    **RUNNING,
    "jobStatus": "SUCCEEDED",
    "jobDeploymentStatus": "Complete",
    "message": "Job finished successfully.",
    "endTime": "2026-03-01T11:59:50Z",
    "succeeded": 1,
    "failed": 0,
}
APP_FAILED = {
    **RUNNING,
    "jobStatus": "FAILED",
    "jobDeploymentStatus": "Failed",
    "reason": "AppFailed",
    "message": "Job entrypoint command failed with exit code 1",
    "endTime": "2026-03-01T11:59:50Z",
    "failed": 1,
}
VALIDATION_FAILED = {
    "jobDeploymentStatus": "ValidationFailed",
    "reason": "ValidationFailed",
    "message": "The RayJob spec is invalid: a RayJob with shutdownAfterJobFinishes set to false cannot have "
    "TTLSecondsAfterFinished",
}


@pytest.mark.parametrize(
    ("status", "phase", "reason"),
    [
        (None, Phase.QUEUED, "Scheduling"),
        ({"jobDeploymentStatus": ""}, Phase.QUEUED, "Scheduling"),
        (INITIALIZING, Phase.INITIALIZING, "cluster is creating"),
        ({**RUNNING, "jobStatus": "PENDING"}, Phase.RUNNING, ""),
        (RUNNING, Phase.RUNNING, ""),
        (COMPLETE, Phase.SUCCESS, ""),
        # A Ray job that ended STOPPED is a success too, as in Flyte.
        ({**COMPLETE, "jobStatus": "STOPPED"}, Phase.SUCCESS, ""),
        ({"jobDeploymentStatus": "Suspended"}, Phase.QUEUED, "Suspended"),
        ({"jobDeploymentStatus": "Suspending"}, Phase.QUEUED, "Suspending"),
        # Deviations (quirk Q11): KubeRay's other states are phases, not an error every round.
        ({**INITIALIZING, "jobDeploymentStatus": "Retrying"}, Phase.QUEUED, "Retrying"),
        ({**INITIALIZING, "jobDeploymentStatus": "Waiting"}, Phase.INITIALIZING, "Waiting"),
    ],
)
def test_job_deployment_status_maps_to_a_phase(
    status: dict[str, Any] | None, phase: Phase, reason: str
) -> None:
    info = ray_task_phase(plugin_context(), job_object(status), RayConfig())
    assert (info.phase, info.version, info.reason, info.err) == (phase, 0, reason, None)
    assert info.info is not None
    assert info.info.occurred_at == NOW


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (
            APP_FAILED,
            "Failed to run Ray job exec1-n0-0 with error: [AppFailed] Job entrypoint command failed with exit code 1",
        ),
        (
            {
                **INITIALIZING,
                "jobDeploymentStatus": "Failed",
                "reason": "SubmissionFailed",
                "message": "Job submission has failed. Reason: BackoffLimitExceeded. Message: Job has reached the specified backoff limit",
            },
            "Failed to run Ray job exec1-n0-0 with error: [SubmissionFailed] Job submission has failed. Reason: "
            "BackoffLimitExceeded. Message: Job has reached the specified backoff limit",
        ),
        ({"jobDeploymentStatus": "Failed"}, "Failed to run Ray job exec1-n0-0 with error: [] "),
    ],
)
def test_a_failed_ray_job_is_a_system_retryable_failure_with_cleanup(
    status: dict[str, Any], message: str
) -> None:
    info = ray_task_phase(plugin_context(), job_object(status), RayConfig())
    assert info.phase is Phase.RETRYABLE_FAILURE
    assert info.err is not None
    assert (info.err.code, info.err.message, info.err.kind) == (
        "TaskFailedWithError",
        message,
        ErrorKind.SYSTEM,
    )
    assert info.cleanup_on_failure is True


def test_a_ray_job_kuberay_rejected_fails_permanently_with_kuberays_reason() -> None:
    # Deviation (quirk Q11): Flyte errors on this every round; KubeRay never moves it again.
    info = ray_task_phase(plugin_context(), job_object(VALIDATION_FAILED), RayConfig())
    assert info.phase is Phase.PERMANENT_FAILURE
    assert info.err is not None
    assert info.err.code == "TaskFailedWithError"
    assert info.err.message == (
        "Failed to run Ray job exec1-n0-0 with error: [ValidationFailed] The RayJob spec is invalid: a RayJob with "
        "shutdownAfterJobFinishes set to false cannot have TTLSecondsAfterFinished"
    )
    assert info.cleanup_on_failure is True


def test_an_unknown_deployment_status_cannot_be_decided() -> None:
    with pytest.raises(PluginError, match=r"unknown job deployment status: Exploded"):
        ray_task_phase(plugin_context(), job_object({"jobDeploymentStatus": "Exploded"}), RayConfig())


def test_the_first_scheduling_report_after_launch_is_queued_version_one() -> None:
    state = PluginState(Phase.QUEUED, 0, "task submitted to K8s")
    info = ray_task_phase(plugin_context(state=state), job_object(None), RayConfig())
    assert (info.phase, info.version, info.reason) == (Phase.QUEUED, 1, "Scheduling")
    again = ray_task_phase(
        plugin_context(state=PluginState(Phase.QUEUED, 1, "Scheduling")), job_object(None), RayConfig()
    )
    assert again.version == 0


# -- log links -------------------------------------------------------------------------------------


def test_ray_jobs_have_no_log_links_unless_configured() -> None:
    # Quirk Q10: plugins.ray.logs is independent of plugins.logs and off by default.
    info = ray_task_phase(plugin_context(), job_object(RUNNING), RayConfig())
    assert info.info is not None
    assert info.info.logs == ()


TEMPLATE = (
    "https://logs/{{ .namespace }}/{{ .rayClusterName }}/{{ .rayJobID }}/{{ .podName }}"
    "?from={{ .podUnixStartTime }}&to={{ .podUnixFinishTime }}&start={{ .podRFC3339StartTime }}"
)


@pytest.mark.parametrize(
    ("status", "uri"),
    [
        (
            RUNNING,
            f"https://logs/{NAMESPACE}/exec1-n0-0-k9fzq/exec1-n0-0-x2b4d/{{{{ .podName }}}}"
            "?from=1772366340&to=1772366400&start=2026-03-01T11:59:00Z",
        ),
        # Before KubeRay names the job and the cluster, their placeholders stay.
        (
            None,
            f"https://logs/{NAMESPACE}/{{{{ .rayClusterName }}}}/{{{{ .rayJobID }}}}/{{{{ .podName }}}}"
            "?from=1772366340&to=1772366400&start=2026-03-01T11:59:00Z",
        ),
    ],
)
def test_configured_links_render_the_ray_job_and_cluster_names(
    status: dict[str, Any] | None, uri: str
) -> None:
    config = ray_config(logs={"templates": [{"displayName": "Ray Logs", "templateUris": [TEMPLATE]}]})
    info = ray_task_phase(plugin_context(), job_object(status), config)
    assert info.info is not None
    assert [(log.name, log.uri) for log in info.info.logs] == [("Ray Logs", uri)]


DASHBOARD = {
    "displayName": "Ray Dashboard",
    "templateUris": ["https://dash/{{ .rayClusterName }}/#/jobs/{{ .rayJobID }}"],
}


@pytest.mark.parametrize(
    ("status", "shown"),
    [
        (RUNNING, True),
        ({**RUNNING, "jobStatus": "PENDING"}, False),
        ({**RUNNING, "dashboardURL": ""}, False),
        (COMPLETE, False),
        (INITIALIZING, False),
    ],
)
def test_the_dashboard_link_is_shown_only_while_the_ray_job_runs(status: dict[str, Any], shown: bool) -> None:
    config = ray_config(
        dashboardURLTemplate=DASHBOARD,
        logs={"kubernetes-enabled": True, "kubernetes-template-uri": "https://k8s/{{ .namespace }}"},
    )
    info = ray_task_phase(plugin_context(), job_object(status), config)
    assert info.info is not None
    names = [log.name for log in info.info.logs]
    assert names == (["Kubernetes Logs", "Ray Dashboard"] if shown else ["Kubernetes Logs"])
    if shown:
        assert info.info.logs[1].uri == "https://dash/exec1-n0-0-k9fzq/#/jobs/exec1-n0-0-x2b4d"
