"""The object store: objects of any type with API-server semantics, one event history, watch fan-out.

Follows the apiserver's generic registry (k8s.io/apiserver/pkg/registry/generic/registry/store.go) and its
watch cache (storage/cacher): one cluster-wide, monotonically increasing ``resourceVersion``; ``uid``,
``creationTimestamp`` and ``generation`` assigned on create; ``generateName``; optimistic concurrency on
update (409 ``Conflict`` on a stale ``resourceVersion``); finalizers (delete sets ``deletionTimestamp`` and
the object goes away when the last finalizer is removed); no-op updates do not bump the version; a watch
replays retained events after the requested version, answers 410 ``Expired`` for a version older than the
retained history, starts with synthetic ADDED events when no version is given, and sends ADDED / DELETED
when a MODIFIED object enters or leaves a watcher's selector. Every client write (create, replace, patch)
is decoded and validated as an API server does it (:mod:`._validation`); the controllers' own writes
(:meth:`Store.update`) are trusted. A watcher or an observer that fails on one object is logged and skipped:
it never fails the write or the other watchers.

Speed is by design, not by luck: objects live in per-type, per-namespace dicts; every write appends to one
bounded deque and is offered only to the watchers of its own type; every stored object is an immutable
snapshot (a write stores a new dict), so events and lists share it and callers get an orjson copy.

Deviation: pods are deleted at once instead of gracefully (no ``deletionGracePeriodSeconds`` wait); the
kubelet stops the processes after the DELETED event.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
import random
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any, Final

import orjson

from taskplug.core import Clock
from taskplug.k8s import KubeApiError, ResourceType
from taskplug.localcluster._errors import (
    already_exists,
    bad_request,
    conflict,
    expired,
    internal_error,
    not_found,
)
from taskplug.localcluster._patch import apply_patch
from taskplug.localcluster._resources import NAMESPACE, POD, TypeRegistry, deep_copy, format_time, type_key
from taskplug.localcluster._selectors import FieldSelector, LabelSelector
from taskplug.localcluster._validation import decode_object, default_pod, validate_object

__all__ = ["Admission", "Observer", "Store", "StoredEvent", "Watcher"]

Obj = dict[str, Any]
TypeKey = tuple[str, str]
Admission = Callable[[ResourceType, Obj], None]
Observer = Callable[[ResourceType, "StoredEvent"], None]

_NAME_ALPHABET: Final = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apiserver names.SimpleNameGenerator

_log = logging.getLogger(__name__)


class StoredEvent:
    """One change: its version, type, the object after it and (for MODIFIED) the object before it."""

    __slots__ = ("_raw", "key", "obj", "old", "rv", "type")

    def __init__(self, rv: int, type_: str, key: TypeKey, obj: Obj, old: Obj | None) -> None:
        self.rv = rv
        self.type = type_
        self.key = key
        self.obj = obj
        self.old = old
        self._raw: bytes | None = None

    def raw_object(self) -> bytes:
        """The object as JSON, serialized once however many watchers read it."""
        if self._raw is None:
            self._raw = orjson.dumps(self.obj)
        return self._raw

    @property
    def namespace(self) -> str:
        return str(self.obj.get("metadata", {}).get("namespace") or "")


# What a watcher's queue carries: an event (with the type this watcher sees), an error, or the end.
_Item = tuple[str, StoredEvent] | KubeApiError | None


class Watcher:
    """One open watch: a filter and a queue. ``next()`` gives ``(type, event)``, or None at the end."""

    def __init__(
        self,
        store: Store,
        rtype: ResourceType,
        *,
        namespace: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
        bookmarks: bool,
        internal: bool,
    ) -> None:
        self.store = store
        self.rtype = rtype
        self.namespace = namespace or None
        self.labels = labels
        self.fields = fields
        self.bookmarks = bookmarks
        self.internal = internal
        self.closed = False
        self._queue: asyncio.Queue[_Item] = asyncio.Queue()

    def _matches(self, obj: Obj) -> bool:
        if not self.labels.empty and not self.labels.matches(obj.get("metadata", {}).get("labels")):
            return False
        return self.fields.empty or self.fields.matches(obj)

    def offer(self, event: StoredEvent) -> None:
        if self.closed or (self.namespace is not None and event.namespace != self.namespace):
            return
        if self.labels.empty and self.fields.empty:
            self._queue.put_nowait((event.type, event))
            return
        now = self._matches(event.obj)
        if event.type != "MODIFIED" or event.old is None:
            if now:
                self._queue.put_nowait((event.type, event))
            return
        before = self._matches(event.old)
        if now:
            self._queue.put_nowait(("MODIFIED" if before else "ADDED", event))
        elif before:
            # The object left the selection: to this watcher it is gone.
            self._queue.put_nowait(("DELETED", event))

    def bookmark(self, rv: int) -> None:
        if not self.closed and self.bookmarks:
            obj = {
                "kind": self.rtype.kind,
                "apiVersion": self.rtype.api_version,
                "metadata": {"resourceVersion": str(rv)},
            }
            self._queue.put_nowait(("BOOKMARK", StoredEvent(rv, "BOOKMARK", type_key(self.rtype), obj, None)))

    def close(self, error: KubeApiError | None = None) -> None:
        """End the stream (cleanly, or with ``error`` raised to the reader). Idempotent."""
        if self.closed:
            return
        self.closed = True
        self.store._unregister(self)
        self._queue.put_nowait(error)

    async def next(self) -> tuple[str, StoredEvent] | None:
        item = await self._queue.get()
        if isinstance(item, KubeApiError):
            raise item
        return item

    def next_nowait(self) -> tuple[str, StoredEvent] | None:
        """Like :meth:`next` for an item already queued; ``asyncio.QueueEmpty`` when there is none."""
        item = self._queue.get_nowait()
        if isinstance(item, KubeApiError):
            raise item
        return item

    def pending(self) -> int:
        return self._queue.qsize()


class Store:
    """All objects of the cluster. Synchronous: a call is atomic under asyncio, so no locks are needed."""

    def __init__(self, clock: Clock, types: TypeRegistry, *, history_limit: int = 20_000) -> None:
        self.clock = clock
        self.types = types
        self._objects: dict[TypeKey, dict[str, dict[str, Obj]]] = {}
        self._rv = 0
        self._history: deque[StoredEvent] = deque()
        self._history_limit = history_limit
        self._compacted_rv = 0  # every event with rv > this is still in the history
        self._watchers: dict[TypeKey, set[Watcher]] = {}
        self.admission: list[Admission] = []
        # Admission of a client's update (PUT, PATCH): what must hold of every version of an object, not
        # only of the one created (Pod Security admission checks updates too).
        self.update_admission: list[Admission] = []
        self.observers: list[Observer] = []

    # -- reads -------------------------------------------------------------------------------------------
    @property
    def resource_version(self) -> int:
        return self._rv

    def try_get(self, rtype: ResourceType, namespace: str | None, name: str) -> Obj | None:
        """The stored snapshot (read-only!) or None."""
        rtype = self.types.resolve(rtype)
        by_ns = self._objects.get(type_key(rtype))
        if by_ns is None:
            return None
        return by_ns.get(self._ns(rtype, namespace), {}).get(name)

    def get(self, rtype: ResourceType, namespace: str | None, name: str) -> Obj:
        obj = self.try_get(rtype, namespace, name)
        if obj is None:
            raise not_found(rtype, name)
        return obj

    def iter(self, rtype: ResourceType, namespace: str | None = None) -> Iterator[Obj]:
        """Stored snapshots (read-only!) of one type, optionally in one namespace."""
        rtype = self.types.resolve(rtype)
        by_ns = self._objects.get(type_key(rtype), {})
        if namespace and rtype.namespaced:
            yield from list(by_ns.get(namespace, {}).values())
        else:
            for objects in list(by_ns.values()):
                yield from list(objects.values())

    def list(
        self,
        rtype: ResourceType,
        namespace: str | None = None,
        *,
        labels: LabelSelector | None = None,
        fields: FieldSelector | None = None,
    ) -> tuple[list[Obj], int]:
        labels = labels or LabelSelector.parse(None)
        fields = fields or FieldSelector.parse(None)
        name = fields.pinned("metadata.name")
        namespace = namespace or fields.pinned("metadata.namespace")
        if name is not None:
            # A pinned name is a dict lookup per namespace, not a scan.
            rtype = self.types.resolve(rtype)
            by_ns = self._objects.get(type_key(rtype), {})
            spaces = [self._ns(rtype, namespace)] if namespace or not rtype.namespaced else list(by_ns)
            candidates: list[Obj] = [o for ns in spaces if (o := by_ns.get(ns, {}).get(name)) is not None]
        else:
            candidates = list(self.iter(rtype, namespace))
        items = [
            o
            for o in candidates
            if (labels.empty or labels.matches(o["metadata"].get("labels")))
            and (fields.empty or fields.matches(o))
        ]
        return items, self._rv

    def namespaces_in_use(self) -> set[str]:
        used = {"default"}
        for by_ns in self._objects.values():
            used.update(ns for ns, objects in by_ns.items() if ns and objects)
        return used

    # -- writes ------------------------------------------------------------------------------------------
    def create(self, rtype: ResourceType, given: Any) -> Obj:
        """Create ``given`` as the API server would: decoded into a private copy (400 when it cannot be),
        defaulted, validated (422), admitted. Returns the stored snapshot."""
        rtype = self.types.resolve(rtype)
        obj = decode_object(rtype, given)
        obj.setdefault("apiVersion", rtype.api_version)
        obj.setdefault("kind", rtype.kind)
        metadata = obj.setdefault("metadata", {})
        if metadata.get("resourceVersion"):
            raise internal_error("resourceVersion should not be set on objects to be created")
        if rtype.namespaced:
            metadata["namespace"] = metadata.get("namespace") or "default"
        else:
            metadata.pop("namespace", None)
        namespace = self._ns(rtype, metadata.get("namespace"))
        objects = self._objects.setdefault(type_key(rtype), {}).setdefault(namespace, {})
        if not metadata.get("name") and metadata.get("generateName"):
            prefix = str(metadata["generateName"])[:58]
            while True:
                candidate = prefix + "".join(random.choices(_NAME_ALPHABET, k=5))
                if candidate not in objects:
                    metadata["name"] = candidate
                    break
        if rtype == POD:
            default_pod(obj)
        validate_object(rtype, obj)
        for admit in self.admission:
            admit(rtype, obj)
        name = metadata["name"]
        if name in objects:
            raise already_exists(rtype, name)
        if rtype.namespaced and namespace not in self._objects.get(type_key(NAMESPACE), {}).get("", {}):
            # NamespaceAutoProvision admission: a namespace springs into being on first use.
            self.create(NAMESPACE, {"metadata": {"name": namespace}})
        if rtype == NAMESPACE:
            obj.setdefault("spec", {"finalizers": ["kubernetes"]})
            obj.setdefault("status", {"phase": "Active"})
        metadata["uid"] = str(uuid.uuid4())
        metadata["creationTimestamp"] = format_time(self.clock.now())
        metadata["generation"] = 1
        metadata.pop("deletionTimestamp", None)
        self._rv += 1
        metadata["resourceVersion"] = str(self._rv)
        objects[name] = obj
        self._emit(rtype, "ADDED", obj, None)
        return obj

    def replace(self, rtype: ResourceType, given: Any) -> Obj:
        """PUT: the whole object (decoded and validated as on create); a ``resourceVersion`` in it must be
        the current one."""
        rtype = self.types.resolve(rtype)
        obj = decode_object(rtype, given)
        metadata = obj.get("metadata") or {}
        old = self.get(rtype, metadata.get("namespace"), str(metadata.get("name") or ""))
        wanted = metadata.get("resourceVersion")
        if wanted and wanted != old["metadata"]["resourceVersion"]:
            raise conflict(rtype, old["metadata"]["name"])
        return self._write(rtype, old, obj, validate=True)

    def patch(
        self, rtype: ResourceType, namespace: str | None, name: str, patch: Any, patch_type: str
    ) -> Obj:
        """PATCH: the patched object is decoded and validated as a PUT of it would be."""
        rtype = self.types.resolve(rtype)
        old = self.get(rtype, namespace, name)
        new = decode_object(rtype, apply_patch(old, patch, patch_type))
        patched_meta = patch.get("metadata") if isinstance(patch, dict) else None
        wanted = patched_meta.get("resourceVersion") if isinstance(patched_meta, dict) else None
        if wanted and wanted != old["metadata"]["resourceVersion"]:
            raise conflict(rtype, name)
        return self._write(rtype, old, new, validate=True)

    def update(
        self, rtype: ResourceType, namespace: str | None, name: str, mutate: Callable[[Obj], None]
    ) -> Obj | None:
        """The controllers' write (status, binding): ``mutate`` edits a private copy in place; it does not
        bump ``generation``. None if the object is gone."""
        rtype = self.types.resolve(rtype)
        old = self.try_get(rtype, namespace, name)
        if old is None:
            return None
        new = deep_copy(old)
        mutate(new)
        return self._write(rtype, old, new, bump_generation=False)

    def delete(self, rtype: ResourceType, namespace: str | None, name: str) -> Obj:
        rtype = self.types.resolve(rtype)
        old = self.get(rtype, namespace, name)
        metadata = old["metadata"]
        if metadata.get("finalizers"):
            if metadata.get("deletionTimestamp"):
                return old
            new = deep_copy(old)
            new["metadata"]["deletionTimestamp"] = format_time(self.clock.now())
            new["metadata"]["deletionGracePeriodSeconds"] = 0
            return self._write(rtype, old, new, allow_deletion_timestamp=True)
        return self._remove(rtype, old)

    def compact(self) -> None:
        """Forget the event history: a watch from any version before now answers 410 Expired."""
        self._history.clear()
        self._compacted_rv = self._rv

    # -- watch -------------------------------------------------------------------------------------------
    def watch(
        self,
        rtype: ResourceType,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        labels: LabelSelector | None = None,
        fields: FieldSelector | None = None,
        bookmarks: bool = False,
        internal: bool = False,
    ) -> Watcher:
        """Open a watch. A stale version gives a watcher whose first item is the 410 error."""
        rtype = self.types.resolve(rtype)
        watcher = Watcher(
            self,
            rtype,
            namespace=namespace if rtype.namespaced else None,
            labels=labels or LabelSelector.parse(None),
            fields=fields or FieldSelector.parse(None),
            bookmarks=bookmarks,
            internal=internal,
        )
        key = type_key(rtype)
        if resource_version in (None, "", "0"):
            # "Get state and start at most recent": synthetic ADDED for what exists now.
            for obj in self.iter(rtype, watcher.namespace):
                watcher.offer(StoredEvent(int(obj["metadata"]["resourceVersion"]), "ADDED", key, obj, None))
        else:
            try:
                since = int(str(resource_version))
            except ValueError:
                raise bad_request(f'invalid resource version "{resource_version}"') from None
            if since < self._compacted_rv:
                self._watchers.setdefault(key, set()).add(watcher)
                watcher.close(expired(since, self._compacted_rv + 1))
                return watcher
            for event in self._history:
                if event.rv > since and event.key == key:
                    watcher.offer(event)
        self._watchers.setdefault(key, set()).add(watcher)
        return watcher

    def watchers(self) -> builtins.list[Watcher]:
        return [w for ws in self._watchers.values() for w in ws]

    def drop_watches(self) -> int:
        """End every client watch cleanly (the controllers' own watches stay). Returns how many."""
        dropped = [w for w in self.watchers() if not w.internal]
        for watcher in dropped:
            watcher.close()
        return len(dropped)

    def bookmark(self) -> None:
        for watcher in self.watchers():
            watcher.bookmark(self._rv)

    def _unregister(self, watcher: Watcher) -> None:
        self._watchers.get(type_key(watcher.rtype), set()).discard(watcher)

    # -- internals ---------------------------------------------------------------------------------------
    @staticmethod
    def _ns(rtype: ResourceType, namespace: str | None) -> str:
        return (namespace or "default") if rtype.namespaced else ""

    def _write(
        self,
        rtype: ResourceType,
        old: Obj,
        new: Obj,
        *,
        allow_deletion_timestamp: bool = False,
        bump_generation: bool = True,
        validate: bool = False,
    ) -> Obj:
        old_meta, meta = old["metadata"], new.setdefault("metadata", {})
        # Identity and server-owned fields cannot be changed by a write.
        for field in ("name", "namespace", "uid", "creationTimestamp"):
            if field in old_meta:
                meta[field] = old_meta[field]
        if not allow_deletion_timestamp:
            for field in ("deletionTimestamp", "deletionGracePeriodSeconds"):
                if field in old_meta:
                    meta[field] = old_meta[field]
                else:
                    meta.pop(field, None)
        new["apiVersion"], new["kind"] = old.get("apiVersion", rtype.api_version), old.get("kind", rtype.kind)
        meta["resourceVersion"] = old_meta["resourceVersion"]
        meta["generation"] = old_meta.get("generation", 1)
        if validate:
            validate_object(rtype, new)  # a client's write; the controllers' own writes are trusted
            for admit in self.update_admission:
                admit(rtype, new)
        if new == old:
            return old  # a no-op write keeps its version and sends no event
        if bump_generation and new.get("spec") != old.get("spec"):
            meta["generation"] += 1  # controllers' writes (binding, status) are not spec changes
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            return self._remove(rtype, new)
        self._rv += 1
        meta["resourceVersion"] = str(self._rv)
        self._objects[type_key(rtype)][self._ns(rtype, meta.get("namespace"))][meta["name"]] = new
        self._emit(rtype, "MODIFIED", new, old)
        return new

    def _remove(self, rtype: ResourceType, last: Obj) -> Obj:
        meta = last["metadata"]
        del self._objects[type_key(rtype)][self._ns(rtype, meta.get("namespace"))][meta["name"]]
        self._rv += 1
        gone = {**last, "metadata": {**meta, "resourceVersion": str(self._rv)}}
        self._emit(rtype, "DELETED", gone, None)
        return gone

    def _emit(self, rtype: ResourceType, type_: str, obj: Obj, old: Obj | None) -> None:
        key = type_key(rtype)
        event = StoredEvent(self._rv, type_, key, obj, old)
        if len(self._history) >= self._history_limit:
            self._compacted_rv = self._history.popleft().rv
        self._history.append(event)
        for watcher in list(self._watchers.get(key, ())):
            try:
                watcher.offer(event)
            except Exception:
                # A selector that cannot read this object must not stop the write or the other watchers.
                _log.exception("watch of %s: could not offer %s", rtype.plural, _describe(obj))
        for observe in self.observers:
            try:
                observe(rtype, event)
            except Exception:
                _log.exception("observer of %s failed on %s", rtype.plural, _describe(obj))


def _describe(obj: Obj) -> str:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return "an object without metadata"
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}".lstrip("/")
