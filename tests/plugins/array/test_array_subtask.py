"""A sub-task's pod and phase (Flyte's array/k8s/subtask.go and subtask_exec_context.go): built by the real
pod plugin, then given the array's changes."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from array_helpers import array_template, task_context

from taskplug.core import ErrorKind, Phase, PluginError, TaskExecutionContext
from taskplug.executor import Platform
from taskplug.k8s import KubeApiError, PlatformPodConfig
from taskplug.plugins.array import (
    ARRAY_FINALIZER,
    K8S_ARRAY_SECTION,
    POD_TEMPLATE_FAILED,
    K8sArrayConfig,
    SubTask,
    build_subtask_pod,
    classify_create_error,
    is_interruptible,
    log_suffix,
    log_vars,
    new_subtask,
    subtask_name,
    subtask_namespace,
    subtask_phase,
    subtask_template,
)
from taskplug.plugins.pod import PodPlugin

NOW = datetime(2026, 1, 1, 0, 0, 30, tzinfo=UTC)


def configs(
    array: dict[str, Any] | None = None, k8s: dict[str, Any] | None = None
) -> tuple[K8sArrayConfig, PlatformPodConfig]:
    platform = Platform.load(document={"plugins": {"k8s-array": array or {}, "k8s": k8s or {}}})
    return platform.config.get(K8S_ARRAY_SECTION), PlatformPodConfig.from_config(platform.config, environ={})


def subtask(
    tctx: TaskExecutionContext,
    config: K8sArrayConfig,
    index: int = 1,
    retry: int = 0,
    system_failures: int = 0,
) -> SubTask:
    template = tctx.task_reader.read()
    return new_subtask(
        tctx,
        template,
        subtask_template(template),
        execution_index=index,
        original_index=index,
        retry_attempt=retry,
        system_failures=system_failures,
        config=config,
    )


def build(
    tmp_path: Path,
    *,
    array: dict[str, Any] | None = None,
    k8s: dict[str, Any] | None = None,
    template: dict[str, Any] | None = None,
    index: int = 1,
    retry: int = 0,
    system_failures: int = 0,
    **execution: Any,
) -> tuple[dict[str, Any], SubTask, TaskExecutionContext]:
    config, platform = configs(array, k8s)
    tctx = task_context(tmp_path, template, xs=[1, 2, 3], **execution)
    sub = subtask(tctx, config, index, retry, system_failures)
    return build_subtask_pod(PodPlugin(platform), sub, config, platform.k8s), sub, tctx


def env_of(pod: dict[str, Any]) -> list[dict[str, str]]:
    return list(pod["spec"]["containers"][0]["env"])


# -- names, log names, namespaces -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("parent", "index", "retry", "expected"),
    [
        ("exec1-n0-0", 3, 0, "exec1-n0-0-3"),
        ("exec1-n0-0", 3, 2, "exec1-n0-0-3-2"),
        ("Exec_1-n0-0", 0, 0, "exec1-n0-0-0"),  # made DNS-1123 safe
    ],
)
def test_sub_task_pod_names(parent: str, index: int, retry: int, expected: str) -> None:
    assert subtask_name(parent, index, retry) == expected


@pytest.mark.parametrize(("retry", "expected"), [(0, " #1-4"), (2, " #1-4-2")])
def test_log_suffix_names_the_parent_attempt_and_the_sub_task(retry: int, expected: str) -> None:
    assert log_suffix(1, 4, retry) == expected


def test_log_template_variables_of_a_sub_task() -> None:
    assert log_vars("exec1-n0-1", 4, 2, 1) == {
        "subtaskParentName": "exec1-n0-1",
        "subtaskExecutionIndex": "4",
        "subtaskRetryAttempt": "2",
        "subtaskParentRetryAttempt": "1",
    }


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("", "p-d"),
        ("{{.namespace}}-arrays", "p-d-arrays"),
        ("x-{{.NAMESPACE}}", "x-p-d"),
        ("{{ .namespace }}", "{{ .namespace }}"),  # Flyte's pattern has no spaces: used literally
        ("arrays", "arrays"),
    ],
)
def test_namespace_template(template: str, expected: str) -> None:
    assert subtask_namespace(template, "p-d") == expected


# -- the context -----------------------------------------------------------------------------------------


def test_the_sub_task_template_is_a_version_2_container_or_sidecar() -> None:
    from flyteidl.core import tasks_pb2
    from google.protobuf import json_format

    container = json_format.ParseDict(array_template(), tasks_pb2.TaskTemplate())
    copy = subtask_template(container)
    assert (copy.type, copy.task_type_version, container.type) == ("container", 2, "container_array")
    pod_target = array_template()
    del pod_target["container"]
    pod_target["k8sPod"] = {"podSpec": {"containers": [{"name": "main", "image": "img"}]}}
    sidecar = subtask_template(json_format.ParseDict(pod_target, tasks_pb2.TaskTemplate()))
    assert (sidecar.type, sidecar.task_type_version) == ("sidecar", 2)


@pytest.mark.parametrize(
    ("retry", "previous"),
    [(0, ""), (2, "/raw/exec1-n0-0/1/1/_flytecheckpoints")],
)
def test_sub_task_paths(tmp_path: Path, retry: int, previous: str) -> None:
    config, _ = configs()
    tctx = task_context(tmp_path, xs=[1, 2])
    sub = subtask(tctx, config, index=1, retry=retry)
    writer, parent = sub.context.output_writer, tctx.output_writer
    root = str(tmp_path / "data")
    # flytekit appends the index to the output prefix itself.
    assert writer.output_prefix == parent.output_prefix
    assert writer.raw_output_prefix == f"{parent.raw_output_prefix}/1/{retry}"
    assert writer.checkpoint_prefix == f"{parent.raw_output_prefix}/1/{retry}/_flytecheckpoints"
    assert writer.prev_checkpoint_prefix == (root + previous if previous else "")
    assert sub.context.input_reader.input_path == tctx.input_reader.input_path
    assert sub.context.plugin_state_reader.get() == (0, None)


def test_a_version_0_sub_task_reads_its_inputs_from_the_prefix(tmp_path: Path) -> None:
    config, _ = configs()
    tctx = task_context(tmp_path, array_template(version=0, custom={"size": "2"}), xs=[1])
    sub = subtask(tctx, config)
    assert sub.context.input_reader.input_path == tctx.input_reader.input_prefix


@pytest.mark.parametrize(
    ("interruptible", "threshold", "max_attempts", "failures", "expected"),
    [
        (False, 1, 3, 0, False),
        (True, 1, 3, 0, True),
        (True, 1, 3, 1, False),
        (True, 2, 3, 1, True),
        # A threshold ≤ 0 counts back from the attempts (Deviation: Flyte makes these never interruptible).
        (True, 0, 3, 2, True),
        (True, 0, 3, 3, False),
        (True, -1, 3, 1, True),
        (True, -1, 3, 2, False),
        (True, -5, 3, 9, True),  # Go's unsigned subtraction wraps: never above
    ],
)
def test_interruptible_until_the_system_failure_threshold(
    tmp_path: Path, interruptible: bool, threshold: int, max_attempts: int, failures: int, expected: bool
) -> None:
    meta = task_context(tmp_path, xs=[1], interruptible=interruptible, max_attempts=max_attempts).metadata
    meta = replace(meta, interruptible_failure_threshold=threshold)
    assert is_interruptible(meta, failures) is expected


# -- the pod ------------------------------------------------------------------------------------------------


def test_the_pod_is_the_pod_plugins_with_the_array_index_environment_appended(tmp_path: Path) -> None:
    pod, sub, tctx = build(tmp_path, index=2)
    assert (pod["apiVersion"], pod["kind"]) == ("v1", "Pod")
    meta = pod["metadata"]
    assert (meta["name"], meta["namespace"]) == ("exec1-n0-0-2", "p-d")
    assert env_of(pod)[-2:] == [
        {"name": "FLYTE_K8S_ARRAY_INDEX", "value": "2"},
        {"name": "BATCH_JOB_ARRAY_INDEX_VAR_NAME", "value": "FLYTE_K8S_ARRAY_INDEX"},
    ]
    # The rest is what the pod plugin builds: the execution's environment, the rendered command.
    names = [e["name"] for e in env_of(pod)]
    assert "FLYTE_INTERNAL_EXECUTION_ID" in names
    container = pod["spec"]["containers"][0]
    assert container["name"] == "exec1-n0-0-2"
    script = container["args"][0]
    assert tctx.input_reader.input_path in script
    assert f'Path("{tctx.output_writer.output_prefix}")' in script
    assert pod["spec"]["restartPolicy"] == "Never"
    assert meta["annotations"]["primary_container_name"] == "exec1-n0-0-2"
    assert meta["labels"]["execution-id"] == "exec1"
    assert sub.name == meta["name"]


def test_flytekit_template_variables_render_the_sub_tasks_paths(tmp_path: Path) -> None:
    args = [
        "pyflyte-map-execute",
        "--inputs", "{{.input}}",
        "--output-prefix", "{{.outputPrefix}}",
        "--raw-output-data-prefix", "{{.rawOutputDataPrefix}}",
        "--checkpoint-path", "{{.checkpointOutputPrefix}}",
        "--prev-checkpoint", "{{.prevCheckpointPrefix}}",
    ]  # fmt: skip
    template = array_template()
    template["container"] = {"image": "img", "args": args}
    pod, _, tctx = build(tmp_path, template=template, index=1, retry=1)
    rendered = pod["spec"]["containers"][0]["args"]
    raw = tctx.output_writer.raw_output_prefix
    assert rendered == [
        "pyflyte-map-execute",
        "--inputs", tctx.input_reader.input_path,
        "--output-prefix", tctx.output_writer.output_prefix,
        "--raw-output-data-prefix", f"{raw}/1/1",
        "--checkpoint-path", f"{raw}/1/1/_flytecheckpoints",
        "--prev-checkpoint", f"{raw}/1/0/_flytecheckpoints",
    ]  # fmt: skip


def test_labels_and_annotations_are_config_then_pod_then_execution(tmp_path: Path) -> None:
    pod, _, _ = build(
        tmp_path,
        k8s={
            "default-labels": {"team": "platform", "tier": "default"},
            "default-annotations": {"a": "default"},
        },
        labels={"tier": "execution"},
        annotations={"a": "execution", "b": "execution"},
    )
    meta = pod["metadata"]
    assert (meta["labels"]["team"], meta["labels"]["tier"]) == ("platform", "execution")
    assert (meta["annotations"]["a"], meta["annotations"]["b"]) == ("execution", "execution")


def test_secrets_are_annotated_and_labelled_for_injection(tmp_path: Path) -> None:
    template = array_template(extra={"securityContext": {"secrets": [{"group": "g", "key": "k"}]}})
    pod, _, _ = build(tmp_path, template=template)
    meta = pod["metadata"]
    assert meta["labels"]["inject-flyte-secrets"] == "true"
    assert "flyte.secrets/s0" in meta["annotations"]


@pytest.mark.parametrize(("inject", "finalizers"), [(False, None), (True, [ARRAY_FINALIZER])])
def test_the_array_finalizer_is_added_when_finalizers_are_injected(
    tmp_path: Path, inject: bool, finalizers: list[str] | None
) -> None:
    pod, _, _ = build(tmp_path, k8s={"inject-finalizer": inject})
    assert pod["metadata"].get("finalizers") == finalizers


def test_the_owner_reference_is_the_executions(tmp_path: Path) -> None:
    owner = {"apiVersion": "flyte.lyft.com/v1alpha1", "kind": "FlyteWorkflow", "name": "wf", "uid": "u1"}
    pod, _, _ = build(tmp_path, ownerReference=owner)
    assert pod["metadata"]["ownerReferences"] == [owner]
    pod, _, _ = build(tmp_path)
    assert "ownerReferences" not in pod["metadata"]


def test_the_configured_scheduler_names_every_sub_task_pod(tmp_path: Path) -> None:
    pod, _, _ = build(tmp_path, array={"scheduler": "batch-scheduler"})
    assert pod["spec"]["schedulerName"] == "batch-scheduler"
    pod, _, _ = build(tmp_path, k8s={"scheduler-name": "from-k8s"})
    assert pod["spec"]["schedulerName"] == "from-k8s"


INTERRUPTIBLE = {
    "interruptible-node-selector": {"lifecycle": "spot"},
    "interruptible-tolerations": [{"key": "spot", "operator": "Exists"}],
    "default-node-selector": {"pool": "batch"},
}


def test_an_interruptible_sub_task_gets_the_interruptible_selector_and_tolerations(tmp_path: Path) -> None:
    pod, _, _ = build(tmp_path, k8s=INTERRUPTIBLE, interruptible=True)
    assert pod["spec"]["nodeSelector"] == {"pool": "batch", "lifecycle": "spot"}
    assert {"key": "spot", "operator": "Exists"} in pod["spec"]["tolerations"]


def test_a_sub_task_past_its_system_failure_threshold_is_not_interruptible(tmp_path: Path) -> None:
    config, platform = configs(k8s=INTERRUPTIBLE)
    tctx = task_context(tmp_path, xs=[1], interruptible=True, max_attempts=3)
    tctx.metadata = replace(tctx.metadata, interruptible_failure_threshold=1)
    pod = build_subtask_pod(PodPlugin(platform), subtask(tctx, config, 0, 1, 1), config, platform.k8s)
    assert pod["spec"]["nodeSelector"] == {"pool": "batch"}
    assert pod["metadata"]["labels"]["interruptible"] == "true"  # the map task's label is kept


def test_the_configured_node_selector_and_tolerations_replace_the_computed_ones(tmp_path: Path) -> None:
    # Flyte's legacy behaviour: the interruptible and default ones are dropped.
    array = {"node-selector": {"arrays": "yes"}, "tolerations": [{"key": "arrays", "operator": "Exists"}]}
    pod, _, _ = build(tmp_path, array=array, k8s=INTERRUPTIBLE, interruptible=True)
    assert pod["spec"]["nodeSelector"] == {"arrays": "yes"}
    assert pod["spec"]["tolerations"] == [{"key": "arrays", "operator": "Exists"}]


def test_the_namespace_template_places_the_pod(tmp_path: Path) -> None:
    pod, sub, _ = build(tmp_path, array={"namespaceTemplate": "{{.namespace}}-maps"})
    assert pod["metadata"]["namespace"] == sub.namespace == "p-d-maps"


class _Builder:
    def __init__(self, pod: dict[str, Any]) -> None:
        self.pod = pod

    def build_resource(self, tctx: TaskExecutionContext) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "pod",
            **{k: dict(v) if isinstance(v, dict) else v for k, v in self.pod.items()},
        }


@pytest.mark.parametrize(
    ("annotations", "message"),
    [
        (
            {},
            "Expected a specified primary container key when building an array job with a K8sPod spec target",
        ),
        (
            {"primary_container_name": "c"},
            "Couldn't find any container matching the primary container key when building an array job with a "
            "K8sPod spec target",
        ),
    ],
)
def test_a_pod_without_a_findable_primary_container_cannot_be_built(
    tmp_path: Path, annotations: dict[str, str], message: str
) -> None:
    config, platform = configs()
    sub = subtask(task_context(tmp_path, xs=[1]), config, 0)
    builder = _Builder(
        {"metadata": {"annotations": annotations}, "spec": {"containers": [{"name": "a"}, {"name": "b"}]}}
    )
    with pytest.raises(PluginError) as raised:
        build_subtask_pod(builder, sub, config, platform.k8s)
    assert (raised.value.code, raised.value.message) == (POD_TEMPLATE_FAILED, message)


def test_the_index_goes_to_the_annotated_primary_container(tmp_path: Path) -> None:
    config, platform = configs()
    sub = subtask(task_context(tmp_path, xs=[1]), config, 0)
    builder = _Builder(
        {
            "metadata": {"annotations": {"primary_container_name": "b"}},
            "spec": {"containers": [{"name": "a"}, {"name": "b", "env": [{"name": "X", "value": "1"}]}]},
        }
    )
    pod = build_subtask_pod(builder, sub, config, platform.k8s)
    assert "env" not in pod["spec"]["containers"][0]
    assert [e["name"] for e in pod["spec"]["containers"][1]["env"]] == [
        "X",
        "FLYTE_K8S_ARRAY_INDEX",
        "BATCH_JOB_ARRAY_INDEX_VAR_NAME",
    ]


# -- create errors and the pod's phase ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "phase", "code", "reason"),
    [
        (
            KubeApiError(403, "Forbidden", "pods is forbidden: exceeded quota: compute"),
            Phase.WAITING_FOR_RESOURCES,
            None,
            "Exceeded resourcequota: pods is forbidden: exceeded quota: compute",
        ),
        (KubeApiError(403, "Forbidden", "nope"), Phase.RETRYABLE_FAILURE, "RuntimeFailure", ""),
        (KubeApiError(400, "BadRequest", "bad"), Phase.PERMANENT_FAILURE, "BadTaskFormat", ""),
        (KubeApiError(422, "Invalid", "bad"), Phase.PERMANENT_FAILURE, "BadTaskFormat", ""),
        (KubeApiError(413, "RequestEntityTooLarge", "big"), Phase.PERMANENT_FAILURE, "EntityTooLarge", ""),
    ],
)
def test_classified_create_errors(error: KubeApiError, phase: Phase, code: str | None, reason: str) -> None:
    info = classify_create_error(error)
    assert (info.phase, info.version, info.reason) == (phase, 0, reason)
    if code is None:
        assert info.err is None
    else:
        assert info.err is not None
        assert (info.err.code, info.err.kind) == (code, ErrorKind.USER)


@pytest.mark.parametrize(
    ("error", "code"),
    [(KubeApiError(500, "InternalError", "etcd"), "InternalError"), (TimeoutError("slow"), "")],
)
def test_other_create_errors_are_errors_coded_with_the_apis_reason(error: Exception, code: str) -> None:
    with pytest.raises(PluginError) as raised:
        classify_create_error(error)
    assert (raised.value.code, raised.value.message, raised.value.cause) == (
        code,
        "failed to create resource",
        error,
    )


def _observed(pod: dict[str, Any], status: dict[str, Any], **metadata: Any) -> dict[str, Any]:
    pod = {**pod, "status": status, "metadata": {**pod["metadata"], **metadata}}
    pod["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    return pod


def test_a_running_pod_is_a_running_sub_task_with_its_log_link(tmp_path: Path) -> None:
    array = {
        "logs": {
            "config": {
                "kubernetes-enabled": False,
                "templates": [
                    {
                        "displayName": "Sub-task",
                        "templateUris": [
                            "https://logs/{{.podName}}/{{.subtaskParentName}}/{{.subtaskExecutionIndex}}"
                        ],
                    }
                ],
            }
        }
    }
    config, platform = configs(array)
    pod, sub, _ = build(tmp_path, array=array, index=2, retry=1)
    name = pod["spec"]["containers"][0]["name"]
    running = _observed(
        pod, {"phase": "Running", "containerStatuses": [{"name": name, "state": {"running": {}}}]}
    )
    info = subtask_phase(running, sub, k8s=platform.k8s, log_config=config.logs.config, now=NOW)
    assert info.phase is Phase.RUNNING
    assert info.info is not None
    [link] = info.info.logs
    assert (link.name, link.uri) == ("Sub-task #0-2-1", "https://logs/exec1-n0-0-2-1/exec1-n0-0/2")


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ({"phase": "Running"}, Phase.RETRYABLE_FAILURE),
        ({"phase": "Succeeded"}, Phase.SUCCESS),
    ],
)
def test_a_pod_being_deleted_fails_unless_it_finished(
    tmp_path: Path, status: dict[str, Any], expected: Phase
) -> None:
    config, platform = configs()
    pod, sub, _ = build(tmp_path)
    name = pod["spec"]["containers"][0]["name"]
    state = {"running": {}} if status["phase"] == "Running" else {"terminated": {"exitCode": 0}}
    observed = _observed(
        pod,
        {**status, "containerStatuses": [{"name": name, "state": state}]},
        deletionTimestamp="2026-01-01T00:00:10Z",
    )
    info = subtask_phase(observed, sub, k8s=platform.k8s, log_config=config.logs.config, now=NOW)
    assert info.phase is expected
    if expected is Phase.RETRYABLE_FAILURE:
        assert info.err is not None
        assert (info.err.code, info.err.kind) == ("UnexpectedObjectDeletion", ErrorKind.SYSTEM)
