"""The plugin registry, the ``tasks`` config section, and plugin resolution by task type.

Follows flyteplugins/go/tasks/pluginmachinery/registry.go, flytepropeller/pkg/controller/nodes/task/
{plugin_config,config/config}.go and the resolution part of task/handler.go.

Plugins are found through the entry-point group ``taskplug.plugins``: each entry point names an entry, a
list of entries, or a function returning them. Built-in plugins register the same way.
"""

from __future__ import annotations

import importlib.metadata
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any, Protocol

from pydantic import Field

from taskplug.core._config import ConfigSection, GoDuration, StrictModel, StrMap
from taskplug.core._errors import ErrorCode, PluginError
from taskplug.core._plugin import Plugin, PluginEntry, PluginKind

__all__ = [
    "ENTRY_POINT_GROUP",
    "TASKS_SECTION",
    "BackOffConfig",
    "EntryLike",
    "PluginRegistry",
    "PluginResolver",
    "TaskPluginsConfig",
    "TasksConfig",
    "enabled_plugins",
    "wrangle_plugins",
]

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "taskplug.plugins"


class BackOffConfig(StrictModel):
    """``tasks.backoff``: the exponential back-off of pod creation after resource-quota and throttling
    errors, shared by every Kubernetes plugin (flytepropeller/pkg/controller/nodes/task/config/config.go)."""

    base_second: int = 2
    """Base of the exponential back-off, in seconds: the n-th consecutive back-off waits ``base^(n-1)``
    seconds (1 s, 2 s, 4 s … with the default). 0 turns back-off off."""
    max_duration: GoDuration = timedelta(seconds=20)
    """Cap of one back-off wait, as a Go duration (``20s``)."""


class TaskPluginsConfig(StrictModel):
    """``tasks.task-plugins``: which plugins are enabled and which one handles a task type
    (flytepropeller/pkg/controller/nodes/task/config/config.go)."""

    enabled_plugins: list[str] = Field(default_factory=list)
    """Ids of the enabled plugins (trimmed, case-insensitive); an empty list enables every registered
    plugin."""
    default_for_task_types: StrMap = Field(default_factory=dict)
    """Task type → plugin id that handles it when several plugins register the type; every plugin named
    must be enabled."""
    # Deviation (taskplug key, flyte#5076): Flyte silently runs a task of an unknown type with the global
    # default plugin. taskplug refuses unless this is switched on, so a Ray task never runs as one container.
    fallback_to_default_plugin: bool = False
    """taskplug key: when true, a task type no enabled plugin handles runs with the default plugin, as
    Flyte does silently; when false it is an error."""


class TasksConfig(StrictModel):
    """``tasks``: the task handler's settings — enabled plugins, plugin resolution, back-off
    (flytepropeller/pkg/controller/nodes/task/config/config.go)."""

    task_plugins: TaskPluginsConfig = Field(default_factory=TaskPluginsConfig)
    """Enabled plugins and the plugin chosen for each task type."""
    max_plugin_phase_versions: int = 100000
    """Most phase versions a plugin may report within one phase (a count); beyond it the task fails
    with ``TooManyPluginPhaseVersions``."""
    backoff: BackOffConfig = Field(default_factory=BackOffConfig)
    """Back-off of pod creation after resource-quota and throttling errors."""
    max_log_message_length: int = Field(default=0, alias="maxLogMessageLength")
    """Deprecated in Flyte (max length of an error message, in characters); accepted and ignored."""


TASKS_SECTION = ConfigSection("tasks", TasksConfig)


class EntryLike(Protocol):
    """What the registry needs of any entry: Kubernetes and web-API entries satisfy it too."""

    @property
    def id(self) -> str: ...

    @property
    def registered_task_types(self) -> tuple[str, ...]: ...

    @property
    def is_default(self) -> bool: ...

    @property
    def kind(self) -> PluginKind: ...

    def validate(self) -> None: ...


@dataclass
class PluginRegistry:
    """All registered entries, by kind, in registration order."""

    entries: list[EntryLike] = field(default_factory=list)
    config_sections: list[ConfigSection[Any]] = field(default_factory=list)

    def register(self, entry: EntryLike) -> None:
        entry.validate()
        if any(e.id == entry.id and e.kind == entry.kind for e in self.entries):
            raise PluginError(
                ErrorCode.PLUGIN_INITIALIZATION_FAILED,
                f"a {entry.kind} plugin with id [{entry.id}] is already registered",
            )
        self.entries.append(entry)
        for section in getattr(entry, "config_sections", ()):
            if all(s.path != section.path for s in self.config_sections):
                self.config_sections.append(section)

    def of_kind(self, kind: PluginKind) -> list[EntryLike]:
        return [e for e in self.entries if e.kind == kind]

    @classmethod
    def discover(cls, group: str = ENTRY_POINT_GROUP) -> PluginRegistry:
        """Load every entry point of ``group``; a broken one fails loudly, naming it."""
        registry = cls()
        for ep in sorted(importlib.metadata.entry_points(group=group), key=lambda e: e.name):
            try:
                target = ep.load()
                produced = target() if callable(target) and not hasattr(target, "kind") else target
            except Exception as e:
                raise PluginError(
                    ErrorCode.PLUGIN_INITIALIZATION_FAILED,
                    f"plugin entry point [{ep.name} = {ep.value}] failed to load: {e}",
                ) from e
            items = (
                produced if isinstance(produced, Iterable) and not isinstance(produced, str) else [produced]
            )
            for item in items:
                if not callable(getattr(item, "validate", None)):
                    raise PluginError(
                        ErrorCode.PLUGIN_INITIALIZATION_FAILED,
                        f"plugin entry point [{ep.name} = {ep.value}] gave {item!r}, not a plugin entry",
                    )
                registry.register(item)
        return registry


