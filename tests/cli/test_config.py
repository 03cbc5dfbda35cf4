"""``taskplug config show`` (the effective config, every default filled in) and ``config validate``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from .conftest import EXAMPLES, assert_bad_input, invoke, write_yaml


def _show(runner: CliRunner, *args: str | Path) -> dict[str, Any]:
    result = invoke(runner, "config", "show", *args)
    assert result.exit_code == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout) if "json" in args else yaml.safe_load(result.stdout)
    return document


def test_show_prints_every_section_with_flytes_defaults(runner: CliRunner) -> None:
    effective = _show(runner)
    k8s = effective["plugins"]["k8s"]
    assert k8s["default-cpus"] == "1"
    assert k8s["default-memory"] == "1Gi"
    assert k8s["inject-finalizer"] is False
    assert k8s["create-container-error-grace-period"] == "3m0s"
    assert effective["executor"]["workers"] == 64
    assert effective["tasks"]["task-plugins"]["enabled-plugins"] == [
        "container",
        "sidecar",
        "spark",
        "connector-service",
        "echo",
        "k8s-array",
    ]
    assert effective["tasks"]["backoff"] == {"base-second": 2, "max-duration": "20s"}
    # Plugin sections come from the registered plugins.
    assert effective["plugins"]["connector-service"]["supportedTaskTypes"] == ["task_type_3", "task_type_4"]
    assert "spark" in effective["plugins"]


def test_show_puts_the_file_over_the_defaults(runner: CliRunner, tmp_path: Path) -> None:
    config = write_yaml(
        tmp_path / "config.yaml",
        {"plugins": {"k8s": {"default-cpus": "2", "inject-finalizer": True}}, "executor": {"workers": 3}},
    )
    effective = _show(runner, "--config", config)
    k8s = effective["plugins"]["k8s"]
    assert (k8s["default-cpus"], k8s["inject-finalizer"], effective["executor"]["workers"]) == ("2", True, 3)
    assert k8s["default-memory"] == "1Gi"  # untouched keys keep their default
    assert effective["executor"]["resync-period"] == "10s"


def test_show_as_json_is_the_same_document_as_yaml(runner: CliRunner) -> None:
    result = invoke(runner, "config", "show", "-o", "json")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("{")
    assert json.loads(result.stdout) == _show(runner)


def test_show_with_a_bad_file_exits_2_naming_the_key_path(runner: CliRunner, tmp_path: Path) -> None:
    config = write_yaml(tmp_path / "config.yaml", {"executor": {"workers": "many"}})
    assert_bad_input(invoke(runner, "config", "show", "--config", config), "executor.workers")


def test_validate_accepts_the_example_platform_config_listing_the_known_sections(runner: CliRunner) -> None:
    path = EXAMPLES / "platform.yaml"
    result = invoke(runner, "config", "validate", path)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith(f"{path}: ok (")
    sections = result.stdout.split("known: ", 1)[1].rstrip(")\n").split(", ")
    assert sections == sorted(sections)
    assert {"executor", "plugins.k8s", "plugins.spark", "plugins.connector-service", "tasks"} <= set(sections)


@pytest.mark.parametrize(
    ("document", "named"),
    [
        ({"plugins": {"k8s": {"default-cpus": "1", "bogus": 2}}}, "plugins.k8s.bogus: unknown key"),
        ({"plugins": {"k8s": {"default-cpus": "abc"}}}, "plugins.k8s.default-cpus"),
        ({"tasks": {"backoff": {"max-duration": "soon"}}}, "tasks.backoff.max-duration"),
        ({"plugins": {"spark": {"spark-history-server": "x"}}}, "plugins.spark.spark-history-server"),
    ],
    ids=["unknown-key", "bad-quantity", "bad-duration", "unknown-key-in-a-plugins-section"],
)
def test_validate_fails_strictly_naming_the_key_path(
    runner: CliRunner, tmp_path: Path, document: dict[str, Any], named: str
) -> None:
    path = write_yaml(tmp_path / "config.yaml", document)
    assert_bad_input(invoke(runner, "config", "validate", path), named)


def test_validate_of_a_missing_file_exits_2_naming_it(runner: CliRunner, tmp_path: Path) -> None:
    missing = tmp_path / "missing.yaml"
    assert_bad_input(invoke(runner, "config", "validate", missing), "cannot read config file", str(missing))


def test_validate_needs_a_path(runner: CliRunner) -> None:
    result = invoke(runner, "config", "validate")
    assert result.exit_code == 2
    assert "Missing argument 'PATH'" in result.stderr


def test_show_includes_the_kube_client_timeout_with_flytes_default(runner: CliRunner) -> None:
    assert _show(runner)["propeller"]["kube-client-config"] == {"timeout": "30s"}


def test_validate_refuses_an_unknown_plugin_id_listing_the_registered_ones(
    runner: CliRunner, tmp_path: Path
) -> None:
    path = write_yaml(
        tmp_path / "config.yaml", {"tasks": {"task-plugins": {"enabled-plugins": ["no-such-plugin"]}}}
    )
    result = invoke(runner, "config", "validate", path)
    assert_bad_input(
        result, "tasks.task-plugins.enabled-plugins[0]", "no plugin [no-such-plugin] is registered"
    )
    listed = result.stderr.split("registered: ", 1)[1].rstrip(")\n").split(", ")
    assert {"container", "sidecar", "spark", "connector-service", "echo", "k8s-array"} <= set(listed)


def test_validate_checks_the_pod_templates_it_is_given(runner: CliRunner, tmp_path: Path) -> None:
    config = write_yaml(tmp_path / "config.yaml", {"executor": {"workers": 8}})
    folder = tmp_path / "templates"
    folder.mkdir()
    write_yaml(
        folder / "base.yaml",
        {
            "apiVersion": "v1",
            "kind": "PodTemplate",
            "metadata": {"name": "base"},
            "template": {"spec": {"containers": [{"name": "default", "image": "x"}]}},
        },
    )
    result = invoke(runner, "config", "validate", config, "--pod-templates", folder)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.rstrip().endswith("; 1 pod template(s))")
    write_yaml(
        folder / "broken.yaml",
        {
            "apiVersion": "v1",
            "kind": "PodTemplate",
            "metadata": {"name": "b"},
            "template": {"spec": {"containers": "x"}},
        },
    )
    assert_bad_input(
        invoke(runner, "config", "validate", config, "--pod-templates", folder), "broken.yaml", "containers"
    )


def test_validate_says_the_bound_a_worker_count_is_over(runner: CliRunner, tmp_path: Path) -> None:
    path = write_yaml(tmp_path / "config.yaml", {"executor": {"workers": 20_000}})
    assert_bad_input(
        invoke(runner, "config", "validate", path), "executor.workers", "less than or equal to 10000"
    )
