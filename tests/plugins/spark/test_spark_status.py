"""A SparkApplication's phase, log links and custom info (GetTaskPhase and getEventInfoForSpark of Flyte's
plugins/k8s/spark/spark.go)."""

from __future__ import annotations

from typing import Any

import pytest
from spark_helpers import NOW, app_object, plugin_context, spark_config, spark_job, spark_template

from taskplug.core import ErrorKind, Phase
from taskplug.k8s import PluginState
from taskplug.plugins.spark import SparkConfig, spark_task_info, spark_task_phase

START = 1772366340  # 2026-03-01T11:59:00Z, the app's creationTimestamp
FINISH = 1772366700  # 2026-03-01T12:05:00Z


def phase_of(app: dict[str, Any], config: SparkConfig | None = None, **kw: Any) -> Any:
    return spark_task_phase(plugin_context(**kw), app, config or SparkConfig())


@pytest.mark.parametrize(
    ("state", "phase", "reason"),
    [
        pytest.param(None, Phase.QUEUED, "job queued", id="no-status-yet"),
        pytest.param("", Phase.QUEUED, "job queued", id="new"),
        pytest.param("SUBMITTED", Phase.INITIALIZING, "job submitted", id="submitted"),
        pytest.param("COMPLETED", Phase.SUCCESS, "", id="completed"),
        pytest.param("RUNNING", Phase.RUNNING, "", id="running"),
        pytest.param("PENDING_RERUN", Phase.RUNNING, "", id="pending-rerun"),
        pytest.param("INVALIDATING", Phase.RUNNING, "", id="invalidating"),
        pytest.param("SUCCEEDING", Phase.RUNNING, "", id="succeeding"),
        pytest.param("FAILING", Phase.RUNNING, "", id="failing"),
        pytest.param("UNKNOWN", Phase.RUNNING, "", id="unknown"),
    ],
)
def test_non_failure_states(state: str | None, phase: Phase, reason: str) -> None:
    info = phase_of(app_object(state))
    assert info.phase is phase
    assert info.version == 0
    assert info.reason == reason
    assert info.err is None
    assert info.info is not None
    assert info.info.occurred_at == NOW


@pytest.mark.parametrize(
    ("state", "message"),
    [
        pytest.param(
            "SUBMISSION_FAILED",
            "Spark Job  Submission Failed with Error: quota exceeded",
            id="submission-failed-with-two-spaces",
        ),
        pytest.param("FAILED", "Spark Job Failed with Error: quota exceeded", id="failed"),
    ],
)
def test_failure_states_are_retryable_downstream_system_errors(state: str, message: str) -> None:
    info = phase_of(app_object(state, error_message="quota exceeded"))
    assert info.phase is Phase.RETRYABLE_FAILURE
    assert info.err is not None
    assert (info.err.code, info.err.message, info.err.kind) == (
        "DownstreamSystemError",
        message,
        ErrorKind.USER,
    )
    assert info.cleanup_on_failure is False


def test_a_failure_without_a_message_keeps_the_prefix() -> None:
    info = phase_of(app_object("FAILED"))
    assert info.err is not None
    assert info.err.message == "Spark Job Failed with Error: "


def test_the_version_is_bumped_when_the_same_phase_comes_back_with_a_new_reason() -> None:
    state = PluginState(Phase.QUEUED, 0, "something else")
    assert phase_of(app_object(""), state=state).version == 1
    same = PluginState(Phase.QUEUED, 0, "job queued")
    assert phase_of(app_object(""), state=same).version == 0
    running = PluginState(Phase.RUNNING, 3, "")
    assert phase_of(app_object("RUNNING"), state=running).version == 0


# -- log links and custom info (getEventInfoForSpark) -----------------------------------------------------


def template_config(name: str) -> dict[str, Any]:
    return {"kubernetes-enabled": True, "kubernetes-template-uri": f"https://{name}/{{{{ .podName }}}}"}


ALL_LOGS = spark_config(
    logs={
        "mixed": template_config("mixed"),
        "user": template_config("user"),
        "system": template_config("system"),
        "all-user": template_config("all-user"),
    }
)


def links(app: dict[str, Any], config: SparkConfig, **kw: Any) -> list[tuple[str, str, bool]]:
    info = spark_task_info(plugin_context(**kw), app, config)
    return [(log.name, log.uri, log.show_while_pending) for log in info.logs]


def test_log_links_in_order_driver_user_system_all_user() -> None:
    # The name is the display name and the log name run together, as Flyte renders it.
    assert links(app_object("RUNNING", driver_pod="app-driver", name="app"), ALL_LOGS) == [
        ("Kubernetes Logs(Driver Logs)", "https://mixed/app-driver", False),
        ("Kubernetes Logs(User Logs)", "https://user/app-driver", False),
        ("Kubernetes Logs(System Logs)", "https://system/app", False),
        ("Kubernetes Logs(Spark-Submit/All User Logs)", "https://all-user/app", True),
    ]


def test_without_a_driver_pod_there_is_no_mixed_link_and_user_links_lack_a_pod_name() -> None:
    assert links(app_object("SUBMITTED", name="app"), ALL_LOGS) == [
        ("Kubernetes Logs(User Logs)", "https://user/{{ .podName }}", False),
        ("Kubernetes Logs(System Logs)", "https://system/app", False),
        ("Kubernetes Logs(Spark-Submit/All User Logs)", "https://all-user/app", True),
    ]


