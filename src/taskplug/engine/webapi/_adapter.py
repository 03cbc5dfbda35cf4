"""The core adapter: a web-API plugin driven as a :class:`taskplug.core.Plugin`.

Follows flyteplugins/go/tasks/pluginmachinery/internal/webapi/{core,launcher,monitor,allocation_token,
plugin_context}.go. One round of :meth:`WebApiPluginAdapter.handle` reads the persisted state (plugin-state
version 1), takes one step of the lifecycle and writes the next state:

    NotStarted ──(quotas: allocate token)──▶ AllocationTokenAcquired ──(create)──▶ ResourcesCreated
        │ no quotas: create                                                      │ monitor via the cache
        └──────────────────────────────────────────────────────────────────────▶ Succeeded / UserFailure /
                                                                                 SystemFailure

Token allocation and create happen in different rounds (Granted reports Queued; create runs next round).
Create runs on the round; ``get`` runs only in the status cache's workers; ``status`` runs on the round.
The decisions are pure functions (``allocation_outcome``, ``launched_state``, ``monitor_outcome``); the
adapter methods do the I/O around them.

Waking: the adapter can be given ``enqueue`` (the executor's "run a round of the task execution with this
generated name soon"). The status cache calls it when a sync changed a job's status, and the adapter when a
token was granted (create is the very next step), so a web-API task moves on when something happened rather
than at the executor's next resync. In Flyte the same effect comes from propeller re-queueing a workflow
whose status it just updated; taskplug's executor wakes executions only through plugins and its resync
timer. Without ``enqueue`` the task still progresses, one resync period at a time.

Persisting before the create: the adapters can be given ``before_create`` (:data:`BeforeCreate`), awaited
after the write rate limit and right before ``create`` (the launch step) or a sync plugin's ``do``. Neither
call is idempotent, so an executor replica uses it to record, fenced by its claim, that the call is about
to be made (docs/service.md, "No object created twice", item 6); when it raises (the execution is no longer
this replica's), the round
errors and nothing is called.

Deviations:

* The write rate limit (``writeRateLimiter``) is applied to every create and delete (Flyte never uses it).
* ``before_create`` is awaited before every create and every sync ``do`` (Flyte persists nothing between
  deciding to create and the call: a round lost after the call calls again, unnoticed).
* A terminal state re-entered re-reports the terminal phase it reported (kept in the state), where Flyte
  reports Undefined. A create that returns a terminal status is persisted as terminal too (Flyte keeps the
  old phase, so a re-entered round would create again).
* A create that returns a **non-terminal** status (a sync connector answering "running", or any
  create-returns-resource shortcut): with a resource meta, the job is treated as created — the cache entry is
  seeded with that resource and its status is reported; without a resource meta there is nothing to poll, so
  the attempt ends as a system retryable failure (``RuntimeFailure``) with a message saying why. Flyte stores
  a nil meta and the next cache ``get`` crashes a worker.
* A cache item in SystemFailure fails the task (``AutoRefreshCacheFailed``) even when an earlier ``get``
  succeeded (see ``_cache``), instead of reporting the stale phase forever.
* ``resource_wait_time`` is observed only when the first request time is known (Flyte observes the time
  since year 1 on the first grant).
* :func:`webapi_plugin_entry` keeps the entry's ``is_default`` (Flyte drops it).
* :class:`SyncPluginAdapter` wraps a SyncPlugin (Flyte has no wrapper): ``do`` runs on the round and must
  return a terminal phase; a non-terminal one is a system retryable failure. ``do`` is the sync plugin's
  create (a connector's ``ExecuteTaskSync`` starts the job), so the write rate limit and ``before_create``
  are applied before it as before a create.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry

from taskplug.core import (
    AllocationStatus,
    Clock,
    ErrorCode,
    PhaseInfo,
    Plugin,
    PluginEntry,
    PluginError,
    PluginKind,
    PluginProperties,
    SetupContext,
    SystemClock,
    TaskExecutionContext,
    Transition,
    close_plugin,
)
from taskplug.engine.webapi._cache import CacheItem, ResourceCache, new_resource_cache
from taskplug.engine.webapi._metrics import CacheMetrics, WebApiMetrics, metric_namespace
from taskplug.engine.webapi._ratelimit import TokenBucket, TokenBucketSpec
from taskplug.engine.webapi._resourcemanager import (
    BaseResourceManager,
    InProcessResourceManager,
    ResourceRegistrarProxy,
    TaskResourceManager,
)
from taskplug.engine.webapi._state import (
    PLUGIN_STATE_VERSION,
    ReportedPhase,
    State,
    WebApiPhase,
    decode_state,
    encode_state,
    to_plugin_phase,
)
from taskplug.engine.webapi._validation import validate_plugin_config
from taskplug.webapi import (
    AsyncPlugin,
    DeleteContext,
    StatusContext,
    SyncPlugin,
    WebApiPluginEntry,
)

__all__ = [
    "LAUNCHED_PHASE_VERSION",
    "BeforeCreate",
    "SyncPluginAdapter",
    "WebApiPluginAdapter",
    "allocation_outcome",
    "launched_state",
    "load_webapi_plugin",
    "monitor_outcome",
    "terminal_state",
    "webapi_plugin_entry",
]

_log = logging.getLogger(__name__)

BeforeCreate = Callable[[TaskExecutionContext], Awaitable[None]]
"""Awaited right before a web-API create with the task's context; raising stops the create (the round
errors)."""

LAUNCHED_PHASE_VERSION = 2
REASON_TOKEN_GRANTED = "Allocation token required"
REASON_QUOTA_EXHAUSTED = "Quota for task has exceeded. Waiting for the resource."
REASON_LAUNCHED = "launched"
REASON_SUBMITTED = "job submitted"
_GO_STATUS_NAMES = {
    AllocationStatus.UNDEFINED: "AllocationUndefined",
    AllocationStatus.NAMESPACE_QUOTA_EXCEEDED: "AllocationStatusNamespaceQuotaExceeded",
}


# -- pure decisions --------------------------------------------------------------------------------------


def allocation_outcome(status: AllocationStatus, incoming: State, now: datetime) -> tuple[State, PhaseInfo]:
    """Flyte's allocateToken after the manager answered; the new state replaces the old one wholesale."""
    if status is AllocationStatus.GRANTED:
        return (
            State(WebApiPhase.ALLOCATION_TOKEN_ACQUIRED, allocation_token_request_start_time=now),
            PhaseInfo.queued(now, 0, REASON_TOKEN_GRANTED),
        )
    if status is AllocationStatus.EXHAUSTED:
        start = incoming.allocation_token_request_start_time or now
        return (
            State(WebApiPhase.NOT_STARTED, allocation_token_request_start_time=start),
            PhaseInfo.waiting_for_resources(0, REASON_QUOTA_EXHAUSTED),
        )
    # NamespaceQuotaExceeded falls out of Flyte's switch like Undefined does.
    raise PluginError(
        ErrorCode.RESOURCE_MANAGER_FAILURE,
        f"allocation status undefined [{_GO_STATUS_NAMES.get(status, status)}]",
    )


