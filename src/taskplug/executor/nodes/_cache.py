"""A task node's catalog cache: the lookup before it starts, the reservation of a serialized one, the
write-back after it succeeds, for a single task's root node, a map element and a workflow's task node alike.

Follows flytepropeller's ``nodes/cache.go`` (``CheckCatalogCache``, ``WriteCatalogCache``,
``GetOrExtendCatalogReservation``, ``ReleaseCatalogReservation``) and ``nodes/task/cache.go``, as the node
executor calls them (``preExecute`` looks up, ``handleQueuedOrRunningNode`` reserves a serialized node's key
and re-checks the cache while it waits, a success writes the cache and releases the reservation):

* a node whose task is not ``discoverable`` has no cache status here (Flyte reports ``CACHE_DISABLED``; the
  status is shown only for cacheable tasks, so results and events of other tasks stay as they were);
* the execution's ``overwrite_cache`` → ``CACHE_SKIPPED``: no lookup, the result is written over the old one;
* a hit: the kept outputs are copied to where the task's would be and the node succeeds (``CACHE_HIT``);
* a miss → ``CACHE_MISS``, and a success then → ``CACHE_POPULATED`` (``CACHE_PUT_FAILURE`` when the write
  failed: the node still succeeds); a lookup that fails → ``CACHE_LOOKUP_FAILURE`` and the task runs;
* a serialized task: before it runs, its owner (``<execution name>-<node>-<attempt>``) takes or extends the
  key's reservation; another owner's live reservation keeps the node waiting (``waiting on serialized
  cache``), re-checking the cache each heartbeat; an expired one is taken over.

A kept copy that is missing, unreadable or lacks a declared output is a miss: the task runs and its result
replaces the entry.

Deviation: Flyte reports ``CACHE_DISABLED`` on every task node that is not cacheable; here such a node has no
cache status at all, so the results and events of tasks that do not ask for caching are unchanged.

Deviation: Flyte carries the cache status on node events (``TaskNodeMetadata``) and a map element's on its
external resource; a single task here reports task events only, so each event of a cacheable task carries
the status it has then (``CACHE_MISS`` while it runs, ``CACHE_POPULATED`` on its success, ``CACHE_HIT`` on the
one event of a hit); a map element's is on its external-resource entries, as on Flyte.

Deviation: a cacheable task whose key cannot be made (an empty ``discovery_version``, which flytekit never
serializes) runs uncached with ``CACHE_LOOKUP_FAILURE``; propeller fails the node's round with the error.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from flyteidl.core import literals_pb2, tasks_pb2

from taskplug.executor._catalog import (
    CacheStatus,
    Catalog,
    CatalogEntry,
    CatalogKey,
    catalog_key,
    is_cacheable,
    is_serialized,
    outputs_location,
)
from taskplug.executor._datastore import DataStore
from taskplug.executor.nodes._settings import CacheSettings

__all__ = [
    "WAITING_ON_CACHE",
    "Lookup",
    "NodeCache",
    "cached_outputs",
    "kept_outputs",
    "populate",
]

log = logging.getLogger(__name__)

WAITING_ON_CACHE = "waiting on serialized cache"
"""The reason a serialized node waits with while another execution holds its key's reservation."""


@dataclass(slots=True)
class Lookup:
    """A lookup's outcome: the status, and on a hit the outputs and the entry they came from."""

    status: CacheStatus
    key: CatalogKey | None = None
    outputs: literals_pb2.LiteralMap | None = None
    entry: CatalogEntry | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": str(self.status)}
        if self.key is not None:
            out["key"] = self.key.to_json()
        if self.entry is not None:
            out["source"] = self.entry.source
        return out


def _declared(template: tasks_pb2.TaskTemplate) -> list[str]:
    return list(template.interface.outputs.variables) if template.HasField("interface") else []


async def cached_outputs(
    catalog: Catalog,
    data: DataStore,
    template: tasks_pb2.TaskTemplate,
    inputs: literals_pb2.LiteralMap,
    *,
    project: str,
    domain: str,
    overwrite: bool = False,
) -> Lookup:
    """Look ``template``'s result for ``inputs`` up: ``CACHE_HIT`` with the outputs, ``CACHE_MISS``,
    ``CACHE_SKIPPED`` (``overwrite``), ``CACHE_LOOKUP_FAILURE``; ``CACHE_DISABLED`` for a task that is not
    cacheable. Never raises."""
    if not is_cacheable(template):
        return Lookup(CacheStatus.CACHE_DISABLED)
    try:
        key = catalog_key(template, inputs, project=project, domain=domain)
    except Exception as e:
        log.warning("task %s: no cache key: %s", template.id.name, e)
        return Lookup(CacheStatus.CACHE_LOOKUP_FAILURE)
    if overwrite:
        return Lookup(CacheStatus.CACHE_SKIPPED, key)
    try:
        entry = catalog.get(key)
    except Exception as e:
        log.warning("task %s: catalog lookup failed: %s", template.id.name, e)
        return Lookup(CacheStatus.CACHE_LOOKUP_FAILURE, key)
    if entry is None:
        return Lookup(CacheStatus.CACHE_MISS, key)
    try:
        outputs = await data.read_outputs(entry.uri)
    except Exception as e:  # unreadable bytes: recomputed
        log.warning(
            "task %s: the cached outputs at %s cannot be read (%s): a miss", template.id.name, entry.uri, e
        )
        outputs = None
    if outputs is None or set(_declared(template)) - set(outputs.literals):
        log.warning(
            "task %s: the cached outputs at %s are gone or incomplete: a miss", template.id.name, entry.uri
        )
        return Lookup(CacheStatus.CACHE_MISS, key)
    return Lookup(CacheStatus.CACHE_HIT, key, outputs, entry)


