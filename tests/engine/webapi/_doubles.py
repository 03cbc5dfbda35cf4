"""A tiny in-process AsyncPlugin / SyncPlugin for the tests: scripted creates, gets and statuses.

Resources are phase names (``"Running"``, ``"Success"``, ``"Failed"`` …); ``status`` maps them to PhaseInfos.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from taskplug.core import Phase, PhaseInfo, ResourceConstraintsSpec, TaskExecutionContext
from taskplug.webapi import DeleteContext, GetContext, PluginConfig, StatusContext


def status_of(resource: Any) -> PhaseInfo:
    match resource:
        case "Queued":
            return PhaseInfo.queued(None, 0, "remote queued")
        case "Initializing":
            return PhaseInfo.initializing(0, "remote initializing")
        case "Running":
            return PhaseInfo.running(3)
        case "Success":
            return PhaseInfo.success()
        case "Failed":
            return PhaseInfo.failure("RemoteFailed", "boom")
        case "Retry":
            return PhaseInfo.retryable_failure("RemoteRetry", "try again")
        case "Aborted":
            return PhaseInfo.aborted()
        case "WaitingForCache":
            return PhaseInfo.waiting_for_cache(0)
    raise ValueError(f"status cannot read resource {resource!r}")


class ScriptedPlugin:
    """An AsyncPlugin whose answers are scripted; every call is recorded."""

    def __init__(
        self,
        *,
        config: PluginConfig | None = None,
        create: list[tuple[Any, Any] | Exception] | None = None,
        gets: list[Any] | None = None,
        status: Callable[[Any], PhaseInfo] = status_of,
        namespace: str = "ns",
        constraints: ResourceConstraintsSpec | None = None,
        delete_error: Exception | None = None,
    ) -> None:
        self.config = config or PluginConfig()
        self.create_script = list(create or [("meta-1", None)])
        self.get_script = list(gets or ["Running"])
        self.status_fn = status
        self.namespace = namespace
        self.constraints = constraints or ResourceConstraintsSpec()
        self.delete_error = delete_error
        self.creates: list[str] = []
        self.get_calls: list[GetContext] = []
        self.deletes: list[DeleteContext] = []
        self.statuses: list[StatusContext] = []

    def get_config(self) -> PluginConfig:
        return self.config

    async def resource_requirements(self, tctx: TaskExecutionContext) -> tuple[str, ResourceConstraintsSpec]:
        return self.namespace, self.constraints

    async def create(self, tctx: TaskExecutionContext) -> tuple[Any, Any]:
        self.creates.append(tctx.metadata.task_execution_id.generated_name)
        result = self.create_script.pop(0) if len(self.create_script) > 1 else self.create_script[0]
        if isinstance(result, Exception):
            raise result
        return result

    async def get(self, ctx: GetContext) -> Any:
        self.get_calls.append(ctx)
        result = self.get_script.pop(0) if len(self.get_script) > 1 else self.get_script[0]
        if isinstance(result, Exception):
            raise result
        return result

    async def delete(self, ctx: DeleteContext) -> None:
        self.deletes.append(ctx)
        if self.delete_error is not None:
            raise self.delete_error

    async def status(self, ctx: StatusContext) -> PhaseInfo:
        self.statuses.append(ctx)
        return self.status_fn(ctx.resource)


class ScriptedSyncPlugin:
    """A SyncPlugin whose ``do`` returns (or raises) a scripted result."""

    def __init__(self, result: PhaseInfo | Exception, config: PluginConfig | None = None) -> None:
        self.result = result
        self.config = config or PluginConfig()
        self.calls = 0

    def get_config(self) -> PluginConfig:
        return self.config

    async def do(self, tctx: TaskExecutionContext) -> PhaseInfo:
        self.calls += 1
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


__all__ = ["Phase", "ScriptedPlugin", "ScriptedSyncPlugin", "status_of"]
