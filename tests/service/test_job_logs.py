"""A connector task's log on the service: ``taskplug serve`` with the platform config asks the task's connector
(``GetTaskLogs``, page after page) for the job the attempt's record names, and shows it in the logs API (and
so in the web view's log pane) beside the pods' logs. Real PostgreSQL, a real replica, a real Flyte 2
connector served by the ``flyte`` SDK's ``c0`` on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from service.replica_helpers import (
    empty_database_fixture,  # noqa: F401 (the conn fixture)
    rows,
    running,
    submit,
)
from service.test_api_replica_double import serve_app
from support.flyte2_connector_server import (  # noqa: F401
    Flyte2ConnectorServer,
    flyte2_connector_server_fixture,
)
from support.postgres_server import postgres_dsn_fixture, postgres_server_fixture  # noqa: F401
from support.waiting import wait_until
from taskplug.executor import Platform
from taskplug.localcluster import LocalCluster
from taskplug.service import JobLogs, Replica, ReplicaSettings
from taskplug.service._api_app import create_app

pytestmark = pytest.mark.integration

FAST = ReplicaSettings(heartbeat=0.5, ttl=3.0, margin=1.0, poll=0.25, reap=0.5, reconcile=1.0)
_INT = {"type": {"simple": "INTEGER"}}


def _platform(tmp_path: Path, server: Flyte2ConnectorServer) -> Platform:
    return Platform.load(
        document={
            "executor": {"data-root": str(tmp_path / "data"), "resync-period": "30s"},
            "tasks": {"task-plugins": {"enabled-plugins": ["container", "connector-service"]}},
            "plugins": {
                "connector-service": {
                    "webApi": {"caching": {"resyncInterval": "5s"}},
                    "connectors": {
                        "flyte2": {
                            "endpoint": server.endpoint,
                            "insecure": True,
                            "defaultTimeout": "30s",
                            "protocol": "flyteidl2",
                        }
                    },
                }
            },
        }
    )


def _task(name: str) -> dict[str, Any]:
    return {
        "template": {
            "id": {"resourceType": "TASK", "project": "fp", "domain": "dev", "name": "t", "version": "v1"},
            "type": "scripted_job2",
            "custom": {
                "script": ["RUNNING", "SUCCEEDED"],
                "secrets": {"api_key": "demo_key"},
                "configs": {"region": "eu-1"},
            },
            "interface": {"inputs": {"variables": {"x": _INT}}, "outputs": {"variables": {"o0": _INT}}},
        },
        "execution": {"id": {"project": "fp", "domain": "dev", "name": name, "nodeId": "n0"}},
        "inputs": {"x": 3},
    }


async def test_the_logs_api_shows_a_connector_jobs_log_from_its_connector(
    conn: psycopg.Connection[Any],
    postgres_dsn: str,
    flyte2_connector_server: Flyte2ConnectorServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FLYTE_SECRET_demo_key", "s3cr3t")
    platform = _platform(tmp_path, flyte2_connector_server)
    jobs_before = set(flyte2_connector_server.state_dir.glob("*.request.json"))
    submit(conn, "fp/dev/joblog/n0", _task("joblog"))
    async with (
        LocalCluster(mode="simulated") as cluster,
        running(Replica(postgres_dsn, platform, cluster.client(), settings=FAST)),
    ):
        await wait_until(lambda: rows(conn)["fp/dev/joblog/n0"]["terminal"], within=90, what="the task ends")
    assert rows(conn)["fp/dev/joblog/n0"]["phase"] == "Success"
    (request,) = set(flyte2_connector_server.state_dir.glob("*.request.json")) - jobs_before
    job = request.name.removesuffix(".request.json")

    app = create_app(postgres_dsn, poll_interval=0.25, job_logs=JobLogs(platform))
    with serve_app(app) as url:
        async with httpx.AsyncClient(base_url=f"{url}/api/v1", timeout=60) as client:
            answer = await client.get("/executions/fp/dev/joblog/n0/logs")
            one_attempt = await client.get("/executions/fp/dev/joblog/n0/logs", params={"attempt": 0})
    with serve_app(create_app(postgres_dsn, poll_interval=0.25)) as url:
        async with httpx.AsyncClient(base_url=f"{url}/api/v1", timeout=60) as client:
            without_config = await client.get("/executions/fp/dev/joblog/n0/logs")

    assert answer.status_code == 200, answer.text
    lines = [f"{job} page {page} line {i}" for page in (1, 2, 3) for i in range(4)]
    # Shown as the container log of the attempt's job, headed as every container log is.
    assert answer.text.splitlines() == ["==> node n0, attempt 0: pod job, container connector <==", *lines]
    assert one_attempt.text.splitlines() == lines
    # Without the platform config the server does not know the connector: nothing to show.
    assert without_config.status_code == 404