def terminal_state(incoming: State, info: PhaseInfo, resource_meta: Any) -> State:
    """The state persisted once a terminal phase was reported, remembering that phase."""
    phase = WebApiPhase.SUCCEEDED if info.phase.is_success else WebApiPhase.USER_FAILURE
    return dataclasses.replace(
        incoming, phase=phase, resource_meta=resource_meta, reported_phase=ReportedPhase.of(info)
    )


def launched_state(incoming: State, resource_meta: Any) -> State:
    return dataclasses.replace(
        incoming,
        phase=WebApiPhase.RESOURCES_CREATED,
        phase_version=LAUNCHED_PHASE_VERSION,
        resource_meta=resource_meta,
    )


def monitor_outcome(
    incoming: State, item: CacheItem, status: PhaseInfo | None, now: datetime
) -> tuple[State, PhaseInfo, bool]:
    """Flyte's monitor after the cache lookup (and ``status`` when the item has a resource).

    Returns the next state, the phase to report, and whether the cache entry should be dropped.
    """
    if item.state.phase is WebApiPhase.SYSTEM_FAILURE:
        info = PhaseInfo.failure(ErrorCode.CACHE_FAILED, item.state.error_message)
        return terminal_state(incoming, info, incoming.resource_meta), info, True
    if item.resource is None or status is None:
        return incoming, PhaseInfo.queued(now, item.state.phase_version, REASON_SUBMITTED), False
    phase = to_plugin_phase(status.phase)
    state = dataclasses.replace(item.state, phase=phase, phase_version=status.version)
    if phase.is_terminal:
        return terminal_state(state, status, state.resource_meta), status, True
    return state, status, False


