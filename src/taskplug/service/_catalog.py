"""The data catalog on PostgreSQL, shared by every replica (``taskplug_catalog``,
``taskplug_catalog_reservations``; migration 0009): the same protocol as the SQLite catalog
(:class:`taskplug.executor.Catalog`), each call one statement committed at once.

Follows datacatalog's ``pkg/manager/impl/reservation_manager.go`` for the reservations: take or extend is one
``INSERT … ON CONFLICT DO UPDATE … WHERE`` (held by this owner, or expired), so two replicas racing for a key
cannot both get it; the database's clock decides expiry, so replicas' clocks need not agree.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from taskplug.executor import CatalogEntry, CatalogKey, Reservation

if TYPE_CHECKING:
    import psycopg

__all__ = ["PostgresCatalog"]

_KEY = "project, domain, dataset, version, tag"
_WHERE = "project = %s AND domain = %s AND dataset = %s AND version = %s AND tag = %s"
_DATASET_PREFIX = "flyte_task-"


def _key(key: CatalogKey) -> tuple[str, str, str, str, str]:
    return key.project, key.domain, key.dataset, key.version, key.tag


def _entry(row: tuple[Any, ...]) -> CatalogEntry:
    project, domain, dataset, version, tag, uri, source, task_version, created = row
    return CatalogEntry(
        CatalogKey(project, domain, dataset, version, tag), uri, source, task_version, created.timestamp()
    )


class PostgresCatalog:
    """The catalog over an autocommit psycopg connection (its own: calls are made from the executor's
    rounds and must not join the state store's batch)."""

    def __init__(self, conn: psycopg.Connection[tuple[Any, ...]]) -> None:
        self._conn = conn

    def close(self) -> None:
        self._conn.close()

    def get(self, key: CatalogKey) -> CatalogEntry | None:
        row = self._conn.execute(
            f"SELECT {_KEY}, uri, source, task_version, created_at FROM taskplug_catalog WHERE {_WHERE}",
            _key(key),
        ).fetchone()
        return _entry(row) if row is not None else None

    def put(self, entry: CatalogEntry) -> None:
        created = datetime.datetime.fromtimestamp(entry.created_at, datetime.UTC)
        self._conn.execute(
            f"INSERT INTO taskplug_catalog ({_KEY}, uri, source, task_version, created_at) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (project, domain, dataset, version, tag) "
            "DO UPDATE SET uri = excluded.uri, source = excluded.source, task_version = excluded.task_version, "
            "created_at = excluded.created_at",
            (*_key(entry.key), entry.uri, entry.source, entry.task_version, created),
        )

    def get_or_extend_reservation(self, key: CatalogKey, owner: str, expires_in: float) -> Reservation:
        interval = datetime.timedelta(seconds=expires_in)
        row = self._conn.execute(
            f"WITH taken AS (INSERT INTO taskplug_catalog_reservations ({_KEY}, owner, expires_at) "
            "VALUES (%s, %s, %s, %s, %s, %s, now() + %s) ON CONFLICT (project, domain, dataset, version, tag) "
            "DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at "
            "WHERE taskplug_catalog_reservations.owner = excluded.owner "
            "OR taskplug_catalog_reservations.expires_at < now() RETURNING owner, expires_at) "
            f"SELECT owner, expires_at FROM taken UNION ALL "
            f"SELECT owner, expires_at FROM taskplug_catalog_reservations WHERE {_WHERE} "
            "AND NOT EXISTS (SELECT 1 FROM taken)",
            (*_key(key), owner, interval, *_key(key)),
        ).fetchone()
        assert row is not None
        return Reservation(row[0], row[1].timestamp())

    def release_reservation(self, key: CatalogKey, owner: str) -> None:
        self._conn.execute(
            f"DELETE FROM taskplug_catalog_reservations WHERE {_WHERE} AND owner = %s", (*_key(key), owner)
        )

    def entries(
        self, *, task: str | None = None, version: str | None = None, older_than: float | None = None
    ) -> list[CatalogEntry]:
        where: list[str] = ["true"]
        args: list[Any] = []
        if task is not None:
            where.append("dataset = %s")
            args.append(_DATASET_PREFIX + task)
        if older_than is not None:
            where.append("created_at < %s")
            args.append(datetime.datetime.fromtimestamp(older_than, datetime.UTC))
        rows = self._conn.execute(
            f"SELECT {_KEY}, uri, source, task_version, created_at FROM taskplug_catalog "
            f"WHERE {' AND '.join(where)} ORDER BY created_at DESC",
            args,
        ).fetchall()
        found = [_entry(r) for r in rows]
        return [e for e in found if version is None or e.key.discovery_version == version]

    def delete(self, entries: list[CatalogEntry]) -> int:
        count = 0
        for entry in entries:
            cursor = self._conn.execute(f"DELETE FROM taskplug_catalog WHERE {_WHERE}", _key(entry.key))
            count += cursor.rowcount
        return count
