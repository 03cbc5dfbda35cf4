"""The service's schema: numbered SQL files in ``migrations/``, applied in order under an advisory lock.

Every process that opens the database (a replica, the API server) calls :func:`migrate` first; the
transaction-scoped advisory lock makes concurrent starts apply each file once, and ``taskplug_schema``
records what was applied. A database whose schema is newer than this code knows is refused rather than
written to by an older replica.
"""

from __future__ import annotations

import re
from importlib import resources
from typing import TYPE_CHECKING, Final

from taskplug.core import TaskplugError

if TYPE_CHECKING:
    import psycopg

__all__ = ["MIGRATIONS", "SchemaError", "migrate", "schema_version"]

_LOCK_ID: Final = 0x7461736B706C7567 & 0x7FFFFFFFFFFFFFFF
"""The advisory lock key ("taskplug" as a number) that serialises migrations."""

_NAME: Final = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


class SchemaError(TaskplugError):
    """The database's schema is not one this version of taskplug can use."""


def _load() -> list[tuple[int, str, str]]:
    found = []
    for entry in resources.files("taskplug.service").joinpath("migrations").iterdir():
        match = _NAME.match(entry.name)
        if match is not None:
            found.append((int(match.group(1)), entry.name, entry.read_text(encoding="utf-8")))
    found.sort()
    numbers = [n for n, _, _ in found]
    if numbers != list(range(1, len(numbers) + 1)):
        raise SchemaError(f"migrations are not numbered 1..n without gaps: {[name for _, name, _ in found]}")
    return found


MIGRATIONS: Final = _load()
"""(number, file name, SQL) of every migration this version knows, in order."""


def migrate(conn: psycopg.Connection[tuple[object, ...]]) -> int:
    """Bring the database to this version's schema; the version it is at afterwards."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_ID,))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS taskplug_schema ("
            " version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        row = conn.execute("SELECT coalesce(max(version), 0) FROM taskplug_schema").fetchone()
        current = _version(row)
        if current > len(MIGRATIONS):
            raise SchemaError(
                f"the database's schema is at version {current}; this taskplug knows versions up to "
                f"{len(MIGRATIONS)} — upgrade taskplug before running it against this database"
            )
        for number, name, sql in MIGRATIONS[current:]:
            conn.execute(sql.encode())
            conn.execute("INSERT INTO taskplug_schema (version, name) VALUES (%s, %s)", (number, name))
    return max(current, len(MIGRATIONS))


def schema_version(conn: psycopg.Connection[tuple[object, ...]]) -> int:
    """The version the database is at (0 for a database taskplug never used)."""
    exists = conn.execute("SELECT to_regclass('taskplug_schema') IS NOT NULL").fetchone()
    if not exists or not exists[0]:
        return 0
    return _version(conn.execute("SELECT coalesce(max(version), 0) FROM taskplug_schema").fetchone())


def _version(row: tuple[object, ...] | None) -> int:
    value = row[0] if row else 0
    if not isinstance(value, int):
        raise SchemaError(f"taskplug_schema holds a version that is not a number: {value!r}")
    return value
