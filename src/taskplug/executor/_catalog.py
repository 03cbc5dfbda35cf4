"""The data catalog: what a cacheable task's outputs are keyed by, where they are kept, and the reservations
that let one execution compute a ``cache_serialize`` task's outputs while the others wait.

Follows flytepropeller's ``pkg/controller/nodes/catalog`` (``datacatalog/transformer.go`` for the key,
``hashing.go`` for the inputs' hash) and datacatalog's ``pkg/manager/impl/reservation_manager.go`` for the
reservations:

* A task is cacheable when its template's ``metadata.discoverable`` is set (node-level cache settings are
  ignored, as propeller ignores them); serialized when ``cache_serializable`` is set too.
* The key: dataset ``{project, domain, "flyte_task-<task name>", "<discovery_version>-<in8>-<out8>"}`` (in8,
  out8: the first 8 characters of the interface's input and output variable maps' hashes) and the tag
  ``flyte_cached-<inputs hash>`` over the inputs less ``cache_ignore_input_vars``, a literal whose own
  ``hash`` is set standing for that hash alone (through collections and maps). The task's version is not
  part of it, so a changed body under the same ``cache_version`` hits, as on Flyte. An empty
  ``discovery_version`` is an error (:class:`CatalogKeyError`).
* A reservation is held by one owner until it expires (``heartbeat × grace multiplier`` after its last
  extension); the owner extends it, anyone takes over an expired one, the owner releases it.

Deviation: the hashes are SHA-256 over protobuf's deterministic encoding, not Flyte's objecthash over
jsonpb; the key's fields are Flyte's, so the same inputs hit and differing ones miss exactly as on Flyte, but
a taskplug catalog cannot be shared with a real datacatalog.

Deviation: datacatalog keeps an artifact's literals in its own blob store; here the catalog row points at a
copy of the outputs kept under the data root (``<data root>/catalog/…/outputs.pb``), so deleting the
execution that produced them does not break a hit. A copy that is missing or unreadable is a miss (the task
runs again and the copy is rewritten), never a failure.

Two stores: :class:`SQLiteCatalog` (tables ``catalog`` and ``catalog_reservations`` in the state file, shared
by every ``taskplug run`` that uses it) and ``taskplug.service.PostgresCatalog`` (shared by all replicas).
"""

from __future__ import annotations

import base64
import enum
import hashlib
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from flyteidl.core import interface_pb2, literals_pb2, tasks_pb2

from taskplug.core import TaskplugError

__all__ = [
    "DEFAULT_GRACE_MULTIPLIER",
    "DEFAULT_HEARTBEAT",
    "CacheStatus",
    "Catalog",
    "CatalogEntry",
    "CatalogKey",
    "CatalogKeyError",
    "Reservation",
    "SQLiteCatalog",
    "catalog_key",
    "hash_inputs",
    "is_cacheable",
    "is_serialized",
    "outputs_location",
]

DEFAULT_HEARTBEAT = 10.0
"""Seconds between a reservation holder's extensions (propeller's workflow re-evaluation interval)."""
DEFAULT_GRACE_MULTIPLIER = 3
"""A reservation expires this many heartbeats after its last extension (datacatalog's
``heartbeatGracePeriodMultiplier``)."""

_DATASET_PREFIX = "flyte_task-"
_TAG_PREFIX = "flyte_cached-"


class CacheStatus(enum.StrEnum):
    """flyteidl ``core.CatalogCacheStatus``."""

    CACHE_DISABLED = "CACHE_DISABLED"
    CACHE_MISS = "CACHE_MISS"
    CACHE_HIT = "CACHE_HIT"
    CACHE_POPULATED = "CACHE_POPULATED"
    CACHE_LOOKUP_FAILURE = "CACHE_LOOKUP_FAILURE"
    CACHE_PUT_FAILURE = "CACHE_PUT_FAILURE"
    CACHE_SKIPPED = "CACHE_SKIPPED"


class CatalogKeyError(TaskplugError):
    """A cacheable task whose key cannot be made (an empty ``discovery_version``)."""


