"""The core plugin contract and its registry entry.

Follows flyteplugins/go/tasks/pluginmachinery/core/plugin.go. Every kind of plugin (a Kubernetes plugin
wrapped by the plugin manager, a web-API plugin wrapped by its adapter, or a plain core plugin) ends up as a
:class:`Plugin` that the executor drives.
"""

from __future__ import annotations

import enum
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from taskplug.core._config import ConfigSection
from taskplug.core._context import SetupContext, TaskExecutionContext
from taskplug.core._errors import ErrorCode, PluginError
from taskplug.core._phase import Transition

__all__ = [
    "Plugin",
    "PluginEntry",
    "PluginKind",
    "PluginLoader",
    "PluginProperties",
    "close_plugin",
    "load_plugin",
]


class PluginKind(enum.StrEnum):
    """Which machinery runs a registered entry: ``CORE`` (the entry's loader returns a :class:`Plugin`),
    ``K8S`` (a ``taskplug.k8s.K8sPluginEntry``, run behind the engine's plugin manager) or ``WEBAPI`` (a
    ``taskplug.webapi.WebApiPluginEntry``, run behind the web-API adapter).

    Flyte registers each kind through its own function (``RegisterCorePlugin``, ``RegisterK8sPlugin``,
    ``RegisterRemotePlugin`` in pluginmachinery/registry.go); here the entry says what it is and
    ``wrangle_plugins`` wraps it accordingly.
    """

    CORE = "core"
    K8S = "k8s"
    WEBAPI = "webapi"


@dataclass(frozen=True, slots=True)
class PluginProperties:
    """What a core plugin declares about itself (Flyte's ``core.PluginProperties``).

    ``generated_name_max_length`` caps the length of the task execution's generated name (the name of the
    object a Kubernetes plugin creates); :func:`load_plugin` refuses a cap below 8, as Flyte does.
    ``disable_node_level_caching`` is kept for parity; taskplug has no node-level cache.
    ``earliest_error_aggregation``: the task's replicas each write an error document (``error.pb`` or
    flytekit's ``error-<uuid>.pb``) and the one with the earliest timestamp is the task's error (Flyte's
    ``EarliestErrorAggregationStrategy``, which propeller's PluginManager hands the output reader).
    """

    disable_node_level_caching: bool = False
    generated_name_max_length: int | None = None
    earliest_error_aggregation: bool = False


@runtime_checkable
class Plugin(Protocol):
    """The one interface the executor drives (Flyte's ``core.Plugin`` in pluginmachinery/core/plugin.go).

    Every plugin ends up as one: a Kubernetes plugin behind the engine's ``PluginManager``, a web-API plugin
    behind ``WebApiPluginAdapter``, or a plain core plugin that implements this directly and registers a
    :class:`PluginEntry`. The executor calls :meth:`handle` once per round until the phase is terminal, then
    :meth:`finalize`; :meth:`abort` when the execution is aborted or a failure asks for cleanup. All three
    must be idempotent (a round may be replayed after a restart) and must return quickly. A task that
    failed is a failure :class:`PhaseInfo`; raising means "could not decide this round" and the executor
    tries again (``executor.max-round-errors`` rounds in a row fail the attempt).
    """

    @property
    def id(self) -> str: ...

    def get_properties(self) -> PluginProperties: ...

    async def handle(self, tctx: TaskExecutionContext) -> Transition:
        """Advance the task one round. Idempotent; returns quickly; a failed task is a failure PhaseInfo."""
        ...

    async def abort(self, tctx: TaskExecutionContext) -> None:
        """Stop the task (idempotent)."""
        ...

    async def finalize(self, tctx: TaskExecutionContext) -> None:
        """Release what the task held; always called after handle or abort (idempotent)."""
        ...


PluginLoader = Callable[[SetupContext], "Plugin | Awaitable[Plugin]"]


@dataclass(frozen=True, slots=True)
class PluginEntry:
    """A core plugin registration; Kubernetes and web-API entries are turned into one of these."""

    id: str
    registered_task_types: tuple[str, ...]
    load_plugin: PluginLoader
    is_default: bool = False
    kind: PluginKind = PluginKind.CORE
    config_sections: tuple[ConfigSection[Any], ...] = ()
    """The config sections the plugin reads (``plugins.echo``, ...), known to the config loader."""

    def validate(self) -> None:
        if not self.id:
            raise PluginError(ErrorCode.PLUGIN_INITIALIZATION_FAILED, "a plugin entry needs an id")
        if not self.registered_task_types:
            raise PluginError(
                ErrorCode.PLUGIN_INITIALIZATION_FAILED, f"plugin [{self.id}] registers no task types"
            )


async def load_plugin(entry: PluginEntry, setup: SetupContext) -> Plugin:
    """Run the entry's loader and check the plugin's properties (Flyte's LoadPlugin)."""
    result = entry.load_plugin(setup)
    plugin: Plugin = await result if inspect.isawaitable(result) else result
    max_length = plugin.get_properties().generated_name_max_length
    if max_length is not None and max_length < 8:
        raise PluginError(
            ErrorCode.PLUGIN_INITIALIZATION_FAILED, "GeneratedNameMaxLength needs to be greater then 8"
        )
    return plugin


async def close_plugin(plugin: object) -> None:
    """Stop what a loader built (a plugin with background work, a resource manager) by whichever of
    ``aclose`` / ``stop`` / ``close`` it offers; closing is not part of the plugin contract."""
    for name in ("aclose", "stop", "close"):
        close = getattr(plugin, name, None)
        if callable(close):
            result = close()
            if inspect.isawaitable(result):
                await result
            return
