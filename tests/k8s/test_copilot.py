"""Flyte co-pilot: the downloader and uploader containers of raw-container tasks (copilot.go)."""

from __future__ import annotations

import base64
from collections import OrderedDict
from pathlib import Path
from typing import Any

from flyteidl.core import interface_pb2, tasks_pb2

from taskplug.executor import ExecutionPaths, task_context_for
from taskplug.k8s import K8S_SECTION
from taskplug.k8s._copilot import add_copilot_to_container, add_copilot_to_pod, copilot_command
from taskplug.k8s._pod_builder import PlatformPodConfig
from taskplug.k8s._pod_template import PodTemplateStore
from taskplug.plugins.pod import PodPlugin

CFG = K8S_SECTION.model().co_pilot


def _interface(inputs: bool = True, outputs: bool = True) -> interface_pb2.TypedInterface:
    iface = interface_pb2.TypedInterface()
    if inputs:
        iface.inputs.variables["x"].type.simple = 1  # INTEGER
    if outputs:
        iface.outputs.variables["y"].type.simple = 1
    return iface


def _data(**kw: Any) -> tasks_pb2.DataLoadingConfig:
    return tasks_pb2.DataLoadingConfig(enabled=True, **kw)


def _pod(**kw: Any) -> tuple[dict[str, Any], str]:
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "alpine"}]}
    name = add_copilot_to_pod(
        CFG,
        spec,
        kw.pop("interface", _interface()),
        kw.pop("data", _data()),
        input_path="s3://bucket/meta/inputs.pb",
        output_prefix="s3://bucket/meta/0",
        raw_output_prefix="s3://bucket/raw/x",
        data_root="s3://bucket/meta/0",
        **kw,
    )
    return spec, name


def test_a_disabled_data_config_adds_nothing() -> None:
    spec, name = _pod(data=tasks_pb2.DataLoadingConfig(enabled=False))
    assert name == ""
    assert spec == {"containers": [{"name": "main", "image": "alpine"}]}


def test_inputs_get_a_downloader_init_container_which_is_the_primary_init_container() -> None:
    spec, name = _pod(interface=_interface(outputs=False))
    [downloader] = spec["initContainers"]
    assert name == downloader["name"] == "flyte-copilot-downloader"
    assert downloader["image"] == CFG.image
    assert downloader["command"] == [
        "/bin/flyte-copilot",
        "--storage.limits.maxDownloadMBs=0",
        "--logger.level=3",
        "--storage.type=s3",
    ]
    args = downloader["args"]
    assert args[:9] == [
        "download",
        "--from-remote",
        "s3://bucket/meta/inputs.pb",
        "--to-output-prefix",
        "s3://bucket/meta/0",
        "--to-local-dir",
        "/var/flyte/inputs",
        "--format",
        "JSON",
    ]
    assert interface_pb2.VariableMap.FromString(base64.b64decode(args[10])) == _interface().inputs
    assert downloader["resources"] == {
        "limits": {"cpu": "500m", "memory": "128Mi"},
        "requests": {"cpu": "500m", "memory": "128Mi"},
    }
    assert downloader["volumeMounts"] == [{"name": "flyte-inputs", "mountPath": "/var/flyte/inputs"}]
    assert spec["volumes"] == [{"name": "flyte-inputs", "emptyDir": {}}]
    assert "terminationGracePeriodSeconds" not in spec


def test_outputs_get_an_uploader_native_sidecar_started_first() -> None:
    spec, _ = _pod()
    uploader, downloader = spec["initContainers"]
    assert (uploader["name"], uploader["restartPolicy"]) == ("flyte-copilot-uploader", "Always")
    assert downloader["name"] == "flyte-copilot-downloader"
    assert uploader["args"][:10] == [
        "sidecar",
        "--timeout",
        "1h0m0s",
        "--to-raw-output",
        "s3://bucket/raw/x",
        "--to-output-prefix",
        "s3://bucket/meta/0",
        "--from-local-dir",
        "/var/flyte/outputs",
        "--interface",
    ]
    assert interface_pb2.TypedInterface.FromString(base64.b64decode(uploader["args"][10])) == _interface()
    # Flyte: int64(cfg.Timeout.Seconds()).
    assert spec["terminationGracePeriodSeconds"] == 3600