@dataclass(frozen=True, slots=True)
class CatalogKey:
    """One cached result's identity: the dataset (project, domain, name, version) and the tag."""

    project: str
    domain: str
    dataset: str  # flyte_task-<task name>
    version: str  # <discovery_version>-<in8>-<out8>
    tag: str  # flyte_cached-<inputs hash>

    @property
    def task_name(self) -> str:
        return self.dataset.removeprefix(_DATASET_PREFIX)

    @property
    def discovery_version(self) -> str:
        return self.version.rsplit("-", 2)[0]

    def to_json(self) -> dict[str, str]:
        """As events carry it (Flyte's ``CatalogMetadata.dataset_id`` and ``artifact_tag``)."""
        return {
            "project": self.project,
            "domain": self.domain,
            "dataset": self.dataset,
            "version": self.version,
            "tag": self.tag,
        }


@dataclass(frozen=True, slots=True)
class CatalogEntry:
    """A cached result: its key, where its outputs are kept, and which execution produced them."""

    key: CatalogKey
    uri: str  # the kept copy of the outputs (a LiteralMap)
    source: str  # the producing execution's key (and node: ``<key>#<node path>``)
    task_version: str  # the producing task's version (not part of the key)
    created_at: float  # epoch seconds

    def to_json(self) -> dict[str, Any]:
        return {
            **self.key.to_json(),
            "taskName": self.key.task_name,
            "discoveryVersion": self.key.discovery_version,
            "uri": self.uri,
            "source": self.source,
            "taskVersion": self.task_version,
            "createdAt": self.created_at,
        }


@dataclass(frozen=True, slots=True)
class Reservation:
    """Who holds a key's reservation, and until when (epoch seconds)."""

    owner: str
    expires_at: float


class Catalog(Protocol):
    """A catalog store (datacatalog's service, reduced to what propeller calls, plus the listing the CLI
    needs). Every method may raise: a lookup that fails is a ``CACHE_LOOKUP_FAILURE`` (the task runs), a put
    that fails a ``CACHE_PUT_FAILURE`` (the node still succeeds)."""

    def get(self, key: CatalogKey) -> CatalogEntry | None: ...

    def put(self, entry: CatalogEntry) -> None:
        """Record ``entry`` (replacing what the key had: a put after a miss, or an overwrite)."""
        ...

    def get_or_extend_reservation(self, key: CatalogKey, owner: str, expires_in: float) -> Reservation:
        """Take the key's reservation for ``owner`` (none held, held by ``owner``, or expired) until
        ``expires_in`` seconds from now; else return the other owner's."""
        ...

    def release_reservation(self, key: CatalogKey, owner: str) -> None:
        """Drop ``owner``'s reservation of the key (another owner's is left alone)."""
        ...

    def entries(
        self, *, task: str | None = None, version: str | None = None, older_than: float | None = None
    ) -> list[CatalogEntry]:
        """Kept results, newest first: of task ``task``, ``discovery_version`` ``version``, created before
        epoch ``older_than``."""
        ...

    def delete(self, entries: list[CatalogEntry]) -> int:
        """Forget ``entries``; how many rows went."""
        ...


# -- the key -------------------------------------------------------------------------------------------------


def is_cacheable(template: tasks_pb2.TaskTemplate) -> bool:
    """Whether the template asks for caching (``metadata.discoverable``)."""
    return template.HasField("metadata") and bool(template.metadata.discoverable)


def is_serialized(template: tasks_pb2.TaskTemplate) -> bool:
    """Whether only one execution at a time may compute the template's cached outputs."""
    return is_cacheable(template) and template.metadata.cache_serializable


def _digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode().rstrip("=")


def _hashified(literal: literals_pb2.Literal) -> literals_pb2.Literal:
    """hashing.go ``hashify``: a literal with its own ``hash`` stands for that hash alone; collections and
    maps are walked."""
    if literal.hash:
        return literals_pb2.Literal(hash=literal.hash)
    kind = literal.WhichOneof("value")
    if kind == "collection":
        out = literals_pb2.Literal()
        out.collection.SetInParent()
        for item in literal.collection.literals:
            out.collection.literals.append(_hashified(item))
        return out
    if kind == "map":
        out = literals_pb2.Literal()
        out.map.SetInParent()
        for name, item in literal.map.literals.items():
            out.map.literals[name].CopyFrom(_hashified(item))
        return out
    return literal


