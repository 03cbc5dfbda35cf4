"""What a web-API plugin author implements: AsyncPlugin (create / get / delete / status) or SyncPlugin (do).

Follows flyteplugins/go/tasks/pluginmachinery/webapi/{plugin,pluginconfig}.go. ``ResourceMeta`` is what
identifies the remote job; it is persisted in plugin state, so it must be JSON-able (dicts, lists, strings,
numbers; bytes are the plugin's to encode). ``Resource`` is the last observed remote status; it lives only in
the status cache.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Annotated, Any, Protocol, runtime_checkable

from pydantic import BeforeValidator, ConfigDict, Field

from taskplug.core import ErrorCode as _ErrorCode
from taskplug.core import (
    GoDuration,
    PhaseInfo,
    PluginError,
    PluginKind,
    ResourceConstraintsSpec,
    SetupContext,
    StrictModel,
    TaskExecutionContext,
    list_of_maps_to_map,
)

__all__ = [
    "AsyncPlugin",
    "CachingConfig",
    "DeleteContext",
    "GetContext",
    "PluginConfig",
    "RateLimiterConfig",
    "StatusContext",
    "SyncPlugin",
    "WebApiPluginEntry",
]

ResourceMeta = Any
Resource = Any


class _CamelModel(StrictModel):
    # Flyte's web-API keys are camelCase (``readRateLimiter.qps``), unlike the kebab-case k8s section.
    model_config = ConfigDict(
        extra="forbid", frozen=True, populate_by_name=True, alias_generator=None, arbitrary_types_allowed=True
    )


class RateLimiterConfig(_CamelModel):
    """A token bucket over calls to the remote service: ``readRateLimiter`` / ``writeRateLimiter`` of a
    web-API plugin's config (flyteplugins/go/tasks/pluginmachinery/webapi/pluginconfig.go)."""

    qps: float = 30
    """Calls per second the bucket refills (1 … 100000)."""
    burst: int = 300
    """Calls that may go at once when the bucket is full (5 … 10000)."""


class CachingConfig(_CamelModel):
    """``caching`` of a web-API plugin's config: the status cache that polls remote jobs
    (flyteplugins/go/tasks/pluginmachinery/webapi/pluginconfig.go)."""

    size: int = 100000
    """Most remote jobs the cache holds (10 … 500000)."""
    resync_interval: GoDuration = Field(default=timedelta(seconds=30), alias="resyncInterval")
    """Go duration between two status polls of a job (5s … 1h)."""
    workers: int = 10
    """Workers polling statuses in parallel (1 … 10000)."""
    max_system_failures: int = Field(default=5, alias="maxSystemFailures")
    """Failed status polls in a row a job may have (a count); more than this fails the task
    (``AutoRefreshCacheFailed``)."""


class PluginConfig(_CamelModel):
    """A web-API plugin's config: quotas, rate limits and status cache (``PluginConfig`` in
    flyteplugins/go/tasks/pluginmachinery/webapi/pluginconfig.go). Plugins embed it in their own section,
    e.g. ``plugins.connector-service.webApi``; the defaults here are Flyte's ``DefaultPluginConfig``."""

    resource_quotas: Annotated[dict[str, int], BeforeValidator(list_of_maps_to_map)] = Field(
        default_factory=dict, alias="resourceQuotas"
    )
    """Quota namespace → most jobs running at once in the remote service (a count of allocation tokens);
    empty: no quota, jobs are created at once."""
    read_rate_limiter: RateLimiterConfig = Field(default_factory=RateLimiterConfig, alias="readRateLimiter")
    """Rate limit of status reads (the status cache's polls)."""
    write_rate_limiter: RateLimiterConfig = Field(
        default_factory=lambda: RateLimiterConfig(qps=20, burst=200), alias="writeRateLimiter"
    )
    """Rate limit of creates and deletes (Flyte validates it but never applies it; taskplug does)."""
    caching: CachingConfig = Field(default_factory=CachingConfig)
    """The status cache."""
    resource_meta: Any = Field(default=None, alias="resourceMeta")
    """Flyte's empty copy of the plugin's resource meta type (for Go's gob encoding); taskplug stores
    resource meta as JSON and ignores it."""


@dataclass(frozen=True, slots=True)
class GetContext:
    """What ``get`` sees: only the resource meta and the previous resource (no task context, as in Flyte)."""

    resource_meta: ResourceMeta
    resource: Resource = None


