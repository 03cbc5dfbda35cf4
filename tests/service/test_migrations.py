"""The schema is applied once however many processes start at once, and a newer schema is refused."""

from __future__ import annotations

import threading

import psycopg
import pytest

from support.postgres_server import PostgresServer
from taskplug.service import MIGRATIONS, SchemaError, migrate, schema_version
from taskplug.service._migrations import LATEST


def test_replicas_starting_together_apply_each_migration_once(postgres_dsn: str) -> None:
    versions: list[int] = []

    def start() -> None:
        with psycopg.connect(postgres_dsn) as conn:
            versions.append(migrate(conn))

    threads = [threading.Thread(target=start) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert versions == [LATEST] * 4
    with psycopg.connect(postgres_dsn) as conn:
        assert schema_version(conn) == LATEST
        applied = conn.execute("SELECT version, name FROM taskplug_schema ORDER BY version").fetchall()
    assert applied == [(number, name) for number, name, _ in MIGRATIONS]


def test_a_database_with_a_newer_schema_is_refused_untouched(postgres_server: PostgresServer) -> None:
    dsn = postgres_server.create_database()
    with psycopg.connect(dsn) as conn:
        migrate(conn)
        conn.execute("INSERT INTO taskplug_schema (version, name) VALUES (%s, 'from_the_future.sql')", (99,))
        conn.commit()
        with pytest.raises(SchemaError, match="version 99"):
            migrate(conn)
        assert schema_version(conn) == 99


def test_a_fresh_database_is_at_version_zero(postgres_server: PostgresServer) -> None:
    dsn = postgres_server.create_database()
    with psycopg.connect(dsn) as conn:
        assert schema_version(conn) == 0


def test_a_migration_numbered_below_the_database_s_latest_is_applied_when_it_arrives(
    postgres_server: PostgresServer,
) -> None:
    """Two changes made side by side each take a number: a database that got the later one first gets the
    earlier one when code that has it starts, and each is recorded once (the last two files touch different
    tables)."""
    fresh = postgres_server.create_database()
    with psycopg.connect(fresh) as conn:
        with conn.transaction():
            conn.execute(
                "CREATE TABLE taskplug_schema (version integer PRIMARY KEY, name text NOT NULL,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            )
            for number, name, sql in MIGRATIONS[:-2]:
                conn.execute(sql.encode())
                conn.execute("INSERT INTO taskplug_schema (version, name) VALUES (%s, %s)", (number, name))
            number, name, sql = MIGRATIONS[-1]
            conn.execute(sql.encode())
            conn.execute("INSERT INTO taskplug_schema (version, name) VALUES (%s, %s)", (number, name))
        assert migrate(conn) == LATEST
        applied = conn.execute("SELECT version FROM taskplug_schema ORDER BY version").fetchall()
    assert [v for (v,) in applied] == [number for number, _, _ in MIGRATIONS]
