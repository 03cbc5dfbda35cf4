"""Log links from ``plugins.logs`` (Flyte's logs/logging_utils.go and tasklog/template.go)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from flyteidl.core import identifier_pb2

from taskplug.core._context import TaskExecutionID
from taskplug.core._phase import TaskLog
from taskplug.k8s._config import LogConfig
from taskplug.k8s._tasklog import (
    LogInput,
    LogTemplate,
    log_templates,
    logs_for_container_in_pod,
    parse_k8s_time,
    task_logs,
)

NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
NOW_UNIX = 1714564800

TEMPLATE = (
    "https://{0}/{{{{ .namespace }}}}/{{{{ .podName }}}}/{{{{ .containerName }}}}/{{{{ .containerId }}}}"
)


def make_pod(**spec: Any) -> dict[str, Any]:
    """The pod of Flyte's logging_utils_test.go assertTestSucceeded."""
    return {
        "metadata": {
            "name": "my-pod",
            "namespace": "my-namespace",
            "uid": "pod-uid-1",
            "creationTimestamp": "2024-05-01T11:00:00Z",
        },
        "spec": {"containers": [{"name": "ContainerName"}], **spec},
        "status": {"phase": "Running", "containerStatuses": [{"containerID": "ContainerID"}]},
    }


def task_execution_id() -> TaskExecutionID:
    ident = identifier_pb2.TaskExecutionIdentifier(
        task_id=identifier_pb2.Identifier(
            resource_type=identifier_pb2.TASK,
            name="my-task-name",
            project="my-task-project",
            domain="my-task-domain",
            version="1",
        ),
        node_execution_id=identifier_pb2.NodeExecutionIdentifier(
            execution_id=identifier_pb2.WorkflowExecutionIdentifier(
                name="my-execution-name", project="my-execution-project", domain="my-execution-domain"
            )
        ),
        retry_attempt=1,
    )
    return TaskExecutionID(generated_name="generated-name", id=ident, unique_node_id="n0-0-n0")


def links(config: LogConfig, pod: dict[str, Any] | None = None, **kwargs: Any) -> list[tuple[str, str]]:
    logs = logs_for_container_in_pod(
        config,
        make_pod() if pod is None else pod,
        0,
        " my-Suffix",
        now=NOW,
        task_execution_id=task_execution_id(),
        **kwargs,
    )
    return [(log.uri, log.name) for log in logs]


def templates(*uris: str, name: str = "Tmpl", **extra: Any) -> LogConfig:
    return LogConfig.model_validate(
        {
            "kubernetes-enabled": False,
            "templates": [{"displayName": name, "templateUris": list(uris), **extra}],
        }
    )