def hash_inputs(inputs: literals_pb2.LiteralMap, ignore: list[str] | tuple[str, ...] = ()) -> str:
    """The inputs' hash (``HashLiteralMap``): ``ignore``'s names left out, hashed literals standing for
    their hash."""
    kept = literals_pb2.LiteralMap()
    for name, literal in inputs.literals.items():
        if name not in ignore:
            kept.literals[name].CopyFrom(_hashified(literal))
    return _digest(kept.SerializeToString(deterministic=True))


def _interface_hash(variables: interface_pb2.VariableMap) -> str:
    return _digest(variables.SerializeToString(deterministic=True))[:8]


def catalog_key(
    template: tasks_pb2.TaskTemplate, inputs: literals_pb2.LiteralMap, *, project: str, domain: str
) -> CatalogKey:
    """The key of ``template``'s result for ``inputs`` in ``project``/``domain`` (transformer.go
    ``GenerateDatasetIDForTask`` and ``GenerateArtifactTagName``)."""
    version = template.metadata.discovery_version
    if not version:
        raise CatalogKeyError(
            f"task {template.id.name}: metadata.discoveryVersion is empty; a cacheable task needs a "
            "cache_version"
        )
    interface = template.interface
    dataset_version = f"{version}-{_interface_hash(interface.inputs)}-{_interface_hash(interface.outputs)}"
    tag = _TAG_PREFIX + hash_inputs(inputs, list(template.metadata.cache_ignore_input_vars))
    return CatalogKey(project, domain, _DATASET_PREFIX + template.id.name, dataset_version, tag)


def outputs_location(data_root: str, key: CatalogKey) -> str:
    """Where the kept copy of a key's outputs lives under the data root."""
    return f"{data_root.rstrip('/')}/catalog/{key.project}/{key.domain}/{key.dataset}/{key.version}/{key.tag}/outputs.pb"


# -- SQLite --------------------------------------------------------------------------------------------------

CATALOG_TABLES = (
    "CREATE TABLE IF NOT EXISTS catalog (project TEXT NOT NULL, domain TEXT NOT NULL, dataset TEXT NOT NULL, "
    "version TEXT NOT NULL, tag TEXT NOT NULL, uri TEXT NOT NULL, source TEXT NOT NULL, "
    "task_version TEXT NOT NULL, created_at REAL NOT NULL, PRIMARY KEY (project, domain, dataset, version, tag))",
    "CREATE TABLE IF NOT EXISTS catalog_reservations (project TEXT NOT NULL, domain TEXT NOT NULL, "
    "dataset TEXT NOT NULL, version TEXT NOT NULL, tag TEXT NOT NULL, owner TEXT NOT NULL, "
    "expires_at REAL NOT NULL, PRIMARY KEY (project, domain, dataset, version, tag))",
)
"""The SQLite state file's catalog tables (part of its schema from version 5)."""

_KEY_COLUMNS = "project, domain, dataset, version, tag"
_KEY_WHERE = "project = ? AND domain = ? AND dataset = ? AND version = ? AND tag = ?"


def _key_row(key: CatalogKey) -> tuple[str, str, str, str, str]:
    return key.project, key.domain, key.dataset, key.version, key.tag


def entry_from_row(row: tuple[Any, ...]) -> CatalogEntry:
    """A catalog row (key columns, uri, source, task version, created at) as an entry."""
    project, domain, dataset, version, tag, uri, source, task_version, created_at = row
    return CatalogEntry(
        CatalogKey(project, domain, dataset, version, tag), uri, source, task_version, float(created_at)
    )


class _SharesConnection(Protocol):
    @property
    def connection(self) -> sqlite3.Connection: ...

    def flush(self) -> None: ...