def test_default_config_gives_only_the_driver_kubernetes_link() -> None:
    app = app_object("RUNNING", driver_pod="app-driver", namespace="ns")
    assert links(app, SparkConfig()) == [
        (
            "Kubernetes Logs(Driver Logs)",
            "http://localhost:30082/#!/log/ns/app-driver/pod?namespace=ns",
            False,
        )
    ]
    assert links(app_object("SUBMITTED"), SparkConfig()) == []


def test_log_links_carry_the_apps_start_time_and_a_finish_time_only_once_it_ended() -> None:
    uri = "https://logs/{{ .podName }}?from={{ .podUnixStartTime }}&to={{ .podUnixFinishTime }}"
    config = spark_config(logs={"mixed": {"kubernetes-enabled": True, "kubernetes-template-uri": uri}})
    running = app_object("RUNNING", driver_pod="d", termination_time="2026-03-01T12:05:00Z")
    assert links(running, config)[0][1] == f"https://logs/d?from={START}&to=0"
    completed = app_object("COMPLETED", driver_pod="d", termination_time="2026-03-01T12:05:00Z")
    assert links(completed, config)[0][1] == f"https://logs/d?from={START}&to={FINISH}"
    failed = app_object("FAILED", driver_pod="d", termination_time="2026-03-01T12:05:00Z")
    assert links(failed, config)[0][1] == f"https://logs/d?from={START}&to={FINISH}"
    assert links(app_object("COMPLETED", driver_pod="d"), config)[0][1] == f"https://logs/d?from={START}&to=0"


def test_log_links_know_the_task_execution() -> None:
    uri = "https://logs/{{ .executionName }}/{{ .nodeID }}/{{ .taskRetryAttempt }}/{{ .namespace }}"
    config = spark_config(logs={"system": {"kubernetes-enabled": True, "kubernetes-template-uri": uri}})
    assert links(app_object("RUNNING", namespace="p-d"), config)[0][1] == "https://logs/exec1/n0/0/p-d"


def test_the_driver_link_includes_the_task_templates_dynamic_links() -> None:
    config = spark_config(
        logs={
            "mixed": {
                "kubernetes-enabled": False,
                "dynamic-log-links": [
                    {
                        "vscode": {
                            "displayName": "VS Code ",
                            "templateUris": ["https://ide/{{ .podName }}/{{ .taskConfig.port }}"],
                        }
                    }
                ],
            },
            "user": {
                "dynamic-log-links": [{"vscode": {"displayName": "no", "templateUris": ["https://no"]}}]
            },
        }
    )
    template = spark_template(spark_job())
    template["config"] = {"link_type": "vscode", "port": "8080"}
    assert links(app_object("RUNNING", driver_pod="d"), config, template=template) == [
        ("VS Code (Driver Logs)", "https://ide/d/8080", False)
    ]


@pytest.mark.parametrize("state", ["COMPLETED", "FAILED"])
def test_a_finished_app_links_the_history_server(state: str) -> None:
    config = spark_config(spark_history_server_url="https://history.example")
    info = spark_task_info(plugin_context(), app_object(state, app_id="spark-123"), config)
    assert info.custom_info == {"sparkHistoryUI": "https://history.example/history/spark-123"}
    assert (info.logs[-1].name, info.logs[-1].uri, info.logs[-1].message_format) == (
        "Spark History UI",
        "https://history.example/history/spark-123",
        "JSON",
    )


def test_no_history_link_without_a_server_url_or_an_app_id() -> None:
    with_url = spark_config(spark_history_server_url="https://history.example")
    assert spark_task_info(plugin_context(), app_object("COMPLETED"), with_url).custom_info == {}
    info = spark_task_info(plugin_context(), app_object("COMPLETED", app_id="spark-1"), SparkConfig())
    assert info.custom_info == {}
    assert info.logs == ()
    running = spark_task_info(plugin_context(), app_object("RUNNING", app_id="spark-1"), with_url)
    assert running.custom_info == {}


@pytest.mark.parametrize(
    ("address", "uri"),
    [
        ("app-ui.example.com", "https://app-ui.example.com"),
        ("http://app-ui.example.com", "http://app-ui.example.com"),
        ("https://app-ui.example.com", "https://app-ui.example.com"),
    ],
)
def test_a_running_app_links_the_driver_ui(address: str, uri: str) -> None:
    info = spark_task_info(plugin_context(), app_object("RUNNING", web_ui=address), SparkConfig())
    assert info.custom_info == {"sparkDriverUI": uri}
    assert [(log.name, log.uri, log.message_format) for log in info.logs] == [
        ("Spark Driver UI", uri, "JSON")
    ]


def test_the_driver_ui_is_only_linked_while_running() -> None:
    info = spark_task_info(plugin_context(), app_object("SUBMITTED", web_ui="ui.example"), SparkConfig())
    assert info.custom_info == {}


def test_history_and_driver_ui_links_come_after_the_configured_logs() -> None:
    config = spark_config(spark_history_server_url="https://h", logs=ALL_LOGS.logs.model_dump(by_alias=True))
    info = spark_task_phase(
        plugin_context(), app_object("COMPLETED", driver_pod="d", app_id="spark-9", name="app"), config
    ).info
    assert info is not None
    assert [log.name for log in info.logs] == [
        "Kubernetes Logs(Driver Logs)",
        "Kubernetes Logs(User Logs)",
        "Kubernetes Logs(System Logs)",
        "Kubernetes Logs(Spark-Submit/All User Logs)",
        "Spark History UI",
    ]
