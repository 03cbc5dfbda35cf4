"""``taskplug gc``: executions that finished before the cutoff go with every row recorded about them; live,
young and locked ones stay; bad arguments are exit 2 naming the option. Rows are written as a replica writes
them (:class:`ReplicaDouble`), then aged by moving ``finished_at`` back."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner

from service.replica_helpers import submit
from service.test_api_replica_double import ReplicaDouble, pod_spec
from taskplug.cli._gc import gc, parse_age
from taskplug.core import SpecError
from taskplug.service import collect_garbage

pytestmark = pytest.mark.integration


def finished(double: ReplicaDouble, conn: psycopg.Connection[Any], key: str, *, days_ago: float) -> int:
    """An execution run to Success by ``double`` (a Running event, a map element, a create intent, the end),
    finished ``days_ago``; its id."""
    submit(conn, key, pod_spec(key.split("/")[-1]))
    double.claim(key)
    double.phase(key, "Running")
    double.elements(key, [{"index": 0, "node_phase": "Succeeded", "attempts": 1}])
    double.phase(key, "Success", outputs={"o0": 1})
    row = conn.execute(
        "UPDATE taskplug_executions SET finished_at = now() - make_interval(days => %s) WHERE key = %s"
        " RETURNING id",
        (days_ago, key),
    ).fetchone()
    assert row is not None
    conn.execute(
        "INSERT INTO taskplug_create_intents (execution_id, element, attempt, resource_name, epoch, outcome_at)"
        " VALUES (%s, -1, 0, %s, 1, now())",
        (row[0], key.split("/")[-1]),
    )
    return int(row[0])


def counts(conn: psycopg.Connection[Any], execution_id: int) -> dict[str, int]:
    tables = ["taskplug_events", "taskplug_attempts", "taskplug_nodes", "taskplug_create_intents"]
    found = {}
    for table in tables:
        row = conn.execute(
            f"SELECT count(*) FROM {table} WHERE execution_id = %s", (execution_id,)
        ).fetchone()
        assert row is not None
        found[table] = row[0]
    return found


def keys(conn: psycopg.Connection[Any]) -> set[str]:
    return {r[0] for r in conn.execute("SELECT key FROM taskplug_executions").fetchall()}


@pytest.fixture
def double(postgres_dsn: str, conn: psycopg.Connection[Any]) -> Any:
    replica = ReplicaDouble(postgres_dsn)
    yield replica
    replica.close()


def test_old_finished_executions_go_with_their_rows_and_the_rest_stays(
    conn: psycopg.Connection[Any], double: ReplicaDouble
) -> None:
    old = finished(double, conn, "p/d/old", days_ago=8)
    young = finished(double, conn, "p/d/young", days_ago=1)
    assert all(counts(conn, old).values()), counts(conn, old)
    # An execution still running, submitted long ago: never touched, however old.
    submit(conn, "p/d/running", pod_spec("running"))
    double.claim("p/d/running")
    double.phase("p/d/running", "Running")
    conn.execute(
        "UPDATE taskplug_executions SET created_at = now() - interval '30 days' WHERE key = 'p/d/running'"
    )

    report = collect_garbage(conn, older_than=timedelta(days=7))

    assert (report.executions, report.events, report.batches, report.dry_run) == (1, 3, 1, False)
    assert keys(conn) == {"p/d/young", "p/d/running"}
    assert counts(conn, old) == dict.fromkeys(counts(conn, old), 0)
    assert all(counts(conn, young).values())
    # Nothing is left to delete: a second pass finds nothing.
    assert collect_garbage(conn, older_than=timedelta(days=7)).executions == 0


def test_gc_deletes_in_batches_oldest_first(conn: psycopg.Connection[Any], double: ReplicaDouble) -> None:
    for i in range(25):
        finished(double, conn, f"p/d/e{i}", days_ago=10 + i)
    report = collect_garbage(conn, older_than=timedelta(days=7), batch=10)
    assert (report.executions, report.batches) == (25, 3)
    assert keys(conn) == set()


def test_a_dry_run_counts_and_deletes_nothing(conn: psycopg.Connection[Any], double: ReplicaDouble) -> None:
    finished(double, conn, "p/d/a", days_ago=9)
    finished(double, conn, "p/d/b", days_ago=3)
    report = collect_garbage(conn, older_than=timedelta(days=7), dry_run=True)
    assert (report.executions, report.events, report.dry_run) == (1, 3, True)
    assert keys(conn) == {"p/d/a", "p/d/b"}


def test_a_row_another_transaction_holds_is_skipped_not_waited_for(
    postgres_dsn: str, conn: psycopg.Connection[Any], double: ReplicaDouble
) -> None:
    finished(double, conn, "p/d/held", days_ago=9)
    finished(double, conn, "p/d/free", days_ago=9)
    with psycopg.connect(postgres_dsn) as other, other.transaction():
        other.execute("SELECT 1 FROM taskplug_executions WHERE key = 'p/d/held' FOR UPDATE")
        report = collect_garbage(conn, older_than=timedelta(days=7))
    assert report.executions == 1
    assert keys(conn) == {"p/d/held"}
    assert collect_garbage(conn, older_than=timedelta(days=7)).executions == 1


def test_a_cutoff_inside_the_reapers_window_is_refused(conn: psycopg.Connection[Any]) -> None:
    with pytest.raises(SpecError, match=r"--older-than.*orphan reaper"):
        collect_garbage(conn, older_than=timedelta(minutes=5))


@pytest.mark.parametrize(
    ("text", "age"),
    [("7d", timedelta(days=7)), ("36h", timedelta(hours=36)), ("1h30m", timedelta(minutes=90))],
)
def test_ages_are_whole_days_or_go_durations(text: str, age: timedelta) -> None:
    assert parse_age(text) == age


def test_the_command_deletes_and_reports_as_json(
    postgres_dsn: str, conn: psycopg.Connection[Any], double: ReplicaDouble
) -> None:
    finished(double, conn, "p/d/cli-old", days_ago=8)
    finished(double, conn, "p/d/cli-young", days_ago=0)
    runner = CliRunner()
    dry = runner.invoke(gc, ["--store", postgres_dsn, "--older-than", "7d", "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert dry.output.startswith("would delete 1 execution(s) and 3 event(s) finished before ")
    result = runner.invoke(gc, ["--store", postgres_dsn, "--older-than", "168h", "-o", "json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert (document["executions"], document["events"], document["dry_run"]) == (1, 3, False)
    assert keys(conn) == {"p/d/cli-young"}


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--older-than", "7 days"], "--older-than"),
        (["--older-than", "-3h"], "--older-than"),
        (["--older-than", "1m"], "--older-than"),
        (["--older-than", "99999999999999h"], "--older-than"),
    ],
)
def test_a_bad_age_is_exit_2_naming_the_option(postgres_dsn: str, args: list[str], named: str) -> None:
    result = CliRunner().invoke(gc, ["--store", postgres_dsn, *args])
    assert result.exit_code == 2, result.output
    assert f"error: {named}" in result.output


def test_an_unusable_store_is_exit_2_naming_it(tmp_path: Any) -> None:
    from support.net import free_port

    for store in ("sqlite:///x.db", f"postgresql://nobody@127.0.0.1:{free_port()}/none"):
        result = CliRunner().invoke(gc, ["--store", store, "--older-than", "7d"])
        assert result.exit_code == 2, result.output
        assert "error: --store" in result.output