class TestBuiltIns:
    def test_the_default_config_gives_the_localhost_kubernetes_dashboard_link(self) -> None:
        logs = logs_for_container_in_pod(LogConfig(), make_pod(), 0, " (User)", now=NOW)
        assert logs == (
            TaskLog(
                uri="http://localhost:30082/#!/log/my-namespace/my-pod/pod?namespace=my-namespace",
                name="Kubernetes Logs (User)",
                message_format="JSON",
            ),
        )

    def test_a_kubernetes_url_alone_uses_the_legacy_dashboard_form(self) -> None:
        config = LogConfig.model_validate({"kubernetes-url": "https://k8s.com"})
        assert links(config) == [
            (
                "https://k8s.com/#!/log/my-namespace/my-pod/pod?namespace=my-namespace",
                "Kubernetes Logs my-Suffix",
            )
        ]

    def test_an_empty_kubernetes_template_falls_back_to_the_url_as_in_flyte(self) -> None:
        config = LogConfig(kubernetes_url="k8s.com", kubernetes_template_uri="")
        assert links(config)[0][0] == "k8s.com/#!/log/my-namespace/my-pod/pod?namespace=my-namespace"

    def test_an_explicit_kubernetes_template_wins_over_the_url(self) -> None:
        config = LogConfig.model_validate(
            {"kubernetes-url": "https://ignored", "kubernetes-template-uri": TEMPLATE.format("k8s")}
        )
        assert links(config) == [
            ("https://k8s/my-namespace/my-pod/ContainerName/ContainerID", "Kubernetes Logs my-Suffix")
        ]

    def test_cloudwatch_without_a_template_builds_the_console_link_from_region_and_group(self) -> None:
        config = LogConfig(
            kubernetes_enabled=False,
            cloudwatch_enabled=True,
            cloudwatch_region="us-east-1",
            cloudwatch_log_group="/kubernetes/flyte-production",
        )
        assert links(config) == [
            (
                "https://console.aws.amazon.com/cloudwatch/home?region=us-east-1#logEventViewer:"
                "group=/kubernetes/flyte-production;stream=var.log.containers."
                "my-pod_my-namespace_ContainerName-ContainerID.log",
                "Cloudwatch Logs my-Suffix",
            )
        ]

    def test_stackdriver_without_a_template_builds_the_console_link_from_project_and_resource(self) -> None:
        config = LogConfig(
            kubernetes_enabled=False,
            stackdriver_enabled=True,
            gcp_project="myGCPProject",
            stackdriver_logresourcename="aws_ec2_instance",
        )
        assert links(config) == [
            (
                "https://console.cloud.google.com/logs/viewer?project=myGCPProject"
                "&angularJsUrl=%2Flogs%2Fviewer%3Fproject%3DmyGCPProject&resource=aws_ec2_instance"
                "&advancedFilter=resource.labels.pod_name%3Dmy-pod",
                "Stackdriver Logs my-Suffix",
            )
        ]

    def test_all_three_templates_come_in_kubernetes_cloudwatch_stackdriver_order(self) -> None:
        config = LogConfig(
            kubernetes_enabled=True,
            kubernetes_template_uri=TEMPLATE.format("k8s-my-log-server"),
            cloudwatch_enabled=True,
            cloudwatch_template_uri=TEMPLATE.format("cw-my-log-server"),
            stackdriver_enabled=True,
            stackdriver_template_uri=TEMPLATE.format("sd-my-log-server"),
        )
        assert links(config) == [
            (
                "https://k8s-my-log-server/my-namespace/my-pod/ContainerName/ContainerID",
                "Kubernetes Logs my-Suffix",
            ),
            (
                "https://cw-my-log-server/my-namespace/my-pod/ContainerName/ContainerID",
                "Cloudwatch Logs my-Suffix",
            ),
            (
                "https://sd-my-log-server/my-namespace/my-pod/ContainerName/ContainerID",
                "Stackdriver Logs my-Suffix",
            ),
        ]

    def test_built_in_links_are_json_and_neither_pending_nor_hidden(self) -> None:
        (log,) = logs_for_container_in_pod(LogConfig(), make_pod(), 0, "", now=NOW)
        assert (log.message_format, log.show_while_pending, log.hide_once_finished) == ("JSON", False, False)

    def test_nothing_enabled_gives_no_links(self) -> None:
        assert links(LogConfig(kubernetes_enabled=False)) == []


