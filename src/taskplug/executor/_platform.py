"""The platform: the registry of plugins, the parsed config, the pod templates, and plugin resolution.

This is where the layers meet. It gathers every config section (core ``tasks``, ``plugins.k8s``,
``plugins.logs``, the executor's own, and the sections each registered plugin declares), loads the config
file over the platform defaults, and resolves a task type to its plugin entry exactly as the task handler
would (enabled plugins, ``default-for-task-types``, Flyte's errors).

Platform defaults: like Flyte's Helm chart values, taskplug ships a default document that enables the
built-in plugins and picks the pod plugin's ``container`` / ``sidecar`` ids for their task types (Flyte's
code defaults would otherwise fail with "Multiple plugins registered to handle task type"). A config file is
merged over it, so a file that sets only ``plugins.k8s`` still works.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import inspect
import operator
import os
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import Field

from taskplug.core import (
    RESOURCE_MANAGER_SECTION,
    TASKS_SECTION,
    Clock,
    ConfigSection,
    EntryLike,
    GoDuration,
    PlatformConfig,
    PluginError,
    PluginKind,
    PluginRegistry,
    PluginResolver,
    SetupContext,
    StrictModel,
    SystemClock,
    close_plugin,
    enabled_plugins,
    load_config_file,
    load_platform_config,
    merge_documents,
)
from taskplug.core import ErrorCode as _ErrorCode
from taskplug.k8s import (
    K8S_SECTION,
    LOGS_SECTION,
    PLUGINS_ROOT_SECTION,
    K8sPluginEntry,
    K8sPluginSetup,
    PodTemplateStore,
)
from taskplug.webapi import WebApiPluginEntry

_T = TypeVar("_T")

__all__ = ["EXECUTOR_SECTION", "PLATFORM_DEFAULTS", "ArrayNodeConfig", "ExecutorConfig", "Platform"]


class ArrayNodeConfig(StrictModel):
    """``executor.array-node``: how ArrayNodes (flytekit map tasks) run, with the keys propeller reads from
    ``propeller.array-node-config``, ``propeller.node-config`` and FlyteAdmin's workflow parallelism."""

    default_parallelism_behavior: Literal["unlimited", "workflow", "hybrid"] = "unlimited"
    """How many elements run at once when the map sets no parallelism (propeller's
    ``array-node-config.default-parallelism-behavior``): ``unlimited`` runs them all; ``workflow`` always
    uses ``max-parallelism``; ``hybrid`` uses it when parallelism is unset and runs all when it is 0."""
    max_parallelism: int = Field(default=25, ge=0)
    """The workflow's parallelism (FlyteAdmin's ``maxParallelism``), which ``workflow`` and ``hybrid``
    behaviors spend; 0 means no limit."""
    default_max_attempts: int = Field(default=1, ge=1)
    """Attempts an element gets when its task sets no retries (``node-config.default-max-attempts``)."""
    ignore_retry_cause: bool = False
    """Count system and user failures against one budget, the element's attempts
    (``node-config.ignore-retry-cause``)."""
    node_execution_worker_count: int = Field(default=8, ge=1)
    """Elements whose plugin calls run at the same time within one round
    (``propeller.node-execution-worker-count``)."""
    event_version: Literal[0] = 0
    """``array-node-config.event-version``: 0, one event for the node listing its elements as external
    resources (version 1, one child node per element, is not supported)."""


class ExecutorConfig(StrictModel):
    """``executor``: taskplug's own settings for running tasks, in the place of flytepropeller's
    (no Flyte section; the nearest is flytepropeller/pkg/controller/config/config.go)."""

    data_root: str = ".taskplug/data"
    """Where inputs, outputs, error documents and raw data live: a local folder (relative to the working
    directory) or any fsspec URL (``s3://bucket/prefix``)."""
    state_db: str = ".taskplug/state.db"
    """SQLite file holding the executions' state (``taskplug run --state-db`` overrides it)."""
    workers: int = Field(default=64, ge=1)
    """Executions worked on at the same time (a count of concurrent rounds)."""
    resync_period: GoDuration = timedelta(seconds=10)
    """Go duration after which an execution's round runs again when no event woke it sooner."""
    max_system_failures: int = Field(default=3, ge=0)
    """System (not user) retryable failures an execution may retry (a count), like propeller's
    ``max-node-retries-system-failures``."""
    max_round_errors: int = Field(default=10, ge=1)
    """Consecutive rounds in which a plugin may fail to decide (raise) before the attempt fails."""
    pod_template_namespace: str = "flyte"
    """Namespace of pod templates loaded without one, and the namespace every pod template lookup falls
    back to (as propeller's own namespace does)."""
    array_node: ArrayNodeConfig = Field(default_factory=ArrayNodeConfig)
    """How ArrayNodes (flytekit map tasks) run."""


