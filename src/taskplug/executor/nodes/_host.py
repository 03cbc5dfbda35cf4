"""What a root node needs of the executor that schedules it, and what the executor asks of a root node.

An execution is one root node — a single task's task node, or a map task's array node — whose handler is made
by :mod:`._factory`. The executor (the scheduler: queue, workers, timers, wake-ups) calls its root node's
:meth:`RootNode.round` whenever the execution is woken, and the node reaches back only through
:class:`NodeHost`: the stores, the node step, events, wake-ups and the end. This is propeller's split between
the workflow executor and ``nodes.NodeExecutor`` (flytepropeller/pkg/controller/workflow/executor.go,
nodes/executor.go), reduced to one root node per execution.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from taskplug.core import Clock, Phase, PhaseInfo, ResourceManager, TaskExecutionContext, rfc3339
from taskplug.executor._datastore import DataStore
from taskplug.executor._spec import ExecutionSpec
from taskplug.executor._store import Event, ExecutionRecord, StateStore
from taskplug.executor.nodes._step import NodeStep, error_json

__all__ = ["AsyncFlush", "NodeHost", "RootNode", "async_flush", "flush_store", "phase_event"]


@runtime_checkable
class AsyncFlush(Protocol):
    """An optional capability of a state store: a flush that may wait, so that concurrent callers share one
    commit (``PostgresStateStore`` groups them into one batch statement)."""

    async def aflush(self) -> None: ...


_ASYNC_FLUSH: dict[type, bool] = {}
"""Whether a store class is :class:`AsyncFlush`: an ``isinstance`` check against a runtime protocol walks the
protocol's members each time, and a workflow flushes once per node."""


def async_flush(store: StateStore) -> bool:
    """Whether ``store`` can group concurrent flushes (:class:`AsyncFlush`), known once per store class."""
    kind = type(store)
    known = _ASYNC_FLUSH.get(kind)
    if known is None:
        known = _ASYNC_FLUSH[kind] = isinstance(store, AsyncFlush)
    return known


async def flush_store(store: StateStore) -> None:
    """Put ``store``'s pending writes on disk before going on (before anything is deleted, before waiters
    are released): through its ``aflush`` when it has one, else its ``flush``."""
    if async_flush(store):
        await store.aflush()  # type: ignore[attr-defined]
    else:
        store.flush()


class NodeHost(Protocol):
    """What a root node needs of the executor running it."""

    data: DataStore
    store: StateStore
    clock: Clock
    resource_manager: ResourceManager | None
    step: NodeStep  # the node step every node's rounds go through

    def emit(self, key: str, event: Event) -> None:
        """Store ``event`` for execution ``key`` and tell the listener."""
        ...

    def index_generated_name(self, name: str, key: str) -> None:
        """Let ``enqueue_task_execution(name)`` wake execution ``key``."""
        ...

    def unindex_generated_name(self, name: str) -> None: ...

    def wake(self, key: str) -> None: ...

    def wake_after(self, key: str, seconds: float) -> None: ...

    def finish(self, key: str) -> None:
        """The execution reached its terminal phase: saved, flushed, its waiters released."""
        ...

    async def launch(self, spec: ExecutionSpec, *, parent: str) -> str:
        """Start execution ``spec`` as a child of execution ``parent`` (a launch-plan node's), or find it when
        it runs or the store knows it (a launch is idempotent by name); ``parent`` is woken when it ends.
        Returns its key."""
        ...

    def launched(self, key: str) -> ExecutionRecord | None:
        """The record of execution ``key`` when this executor drives it (None: launch it again)."""
        ...

    def abort(self, key: str) -> None:
        """Ask execution ``key`` to abort (a launch-plan node's child, when the node is aborted)."""
        ...


class RootNode(Protocol):
    """One execution's root node, as the executor drives it."""

    async def round(self) -> None:
        """One round: called whenever the execution is woken, never twice at once."""
        ...

    def creating(self, tctx: TaskExecutionContext) -> tuple[str | None, int | None, int]:
        """(node, element index, attempt) of the create ``tctx`` is about to make, for the store's intent:
        node None for this root node's own task, else the path of the node whose attempt or elements it is
        (a map node's own path; a workflow's task node's unique id); element None unless it is a map
        element's. Raises a PluginError when ``tctx`` is no attempt of this node."""
        ...

    def elements_json(self) -> list[dict[str, Any]] | None:
        """A map task's elements as results show them; None for other kinds."""
        ...

    def nodes_json(self) -> list[dict[str, Any]] | None:
        """A workflow's nodes as results show them (nested under sub-workflow and branch nodes); None for
        other kinds."""
        ...

    def unindex_all(self) -> None:
        """Stop routing any generated name to this execution (the executor forgets it)."""
        ...


def phase_event(record: ExecutionRecord, info: PhaseInfo) -> Event | None:
    """Record ``info`` as the root node's phase and return the event to report, or None when it is no news:
    same phase, no newer version, same reason. (A plugin may report a lower version after a bump, as
    MaybeUpdatePhaseVersion allows; that alone is no news.)

    Deviation: FlyteAdmin also drops a same-phase event whose version is not newer even when its reason
    changed, which hides a connector's progress messages (they all come at version 0); they are kept here."""
    if (
        info.phase == record.task_phase
        and info.version <= record.phase_version
        and info.reason == record.reason
        and info.phase is not Phase.UNDEFINED
    ):
        return None
    record.task_phase, record.phase_version, record.reason = int(info.phase), info.version, info.reason
    occurred = info.info.occurred_at if info.info is not None else None
    return Event(
        attempt=record.attempt,
        phase=str(info.phase),
        version=info.version,
        reason=info.reason or (info.err.message if info.err else ""),
        occurred_at=rfc3339(occurred) if occurred else None,
        error=error_json(info.err),
        logs=[link.to_json() for link in info.info.logs]
        if info.info is not None and info.info.logs
        else None,
    )
