"""An asyncio informer: a local cache of one resource type kept current by list + watch.

Plays the role of client-go's shared informer behind controller-runtime's cache, which Flyte's plugin
manager, event watcher and resource monitor read from. No Python client ships an asyncio informer,
so this is ours:

* list, then watch from the list's resourceVersion;
* a stream that ends cleanly is resumed from the last resourceVersion seen (bookmarks included);
* a 410 (``Expired``/``Gone``, as an error or as an ``ERROR`` event) means that version is compacted
  away: list again and reconcile the cache, synthesising deletions for objects that vanished and updates
  for objects that changed while nobody watched;
* connection errors, 5xx, 429 and other API errors back off exponentially (capped) through the injected
  clock; the back-off resets once the server answers again;
* reads (:meth:`Informer.get`, :meth:`Informer.list`) are served from the cache, never from the API.

Objects are cached as compact JSON bytes and decoded on read: a pod held as Python dicts costs ~11 KiB, its
JSON ~3 KiB, and the cache is read once per round while it is held for the task's whole life. Every read
returns a fresh dict, so callers may change what they get.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Hashable, Iterator, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Protocol, runtime_checkable

import orjson

from taskplug.core import Clock
from taskplug.k8s import KubeApiError, KubeClient, ResourceType, WatchEvent

__all__ = ["Informer", "InformerFactory", "InformerHandler", "ObjectKey", "UpdatesByVersion", "object_key"]

log = logging.getLogger(__name__)

KubeObject = dict[str, Any]
ObjectKey = tuple[str, str]


def object_key(obj: Mapping[str, Any]) -> ObjectKey:
    """``(namespace, name)``; cluster-scoped objects have namespace ``""``."""
    meta = obj.get("metadata") or {}
    return (meta.get("namespace") or "", meta.get("name") or "")


def _resource_version(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


# One cached object: its resourceVersion (to tell changes apart without decoding) and its JSON. A plain tuple
# of a string and bytes, which the garbage collector stops tracking: the cache holds one per object for its
# whole life, and every full collection would walk them all.
_Cached = tuple[str, bytes]


def _cached(obj: Mapping[str, Any]) -> _Cached:
    return (_resource_version(obj), orjson.dumps(obj))


def _decoded(cached: _Cached) -> KubeObject:
    decoded: KubeObject = orjson.loads(cached[1])
    return decoded


class InformerHandler(Protocol):
    """Callbacks run inline, in event order; keep them short (enqueue work, do not do it)."""

    def on_add(self, obj: KubeObject) -> None: ...

    def on_update(self, old: KubeObject | None, new: KubeObject) -> None: ...

    def on_delete(self, obj: KubeObject) -> None: ...


@runtime_checkable
class UpdatesByVersion(Protocol):
    """An optional capability of a handler that reads nothing of an updated object's old copy but its
    resourceVersion: it is told that version instead of being handed the old copy, which the cache would
    otherwise decode for it on every update."""

    def on_update_version(self, old_resource_version: str | None, new: KubeObject) -> None: ...


@dataclass(frozen=True, slots=True)
class _Callbacks:
    add: Callable[[KubeObject], None] | None = None
    update: Callable[[KubeObject | None, KubeObject], None] | None = None
    delete: Callable[[KubeObject], None] | None = None

    def on_add(self, obj: KubeObject) -> None:
        if self.add is not None:
            self.add(obj)

    def on_update(self, old: KubeObject | None, new: KubeObject) -> None:
        if self.update is not None:
            self.update(old, new)

    def on_delete(self, obj: KubeObject) -> None:
        if self.delete is not None:
            self.delete(obj)


@dataclass(frozen=True, slots=True)
class _VersionCallbacks(_Callbacks):
    """Callbacks whose update is told the old resourceVersion (:class:`UpdatesByVersion`)."""

    update_version: Callable[[str | None, KubeObject], None] | None = None

    def on_update_version(self, old_resource_version: str | None, new: KubeObject) -> None:
        if self.update_version is not None:
            self.update_version(old_resource_version, new)


class _Relist(Exception):
    """The watch's resourceVersion is too old: list again."""


