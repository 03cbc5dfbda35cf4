"""``taskplug render`` routes a task as ``taskplug run`` does: a connector task (here flytekit's own
FileSensor, task type ``sensor``, which only the connector's discovery knows) is named as the web-API
plugin's, against a real flytekit connector server on 127.0.0.1 — not "no plugin defined"."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from support.connector_server import ConnectorServer, connector_server_fixture  # noqa: F401
from support.webapi import connector_document, file_sensor_document
from taskplug.executor import Platform

pytestmark = pytest.mark.integration

TASKPLUG = str(Path(sys.executable).with_name("taskplug"))


def _render(
    spec: dict[str, object], config: dict[str, object], tmp_path: Path
) -> subprocess.CompletedProcess[str]:
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    return subprocess.run(
        [TASKPLUG, "render", str(tmp_path / "spec.yaml"), "--config", str(tmp_path / "config.yaml")],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )


def test_render_of_a_connector_task_names_the_web_api_plugin_that_runs_it(
    connector_server: ConnectorServer, tmp_path: Path
) -> None:
    spec = file_sensor_document("render-sensor", tmp_path / "never")
    done = _render(spec, connector_document(tmp_path, connector_server.endpoint), tmp_path)

    assert done.returncode == 2
    assert "no plugin defined" not in done.stderr
    assert "task type [sensor] is run by the webapi plugin [connector-service]" in done.stderr
    assert "creates no Kubernetes object" in done.stderr


def test_the_platform_resolves_a_discovered_task_type_to_the_connector_entry(
    connector_server: ConnectorServer, tmp_path: Path
) -> None:
    platform = Platform.load(document=connector_document(tmp_path, connector_server.endpoint))
    assert platform.entry_for("sensor").id == "connector-service"
    # A registered type never needs discovery, and still resolves to its own plugin.
    assert platform.entry_for("python-task").id == "container"


def test_without_a_connector_serving_it_render_still_says_no_plugin_is_defined(tmp_path: Path) -> None:
    spec = file_sensor_document("render-sensor", tmp_path / "never")
    done = _render(spec, {"executor": {"data-root": str(tmp_path / "data")}}, tmp_path)

    assert done.returncode == 2
    assert "no plugin defined for Handler type [sensor]" in done.stderr
