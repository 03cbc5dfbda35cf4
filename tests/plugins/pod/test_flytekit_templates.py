"""Interop with real Flyte tooling: TaskTemplates serialized offline by flytekit, loaded from a
binary ``templateFile`` by the execution spec loader and built into a Pod by the pod plugin."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from flyteidl.core import tasks_pb2
from flytekit import PodTemplate, Resources, task
from flytekit.configuration import Image, ImageConfig, SerializationSettings
from flytekit.tools.translator import get_serializable
from flytekitplugins.pod import Pod
from kubernetes.client import V1Container, V1EnvVar, V1PodSpec

from taskplug.executor._paths import ExecutionPaths
from taskplug.executor._spec import ExecutionSpec, load_spec
from taskplug.executor._tasks import task_context_for
from taskplug.k8s._config import K8sPluginConfig
from taskplug.k8s._pod_builder import PlatformPodConfig
from taskplug.k8s._pod_template import PodTemplateStore
from taskplug.plugins.pod._plugin import PodPlugin

SETTINGS = SerializationSettings(
    image_config=ImageConfig(default_image=Image(name="default", fqn="ghcr.io/org/img", tag="v1")),
    project="p",
    domain="d",
    version="v1",
    env={"FOO": "bar"},
)
IMAGE = "ghcr.io/org/img:v1"
PRIMARY_KEY = "primary_container_name"


@task(requests=Resources(cpu="1", mem="1Gi"), retries=2)
def plain(a: int, b: str) -> int:
    return a


@task(
    requests=Resources(cpu="2", mem="2Gi"),
    pod_template=PodTemplate(
        primary_container_name="primary",
        pod_spec=V1PodSpec(
            containers=[V1Container(name="sidecar", image="busybox", env=[V1EnvVar(name="S", value="1")])],
            node_selector={"pool": "gpu"},
        ),
        labels={"l": "1"},
    ),
)
def with_pod_template(a: int) -> int:
    return a


@task(
    task_config=Pod(
        pod_spec=V1PodSpec(
            containers=[V1Container(name="sidecar", image="busybox")], node_selector={"pool": "x"}
        ),
        primary_container_name="primary",
    )
)
def pod_plugin(a: int) -> int:
    return a


def serialize(fn: Callable[..., Any], path: Path) -> None:
    template = get_serializable(OrderedDict(), SETTINGS, fn).template.to_flyte_idl()
    path.write_bytes(template.SerializeToString())


def write_spec(tmp_path: Path, fn: Callable[..., Any], inputs: Mapping[str, Any]) -> ExecutionSpec:
    serialize(fn, tmp_path / "task.pb")
    document = {
        "templateFile": "task.pb",
        "execution": {
            "id": {"project": "p", "domain": "d", "name": "exec1", "nodeId": "n0"},
            "namespace": "p-d",
            "serviceAccount": "default",
            "platformResources": {
                "requests": {"cpu": "500m", "memory": "512Mi"},
                "limits": {"cpu": "4", "memory": "8Gi"},
            },
        },
        "inputs": dict(inputs),
    }
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(yaml.safe_dump(document))
    return load_spec(spec_path)


def build_pod(tmp_path: Path, spec: ExecutionSpec) -> dict[str, Any]:
    plugin = PodPlugin(PlatformPodConfig(K8sPluginConfig(), PodTemplateStore(), {}))
    return plugin.build_resource(task_context_for(spec, str(tmp_path)))


def container(pod: Mapping[str, Any], name: str) -> dict[str, Any]:
    found = [c for c in pod["spec"]["containers"] if c["name"] == name]
    assert len(found) == 1, [c["name"] for c in pod["spec"]["containers"]]
    return found[0]  # type: ignore[no-any-return]


def env(c: Mapping[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in c.get("env") or []}


def check_pyflyte_args(c: Mapping[str, Any], tmp_path: Path, spec: ExecutionSpec, task_name: str) -> None:
    args = c["args"]
    assert args[0] == "pyflyte-execute"
    assert not any("{{" in a for a in args), args
    paths = ExecutionPaths.for_attempt(str(tmp_path), spec.metadata)
    assert paths.input_path.startswith(str(tmp_path.resolve()))

    def after(flag: str) -> str:
        return args[args.index(flag) + 1]  # type: ignore[no-any-return]

    assert after("--inputs") == paths.input_path
    assert after("--output-prefix") == paths.output_prefix
    assert after("--raw-output-data-prefix") == paths.raw_output_prefix
    assert after("--checkpoint-path") == paths.checkpoint_prefix
    assert after("--prev-checkpoint") == '""'  # first attempt: no previous checkpoint
    assert args[-4:] == ["task-module", __name__, "task-name", task_name]


def test_plain_task(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, plain, {"a": 3, "b": "world"})
    assert spec.template.type == "python-task"
    assert spec.template.WhichOneof("target") == "container"
    pod = build_pod(tmp_path, spec)

    assert pod["kind"] == "pod"
    (c,) = pod["spec"]["containers"]
    assert c["name"] == "exec1-n0-0"
    assert c["image"] == IMAGE
    assert "command" not in c
    check_pyflyte_args(c, tmp_path, spec, "plain")
    # Requests from the task; an unset limit copies the request.
    assert c["resources"] == {
        "requests": {"cpu": "1", "memory": "1Gi"},
        "limits": {"cpu": "1", "memory": "1Gi"},
    }
    assert env(c)["FOO"] == "bar"
    assert env(c)["FLYTE_INTERNAL_EXECUTION_ID"] == "exec1"
    assert env(c)["FLYTE_INTERNAL_TASK_NAME"] == f"{__name__}.plain"
    assert pod["metadata"]["annotations"] == {PRIMARY_KEY: "exec1-n0-0"}
    assert pod["spec"]["serviceAccountName"] == "default"
    assert pod["spec"]["restartPolicy"] == "Never"


def test_task_with_a_pod_template(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, with_pod_template, {"a": 3})
    assert spec.template.WhichOneof("target") == "k8s_pod"
    assert dict(spec.template.config) == {PRIMARY_KEY: "primary"}
    pod = build_pod(tmp_path, spec)

    assert [c["name"] for c in pod["spec"]["containers"]] == ["sidecar", "primary"]
    primary = container(pod, "primary")
    assert primary["image"] == IMAGE
    check_pyflyte_args(primary, tmp_path, spec, "with_pod_template")
    assert primary["resources"] == {
        "requests": {"cpu": "2", "memory": "2Gi"},
        "limits": {"cpu": "2", "memory": "2Gi"},
    }
    assert env(primary)["FOO"] == "bar"

    sidecar = container(pod, "sidecar")
    assert sidecar["image"] == "busybox"
    assert sidecar["env"][0] == {"name": "S", "value": "1"}
    assert sidecar["resources"] == {
        "requests": {"cpu": "0", "memory": "0"},
        "limits": {"cpu": "0", "memory": "0"},
    }

    assert pod["metadata"]["labels"] == {"l": "1"}
    assert pod["spec"]["nodeSelector"] == {"pool": "gpu"}
    # A python-task with two containers is not marked: only sidecars or single-container pods are.
    assert PRIMARY_KEY not in pod["metadata"]["annotations"]


def test_flytekitplugins_pod_task(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, pod_plugin, {"a": 3})
    assert (spec.template.type, spec.template.task_type_version) == ("sidecar", 2)
    assert spec.template.WhichOneof("target") == "k8s_pod"
    pod = build_pod(tmp_path, spec)

    assert [c["name"] for c in pod["spec"]["containers"]] == ["sidecar", "primary"]
    primary = container(pod, "primary")
    assert primary["image"] == IMAGE
    check_pyflyte_args(primary, tmp_path, spec, "pod_plugin")
    assert primary["resources"] == {
        "requests": {"cpu": "500m", "memory": "512Mi"},
        "limits": {"cpu": "500m", "memory": "512Mi"},
    }
    assert env(primary)["FOO"] == "bar"
    assert container(pod, "sidecar")["image"] == "busybox"
    assert pod["spec"]["nodeSelector"] == {"pool": "x"}
    assert pod["metadata"]["annotations"] == {PRIMARY_KEY: "primary"}


@pytest.mark.parametrize("fn", [plain, with_pod_template, pod_plugin], ids=lambda f: f.name)
def test_a_binary_template_round_trips_through_the_spec_loader(tmp_path: Path, fn: Any) -> None:
    spec = write_spec(tmp_path, fn, {"a": 1, "b": "x"} if fn is plain else {"a": 1})
    # Compared with the file written, not a second serialization: flytekitplugins-pod appends the primary
    # container's env again each time the same task is serialized.
    assert spec.template == tasks_pb2.TaskTemplate.FromString((tmp_path / "task.pb").read_bytes())
    assert spec.template.id.name == f"{__name__}.{fn.name.rsplit('.', 1)[-1]}"


def test_a_template_file_may_hold_flytekits_admin_task_spec(tmp_path: Path) -> None:
    task_spec = get_serializable(OrderedDict(), SETTINGS, plain).to_flyte_idl()
    (tmp_path / "task.pb").write_bytes(task_spec.SerializeToString())
    (tmp_path / "spec.yaml").write_text(
        yaml.safe_dump(
            {"templateFile": "task.pb", "execution": {"id": {"name": "exec1"}}, "inputs": {"a": 1, "b": "x"}}
        )
    )
    spec = load_spec(tmp_path / "spec.yaml")
    assert spec.template == task_spec.template
    pod = build_pod(tmp_path, spec)
    assert pod["spec"]["containers"][0]["image"] == IMAGE