class Informer:
    """List + watch cache for one :class:`ResourceType` (optionally one namespace / label selector)."""

    def __init__(
        self,
        client: KubeClient,
        rtype: ResourceType,
        *,
        clock: Clock,
        namespace: str | None = None,
        label_selector: str | None = None,
        watch_timeout_seconds: int | None = None,
        initial_backoff: float = 0.5,
        max_backoff: float = 30.0,
    ) -> None:
        self.client = client
        self.rtype = rtype
        self.namespace = namespace
        self.label_selector = label_selector
        self.clock = clock
        self.watch_timeout_seconds = watch_timeout_seconds
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self._cache: dict[ObjectKey, _Cached] = {}
        self._handlers: list[InformerHandler] = []
        # Each handler's update callback: by resourceVersion (True) or with the decoded old copy.
        self._by_version: list[bool] = []
        self._resource_version = ""
        self._synced = asyncio.Event()
        self._delay = initial_backoff
        self._out_of_contact = False
        #: Observability for tests and metrics: how often each thing happened.
        self.stats: dict[str, int] = {"lists": 0, "watches": 0, "relists": 0, "backoffs": 0, "events": 0}

    # -- reads ---------------------------------------------------------------------------------------
    def get(self, namespace: str, name: str) -> KubeObject | None:
        """The cached object, or None when it is not cached — or when the informer has lost contact with
        the API (its last list or watch failed and nothing has been heard since): a cache that cannot be
        kept current does not answer, so the caller asks the API, and learns whether it can be reached.
        Deviation: client-go's cache keeps serving what it last saw; a task whose API is gone would then be
        reported Running for ever."""
        if self._out_of_contact:
            return None
        cached = self._cache.get((namespace or "", name))
        return _decoded(cached) if cached is not None else None

    def list(self, namespace: str | None = None) -> list[KubeObject]:
        if namespace is None:
            return [_decoded(c) for c in self._cache.values()]
        return [_decoded(c) for (ns, _), c in self._cache.items() if ns == namespace]

    def keys(self) -> Iterator[ObjectKey]:
        return iter(self._cache)

    def __len__(self) -> int:
        return len(self._cache)

    @property
    def resource_version(self) -> str:
        """The last resourceVersion seen (list, event or bookmark)."""
        return self._resource_version

    @property
    def has_synced(self) -> bool:
        return self._synced.is_set()

    async def wait_synced(self) -> None:
        """Until the first list has filled the cache."""
        await self._synced.wait()

    # -- handlers ------------------------------------------------------------------------------------
    def add_handler(self, handler: InformerHandler) -> None:
        """Subscribe; a handler added after the first list is replayed the cache as adds."""
        self._handlers.append(handler)
        self._by_version.append(isinstance(handler, UpdatesByVersion))
        if self.has_synced:
            for cached in list(self._cache.values()):
                self._call(handler.on_add, _decoded(cached))

    def add_callbacks(
        self,
        *,
        on_add: Callable[[KubeObject], None] | None = None,
        on_update: Callable[[KubeObject | None, KubeObject], None] | None = None,
        on_delete: Callable[[KubeObject], None] | None = None,
        on_update_version: Callable[[str | None, KubeObject], None] | None = None,
    ) -> None:
        """Subscribe callbacks; ``on_update_version`` (instead of ``on_update``) is told an updated object's
        old resourceVersion rather than handed its old copy."""
        if on_update_version is not None:
            if on_update is not None:
                raise ValueError("give on_update or on_update_version, not both")
            self.add_handler(_VersionCallbacks(on_add, None, on_delete, on_update_version))
        else:
            self.add_handler(_Callbacks(on_add, on_update, on_delete))

    def _call(self, fn: Callable[..., None], *args: Any) -> None:
        try:
            fn(*args)
        except Exception:
            # A broken handler must not stop the cache for everyone else.
            log.exception("informer handler for %s failed", self.rtype.kind)

    def _emit_add(self, obj: KubeObject) -> None:
        for h in self._handlers:
            self._call(h.on_add, obj)

    def _emit_update(self, old: _Cached, new: KubeObject) -> None:
        decoded: KubeObject | None = None
        for h, by_version in zip(self._handlers, self._by_version, strict=True):
            if by_version:
                self._call(h.on_update_version, old[0], new)  # type: ignore[attr-defined]
                continue
            if decoded is None:
                decoded = _decoded(old)
            self._call(h.on_update, decoded, new)

    def _emit_delete(self, obj: KubeObject) -> None:
        for h in self._handlers:
            self._call(h.on_delete, obj)

    # -- the loop ------------------------------------------------------------------------------------
    async def run(self) -> None:
        """List and watch until cancelled."""
        need_list = True
        while True:
            try:
                if need_list:
                    await self._list_and_reconcile()
                    need_list = False
                await self._watch_once()
                # A clean end of stream: resume from the last version seen.
            except _Relist:
                self.stats["relists"] += 1
                need_list = True
            except KubeApiError as e:
                if e.status == 410:
                    self.stats["relists"] += 1
                    need_list = True
                    continue
                log.warning("%s informer: API error %s %s: %s", self.rtype.kind, e.status, e.reason, e)
                self._out_of_contact = True
                await self._back_off()
            except (ConnectionError, TimeoutError, OSError) as e:
                log.warning("%s informer: connection trouble: %s", self.rtype.kind, e)
                self._out_of_contact = True
                await self._back_off()

    async def _back_off(self) -> None:
        self.stats["backoffs"] += 1
        delay = self._delay
        self._delay = min(self._delay * 2, self.max_backoff)
        await self.clock.sleep(delay)

    def _answered(self) -> None:
        self._delay = self.initial_backoff
        self._out_of_contact = False

    async def _list_and_reconcile(self) -> None:
        items, resource_version = await self.client.list(
            self.rtype, self.namespace, label_selector=self.label_selector
        )
        self.stats["lists"] += 1
        self._answered()
        fresh: dict[ObjectKey, KubeObject] = {object_key(o): o for o in items}
        old_cache = self._cache
        self._cache = {key: _cached(obj) for key, obj in fresh.items()}
        self._resource_version = resource_version
        if not self._synced.is_set():
            for obj in fresh.values():
                self._emit_add(obj)
            self._synced.set()
            return
        for key, obj in fresh.items():
            previous = old_cache.get(key)
            if previous is None:
                self._emit_add(obj)
            elif previous[0] != _resource_version(obj):
                self._emit_update(previous, obj)
        for key, gone in old_cache.items():
            if key not in fresh:
                self._emit_delete(_decoded(gone))

    async def _watch_once(self) -> None:
        self.stats["watches"] += 1
        stream = self.client.watch(
            self.rtype,
            self.namespace,
            resource_version=self._resource_version or None,
            label_selector=self.label_selector,
            timeout_seconds=self.watch_timeout_seconds,
        )
        try:
            async for event in stream:
                self._answered()
                self._apply(event)
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(Exception):
                    await aclose()

    def _apply(self, event: WatchEvent) -> None:
        obj = event.object
        if event.type == "ERROR":
            status = KubeApiError.from_status(obj)
            if status.status == 410 or status.reason in ("Expired", "Gone"):
                raise _Relist()
            raise status
        self.stats["events"] += 1
        rv = _resource_version(obj)
        if rv:
            self._resource_version = rv
        if event.type == "BOOKMARK":
            return
        key = object_key(obj)
        if event.type == "ADDED" or event.type == "MODIFIED":
            previous = self._cache.get(key)
            self._cache[key] = _cached(obj)
            if previous is None:
                self._emit_add(obj)
            else:
                self._emit_update(previous, obj)
        elif event.type == "DELETED":
            self._cache.pop(key, None)
            self._emit_delete(obj)