@dataclass(frozen=True, slots=True)
class DeleteContext:
    """What ``delete`` sees (Flyte's ``webapi.DeleteContext``): the resource meta ``create`` returned (None
    when nothing was created) and the reason, always ``"Aborted"``."""

    resource_meta: ResourceMeta
    reason: str = "Aborted"


@dataclass(frozen=True, slots=True)
class StatusContext:
    """The task context plus the remote job's meta and its last observed status."""

    tctx: TaskExecutionContext
    resource_meta: ResourceMeta
    resource: Resource


@runtime_checkable
class AsyncPlugin(Protocol):
    """A web-API plugin that starts a remote job and follows it (Flyte's ``webapi.AsyncPlugin`` in
    pluginmachinery/webapi/plugin.go). The engine's ``WebApiPluginAdapter`` runs it as a core plugin.

    * :meth:`get_config` gives quotas, rate limits and cache settings: validated at load, and its quotas
      read again on every round that may take or release a token.
    * :meth:`create` runs on the executor's round: start the job and return its resource meta (JSON-able,
      persisted in plugin state) and, optionally, its status at once. It may be called again for the same
      attempt (after a restart), so it should be idempotent on the remote side. An error fails the attempt
      as retryable (``TaskFailedWithError``).
    * :meth:`get` runs only in the status cache's background workers, under the read rate limit; it gets
      the meta and the previous resource, never the task context. After more than
      ``caching.maxSystemFailures`` consecutive errors the task fails with ``AutoRefreshCacheFailed``. A
      resource with an ``is_terminal()`` method stops being polled once it returns True.
    * :meth:`status` translates a resource into a :class:`~taskplug.core.PhaseInfo` (pure: no network) and
      puts the outputs on success; an error means "could not decide this round".
    * :meth:`delete` is called only on abort and must tolerate a job already gone.
    * :meth:`resource_requirements` is asked only when ``resourceQuotas`` is configured.
    """

    def get_config(self) -> PluginConfig: ...

    async def resource_requirements(self, tctx: TaskExecutionContext) -> tuple[str, ResourceConstraintsSpec]:
        """The quota namespace and constraints for this task (only asked when quotas are configured)."""
        ...

    async def create(self, tctx: TaskExecutionContext) -> tuple[ResourceMeta, Resource | None]:
        """Start the remote job; may also return its status at once (the create-returns-resource shortcut)."""
        ...

    async def get(self, ctx: GetContext) -> Resource: ...

    async def delete(self, ctx: DeleteContext) -> None: ...

    async def status(self, ctx: StatusContext) -> PhaseInfo:
        """Translate a Resource into a phase (writes outputs on success)."""
        ...


@runtime_checkable
class SyncPlugin(Protocol):
    """A web-API plugin that runs a task in one call (Flyte's ``webapi.SyncPlugin``, which Flyte 1 declares
    but never runs). The engine's ``SyncPluginAdapter`` calls :meth:`do` on the executor's round; it must
    return a terminal phase (a non-terminal one fails the attempt) and an error fails the attempt as
    retryable. There is nothing to abort."""

    def get_config(self) -> PluginConfig: ...

    async def do(self, tctx: TaskExecutionContext) -> PhaseInfo:
        """Run the task to a terminal phase in one call."""
        ...


WebApiPluginLoader = Callable[
    [SetupContext], "AsyncPlugin | SyncPlugin | Awaitable[AsyncPlugin | SyncPlugin]"
]


@dataclass(frozen=True, slots=True)
class WebApiPluginEntry:
    """A web-API plugin registration (Flyte's webapi.PluginEntry)."""

    id: str
    supported_task_types: tuple[str, ...]
    plugin_loader: WebApiPluginLoader
    is_default: bool = False
    default_for_task_types: tuple[str, ...] = ()
    config_sections: tuple[Any, ...] = field(default=())
    kind: PluginKind = PluginKind.WEBAPI

    @property
    def registered_task_types(self) -> tuple[str, ...]:
        return self.supported_task_types

    def validate(self) -> None:
        if not self.id or not self.supported_task_types:
            raise PluginError(
                _ErrorCode.PLUGIN_INITIALIZATION_FAILED,
                f"web-API plugin entry [{self.id}] needs an id and at least one task type",
            )