# -- I/O helpers -------------------------------------------------------------------------------------------


def _wrap(e: Exception, code: str, message: str) -> PluginError:
    if isinstance(e, PluginError):
        return e
    return PluginError(code, message, cause=e)


class _StateIO:
    """Reading and writing the persisted state, with Flyte's unmarshal metrics."""

    def __init__(self, metrics: WebApiMetrics) -> None:
        self._metrics = metrics

    def read(self, tctx: TaskExecutionContext) -> State:
        started = time.perf_counter()
        try:
            _, raw = tctx.plugin_state_reader.get()
            state = decode_state(raw)
        except (ValueError, TypeError, KeyError) as e:
            self._metrics.unmarshal_state_failed.inc()
            raise PluginError(
                ErrorCode.CORRUPTED_PLUGIN_STATE, "Failed to unmarshal custom state in Handle", cause=e
            ) from e
        self._metrics.unmarshal_state_success.observe((time.perf_counter() - started) * 1000)
        return state

    @staticmethod
    def write(tctx: TaskExecutionContext, state: State) -> None:
        tctx.plugin_state_writer.put(PLUGIN_STATE_VERSION, encode_state(state))


def _rereport(state: State, now: datetime) -> PhaseInfo:
    if state.reported_phase is not None:
        return state.reported_phase.to_phase_info(now)
    # A terminal state written without its phase (not by this adapter): Flyte's answer.
    return PhaseInfo()


