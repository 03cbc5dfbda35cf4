"""``taskplug plugins``: every registered plugin, whether it is enabled, and the task types it handles."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from .conftest import assert_bad_input, invoke, write_yaml


def _rows(runner: CliRunner, *args: str | Path) -> dict[str, dict[str, Any]]:
    result = invoke(runner, "plugins", "-o", "json", *args)
    assert result.exit_code == 0, result.stderr
    rows = json.loads(result.stdout)
    assert isinstance(rows, list)
    for row in rows:
        assert list(row) == ["id", "kind", "taskTypes", "enabled", "handles", "default", "resource"]
    by_id = {row["id"]: row for row in rows}
    assert len(by_id) == len(rows), "an id is listed twice"
    return by_id


def test_json_lists_the_built_in_plugins_with_their_task_types_and_watched_resources(
    runner: CliRunner,
) -> None:
    rows = _rows(runner)
    # Other installed distributions may register more plugins (the example plugin does); these are built in.
    assert rows["pod"] == {
        "id": "pod",
        "kind": "k8s",
        "taskTypes": ["container", "python-task", "python", "raw-container", "sidecar"],
        "enabled": False,  # Flyte's default enabled list names its ids container and sidecar instead
        "handles": [],
        "default": True,
        "resource": "Pod.v1",
    }
    assert rows["container"]["handles"] == ["container", "python", "python-task", "raw-container"]
    assert rows["sidecar"]["handles"] == ["sidecar"]
    assert rows["spark"] == {
        "id": "spark",
        "kind": "k8s",
        "taskTypes": ["spark"],
        "enabled": True,
        "handles": ["spark"],
        "default": False,
        "resource": "SparkApplication.sparkoperator.k8s.io/v1beta2",
    }
    assert rows["connector-service"] == {
        "id": "connector-service",
        "kind": "webapi",
        "taskTypes": ["task_type_3", "task_type_4"],
        "enabled": True,
        "handles": ["task_type_3", "task_type_4"],
        "default": False,
        "resource": None,
    }


def test_a_plugin_left_out_of_enabled_plugins_is_listed_as_disabled_and_handles_nothing(
    runner: CliRunner, tmp_path: Path
) -> None:
    config = write_yaml(
        tmp_path / "config.yaml", {"tasks": {"task-plugins": {"enabled-plugins": ["container", "spark"]}}}
    )
    rows = _rows(runner, "--config", config)
    assert (rows["spark"]["enabled"], rows["spark"]["handles"]) == (True, ["spark"])
    assert (rows["connector-service"]["enabled"], rows["connector-service"]["handles"]) == (False, [])
    assert (rows["sidecar"]["enabled"], rows["sidecar"]["handles"]) == (False, [])
    # Still registered: the task types a plugin could handle are listed whether or not it is enabled.
    assert rows["connector-service"]["taskTypes"] == ["task_type_3", "task_type_4"]


def test_the_table_shows_every_plugin_and_what_it_watches(runner: CliRunner) -> None:
    result = invoke(runner, "plugins")
    assert result.exit_code == 0, result.stderr
    assert "taskplug plugins" in result.stdout
    lines = {line.split("│")[1].strip(): line for line in result.stdout.splitlines() if line.count("│") > 2}
    assert {"pod", "container", "sidecar", "spark", "connector-service"} <= set(lines)
    assert "webapi" in lines["connector-service"] and "task_type_3, task_type_4" in lines["connector-service"]
    assert "SparkApplication" in lines["spark"] and " yes " in lines["spark"]
    assert " no " in lines["pod"]


def test_a_bad_config_exits_2_naming_the_key_path(runner: CliRunner, tmp_path: Path) -> None:
    config = write_yaml(tmp_path / "config.yaml", {"tasks": {"task-plugins": {"enabled-plugin": ["pod"]}}})
    assert_bad_input(invoke(runner, "plugins", "--config", config), "tasks.task-plugins.enabled-plugin")


def test_an_unknown_output_format_exits_2_naming_the_option(runner: CliRunner) -> None:
    result = invoke(runner, "plugins", "-o", "yaml")
    assert result.exit_code == 2
    assert "'--output'" in result.stderr and "'yaml'" in result.stderr
