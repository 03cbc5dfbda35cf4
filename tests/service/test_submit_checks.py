"""What a submitter cannot do through the API: submit a task type no enabled plugin runs when the server knows
the platform config (``serve --config``; a workflow's tasks' types too), ask for more than ``executor.limits`` allows, or set the
``relaunch-of`` label the server keeps for relaunches."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from fastapi.testclient import TestClient

from service.replica_helpers import workflow_document
from service.test_api_replica_double import pod_spec
from taskplug.executor import Platform, submission_limits
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


@pytest.mark.parametrize(
    ("change", "field"),
    [
        pytest.param(
            lambda spec: spec.setdefault("execution", {}).update(maxAttempts=4294967295),
            "spec.execution.maxAttempts",
            id="attempts",
        ),
    ],
)
def test_a_submission_above_the_default_limits_is_422_naming_the_field(
    postgres_dsn: str, change: Any, field: str
) -> None:
    # No --config: the limits are executor.limits' defaults, never none at all.
    with TestClient(create_app(postgres_dsn)) as client:
        spec = pod_spec("too-many-attempts")
        change(spec)
        response = client.post("/api/v1/executions", json={"spec": spec})
        assert response.status_code == 422, response.text
        error = response.json()["error"]
        assert error["field"] == field and "executor.limits" in error["message"]
        assert client.get("/api/v1/executions/p/d/too-many-attempts/n0").status_code == 404


def test_a_map_above_the_configured_limits_is_422_naming_the_field(postgres_dsn: str, tmp_path: Path) -> None:
    config = tmp_path / "limits.yaml"
    config.write_text(yaml.safe_dump({"executor": {"limits": {"max-elements": 3, "max-parallelism": 2}}}))
    platform = Platform.load(config)
    with TestClient(create_app(postgres_dsn, submission_limits=submission_limits(platform))) as client:
        for name, xs, array, field in [
            ("wide-map", [1, 2, 3, 4], {}, "spec.inputs"),
            ("eager-map", [1, 2], {"parallelism": 5}, "spec.arrayNode.parallelism"),
        ]:
            spec = {
                "template": {
                    "id": {
                        "resourceType": "TASK",
                        "project": "p",
                        "domain": "d",
                        "name": "sq",
                        "version": "v1",
                    },
                    "type": "container",
                    "container": {"image": "busybox", "command": ["true"]},
                    "interface": {
                        "inputs": {"variables": {"x": {"type": {"collectionType": {"simple": "INTEGER"}}}}}
                    },
                },
                "arrayNode": array,
                "execution": {"id": {"project": "p", "domain": "d", "name": name}},
                "inputs": {"x": xs},
            }
            response = client.post("/api/v1/executions", json={"spec": spec})
            assert response.status_code == 422, response.text
            assert response.json()["error"]["field"] == field


def test_a_workflow_whose_task_type_no_enabled_plugin_runs_is_422_naming_its_tasks(
    client: TestClient,
) -> None:
    document = workflow_document("wf-unhandled")
    document["workflowClosure"]["tasks"][0]["template"]["type"] = "spark"

    response = client.post("/api/v1/executions", json={"spec": document})

    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["field"] == "spec.workflowClosure.tasks"
    assert "'spark'" in error["message"]
    # The workflow itself is no task type: one whose tasks an enabled plugin runs is submitted.
    ok = client.post("/api/v1/executions", json={"spec": workflow_document("wf-handled")})
    assert ok.status_code == 201, ok.text