EXECUTOR_SECTION = ConfigSection("executor", ExecutorConfig)

PLATFORM_DEFAULTS: Mapping[str, Any] = {
    "tasks": {
        "task-plugins": {
            "enabled-plugins": ["container", "sidecar", "spark", "connector-service", "echo", "k8s-array"],
            "default-for-task-types": {
                "container": "container",
                "python-task": "container",
                "raw-container": "container",
                "sidecar": "sidecar",
            },
        }
    }
}


def _defaults_under(user: Mapping[str, Any]) -> Mapping[str, Any]:
    """The platform defaults to merge ``user`` over.

    A merged mapping cannot lose a key, so when the user's config names its own enabled plugins, the default
    task-type choices for plugins it leaves out are dropped here; otherwise enabling only ``container``
    would fail with "cannot set default plugin [sidecar] ...", which Flyte itself would accept.
    """
    tasks = user.get("tasks")
    task_plugins = tasks.get("task-plugins") if isinstance(tasks, Mapping) else None
    enabled = task_plugins.get("enabled-plugins") if isinstance(task_plugins, Mapping) else None
    if not isinstance(enabled, list) or not enabled:
        return PLATFORM_DEFAULTS
    names = {str(name).strip().lower() for name in enabled}
    defaults = PLATFORM_DEFAULTS["tasks"]["task-plugins"]
    kept = {t: p for t, p in defaults["default-for-task-types"].items() if p in names}
    task_defaults = {
        **PLATFORM_DEFAULTS["tasks"],
        "task-plugins": {**defaults, "default-for-task-types": kept},
    }
    return {**PLATFORM_DEFAULTS, "tasks": task_defaults}


def _core_sections() -> list[ConfigSection[Any]]:
    return [
        TASKS_SECTION,
        PLUGINS_ROOT_SECTION,
        K8S_SECTION,
        LOGS_SECTION,
        EXECUTOR_SECTION,
        RESOURCE_MANAGER_SECTION,
    ]