class TestTemplates:
    def test_custom_templates_follow_the_built_ins_with_task_execution_variables(self) -> None:
        config = LogConfig.model_validate(
            {
                "kubernetes-template-uri": "https://k/{{ .podName }}",
                "templates": [
                    {"displayName": "StackDriver", "templateUris": [TEMPLATE.format("my-log-server")]},
                    {
                        "displayName": "Internal",
                        "templateUris": [
                            "https://flyte.corp.net/console/projects/{{ .executionProject }}/domains/"
                            "{{ .executionDomain }}/executions/{{ .executionName }}/nodeId/{{ .nodeID }}/"
                            "taskId/{{ .taskID }}/attempt/{{ .taskRetryAttempt }}/view/logs"
                        ],
                    },
                ],
            }
        )
        assert links(config) == [
            ("https://k/my-pod", "Kubernetes Logs my-Suffix"),
            ("https://my-log-server/my-namespace/my-pod/ContainerName/ContainerID", "StackDriver my-Suffix"),
            (
                "https://flyte.corp.net/console/projects/my-execution-project/domains/my-execution-domain/"
                "executions/my-execution-name/nodeId/n0-0-n0/taskId/my-task-name/attempt/1/view/logs",
                "Internal my-Suffix",
            ),
        ]

    def test_task_identity_variables(self) -> None:
        config = templates("{{ .taskVersion }}/{{ .taskProject }}/{{ .taskDomain }}/{{ .generatedName }}")
        assert links(config)[0][0] == "1/my-task-project/my-task-domain/generated-name"

    def test_hostname_and_node_name_come_from_the_pod_spec(self) -> None:
        config = templates("{{ .hostname }}/{{ .nodeName }}/{{ .podUID }}")
        pod = make_pod(hostname="my-hostname", nodeName="ip-1-2-3-4")
        assert links(config, pod)[0][0] == "my-hostname/ip-1-2-3-4/pod-uid-1"

    def test_times_are_the_pod_creation_and_now_at_second_resolution(self) -> None:
        config = templates(
            "{{ .podRFC3339StartTime }} {{ .podRFC3339FinishTime }} "
            "{{ .podUnixStartTime }} {{ .podUnixFinishTime }}"
        )
        uri = links(config)[0][0]
        assert uri == f"2024-05-01T11:00:00Z 2024-05-01T12:00:00Z {NOW_UNIX - 3600} {NOW_UNIX}"

    def test_a_pod_without_creation_time_renders_gos_zero_time(self) -> None:
        pod = make_pod()
        del pod["metadata"]["creationTimestamp"]
        uri = links(templates("{{ .podRFC3339StartTime }}|{{ .podUnixStartTime }}"), pod)[0][0]
        assert uri == "0001-01-01T00:00:00Z|-62135596800"

    def test_the_runtime_scheme_is_stripped_from_the_container_id(self) -> None:
        pod = make_pod()
        pod["status"]["containerStatuses"][0]["containerID"] = "containerd://abc123"
        assert links(templates("{{ .containerId }}"), pod)[0][0] == "abc123"

    @pytest.mark.parametrize(
        "uri", ["{{.podName}}", "{{   .podName   }}", "{{ .PODNAME }}", "{{ $podName }}", "{{ .podname}}"]
    )
    def test_variables_are_case_insensitive_with_optional_spaces(self, uri: str) -> None:
        assert links(templates(uri))[0][0] == "my-pod"

    def test_a_variable_with_an_empty_value_is_left_as_written(self) -> None:
        assert (
            links(templates("x/{{ .hostname }}/{{ .unknownVar }}"))[0][0]
            == "x/{{ .hostname }}/{{ .unknownVar }}"
        )

    def test_values_are_inserted_literally(self) -> None:
        pod = make_pod()
        pod["metadata"]["name"] = r"a\1b\g<0>"
        assert links(templates("{{ .podName }}"), pod)[0][0] == r"a\1b\g<0>"

    def test_the_suffix_is_templated_into_the_name_too(self) -> None:
        logs = logs_for_container_in_pod(templates("u"), make_pod(), 0, " ({{ .podName }})", now=NOW)
        assert logs[0].name == "Tmpl (my-pod)"

    def test_every_uri_of_a_template_becomes_a_link(self) -> None:
        assert [u for u, _ in links(templates("a/{{ .podName }}", "b/{{ .namespace }}"))] == [
            "a/my-pod",
            "b/my-namespace",
        ]

    def test_show_while_pending_hide_once_finished_and_message_format_are_carried(self) -> None:
        config = templates("u", showWhilePending=True, hideOnceFinished=True, messageFormat="CSV")
        (log,) = logs_for_container_in_pod(config, make_pod(), 0, "", now=NOW)
        assert (log.show_while_pending, log.hide_once_finished, log.message_format) == (True, True, "CSV")

    def test_a_numeric_message_format_is_named(self) -> None:
        (log,) = logs_for_container_in_pod(templates("u", messageFormat=1), make_pod(), 0, "", now=NOW)
        assert log.message_format == "CSV"

    def test_extra_variables_are_substituted(self) -> None:
        uri = links(templates("{{ .rayJobID }}/{{ .podName }}"), extra_vars={"rayJobID": "job-1"})[0][0]
        assert uri == "job-1/my-pod"


class TestDynamicLinks:
    CONFIG = LogConfig.model_validate(
        {
            "kubernetes-enabled": False,
            "dynamic-log-links": [
                {
                    "vscode": {
                        "displayName": "vscode link",
                        "templateUris": ["https://abc.com:{{ .taskConfig.port }}/{{ .taskConfig.route }}"],
                        "showWhilePending": True,
                    }
                }
            ],
        }
    )

    def test_a_dynamic_link_renders_when_the_task_asks_for_it(self) -> None:
        logs = logs_for_container_in_pod(
            self.CONFIG,
            make_pod(),
            0,
            " my-Suffix",
            now=NOW,
            task_template_config={"link_type": "vscode", "port": "65535", "route": "a-route"},
        )
        assert logs == (
            TaskLog(
                uri="https://abc.com:65535/a-route",
                name="vscode link my-Suffix",
                message_format="JSON",
                show_while_pending=True,
            ),
        )

    @pytest.mark.parametrize(
        "task_config", [None, {}, {"port": "1"}, {"link_type": "jupyter", "port": "1"}], ids=str
    )
    def test_no_dynamic_link_without_a_matching_link_type(self, task_config: dict[str, str] | None) -> None:
        assert links(self.CONFIG, task_template_config=task_config) == []

    def test_a_missing_task_config_value_is_left_as_written(self) -> None:
        uri = links(self.CONFIG, task_template_config={"link_type": "vscode", "port": "1"})[0][0]
        assert uri == "https://abc.com:1/{{ .taskConfig.route }}"

    def test_a_link_type_list_is_comma_separated(self) -> None:
        got = links(
            self.CONFIG, task_template_config={"link_type": "jupyter,vscode", "port": "1", "route": "r"}
        )
        assert got == [("https://abc.com:1/r", "vscode link my-Suffix")]


