"""What a submitter cannot do through the API: submit a task type no enabled plugin runs when the server knows
the platform config (``serve --config``), or set the ``relaunch-of`` label the server keeps for relaunches."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from fastapi.testclient import TestClient

from service.test_api_replica_double import pod_spec
from taskplug.executor import Platform
from taskplug.service import platform_task_types
from taskplug.service._api_app import create_app


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("config") / "config.yaml"
    path.write_text(yaml.safe_dump({"tasks": {"task-plugins": {"enabled-plugins": ["container"]}}}))
    return path


@pytest.fixture(scope="module")
def client(postgres_dsn: str, config: Path) -> Iterator[TestClient]:
    app = create_app(postgres_dsn, task_types=platform_task_types(Platform.load(config)))
    with TestClient(app) as c:
        yield c


def test_a_task_type_no_enabled_plugin_runs_is_422_naming_the_field_and_what_enables_it(
    client: TestClient,
) -> None:
    spec = pod_spec("unhandled-type")
    spec["template"]["type"] = "spark"

    response = client.post("/api/v1/executions", json={"spec": spec})

    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["field"] == "spec.template.type"
    assert "'spark'" in error["message"] and "enabled-plugins" in error["message"]
    assert client.get("/api/v1/executions/p/d/unhandled-type/n0").status_code == 404

    # One an enabled plugin runs is submitted.
    assert client.post("/api/v1/executions", json={"spec": pod_spec("handled-type")}).status_code == 201


def test_a_submitter_cannot_set_the_relaunch_of_label(client: TestClient) -> None:
    response = client.post(
        "/api/v1/executions",
        json={"spec": pod_spec("forged-relaunch"), "labels": {"relaunch-of": "p/d/x/n0"}},
    )

    assert response.status_code == 422
    assert response.json()["error"]["field"] == "labels.relaunch-of"
    assert client.get("/api/v1/executions/p/d/forged-relaunch/n0").status_code == 404
    # The server's own relaunch still sets it.
    key = client.post("/api/v1/executions", json={"spec": pod_spec("real-relaunch")}).json()["key"]
    relaunched = client.post(f"/api/v1/executions/{key}/relaunch")

    assert relaunched.status_code == 201
    assert relaunched.json()["labels"] == {"relaunch-of": key}


def test_serve_refuses_a_config_it_cannot_load_naming_it(tmp_path: Path, postgres_dsn: str) -> None:
    from taskplug.cli._serve import serve

    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"tasks": {"task-plugins": {"enabled-plugins": ["no-such-plugin"]}}}))

    result = CliRunner().invoke(serve, ["--store", postgres_dsn, "--config", str(bad), "--port", "0"])

    assert result.exit_code == 2, result.output
    assert "no-such-plugin" in result.output