@dataclass
class Platform:
    """The platform a command runs on: the registered plugins, the parsed config, the pod templates, the
    clock and the environment. ``Platform.load`` builds it (entry-point discovery, config over
    :data:`PLATFORM_DEFAULTS`); ``taskplug run``, ``render``, ``status``, ``plugins`` and ``config`` start
    from one. It answers which plugin entry runs a task type without loading any plugin
    (:meth:`entry_for`), which ``taskplug render`` and ``status`` need; ``open_executor`` loads the plugins
    from it."""

    registry: PluginRegistry
    config: PlatformConfig
    pod_templates: PodTemplateStore
    clock: Clock = field(default_factory=SystemClock)
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    extra_sections: Sequence[ConfigSection[Any]] = ()

    @classmethod
    def load(
        cls,
        config_path: str | Path | None = None,
        *,
        pod_template_paths: Iterable[str | Path] = (),
        registry: PluginRegistry | None = None,
        document: Mapping[str, Any] | None = None,
        extra_sections: Sequence[ConfigSection[Any]] = (),
        clock: Clock | None = None,
    ) -> Platform:
        """Discover plugins, load the config over the platform defaults, load pod templates."""
        registry = registry if registry is not None else PluginRegistry.discover()
        user = dict(document or {})
        if config_path is not None:
            user = merge_documents(user, load_config_file(config_path))
        merged = merge_documents(_defaults_under(user), user)
        sections = cls.sections_for(registry, extra_sections)
        config = load_platform_config(merged, sections)
        namespace = config.get(EXECUTOR_SECTION).pod_template_namespace
        templates = (
            PodTemplateStore.from_paths(pod_template_paths, namespace)
            if pod_template_paths
            else PodTemplateStore(namespace)
        )
        return cls(
            registry, config, templates, clock or SystemClock(), dict(os.environ), tuple(extra_sections)
        )

    @staticmethod
    def sections_for(
        registry: PluginRegistry, extra: Sequence[ConfigSection[Any]] = ()
    ) -> list[ConfigSection[Any]]:
        sections = _core_sections() + list(registry.config_sections) + list(extra)
        unique: dict[str, ConfigSection[Any]] = {}
        for section in sections:
            unique.setdefault(section.path, section)
        return list(unique.values())

    # -- resolution ---------------------------------------------------------------------------------------
    def enabled_entries(self) -> list[EntryLike]:
        cfg = self.config.get(TASKS_SECTION).task_plugins
        enabled, _ = enabled_plugins(cfg)
        return [e for e in self.registry.entries if not enabled or e.id.lower() in enabled]

    def resolver(self, discovered: Sequence[tuple[Callable[[str], bool], EntryLike]] = ()) -> PluginResolver:
        """A resolver over plugin *entries* (no plugin loaded), with the same rules as the executor's;
        ``discovered`` are the entries whose plugins answer for task types found at run time."""
        cfg = self.config.get(TASKS_SECTION).task_plugins
        _, defaults = enabled_plugins(cfg)
        pairs: list[Any] = [(_EntryView(e), e) for e in self.enabled_entries()]
        dynamic: list[Any] = list(discovered)
        return PluginResolver(
            pairs, defaults, fallback_to_default=cfg.fallback_to_default_plugin, dynamic=dynamic
        )

    def entry_for(self, task_type: str) -> EntryLike:
        """The entry of the plugin that runs ``task_type``, resolved as the executor resolves it (one
        :class:`PluginResolver`, the same order): the registered task types first, then the task types a
        plugin discovers at run time (the connector service asks its connectors, as it does when ``taskplug
        run`` loads it), then the default plugin. Discovery runs only when no registered type matches, so a
        pod task is resolved without contacting anything."""
        # The resolver was built over (view, entry) pairs, so what it resolves to is the entry.
        resolver = self.resolver()
        if task_type in resolver.task_types:
            resolved: Any = resolver.resolve(task_type)
        else:
            resolved = self.resolver(_run_sync(self._discovering(task_type))).resolve(task_type)
        entry: EntryLike = resolved
        return entry

    async def _discovering(self, task_type: str) -> list[tuple[Callable[[str], bool], EntryLike]]:
        """The enabled web-API entries whose plugin, loaded as ``taskplug run`` loads it and closed at once,
        answers for ``task_type`` (``handles_task_type``: the connector service's discovered types).

        Deviation: the executor asks every loaded plugin; only web-API plugins discover task types (the
        Kubernetes and core plugins register theirs), and loading those needs no cluster."""
        setup = SetupContext(
            enqueue_owner=lambda namespace, name: None,
            owner_kind="",
            clock=self.clock,
            config=self.config,
            pod_templates=self.pod_templates,
        )
        found: list[tuple[Callable[[str], bool], EntryLike]] = []
        for entry in self.enabled_entries():
            if entry.kind != PluginKind.WEBAPI or not isinstance(entry, WebApiPluginEntry):
                continue
            loaded = entry.plugin_loader(setup)
            plugin = await loaded if inspect.isawaitable(loaded) else loaded
            try:
                handles = getattr(plugin, "handles_task_type", None)
                if callable(handles) and handles(task_type):
                    found.append((functools.partial(operator.eq, task_type), entry))
            finally:
                await close_plugin(plugin)
        return found

    def k8s_entry_for(self, task_type: str) -> K8sPluginEntry:
        entry = self.entry_for(task_type)
        if entry.kind != PluginKind.K8S or not isinstance(entry, K8sPluginEntry):
            raise PluginError(
                _ErrorCode.UNSUPPORTED_TASK_TYPE,
                f"task type [{task_type}] is run by the {entry.kind} plugin [{entry.id}], which creates no "
                "Kubernetes object: there is nothing to render or observe (`taskplug run` hands the task "
                "to that plugin)",
            )
        return entry

    def k8s_setup(self) -> K8sPluginSetup:
        return K8sPluginSetup(self.config, self.pod_templates, self.clock, self.environ)


def _run_sync(coroutine: Coroutine[Any, Any, _T]) -> _T:
    """Run ``coroutine`` to its end from synchronous code, also when an event loop runs in this thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


@dataclass(frozen=True)
class _EntryView:
    """Lets the resolver work on entries: it only needs id, task types and the default flag."""

    entry: EntryLike

    @property
    def id(self) -> str:
        # Flyte lower-cases the ids of wrapped (k8s, web-API) plugins.
        return self.entry.id if self.entry.kind == PluginKind.CORE else self.entry.id.lower()

    @property
    def registered_task_types(self) -> tuple[str, ...]:
        return tuple(self.entry.registered_task_types)

    @property
    def is_default(self) -> bool:
        return self.entry.is_default