class TestContainerSelection:
    def test_no_pod_gives_no_links(self) -> None:
        assert logs_for_container_in_pod(LogConfig(), None, 0, " (User)", now=NOW) == ()

    @pytest.mark.parametrize("index", [1, 5, -1])
    def test_an_index_beyond_the_containers_gives_no_links(self, index: int) -> None:
        assert logs_for_container_in_pod(LogConfig(), make_pod(), index, " (User)", now=NOW) == ()

    def test_a_pod_without_container_statuses_still_gets_links_without_a_container_id(self) -> None:
        pod = make_pod()
        pod["status"] = {"phase": "Pending"}
        assert links(templates("{{ .containerName }}/{{ .containerId }}"), pod)[0][0] == (
            "ContainerName/{{ .containerId }}"
        )

    def test_the_indexed_container_and_its_status_are_used(self) -> None:
        pod = make_pod()
        pod["spec"]["containers"].append({"name": "second"})
        pod["status"]["containerStatuses"].append({"containerID": "docker://id2"})
        logs = logs_for_container_in_pod(
            templates("{{ .containerName }}:{{ .containerId }}"), pod, 1, "", now=NOW
        )
        assert logs[0].uri == "second:id2"


class TestLowLevel:
    def test_log_templates_lists_sources_in_flytes_order(self) -> None:
        config = LogConfig.model_validate(
            {
                "cloudwatch-enabled": True,
                "stackdriver-enabled": True,
                "templates": [{"displayName": "T", "templateUris": ["u"]}],
                "dynamic-log-links": [{"vscode": {"displayName": "V", "templateUris": ["d"]}}],
            }
        )
        names = [(t.display_name, t.name) for t in log_templates(config)]
        assert names == [
            ("Kubernetes Logs", ""),
            ("Cloudwatch Logs", ""),
            ("Stackdriver Logs", ""),
            ("T", ""),
            ("V", "vscode"),
        ]

    def test_task_logs_renders_an_input_without_a_pod_as_spark_does(self) -> None:
        inp = LogInput(pod_name="driver", namespace="ns", log_name="(Driver Logs)")
        source = [
            LogTemplate("Spark", ("https://s/{{ .namespace }}/{{ .podName }}",), show_while_pending=True)
        ]
        assert task_logs(source, inp) == (
            TaskLog(
                uri="https://s/ns/driver",
                name="Spark(Driver Logs)",
                message_format="JSON",
                show_while_pending=True,
            ),
        )

    def test_log_templates_of_one_config_are_read_once_and_each_config_has_its_own(self) -> None:
        first = templates("https://a/{{ .podName }}")
        second = templates("https://b/{{ .podName }}")
        assert log_templates(first) is log_templates(first)
        assert [t.template_uris for t in log_templates(second)] == [("https://b/{{ .podName }}",)]
        assert [t.template_uris for t in log_templates(first)] == [("https://a/{{ .podName }}",)]

    def test_a_value_that_leaves_no_variable_ends_the_substitution_and_one_that_adds_one_is_expanded(
        self,
    ) -> None:
        inp = LogInput(pod_name="p-{{ .namespace }}", namespace="ns", log_name="")
        source = [LogTemplate("T", ("{{ .podName }}", "plain", "{{ .namespace }}/{{ .podName }}"))]
        assert [log.uri for log in task_logs(source, inp)] == ["p-ns", "plain", "ns/p-ns"]


class TestTimes:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("2024-05-01T11:00:00Z", datetime(2024, 5, 1, 11, 0, 0, tzinfo=UTC)),
            ("2024-05-01T11:00:00.123456789Z", datetime(2024, 5, 1, 11, 0, 0, 123456, tzinfo=UTC)),
            ("2024-05-01T11:00:00.5+02:00", datetime(2024, 5, 1, 9, 0, 0, 500000, tzinfo=UTC)),
        ],
    )
    def test_kubernetes_times_parse_with_or_without_a_fraction(self, text: str, expected: datetime) -> None:
        assert parse_k8s_time(text) == expected