class InformerFactory:
    """One informer per (type, namespace, selector), shared by every plugin manager; owns their tasks.

    Use as an async context manager: informers (and background jobs registered with :meth:`spawn_once`)
    run inside its TaskGroup until the block exits, and are cancelled then.
    """

    def __init__(self, client: KubeClient, *, clock: Clock, **informer_options: Any) -> None:
        self.client = client
        self.clock = clock
        self._options = informer_options
        self._informers: dict[tuple[ResourceType, str | None, str | None], Informer] = {}
        self._jobs: dict[Hashable, Callable[[], Awaitable[None]]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._tg: asyncio.TaskGroup | None = None
        #: Components derived from the informers that must exist once per factory (event watcher, …).
        self.extensions: dict[str, Any] = {}

    def informer(
        self, rtype: ResourceType, *, namespace: str | None = None, label_selector: str | None = None
    ) -> Informer:
        key = (rtype, namespace, label_selector)
        informer = self._informers.get(key)
        if informer is None:
            informer = Informer(
                self.client,
                rtype,
                clock=self.clock,
                namespace=namespace,
                label_selector=label_selector,
                **self._options,
            )
            self._informers[key] = informer
            self._start(informer.run)
        return informer

    def spawn_once(self, key: Hashable, job: Callable[[], Awaitable[None]]) -> None:
        """Run ``job`` in the factory's TaskGroup, once per ``key`` (now, or when the factory starts)."""
        if key in self._jobs:
            return
        self._jobs[key] = job
        self._start(job)

    @property
    def informers(self) -> list[Informer]:
        return list(self._informers.values())

    def _start(self, job: Callable[[], Awaitable[None]]) -> None:
        if self._tg is not None:
            self._tasks.append(self._tg.create_task(_as_coroutine(job)))

    async def __aenter__(self) -> InformerFactory:
        self._tg = asyncio.TaskGroup()
        await self._tg.__aenter__()
        for informer in self._informers.values():
            self._tasks.append(self._tg.create_task(_as_coroutine(informer.run)))
        for job in self._jobs.values():
            self._tasks.append(self._tg.create_task(_as_coroutine(job)))
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        tg, self._tg = self._tg, None
        for task in self._tasks:
            task.cancel()
        self._tasks.clear()
        if tg is not None:
            # Our tasks are cancelled above, so the group only waits for them. An exception raised in the
            # ``async with`` body is the caller's: it propagates unchanged instead of being wrapped in an
            # ExceptionGroup (a bad task type must reach the CLI as the PluginError it is).
            await tg.__aexit__(None, None, None)


async def _as_coroutine(job: Callable[[], Awaitable[None]]) -> None:
    await job()