def test_the_data_volumes_take_the_storage_size_of_the_override_resources() -> None:
    spec, _ = _pod(override_resources={"limits": {"storage": "2Gi"}, "requests": {"storage": "1Gi"}})
    assert spec["volumes"] == [
        {"name": "flyte-inputs", "emptyDir": {"sizeLimit": "2Gi"}},
        {"name": "flyte-outputs", "emptyDir": {"sizeLimit": "2Gi"}},
    ]


def test_the_task_container_mounts_the_configured_paths() -> None:
    container: dict[str, Any] = {"name": "main"}
    add_copilot_to_container(CFG, container, _interface(), _data(input_path="/in", output_path="/out"))
    assert container["volumeMounts"] == [
        {"name": "flyte-inputs", "mountPath": "/in"},
        {"name": "flyte-outputs", "mountPath": "/out"},
    ]
    assert container["securityContext"] == {"capabilities": {}}


def test_the_store_type_follows_the_data_root() -> None:
    assert copilot_command("gs://b/x")[3:] == ["--storage.type=stow", "--storage.stow.kind=google"]
    assert copilot_command("/var/data/x")[3:] == ["--storage.type=local"]


def test_a_flytekit_container_task_renders_with_its_copilot_and_primary_init_template(tmp_path: Path) -> None:
    from flytekit import ContainerTask, kwtypes
    from flytekit.configuration import Image, ImageConfig, SerializationSettings
    from flytekit.tools.translator import get_serializable

    task = ContainerTask(
        name="double",
        image="alpine",
        input_data_dir="/var/inputs",
        output_data_dir="/var/outputs",
        inputs=kwtypes(x=int),
        outputs=kwtypes(y=int),
        command=["sh", "-c", "echo $(( $(cat /var/inputs/x) * 2 )) > /var/outputs/y"],
    )
    settings = SerializationSettings(
        image_config=ImageConfig(default_image=Image(name="default", fqn="ghcr.io/org/img", tag="v1")),
        project="p",
        domain="d",
        version="v1",
    )
    (tmp_path / "double.pb").write_bytes(
        get_serializable(OrderedDict(), settings, task).template.to_flyte_idl().SerializeToString()
    )
    (tmp_path / "spec.yaml").write_text(
        "templateFile: double.pb\nexecution: {id: {name: d1}}\ninputs: {x: 21}\n"
    )
    from taskplug.executor import load_spec

    spec = load_spec(tmp_path / "spec.yaml")
    assert (spec.template.type, spec.template.container.data_config.enabled) == ("raw-container", True)
    templates = PodTemplateStore()
    templates.store(
        {
            "kind": "PodTemplate",
            "metadata": {"name": "base"},
            "template": {
                "spec": {"initContainers": [{"name": "primary-init", "env": [{"name": "TPL", "value": "1"}]}]}
            },
        }
    )
    k8s = K8S_SECTION.model.model_validate({"default-pod-template-name": "base"})
    pod = PodPlugin(PlatformPodConfig(k8s, templates, environ={})).build_resource(
        task_context_for(spec, str(tmp_path))
    )
    inits = {c["name"]: c for c in pod["spec"]["initContainers"]}
    assert list(inits) == ["flyte-copilot-uploader", "flyte-copilot-downloader"]
    # The base template's primary-init container is merged into the downloader only.
    assert inits["flyte-copilot-downloader"]["env"] == [{"name": "TPL", "value": "1"}]
    assert "env" not in inits["flyte-copilot-uploader"]
    [main] = pod["spec"]["containers"]
    assert {m["mountPath"] for m in main["volumeMounts"]} == {"/var/inputs", "/var/outputs"}
    # raw-container tasks get no primary annotation (the uploader must finish before the task counts as done).
    assert "primary_container_name" not in pod["metadata"]["annotations"]
    paths = ExecutionPaths.for_attempt(str(tmp_path), spec.metadata)
    assert inits["flyte-copilot-downloader"]["args"][2] == paths.input_path