class WebApiPluginAdapter:
    """An AsyncPlugin as a core Plugin (Flyte's webapi CorePlugin). Build it with :func:`load_webapi_plugin`."""

    def __init__(
        self,
        plugin_id: str,
        plugin: AsyncPlugin,
        *,
        cache: ResourceCache,
        resource_manager: BaseResourceManager,
        clock: Clock,
        metrics: WebApiMetrics,
        write_bucket: TokenBucket,
        enqueue: Callable[[str], None] | None = None,
        before_create: BeforeCreate | None = None,
    ) -> None:
        self._id = plugin_id
        self.plugin = plugin
        self.cache = cache
        self.resource_manager = resource_manager
        self._clock = clock
        self._metrics = metrics
        self._write_bucket = write_bucket
        self._enqueue = enqueue
        self._before_create = before_create
        self._state = _StateIO(metrics)

    @property
    def id(self) -> str:
        return self._id

    def get_properties(self) -> PluginProperties:
        return PluginProperties()

    async def aclose(self) -> None:
        """Stop the status cache's tasks, then the plugin the loader built (its own tasks, its channels)."""
        await self.cache.stop()
        await close_plugin(self.plugin)

    def _task_resource_manager(self, tctx: TaskExecutionContext) -> TaskResourceManager:
        execution = tctx.metadata.task_execution_id.id.node_execution_id.execution_id
        return TaskResourceManager(
            self.resource_manager, self._id, execution.project, execution.domain, execution.name
        )

    async def handle(self, tctx: TaskExecutionContext) -> Transition:
        incoming = self._state.read(tctx)
        match incoming.phase:
            case WebApiPhase.NOT_STARTED if self.plugin.get_config().resource_quotas:
                state, info = await self._allocate_token(tctx, incoming)
            case WebApiPhase.NOT_STARTED | WebApiPhase.ALLOCATION_TOKEN_ACQUIRED:
                state, info = await self._launch(tctx, incoming)
            case WebApiPhase.RESOURCES_CREATED:
                state, info = await self._monitor(tctx, incoming)
            case _:
                # Deviation: re-report the terminal phase (Flyte: Undefined).
                state, info = incoming, _rereport(incoming, self._clock.now())
        self._state.write(tctx, state)
        return Transition.to(info)

    async def _allocate_token(self, tctx: TaskExecutionContext, incoming: State) -> tuple[State, PhaseInfo]:
        try:
            namespace, constraints = await self.plugin.resource_requirements(tctx)
        except Exception as e:
            raise _wrap(e, ErrorCode.RESOURCE_MANAGER_FAILURE, "failed to get resource requirements") from e
        token = tctx.metadata.task_execution_id.generated_name
        status = await self._task_resource_manager(tctx).allocate_resource(namespace, token, constraints)
        now = self._clock.now()
        state, info = allocation_outcome(status, incoming, now)
        if status is AllocationStatus.GRANTED:
            self._metrics.allocation_grant_success.inc()
            start = incoming.allocation_token_request_start_time
            if start is not None:
                self._metrics.resource_wait_time.observe((now - start).total_seconds() * 1000)
            if self._enqueue is not None:
                self._enqueue(token)  # create runs on the next round: no reason to wait for a resync
        else:
            self._metrics.allocation_grant_failed.inc()
        return state, info

    async def _status(self, tctx: TaskExecutionContext, meta: Any, resource: Any) -> PhaseInfo:
        try:
            return await self.plugin.status(StatusContext(tctx, meta, resource))
        except Exception as e:
            raise _wrap(e, ErrorCode.SYSTEM_ERROR, "failed to get the status of the remote resource") from e

    async def _launch(self, tctx: TaskExecutionContext, incoming: State) -> tuple[State, PhaseInfo]:
        await self._write_bucket.wait()
        if self._before_create is not None:
            # Raising here errors the round before anything was sent (see the module doc).
            # Deviation: Flyte persists nothing between deciding to create and the create, so a round lost
            # after the call creates again unnoticed; here the executor records the intent first.
            await self._before_create(tctx)
        try:
            meta, resource = await self.plugin.create(tctx)
        except Exception as e:
            _log.info("plugin %s: create failed: %s", self._id, e)
            return incoming, PhaseInfo.retryable_failure(ErrorCode.TASK_FAILED_WITH_ERROR, str(e))
        cache_id = tctx.metadata.task_execution_id.generated_name
        if resource is None:
            state = launched_state(incoming, meta)
            self.cache.get_or_create(cache_id, CacheItem(state))
            return state, PhaseInfo.queued(self._clock.now(), LAUNCHED_PHASE_VERSION, REASON_LAUNCHED)
        info = await self._status(tctx, meta, resource)
        if info.phase.is_terminal:
            return terminal_state(incoming, info, meta), info
        if meta is None:
            failure = PhaseInfo.system_retryable_failure(
                ErrorCode.RUNTIME_FAILURE,
                f"plugin [{self._id}] create returned the non-terminal phase {info.phase} without a resource "
                "meta, so there is nothing to follow; a create that answers at once must answer with a "
                "terminal phase",
            )
            return terminal_state(incoming, failure, None), failure
        # Treated as created with that status: the cache starts from this resource.
        to_plugin_phase(info.phase)
        state = launched_state(incoming, meta)
        self.cache.get_or_create(cache_id, CacheItem(state, resource))
        return state, info

    async def _monitor(self, tctx: TaskExecutionContext, incoming: State) -> tuple[State, PhaseInfo]:
        cache_id = tctx.metadata.task_execution_id.generated_name
        # Re-registers the job if the cache lost it (restart, eviction); an existing entry is returned as is.
        item = self.cache.get_or_create(cache_id, CacheItem(incoming))
        if not isinstance(item, CacheItem):
            raise PluginError(ErrorCode.CACHE_FAILED, f"cache item [{cache_id}] is not a CacheItem")
        status = None
        if item.resource is not None and item.state.phase is not WebApiPhase.SYSTEM_FAILURE:
            status = await self._status(tctx, item.state.resource_meta, item.resource)
        state, info, drop = monitor_outcome(incoming, item, status, self._clock.now())
        if drop:
            self.cache.delete_delayed(cache_id)
        return state, info

    async def abort(self, tctx: TaskExecutionContext) -> None:
        state = self._state.read(tctx)
        await self._write_bucket.wait()
        try:
            await self.plugin.delete(DeleteContext(state.resource_meta, "Aborted"))
        except Exception as e:
            name = tctx.metadata.task_execution_id.generated_name
            raise _wrap(
                e, ErrorCode.DOWNSTREAM_SYSTEM_ERROR, f"Failed to abort some resources [{name}]"
            ) from e

    async def finalize(self, tctx: TaskExecutionContext) -> None:
        name = tctx.metadata.task_execution_id.generated_name
        self.cache.delete_delayed(name)
        if not self.plugin.get_config().resource_quotas:
            return
        try:
            namespace, _ = await self.plugin.resource_requirements(tctx)
        except Exception as e:
            raise _wrap(e, ErrorCode.RESOURCE_MANAGER_FAILURE, "failed to get resource requirements") from e
        try:
            await self._task_resource_manager(tctx).release_resource(namespace, name)
        except Exception as e:
            self._metrics.resource_release_failed.inc()
            raise _wrap(e, ErrorCode.RESOURCE_MANAGER_FAILURE, f"failed to release token [{name}]") from e
        self._metrics.resource_release_success.inc()