class SQLiteCatalog:
    """The catalog in the SQLite state file, each write committed at once, so another process sharing the
    file sees a result or a reservation as soon as it is written.

    Given the executor's :class:`~taskplug.executor.SQLiteStateStore`, it shares its connection (flushing the
    store's batch before each write: one process never waits on its own open transaction); given a path
    (``taskplug cache``), it opens its own. Open the state store on the file first: it checks the file is
    taskplug's and brings it to the schema that has these tables."""

    def __init__(self, source: str | Path | _SharesConnection, *, clock: Any = time.time) -> None:
        self._own = isinstance(source, (str, Path))
        if isinstance(source, (str, Path)):
            self._db = sqlite3.connect(
                str(source), isolation_level=None, check_same_thread=False, timeout=15.0
            )
            self._flush: Any = lambda: None
            for statement in CATALOG_TABLES:  # a no-op on a file the state store opened
                self._db.execute(statement)
        else:
            self._db = source.connection
            self._flush = source.flush
        self._now = clock

    def close(self) -> None:
        if self._own:
            self._db.close()

    def get(self, key: CatalogKey) -> CatalogEntry | None:
        row = self._db.execute(
            f"SELECT {_KEY_COLUMNS}, uri, source, task_version, created_at FROM catalog WHERE {_KEY_WHERE}",
            _key_row(key),
        ).fetchone()
        return entry_from_row(row) if row is not None else None

    def put(self, entry: CatalogEntry) -> None:
        self._flush()
        self._db.execute(
            f"INSERT INTO catalog ({_KEY_COLUMNS}, uri, source, task_version, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (project, domain, dataset, version, tag) DO UPDATE "
            "SET uri = excluded.uri, source = excluded.source, task_version = excluded.task_version, "
            "created_at = excluded.created_at",
            (*_key_row(entry.key), entry.uri, entry.source, entry.task_version, entry.created_at),
        )

    def get_or_extend_reservation(self, key: CatalogKey, owner: str, expires_in: float) -> Reservation:
        now = float(self._now())
        self._flush()
        self._db.execute("BEGIN IMMEDIATE")
        try:
            self._db.execute(
                f"INSERT INTO catalog_reservations ({_KEY_COLUMNS}, owner, expires_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (project, domain, dataset, version, tag) DO UPDATE "
                "SET owner = excluded.owner, expires_at = excluded.expires_at "
                "WHERE catalog_reservations.owner = excluded.owner OR catalog_reservations.expires_at < ?",
                (*_key_row(key), owner, now + expires_in, now),
            )
            row = self._db.execute(
                f"SELECT owner, expires_at FROM catalog_reservations WHERE {_KEY_WHERE}", _key_row(key)
            ).fetchone()
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        return Reservation(row[0], float(row[1]))

    def release_reservation(self, key: CatalogKey, owner: str) -> None:
        self._flush()
        self._db.execute(
            f"DELETE FROM catalog_reservations WHERE {_KEY_WHERE} AND owner = ?", (*_key_row(key), owner)
        )

    def entries(
        self, *, task: str | None = None, version: str | None = None, older_than: float | None = None
    ) -> list[CatalogEntry]:
        where: list[str] = ["1 = 1"]
        args: list[Any] = []
        if task is not None:
            where.append("dataset = ?")
            args.append(_DATASET_PREFIX + task)
        if version is not None:
            where.append("(version = ? OR version LIKE ? ESCAPE '\\')")
            escaped = version.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            args.extend([version, f"{escaped}-%-%"])
        if older_than is not None:
            where.append("created_at < ?")
            args.append(older_than)
        rows = self._db.execute(
            f"SELECT {_KEY_COLUMNS}, uri, source, task_version, created_at FROM catalog "
            f"WHERE {' AND '.join(where)} ORDER BY created_at DESC",
            args,
        ).fetchall()
        found = [entry_from_row(r) for r in rows]
        # LIKE matched "<version>-x-y"; a discovery version that itself has dashes is checked exactly here.
        return [e for e in found if version is None or e.key.discovery_version == version]

    def delete(self, entries: list[CatalogEntry]) -> int:
        self._flush()
        count = 0
        for entry in entries:
            count += self._db.execute(f"DELETE FROM catalog WHERE {_KEY_WHERE}", _key_row(entry.key)).rowcount
        return count
