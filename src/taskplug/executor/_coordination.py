"""Which executions this process drives, and the lease every write of one is fenced with.

Two deployments share these seams. ``taskplug run`` is one process on an SQLite file: its
:class:`LocalCoordinator` drives the execution it was given, holding it with a kernel lock and a lease in the
file (:class:`~taskplug.executor.SQLiteStateStore`). ``taskplug executor --store postgresql://…`` runs
replicas: each one's coordinator claims executions from PostgreSQL (``taskplug.service``'s Replica) and its
store is ``PostgresStateStore``. Either way:

- a **lease** (:class:`Lease`) is an owner and an epoch; taking an execution increments its epoch;
- the **store's writes are fenced** (:class:`FencedStateStore`): each write of a held execution checks, in the
  statement that writes, that the lease it holds is still the current one; a write refused is dropped, the
  execution is reported lost and never written by this process again;
- the **coordinator** (:class:`Coordinator`) decides which executions the executor is given, and stops
  driving those its store reports lost (:meth:`Executor.forget`: no cleanup, no further write — the new
  holder owns the objects now).

Flyte's counterpart is the FlyteWorkflow CR's ``resourceVersion``: propeller's update of a workflow whose
version moved on is refused (optimistic concurrency), and a propeller shard is one leader-elected process.
Deviation: the fencing token is per execution and checked by the store, not by the Kubernetes API.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import uuid
from collections.abc import Collection, Iterator
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from taskplug.executor._guard import FencedError
from taskplug.executor._store import Lease, StateStore, StateStoreError

if TYPE_CHECKING:
    from taskplug.executor._executor import Executor
    from taskplug.executor._store import SQLiteStateStore

__all__ = ["Coordinator", "FencedStateStore", "Lease", "LocalCoordinator"]


@runtime_checkable
class FencedStateStore(StateStore, Protocol):
    """A :class:`StateStore` whose writes of a held execution are checked against its lease in the statement
    that writes them (SQLite's and PostgreSQL's)."""

    def lease_of(self, key: str) -> Lease | None:
        """The lease ``key``'s writes are fenced with; None when this store holds no lease for it."""
        ...

    def release(self, key: str) -> None:
        """Stop writing ``key``: pending writes are dropped, its lease is forgotten here."""
        ...

    @property
    def lost(self) -> Collection[str]:
        """The executions a fenced write was refused for: another process holds them now."""
        ...


class Coordinator(Protocol):
    """What decides which executions this process drives: the single process's :class:`LocalCoordinator`, or
    a replica claiming from PostgreSQL. Its store tells it (``on_lost``) of executions taken over."""

    @property
    def owner(self) -> str:
        """This process incarnation, as its leases name it."""
        ...

    def driving(self) -> Collection[str]:
        """The executions this process drives now."""
        ...

    def on_lost(self, keys: Collection[str]) -> None:
        """The store refused a fenced write of ``keys``: stop driving them, without cleanup."""
        ...


class LocalCoordinator:
    """The single process's coordinator (``taskplug run``): it drives the executions it is asked to hold.

    :meth:`hold` takes the execution's kernel lock (:meth:`SQLiteStateStore.lock`: a second process on the
    same file is refused at once, naming the holder) and then a new lease in the file, so the store fences
    this process's writes. The lock alone is not the fence: it is a file beside the database (removed, or on
    a filesystem whose locks do not reach every host, two processes could both pass it); the lease in the
    database is. A process whose write is refused because another took the execution over stops driving it
    (the executor given to :meth:`drive` forgets it, and :meth:`check` raises), deleting nothing.
    """

    def __init__(self, store: SQLiteStateStore) -> None:
        self.store = store
        self._owner = f"{socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:12]}"
        self._held: set[str] = set()
        self._executor: Executor | None = None
        self.taken_over: set[str] = set()
        store.on_lost = self.on_lost

    def drive(self, executor: Executor) -> None:
        """Have ``executor`` forget an execution of this process's that another process takes over."""
        self._executor = executor

    @property
    def owner(self) -> str:
        return self._owner

    def driving(self) -> Collection[str]:
        return set(self._held)

    def on_lost(self, keys: Collection[str]) -> None:
        lost = set(keys) & self._held
        if not lost:
            return
        self._held -= lost
        self.taken_over |= lost
        if self._executor is not None:
            # Told from inside a round's write: the executor forgets the execution once that round returns.
            loop = asyncio.get_running_loop()
            for key in lost:
                loop.call_soon(self._executor.forget, key)

    @contextlib.contextmanager
    def hold(self, key: str) -> Iterator[Lease]:
        """Hold ``key`` for the block: its lock, then a new lease the store's writes are fenced with.
        :class:`StateStoreError` naming the holder when another process holds the lock."""
        with self.store.lock(key):
            lease = self.store.acquire_lease(key, self._owner)
            self._held.add(key)
            try:
                yield lease
            finally:
                self._held.discard(key)
                with contextlib.suppress(StateStoreError):
                    self.store.flush()
                self.store.release(key)

    async def guard(self) -> None:
        """The :class:`~taskplug.executor.GuardedKubeClient` guard of this process's creates and deletes:
        refused (:class:`FencedError`) once anything it held was taken over — the new holder owns the
        objects now."""
        if self.taken_over:
            raise FencedError(
                f"execution {sorted(self.taken_over)[0]!r} was taken over by another process: the call was not sent"
            )

    def check(self, key: str) -> None:
        """Raise :class:`StateStoreError` when ``key`` was taken over by another process."""
        if key in self.taken_over:
            raise StateStoreError(
                f"execution {key!r} was taken over by another process while this one drove it (its lease in "
                f"state DB {str(self.store.path)!r} moved on, so this process's writes were refused); this run "
                "stopped driving it and deleted nothing: the other process finishes it"
            )
