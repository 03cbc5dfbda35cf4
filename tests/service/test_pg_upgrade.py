"""A replicas' database written by the release before node records (``fixtures/pg_v4.sql``, schema version
4, made by ``fixtures/pg_v4.py``) is migrated — its map elements become ``taskplug_nodes`` rows at
``n0/<index>``, every record speaks today's key names — and a replica resumes both executions it holds
mid-run, a single task and a map of three elements of a web-API task, to Success from their stored plugin
state, creating nothing again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg

from service.fixtures.pg_v4 import MAP, MAP_SIZE, SINGLE, ProgressProbe, platform
from service.replica_helpers import rows, running
from support.waiting import wait_until
from taskplug.localcluster import LocalCluster
from taskplug.service import Replica, ReplicaSettings, migrate
from taskplug.service._migrations import LATEST, MIGRATIONS

FIXTURE = Path(__file__).with_name("fixtures") / "pg_v4.sql"
FAST = ReplicaSettings(heartbeat=0.5, ttl=3.0, margin=1.0, poll=0.25, reap=0.5, reconcile=1.0)
JOBS = {f"{SINGLE}-n0-0", *(f"{MAP}-n0-0-n{i}-0" for i in range(MAP_SIZE))}


def _load_version_4(conn: psycopg.Connection[Any]) -> None:
    """The schema as the release before left it (migrations 0001–0004), then the fixture's rows."""
    with conn.transaction():
        conn.execute(
            "CREATE TABLE taskplug_schema ("
            " version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        for number, name, sql in MIGRATIONS[:4]:
            conn.execute(sql.encode())
            conn.execute("INSERT INTO taskplug_schema (version, name) VALUES (%s, %s)", (number, name))
        conn.execute(FIXTURE.read_text().encode())


async def test_a_version_4_database_is_migrated_and_a_replica_resumes_its_executions_creating_nothing_again(
    postgres_dsn: str, tmp_path: Path
) -> None:
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        _load_version_4(conn)
        assert migrate(conn) == LATEST
        assert conn.execute("SELECT to_regclass('taskplug_elements')").fetchone() == (None,)
        nodes = conn.execute(
            "SELECT e.key, n.path, n.record FROM taskplug_nodes n JOIN taskplug_executions e ON e.id = n.execution_id"
            " ORDER BY n.path"
        ).fetchall()
        assert [(key, path) for key, path, _ in nodes] == [(MAP, f"n0/{i}") for i in range(MAP_SIZE)]
        for _, path, record in nodes:
            assert (record["path"], record["attempt"]) == (path, 0)
            assert record["plugin_state"]["resourceMeta"] == {"job": f"{MAP}-n0-0-n{path[-1]}-0"}
            assert not {"index", "attempts"} & record.keys()
        records = dict(conn.execute("SELECT key, record FROM taskplug_executions").fetchall())
        assert (records[SINGLE]["path"], records[SINGLE]["task_phase"]) == ("n0", 5)
        assert records[MAP]["path"] == "n0"
        assert not any({"phase", "user_failures"} & record.keys() for record in records.values())
        intents_before = conn.execute("SELECT count(*) FROM taskplug_create_intents").fetchone()
        # A single task's intent keeps node ''; a map's elements' move under its root node's path (0008).
        intents = conn.execute(
            "SELECT e.key, i.node, i.element FROM taskplug_create_intents i"
            " JOIN taskplug_executions e ON e.id = i.execution_id ORDER BY e.key, i.element"
        ).fetchall()
        assert sorted(intents) == sorted([(SINGLE, "", -1)] + [(MAP, "n0", i) for i in range(MAP_SIZE)])

        probe = ProgressProbe(finish=True)
        async with (
            LocalCluster(mode="simulated") as cluster,
            running(
                Replica(postgres_dsn, platform(probe, tmp_path / "data"), cluster.client(), settings=FAST)
            ),
        ):
            await wait_until(
                lambda: all(rows(conn)[k]["terminal"] for k in (SINGLE, MAP)), within=60, what="both end"
            )
        found = rows(conn)
        assert (found[SINGLE]["phase"], found[MAP]["phase"]) == ("Success", "Success")
        # Every attempt was followed from the job the old release created (its resource meta, kept in the
        # plugin state): none was created again.
        assert probe.created == []
        assert set(probe.polled) == JOBS
        assert conn.execute("SELECT count(*) FROM taskplug_create_intents").fetchone() == intents_before
        elements = conn.execute(
            "SELECT n.path, n.record->>'attempt' FROM taskplug_nodes n "
            "JOIN taskplug_executions e ON e.id = n.execution_id WHERE e.key = %s ORDER BY n.path",
            (MAP,),
        ).fetchall()
        assert elements == [(f"n0/{i}", "0") for i in range(MAP_SIZE)]
