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
    qps: float = 30
    burst: int = 300


class CachingConfig(_CamelModel):
    size: int = 100000
    resync_interval: GoDuration = Field(default=timedelta(seconds=30), alias="resyncInterval")
    workers: int = 10
    max_system_failures: int = Field(default=5, alias="maxSystemFailures")


class PluginConfig(_CamelModel):
    """Flyte's webapi.PluginConfig with ``DefaultPluginConfig``'s values."""

    resource_quotas: Annotated[dict[str, int], BeforeValidator(list_of_maps_to_map)] = Field(
        default_factory=dict, alias="resourceQuotas"
    )
    read_rate_limiter: RateLimiterConfig = Field(default_factory=RateLimiterConfig, alias="readRateLimiter")
    write_rate_limiter: RateLimiterConfig = Field(
        default_factory=lambda: RateLimiterConfig(qps=20, burst=200), alias="writeRateLimiter"
    )
    caching: CachingConfig = Field(default_factory=CachingConfig)
    resource_meta: Any = Field(default=None, alias="resourceMeta")


@dataclass(frozen=True, slots=True)
class GetContext:
    """What ``get`` sees: only the resource meta and the previous resource (no task context, as in Flyte)."""

    resource_meta: ResourceMeta
    resource: Resource = None


@dataclass(frozen=True, slots=True)
class DeleteContext:
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