async def kept_outputs(entry: CatalogEntry, data: DataStore | None = None) -> literals_pb2.LiteralMap | None:
    """The outputs a catalog entry keeps (None when its copy is gone; ValueError when it cannot be read)."""
    return await (data or DataStore()).read_outputs(entry.uri)


async def populate(
    catalog: Catalog,
    data: DataStore,
    data_root: str,
    template: tasks_pb2.TaskTemplate,
    inputs: literals_pb2.LiteralMap,
    outputs: literals_pb2.LiteralMap,
    *,
    project: str,
    domain: str,
    source: str,
    key: CatalogKey | None = None,
    now: float | None = None,
) -> CacheStatus:
    """Keep ``outputs`` as ``template``'s result for ``inputs`` (a copy under the data root, the catalog row
    pointing at it): ``CACHE_POPULATED``, or ``CACHE_PUT_FAILURE`` when it could not be written (logged, never
    raised); ``CACHE_DISABLED`` for a task that is not cacheable. ``source``: the producing execution's key
    and node, shown by ``taskplug cache show``."""
    if not is_cacheable(template):
        return CacheStatus.CACHE_DISABLED
    try:
        key = key or catalog_key(template, inputs, project=project, domain=domain)
        uri = outputs_location(data_root, key)
        await data.write(uri, outputs.SerializeToString())
        catalog.put(CatalogEntry(key, uri, source, template.id.version, time.time() if now is None else now))
    except Exception as e:
        log.warning("task %s: the cache write failed: %s", template.id.name, e)
        return CacheStatus.CACHE_PUT_FAILURE
    return CacheStatus.CACHE_POPULATED


@dataclass(slots=True)
class NodeCache:
    """One task node's use of the catalog (a root node's, a map element's), over its stored ``cache`` state
    (``NodeRecord.cache``: ``status``, ``key``, ``source``, ``reservation``)."""

    settings: CacheSettings
    data: DataStore
    data_root: str
    template: tasks_pb2.TaskTemplate
    project: str
    domain: str
    overwrite: bool

    @property
    def active(self) -> bool:
        return self.settings.catalog is not None and is_cacheable(self.template)

    @property
    def serialized(self) -> bool:
        return self.active and is_serialized(self.template)

    async def lookup(self, inputs: literals_pb2.LiteralMap, *, overwrite: bool | None = None) -> Lookup:
        assert self.settings.catalog is not None
        return await cached_outputs(
            self.settings.catalog,
            self.data,
            self.template,
            inputs,
            project=self.project,
            domain=self.domain,
            overwrite=self.overwrite if overwrite is None else overwrite,
        )

    def reserve(self, state: dict[str, Any], owner: str) -> bool:
        """Take or extend the key's reservation for ``owner``; whether ``owner`` holds it. A reservation
        that cannot be asked for does not stop the node (it runs, as propeller's RESERVATION_FAILURE does)."""
        key = self.key_of(state)
        catalog = self.settings.catalog
        if key is None or catalog is None:
            return True
        try:
            held = catalog.get_or_extend_reservation(key, owner, self.settings.expiry)
        except Exception as e:
            log.warning("%s: the reservation failed: %s", owner, e)
            state["reservation"] = "RESERVATION_FAILURE"
            return True
        mine = held.owner == owner
        state["reservation"] = "RESERVATION_ACQUIRED" if mine else "RESERVATION_EXISTS"
        if not mine:
            state["holder"] = held.owner
        else:
            state.pop("holder", None)
        return mine

    def release(self, state: dict[str, Any], owner: str) -> None:
        key = self.key_of(state)
        catalog = self.settings.catalog
        if key is None or catalog is None or state.get("reservation") != "RESERVATION_ACQUIRED":
            return
        try:
            catalog.release_reservation(key, owner)
            state["reservation"] = "RESERVATION_RELEASED"
        except Exception as e:  # it expires on its own
            log.warning("%s: the reservation release failed: %s", owner, e)

    @staticmethod
    def key_of(state: dict[str, Any]) -> CatalogKey | None:
        """The key a lookup stored in the node's cache state (None when it could not be made)."""
        key = state.get("key")
        return CatalogKey(**key) if key else None

    async def write(
        self,
        state: dict[str, Any],
        inputs: literals_pb2.LiteralMap,
        outputs: literals_pb2.LiteralMap,
        source: str,
    ) -> None:
        """After a success: keep the result, the status in ``state``."""
        assert self.settings.catalog is not None
        status = await populate(
            self.settings.catalog,
            self.data,
            self.data_root,
            self.template,
            inputs,
            outputs,
            project=self.project,
            domain=self.domain,
            source=source,
            key=self.key_of(state),
        )
        state["status"] = str(status)