class SyncPluginAdapter:
    """A SyncPlugin as a core Plugin: ``do`` runs on the round, after ``before_create``, and must finish the
    task."""

    def __init__(
        self,
        plugin_id: str,
        plugin: SyncPlugin,
        *,
        clock: Clock,
        metrics: WebApiMetrics,
        write_bucket: TokenBucket,
        before_create: BeforeCreate | None = None,
    ) -> None:
        self._id = plugin_id
        self.plugin = plugin
        self._clock = clock
        self._write_bucket = write_bucket
        self._before_create = before_create
        self._state = _StateIO(metrics)

    @property
    def id(self) -> str:
        return self._id

    def get_properties(self) -> PluginProperties:
        return PluginProperties()

    async def aclose(self) -> None:
        await close_plugin(self.plugin)

    async def handle(self, tctx: TaskExecutionContext) -> Transition:
        incoming = self._state.read(tctx)
        if incoming.phase.is_terminal:
            return Transition.to(_rereport(incoming, self._clock.now()))
        await self._write_bucket.wait()
        if self._before_create is not None:
            # ``do`` starts the job as a create does: the intent is recorded first, as in ``_launch`` (see
            # the module doc); raising errors the round before ``do`` is called.
            await self._before_create(tctx)
        try:
            info = await self.plugin.do(tctx)
        except Exception as e:
            info = PhaseInfo.retryable_failure(ErrorCode.TASK_FAILED_WITH_ERROR, str(e))
        if not info.phase.is_terminal:
            info = PhaseInfo.system_retryable_failure(
                ErrorCode.RUNTIME_FAILURE,
                f"sync plugin [{self._id}] returned the non-terminal phase {info.phase}; "
                "a sync plugin must finish the task in one call",
            )
        self._state.write(tctx, terminal_state(incoming, info, None))
        return Transition.to(info)

    async def abort(self, tctx: TaskExecutionContext) -> None:
        # Nothing outlives ``do``: there is no remote job to delete.
        return None

    async def finalize(self, tctx: TaskExecutionContext) -> None:
        return None


