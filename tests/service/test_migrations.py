"""The schema is applied once however many processes start at once, and a newer schema is refused."""

from __future__ import annotations

import threading

import psycopg
import pytest

from support.postgres_server import PostgresServer
from taskplug.service import MIGRATIONS, SchemaError, migrate, schema_version


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

    assert versions == [len(MIGRATIONS)] * 4
    with psycopg.connect(postgres_dsn) as conn:
        assert schema_version(conn) == len(MIGRATIONS)
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
