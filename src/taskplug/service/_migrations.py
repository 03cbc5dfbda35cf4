"""The service's schema: numbered SQL files in ``migrations/``, applied in order under an advisory lock.

Every process that opens the database (a replica, the API server) calls :func:`migrate` first; the
transaction-scoped advisory lock makes concurrent starts apply each file once, and ``taskplug_schema``
records what was applied. A database whose schema is newer than this code knows (it holds a version this
code has no file for) is refused rather than written to by an older replica.

Numbers need not be contiguous: every file whose number ``taskplug_schema`` does not hold is applied, in
number order, so two changes made side by side (say 0007 and 0008, each on its own branch) each take their
number, and a database that received 0008 first gets 0007 when the code that has it arrives. Files that
share a number are refused: two of them would both be recorded as one version.
"""

from __future__ import annotations

import re
from importlib import resources
from typing import TYPE_CHECKING, Final

from taskplug.core import TaskplugError

if TYPE_CHECKING:
    import psycopg

__all__ = ["LATEST", "MIGRATIONS", "SchemaError", "migrate", "schema_version"]

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
    if len(set(numbers)) != len(numbers) or (numbers and numbers[0] < 1):
        raise SchemaError(f"migrations are not numbered 1, 2, … each once: {[name for _, name, _ in found]}")
    return found


MIGRATIONS: Final = _load()
"""(number, file name, SQL) of every migration this version knows, in order."""

LATEST: Final = MIGRATIONS[-1][0] if MIGRATIONS else 0
"""The highest migration number this version knows: the version a migrated database is at."""


def migrate(conn: psycopg.Connection[tuple[object, ...]]) -> int:
    """Bring the database to this version's schema; the version it is at afterwards."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_ID,))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS taskplug_schema ("
            " version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        applied = {_version(row) for row in conn.execute("SELECT version FROM taskplug_schema").fetchall()}
        unknown = sorted(applied - {number for number, _, _ in MIGRATIONS})
        if unknown:
            raise SchemaError(
                f"the database's schema is at version {max(applied)}; this taskplug does not know version(s) "
                f"{unknown} — upgrade taskplug before running it against this database"
            )
        for number, name, sql in MIGRATIONS:
            if number not in applied:
                conn.execute(sql.encode())
                conn.execute("INSERT INTO taskplug_schema (version, name) VALUES (%s, %s)", (number, name))
                applied.add(number)
    return max(applied, default=0)


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