def _is_async_plugin(plugin: object) -> bool:
    return all(callable(getattr(plugin, name, None)) for name in ("create", "get", "delete", "status"))


async def load_webapi_plugin(
    entry: WebApiPluginEntry,
    setup: SetupContext,
    *,
    clock: Clock | None = None,
    resource_manager: BaseResourceManager | None = None,
    metrics_registry: CollectorRegistry | None = None,
    enqueue: Callable[[str], None] | None = None,
    before_create: BeforeCreate | None = None,
) -> WebApiPluginAdapter | SyncPluginAdapter:
    """Flyte's web-API LoadPlugin: run the loader, validate the config, register the quotas, start the cache.

    ``resource_manager`` is the executor's shared base manager (a private in-process one when omitted);
    quotas are registered on it and every allocation goes through it, namespaced by this plugin's id.
    ``enqueue`` wakes a task execution by its generated name; ``before_create`` is awaited before every
    create and every sync plugin's ``do`` (see the module doc).
    Call ``aclose()`` on the result to stop its status cache.
    """
    result = entry.plugin_loader(setup)
    plugin = await result if inspect.isawaitable(result) else result
    clock = clock or setup.clock or SystemClock()
    registry = metrics_registry if metrics_registry is not None else CollectorRegistry()
    namespace = metric_namespace(entry.id)
    config = plugin.get_config()
    validate_plugin_config(config)
    write_bucket = TokenBucket(TokenBucketSpec.from_config(config.write_rate_limiter), clock)
    metrics = WebApiMetrics(registry, namespace)
    if not _is_async_plugin(plugin):
        if not callable(getattr(plugin, "do", None)):
            raise PluginError(
                ErrorCode.PLUGIN_INITIALIZATION_FAILED,
                f"web-API plugin [{entry.id}] is neither an AsyncPlugin nor a SyncPlugin",
            )
        assert isinstance(plugin, SyncPlugin)
        return SyncPluginAdapter(
            entry.id,
            plugin,
            clock=clock,
            metrics=metrics,
            write_bucket=write_bucket,
            before_create=before_create,
        )
    assert isinstance(plugin, AsyncPlugin)
    manager = resource_manager if resource_manager is not None else InProcessResourceManager()
    registrar = ResourceRegistrarProxy(manager, entry.id)
    for quota_namespace, quota in config.resource_quotas.items():
        await registrar.register_resource_quota(quota_namespace, quota)
    cache = new_resource_cache(
        entry.id,
        plugin,
        config.caching,
        config.read_rate_limiter,
        clock=clock,
        metrics=CacheMetrics(registry, namespace),
        on_update=enqueue,
    )
    await cache.start()
    return WebApiPluginAdapter(
        entry.id,
        plugin,
        cache=cache,
        resource_manager=manager,
        clock=clock,
        metrics=metrics,
        write_bucket=write_bucket,
        enqueue=enqueue,
        before_create=before_create,
    )


def webapi_plugin_entry(
    entry: WebApiPluginEntry,
    *,
    clock: Clock | None = None,
    resource_manager: BaseResourceManager | None = None,
    metrics_registry: CollectorRegistry | None = None,
    enqueue: Callable[[str], None] | None = None,
    before_create: BeforeCreate | None = None,
) -> PluginEntry:
    """Flyte's CreateRemotePlugin: a core PluginEntry whose loader is :func:`load_webapi_plugin`."""

    async def load(setup: SetupContext) -> Plugin:
        return await load_webapi_plugin(
            entry,
            setup,
            clock=clock,
            resource_manager=resource_manager,
            metrics_registry=metrics_registry,
            enqueue=enqueue,
            before_create=before_create,
        )

    return PluginEntry(
        entry.id, entry.supported_task_types, load, is_default=entry.is_default, kind=PluginKind.WEBAPI
    )
