"""``taskplug run --server URL hello.py add --a 2`` for a Flyte 2 module: the task serialized here by the SDK
(``tests/support/flyte2_env.py``'s virtualenv on ``PATH``), sent as a spec with its template inline, run by a
replica on a process-mode embedded cluster (its pod runs that virtualenv's ``a0``), followed to its outputs."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner

from service.replica_helpers import empty_database_fixture, running  # noqa: F401 (the conn fixture)
from service.test_api_replica_double import serve_app
from support.flyte2_env import flyte2_python_fixture  # noqa: F401
from support.postgres_server import postgres_dsn_fixture, postgres_server_fixture  # noqa: F401
from taskplug.cli._run import run
from taskplug.executor import Platform
from taskplug.localcluster import LocalCluster
from taskplug.service import Replica, ReplicaSettings
from taskplug.service._api_app import create_app

pytestmark = pytest.mark.integration

HELLO = Path(__file__).resolve().parents[2] / "examples" / "flyte2" / "hello.py"
FAST = ReplicaSettings(heartbeat=0.5, ttl=3.0, margin=1.0, poll=0.25, reap=0.5, reconcile=1.0)


@pytest.fixture
def api(postgres_dsn: str) -> Iterator[str]:
    with serve_app(create_app(postgres_dsn, poll_interval=0.25)) as url:
        yield url


async def test_run_with_server_submits_a_flyte2_task_and_follows_it_to_its_outputs(
    conn: psycopg.Connection[Any],
    postgres_dsn: str,
    api: str,
    tmp_path: Path,
    flyte2_python: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PATH", f"{flyte2_python.parent}:{os.environ.get('PATH', '')}")
    platform = Platform.load(
        document={"executor": {"data-root": str(tmp_path / "data"), "resync-period": "1s"}}
    )
    args = [
        "--server",
        api,
        "-o",
        "json",
        "--name",
        "f2task",
        str(HELLO),
        "scale",
        "--p",
        '{"x": 1, "y": -2}',
    ]
    async with (
        LocalCluster(mode="process", kill_grace_seconds=1.0) as cluster,
        running(Replica(postgres_dsn, platform, cluster.client(), settings=FAST)),
    ):
        result = await asyncio.to_thread(CliRunner().invoke, run, args)
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert (document["execution"], document["phase"]) == ("flytesnacks/development/f2task/n0", "Success")
    assert document["outputs"] == {"o0": {"x": 2.0, "y": -4.0}}  # factor's default, 2.0
    stored = conn.execute("SELECT spec FROM taskplug_executions WHERE key = %s", (document["execution"],))
    spec = stored.fetchone()[0]
    # The self-contained form: Flyte 2's template inline (type python), the execution named.
    assert (spec["template"]["type"], spec["execution"]["id"]["name"]) == ("python", "f2task")