def enabled_plugins(cfg: TaskPluginsConfig) -> tuple[set[str], dict[str, list[str]]]:
    """Flyte's GetEnabledPlugins: the enabled ids (cleaned) and plugin id → task types it is default for."""
    enabled = {name.strip().lower() for name in cfg.enabled_plugins if name.strip()}
    defaults: dict[str, list[str]] = {}
    for task_type, plugin_id in cfg.default_for_task_types.items():
        defaults.setdefault(plugin_id.strip().lower(), []).append(task_type.strip().lower())
    if enabled:
        for plugin_id, task_types in defaults.items():
            if plugin_id not in enabled:
                raise PluginError(
                    ErrorCode.PLUGIN_INITIALIZATION_FAILED,
                    f"cannot set default plugin [{plugin_id}] for task types [{' '.join(task_types)}] "
                    "when it is not configured to be an enabled plugin",
                )
    return enabled, defaults


Wrapper = Callable[[Any], PluginEntry]


def wrangle_plugins(
    cfg: TaskPluginsConfig, registry: PluginRegistry, wrappers: Mapping[PluginKind, Wrapper]
) -> tuple[list[PluginEntry], dict[str, list[str]]]:
    """Flyte's WranglePluginsAndGenerateFinalList: the enabled entries as core entries.

    Core entries keep their id; Kubernetes and web-API entries are wrapped (plugin manager, web-API adapter)
    by the caller's ``wrappers`` and get a lower-cased id, as in Flyte.
    """
    enabled, defaults = enabled_plugins(cfg)
    final: list[PluginEntry] = []
    for entry in registry.entries:
        if enabled and entry.id.lower() not in enabled:
            continue
        if entry.kind == PluginKind.CORE:
            assert isinstance(entry, PluginEntry)
            final.append(entry)
            continue
        wrapper = wrappers.get(entry.kind)
        if wrapper is None:
            raise PluginError(
                ErrorCode.PLUGIN_INITIALIZATION_FAILED,
                f"no machinery to load {entry.kind} plugin [{entry.id}]",
            )
        wrapped = wrapper(entry)
        final.append(wrapped if wrapped.id == wrapped.id.lower() else replace(wrapped, id=wrapped.id.lower()))
    return final, defaults


class PluginResolver:
    """Which loaded plugin handles a task type (Flyte's task handler Setup + ResolvePlugin)."""

    def __init__(
        self,
        loaded: Sequence[tuple[PluginEntry, Plugin]],
        defaults_for_plugin: Mapping[str, Sequence[str]],
        *,
        fallback_to_default: bool = False,
        dynamic: Sequence[tuple[Callable[[str], bool], Plugin]] = (),
    ) -> None:
        self._by_type: dict[str, Plugin] = {}
        self._by_id: dict[str, Plugin] = {}
        self._global_default: Plugin | None = None
        self._fallback = fallback_to_default
        self._dynamic = list(dynamic)
        self.plugin_ids_by_type: dict[str, list[str]] = {}
        registered: dict[str, list[tuple[str, Plugin]]] = {}
        default_ids: dict[str, str] = {}
        for entry, plugin in loaded:
            self._by_id[entry.id] = plugin
            configured_for = {t.lower() for t in defaults_for_plugin.get(entry.id.lower(), ())}
            for task_type in entry.registered_task_types:
                registered.setdefault(task_type, []).append((entry.id, plugin))
                if task_type.lower() in configured_for:
                    if task_type in default_ids and default_ids[task_type] != entry.id:
                        raise PluginError(
                            ErrorCode.PLUGIN_INITIALIZATION_FAILED,
                            f"TaskType [{task_type}] has multiple default handlers specified: "
                            f"[{default_ids[task_type]}] and [{entry.id}]",
                        )
                    default_ids[task_type] = entry.id
                    self._by_type[task_type] = plugin
            if entry.is_default:
                if self._global_default is None:
                    self._global_default = plugin
                else:
                    log.error(
                        "plugin [%s] is also marked default; the first default plugin is kept", entry.id
                    )
        for task_type, candidates in registered.items():
            self.plugin_ids_by_type[task_type] = [pid for pid, _ in candidates]
            if task_type in self._by_type:
                continue
            if len(candidates) != 1:
                ids = " ".join(pid for pid, _ in candidates)
                raise PluginError(
                    ErrorCode.PLUGIN_INITIALIZATION_FAILED,
                    f"Multiple plugins registered to handle task type: {task_type}. ([{ids}]). "
                    "Use default-for-task-type config option to choose the desired plugin.",
                )
            self._by_type[task_type] = candidates[0][1]

    @property
    def task_types(self) -> list[str]:
        return sorted(self._by_type)

    def resolve(self, task_type: str, overrides: Sequence[str] = ()) -> Plugin:
        for plugin_id in overrides:
            if plugin_id in self._by_id:
                return self._by_id[plugin_id]
        plugin = self._by_type.get(task_type)
        if plugin is not None:
            return plugin
        for handles, dynamic_plugin in self._dynamic:
            if handles(task_type):
                return dynamic_plugin
        if self._fallback and self._global_default is not None:
            return self._global_default
        known = ", ".join(self.task_types) or "none"
        raise PluginError(
            ErrorCode.UNSUPPORTED_TASK_TYPE,
            f"no plugin defined for Handler type [{task_type}] and no defaultPlugin configured "
            f"(task types handled here: {known})",
        )
