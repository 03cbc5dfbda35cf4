"""``taskplug render``: the object the plugin manager would create, printed and created nowhere."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from .conftest import EXAMPLES, HELLO, assert_bad_input, hello_document, invoke, write_yaml

FINALIZER = "flyte.org/finalizer-k8s"


def _named_hello(tmp_path: Path) -> Path:
    """``examples/hello.yaml`` with an execution name (the example has none, so each run is a new one)."""
    document = hello_document()
    document["execution"]["id"]["name"] = "hello-1"
    return write_yaml(tmp_path / "hello-1.yaml", document)


def test_a_spec_without_a_name_renders_the_same_object_each_time_and_another_after_an_edit(
    runner: CliRunner, tmp_path: Path
) -> None:
    first, again = _render(runner, HELLO), _render(runner, HELLO)
    assert first == again
    edited = hello_document()
    edited["inputs"]["name"] = "someone else"
    other = _render(runner, write_yaml(tmp_path / "edited.yaml", edited))
    assert other["metadata"]["name"] != first["metadata"]["name"]


def _render(runner: CliRunner, *args: str | Path) -> dict[str, Any]:
    result = invoke(runner, "render", *args)
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def test_render_prints_the_pod_with_its_name_namespace_labels_finalizer_and_container(
    runner: CliRunner, tmp_path: Path
) -> None:
    config = write_yaml(
        tmp_path / "config.yaml",
        {
            "executor": {"data-root": str(tmp_path / "data")},
            "plugins": {"k8s": {"inject-finalizer": True, "default-labels": {"team": "ml"}}},
        },
    )
    pod = _render(runner, _named_hello(tmp_path), "--config", config)

    assert (pod["apiVersion"], pod["kind"]) == ("v1", "Pod")
    meta = pod["metadata"]
    assert (meta["name"], meta["namespace"]) == ("hello-1-n0-0", "demo-development")
    assert meta["labels"] == {
        "team": "ml",
        "execution-id": "hello-1",
        "node-id": "n0",
        "interruptible": "false",
        "task-name": "hello",
    }
    assert meta["finalizers"] == [FINALIZER]
    assert meta["annotations"]["primary_container_name"] == "hello-1-n0-0"

    spec = pod["spec"]
    assert spec["restartPolicy"] == "Never"
    [container] = spec["containers"]
    assert (container["name"], container["image"]) == ("hello-1-n0-0", "python:3.11-slim")
    assert container["command"] == ["python", "-c"]
    # The template's {{.Inputs.name}} and {{.OutputPrefix}} are filled in, the latter under the data root.
    [script] = container["args"]
    assert 'greeting = "hello, world"' in script
    assert f'Path("{tmp_path / "data"}/metadata/demo/development/hello-1/n0/0")' in script
    assert container["resources"] == {
        "limits": {"memory": "256Mi", "cpu": "250m"},
        "requests": {"cpu": "250m", "memory": "128Mi"},
    }
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["GREETING_STYLE"] == "plain"
    assert env["FLYTE_INTERNAL_EXECUTION_ID"] == "hello-1"
    assert env["FLYTE_ATTEMPT_NUMBER"] == "0"


def test_without_a_config_the_platform_defaults_apply_and_no_finalizer_is_added(runner: CliRunner) -> None:
    pod = _render(runner, HELLO)
    assert "finalizers" not in pod["metadata"]
    assert "team" not in pod["metadata"]["labels"]
    assert pod["metadata"]["annotations"]["cluster-autoscaler.kubernetes.io/safe-to-evict"] == "false"


def test_the_example_platform_config_and_pod_template_are_merged_into_the_pod(
    runner: CliRunner, tmp_path: Path
) -> None:
    pod = _render(
        runner,
        _named_hello(tmp_path),
        "--config",
        EXAMPLES / "platform.yaml",
        "--pod-templates",
        EXAMPLES / "pod-templates",
    )
    meta, spec = pod["metadata"], pod["spec"]
    assert meta["finalizers"] == [FINALIZER]
    assert meta["labels"]["team"] == "ml-platform"
    assert meta["labels"]["platform.example.com/managed"] == "true"  # from the PodTemplate
    assert meta["annotations"]["platform.example.com/cost-center"] == "research"
    assert spec["priorityClassName"] == "batch-normal"
    assert spec["nodeSelector"] == {"pool": "batch"}
    assert {"key": "dedicated", "operator": "Equal", "value": "flyte", "effect": "NoSchedule"} in spec[
        "tolerations"
    ]
    [container] = spec["containers"]
    assert container["name"] == "hello-1-n0-0"
    assert {"name": "scratch", "mountPath": "/scratch"} in container["volumeMounts"]


def test_yaml_output_is_the_same_document_as_json(runner: CliRunner) -> None:
    result = invoke(runner, "render", HELLO, "-o", "yaml")
    assert result.exit_code == 0, result.stderr
    assert not result.stdout.lstrip().startswith("{")
    assert yaml.safe_load(result.stdout) == _render(runner, HELLO)


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(document: dict[str, Any]) -> None:
        *parents, leaf = path.split(".")
        node = document
        for key in parents:
            node = node[key]
        node[leaf] = value

    return change


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (_set("execution.maxAttempts", 0), "execution.maxAttempts"),
        (_set("execution.retries", 2), "execution.retries"),
        (lambda d: d["template"]["container"].pop("image"), "template.container.image"),
        (_set("template.type", "task_type_3"), "task_type_3"),
    ],
    ids=["bad-value", "unknown-field", "missing-field", "task-type-without-a-kubernetes-object"],
)
def test_a_bad_spec_exits_2_naming_the_field(
    runner: CliRunner, tmp_path: Path, change: Callable[[dict[str, Any]], None], named: str
) -> None:
    document = hello_document()
    change(document)
    assert_bad_input(invoke(runner, "render", write_yaml(tmp_path / "bad.yaml", document)), named)


def test_a_bad_config_value_exits_2_naming_the_key_path(runner: CliRunner, tmp_path: Path) -> None:
    config = write_yaml(tmp_path / "config.yaml", {"plugins": {"k8s": {"default-cpus": [1]}}})
    assert_bad_input(invoke(runner, "render", HELLO, "--config", config), "plugins.k8s.default-cpus")


def test_a_missing_spec_file_exits_2_naming_it(runner: CliRunner, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.yaml"
    assert_bad_input(invoke(runner, "render", missing), "cannot read execution spec", str(missing))


def test_an_unknown_output_format_exits_2_naming_the_option(runner: CliRunner) -> None:
    result = invoke(runner, "render", HELLO, "-o", "xml")
    assert result.exit_code == 2
    assert "'--output'" in result.stderr and "'xml'" in result.stderr
