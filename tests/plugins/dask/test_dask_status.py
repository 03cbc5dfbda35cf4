"""The DaskJob's phase and log links, for statuses as the dask operator writes them."""

from __future__ import annotations

from typing import Any

import pytest
from dask_helpers import NAMESPACE, NOW, config, job_object, plugin_context

from taskplug.core import ErrorKind, Phase
from taskplug.k8s import PluginState
from taskplug.plugins.dask import DaskConfig, dask_task_phase

RUNNER_LINK = f"http://localhost:30082/#!/log/{NAMESPACE}/exec1-n0-0-runner/pod?namespace={NAMESPACE}"

# What the operator writes, step by step (controller.py daskjob_create, daskjob_create_components,
# handle_runner_status_change_*).
CLUSTER_CREATED = {
    "clusterName": "exec1-n0-0",
    "jobStatus": "ClusterCreated",
    "jobRunnerPodName": "exec1-n0-0-runner",
}
RUNNING = {**CLUSTER_CREATED, "jobStatus": "Running", "startTime": "2026-03-01T12:00:05Z"}
SUCCESSFUL = {**RUNNING, "jobStatus": "Successful", "endTime": "2026-03-01T12:01:00Z"}
FAILED = {**RUNNING, "jobStatus": "Failed", "endTime": "2026-03-01T12:01:00Z"}


@pytest.mark.parametrize(
    ("status", "phase", "reason"),
    [
        (None, Phase.INITIALIZING, "unknown"),
        ({"jobStatus": "JobCreated"}, Phase.INITIALIZING, "job created"),
        (CLUSTER_CREATED, Phase.INITIALIZING, "cluster created"),
        (RUNNING, Phase.RUNNING, ""),
        ({**RUNNING, "jobStatus": "SomethingNew"}, Phase.RUNNING, ""),
        (SUCCESSFUL, Phase.SUCCESS, ""),
    ],
)
def test_job_status_maps_to_a_phase(status: dict[str, Any] | None, phase: Phase, reason: str) -> None:
    info = dask_task_phase(plugin_context(), job_object(status), DaskConfig())
    assert (info.phase, info.version, info.reason, info.err) == (phase, 0, reason, None)
    assert info.info is not None
    assert info.info.occurred_at == NOW


def test_a_failed_job_is_a_retryable_user_failure() -> None:
    info = dask_task_phase(plugin_context(), job_object(FAILED), DaskConfig())
    assert info.phase is Phase.RETRYABLE_FAILURE
    assert info.err is not None
    assert (info.err.code, info.err.message, info.err.kind) == (
        "DownstreamSystemError",
        "Dask Job failed",
        ErrorKind.USER,
    )
    assert info.cleanup_on_failure is False


def test_the_same_phase_with_a_new_reason_gets_the_next_version() -> None:
    # First report after launch: the plugin manager stored Queued... then Initializing "unknown" is new.
    state = PluginState(Phase.INITIALIZING, 0, "job created")
    info = dask_task_phase(plugin_context(state=state), job_object(CLUSTER_CREATED), DaskConfig())
    assert (info.phase, info.version, info.reason) == (Phase.INITIALIZING, 1, "cluster created")
    same = dask_task_phase(
        plugin_context(state=PluginState(Phase.INITIALIZING, 1, "cluster created")),
        job_object(CLUSTER_CREATED),
        DaskConfig(),
    )
    assert same.version == 0


def test_the_runner_log_link_names_the_runner_pod_once_the_operator_reports_it() -> None:
    info = dask_task_phase(plugin_context(), job_object(RUNNING), DaskConfig())
    assert info.info is not None
    [log] = info.info.logs
    assert (log.uri, log.name, log.message_format) == (
        RUNNER_LINK,
        "Kubernetes Logs(Dask Runner Logs)",
        "JSON",
    )


def test_before_cluster_created_the_pod_name_placeholder_stays_in_the_link() -> None:
    # Quirk Q10, as Flyte: an empty variable is not substituted.
    info = dask_task_phase(plugin_context(), job_object({"jobStatus": "JobCreated"}), DaskConfig())
    assert info.info is not None
    assert (
        info.info.logs[0].uri
        == f"http://localhost:30082/#!/log/{NAMESPACE}/{{{{ .podName }}}}/pod?namespace={NAMESPACE}"
    )


def test_the_dask_log_config_is_independent_of_the_global_one() -> None:
    cfg = config(
        logs={
            "kubernetes-enabled": False,
            "templates": [
                {
                    "displayName": "Runner",
                    "templateUris": ["https://logs/{{ .podName }}/{{ .taskRetryAttempt }}"],
                }
            ],
        }
    )
    info = dask_task_phase(plugin_context(), job_object(RUNNING), cfg)
    assert info.info is not None
    assert [(log.name, log.uri) for log in info.info.logs] == [
        ("Runner(Dask Runner Logs)", "https://logs/exec1-n0-0-runner/0")
    ]


def test_no_logs_configured_gives_no_links() -> None:
    info = dask_task_phase(plugin_context(), job_object(RUNNING), config(logs={"kubernetes-enabled": False}))
    assert info.info is not None
    assert info.info.logs == ()
