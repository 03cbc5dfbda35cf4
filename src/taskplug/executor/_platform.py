"""The platform: the registry of plugins, the parsed config, the pod templates, and plugin resolution.

This is where the layers meet. It gathers every config section (core ``tasks``, ``plugins.k8s``,
``plugins.logs``, the executor's own, and the sections each registered plugin declares), loads the config
file over the platform defaults, and resolves a task type to its plugin entry exactly as the task handler
would (enabled plugins, ``default-for-task-types``, Flyte's errors).

Platform defaults: like Flyte's Helm chart values, taskplug ships a default document that enables the
built-in plugins and picks the pod plugin's ``container`` / ``sidecar`` ids for their task types (Flyte's
code defaults would otherwise fail with "Multiple plugins registered to handle task type"). A config file is
merged over it, so a file that sets only ``plugins.k8s`` still works.

A config that loads will run (issue 13): besides each section's own types and ranges, :meth:`Platform.load`
checks what a run would otherwise trip over later — every plugin id the file names is registered, the
plugin wiring resolves (Flyte's "cannot set default plugin" and "Multiple plugins registered" errors, raised
here naming the key), ``executor.data-root`` is a protocol fsspec knows (its package installed) or a local
folder — and :meth:`Platform.validate` (``taskplug config validate``) also runs the load-time range checks
of the enabled web-API plugins (Flyte's ``validateConfig``), which ``taskplug run`` meets when it loads
them. Every failure is a :class:`~taskplug.core.ConfigError` naming the key path.
"""

from __future__ import annotations

import functools
import inspect
import operator
import os
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar

from pydantic import BaseModel, Field, field_validator, model_validator

from taskplug.core import (
    RESOURCE_MANAGER_SECTION,
    TASKS_SECTION,
    Clock,
    ConfigError,
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
from taskplug.webapi import PluginConfig, WebApiPluginEntry

if TYPE_CHECKING:
    from taskplug.k8s import KubeClient

_T = TypeVar("_T")

__all__ = [
    "EXECUTOR_SECTION",
    "KUBE_CLIENT_SECTION",
    "MAX_WORKERS",
    "PLATFORM_DEFAULTS",
    "ArrayNodeConfig",
    "ExecutorConfig",
    "KubeClientConfig",
    "LimitsConfig",
    "NodeConfig",
    "Platform",
]

MAX_WORKERS: Final = 10_000
"""Most workers any of taskplug's pools may have: Flyte's own bound on a worker pool (the web-API status
cache's ``caching.workers``, ``validateConfig``: 1 … 10000). Each worker is a task held in memory whether or
not there is work, so a count beyond it buys nothing and costs memory at start (propeller's default is 20)."""
INT32_MAX: Final = 2**31 - 1
"""Largest value of the int32 fields Flyte keeps these counts in (``default-max-attempts``, FlyteAdmin's
``maxParallelism``)."""


class ArrayNodeConfig(StrictModel):
    """``executor.array-node``: how ArrayNodes (flytekit map tasks) run, with the keys propeller reads from
    ``propeller.array-node-config``, ``propeller.node-config`` and FlyteAdmin's workflow parallelism."""

    default_parallelism_behavior: Literal["unlimited", "workflow", "hybrid"] = "unlimited"
    """How many elements run at once when the map sets no parallelism (propeller's
    ``array-node-config.default-parallelism-behavior``): ``unlimited`` runs them all; ``workflow`` always
    uses ``max-parallelism``; ``hybrid`` uses it when parallelism is unset and runs all when it is 0."""
    max_parallelism: int = Field(default=25, ge=0, le=INT32_MAX)
    """The workflow's parallelism (FlyteAdmin's ``maxParallelism``, an int32), which ``workflow`` and
    ``hybrid`` behaviors spend; 0 means no limit."""
    node_execution_worker_count: int = Field(default=8, ge=1, le=MAX_WORKERS)
    """Elements whose plugin calls run at the same time within one round
    (``propeller.node-execution-worker-count``), 1 … 10000."""
    event_version: Literal[0] = 0
    """``array-node-config.event-version``: 0, one event for the node listing its elements as external
    resources (version 1, one child node per element, is not supported)."""


_MOVED_NODE_KEYS: Final = ("default-max-attempts", "ignore-retry-cause")


class NodeConfig(StrictModel):
    """``executor.node``: the retry strategy every node follows — a single task, each element of a map task
    (and, as they come, workflow nodes) — with the keys propeller reads from ``propeller.node-config``.
    Written under ``executor.array-node`` by earlier versions, where they are still read."""

    default_max_attempts: int = Field(default=1, ge=1, le=INT32_MAX)
    """Attempts a node gets when its task sets no retries (``node-config.default-max-attempts``, an int32 in
    Flyte); a task's ``retries: n`` gives it n + 1."""
    ignore_retry_cause: bool = False
    """Count system and user failures against one budget, the node's attempts
    (``node-config.ignore-retry-cause``); otherwise system failures spend ``executor.max-system-failures``."""


class LimitsConfig(StrictModel):
    """``executor.limits``: the most one submission may ask for; a spec above a ceiling is refused before
    anything runs, naming the field (``taskplug run`` exits 2, the API answers 422)."""

    max_attempts: int = Field(default=100, ge=1, le=INT32_MAX)
    """Attempts one task or map element may be given (``execution.maxAttempts``, a task's retries + 1)."""
    max_elements: int = Field(default=10_000, ge=1, le=INT32_MAX)
    """Elements one map task may have (the length of its mapped inputs)."""
    max_parallelism: int = Field(default=10_000, ge=1, le=INT32_MAX)
    """The largest ``arrayNode.parallelism`` a map task may ask for (0, all at once, is bounded by
    ``max-elements``)."""
    max_nodes: int = Field(default=1_000, ge=1, le=INT32_MAX)
    """Nodes one workflow may run, nested ones included: a branch's cases, a map's sub-node, and a
    sub-workflow's nodes counted every time it is called."""


class CacheConfig(StrictModel):
    """``executor.cache``: the serialized-cache reservations (``cache_serialize=True`` tasks), as
    datacatalog and propeller time them; see ``docs/cache.md``."""

    reservation_heartbeat: GoDuration = timedelta(seconds=10)
    """Go duration between a reservation holder's extensions, and how often an execution waiting on
    another's reservation looks again (propeller's workflow re-evaluation interval); more than 0."""
    reservation_grace_multiplier: int = Field(default=3, ge=1, le=1000)
    """A reservation expires this many heartbeats after its last extension, and is then taken over by a
    waiting execution (datacatalog's ``heartbeat-grace-period-multiplier``)."""

    @field_validator("reservation_heartbeat")
    @classmethod
    def _positive_heartbeat(cls, value: timedelta) -> timedelta:
        if value <= timedelta(0):
            raise ValueError("must be longer than 0s (a waiting execution would look again at once, forever)")
        return value


class ExecutorConfig(StrictModel):
    """``executor``: taskplug's own settings for running tasks, in the place of flytepropeller's
    (no Flyte section; the nearest is flytepropeller/pkg/controller/config/config.go)."""

    data_root: str = ".taskplug/data"
    """Where inputs, outputs, error documents and raw data live: a local folder (relative to the working
    directory) or any fsspec URL (``s3://bucket/prefix``)."""
    state_db: str = ".taskplug/state.db"
    """SQLite file holding the executions' state (``taskplug run --state-db`` overrides it)."""
    workers: int = Field(default=64, ge=1, le=MAX_WORKERS)
    """Executions worked on at the same time (a count of concurrent rounds), 1 … 10000: each worker is a
    task held in memory from the start, and 10000 is the largest worker pool Flyte accepts anywhere (its
    web-API cache ``workers``)."""
    resync_period: GoDuration = timedelta(seconds=10)
    """Go duration after which an execution's round runs again when no event woke it sooner; more than 0
    (a zero period would run every execution's rounds back to back)."""
    max_system_failures: int = Field(default=3, ge=0)
    """System (not user) retryable failures a node — a single task, a map element — may retry (a count),
    like propeller's ``node-config.max-node-retries-system-failures``."""
    max_round_errors: int = Field(default=10, ge=1)
    """Consecutive rounds that may error before taskplug stops retrying (a count), as propeller's
    ``max-workflow-retries`` bounds a workflow's failed rounds: a plugin that cannot decide (an unreachable
    API, a data store that refuses a write) fails the attempt with a system error, which the system-retry
    budget may retry; a cleanup (abort, finalize) that keeps failing ends the execution with error
    ``CleanupFailed`` listing the objects that may be left behind. Between such rounds taskplug waits
    0.1 s, doubling each time, at most ``resync-period``."""
    pod_template_namespace: str = "flyte"
    """Namespace of pod templates loaded without one, and the namespace every pod template lookup falls
    back to (as propeller's own namespace does)."""
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    """Ceilings on the work one submission may start."""
    node: NodeConfig = Field(default_factory=NodeConfig)
    """The retry strategy of every node (single tasks and map elements). Its two keys are also read from
    ``array-node``, where earlier versions documented them."""
    array_node: ArrayNodeConfig = Field(default_factory=ArrayNodeConfig)
    """How ArrayNodes (flytekit map tasks) run."""
    cache: CacheConfig = Field(default_factory=CacheConfig)
    """The data catalog's serialized-cache reservations."""

    @model_validator(mode="before")
    @classmethod
    def _node_keys_once(cls, data: Any) -> Any:
        # The retry keys moved from array-node to node (they always governed single tasks too). The old place
        # is still read; two different values are refused rather than one silently winning.
        if not isinstance(data, dict) or not isinstance(data.get("array-node"), dict):
            return data
        array = data["array-node"]
        moved = {key: array[key] for key in _MOVED_NODE_KEYS if key in array}
        node = data.get("node", {})
        if not moved or not isinstance(node, dict):
            return data
        for key, value in moved.items():
            if key in node and node[key] != value:
                raise ValueError(
                    f"executor.array-node.{key} ({value}) and executor.node.{key} ({node[key]}) disagree: "
                    f"give executor.node.{key} only"
                )
        rest = {key: value for key, value in array.items() if key not in moved}
        return {**data, "array-node": rest, "node": {**moved, **node}}

    @field_validator("resync_period")
    @classmethod
    def _positive_period(cls, value: timedelta) -> timedelta:
        if value <= timedelta(0):
            raise ValueError(
                "must be longer than 0s (with no period every execution's rounds would run back to back)"
            )
        return value


EXECUTOR_SECTION = ConfigSection("executor", ExecutorConfig)


class KubeClientConfig(StrictModel):
    """``propeller.kube-client-config``: the client of a real cluster's API (``taskplug run --kubeconfig``)
    (flytepropeller/pkg/controller/config/config.go, ``KubeClientConfig``).

    Deviation: only ``timeout`` is read; Flyte's ``qps`` and ``burst`` (client-side throttling) have no
    counterpart here, and are refused as unknown keys rather than silently ignored."""

    timeout: GoDuration = timedelta(seconds=30)
    """Go duration one request to the Kubernetes API may take, from connecting to the end of the answer,
    before it fails with a system error naming the API address (Flyte's default, ``30s``); ``0`` means no
    limit. A watch's stream is open-ended; only its connection is bounded."""

    @field_validator("timeout")
    @classmethod
    def _not_negative(cls, value: timedelta) -> timedelta:
        if value < timedelta(0):
            raise ValueError("must not be negative (0 means no limit)")
        return value


KUBE_CLIENT_SECTION = ConfigSection("propeller.kube-client-config", KubeClientConfig)

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
        KUBE_CLIENT_SECTION,
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
        platform = cls(
            registry, config, templates, clock or SystemClock(), dict(os.environ), tuple(extra_sections)
        )
        platform._check_plugins(user)
        _check_data_root(config.get(EXECUTOR_SECTION).data_root)
        manager = config.get(RESOURCE_MANAGER_SECTION)
        if manager.type == "redis" and not (manager.redis.host_paths or manager.redis.host_path):
            raise ConfigError(
                f"{RESOURCE_MANAGER_SECTION.path}.redis.hostPaths",
                "type redis needs at least one host (hostPaths, or hostPath)",
            )
        return platform

    def validate(self) -> None:
        """What ``taskplug config validate`` checks beyond :meth:`load`: the load-time range checks of the
        enabled web-API plugins' configs (Flyte's ``validateConfig``: cache size 10 … 500000, workers
        1 … 10000, resync interval 5 s … 1 h, rate limits) and their resource quotas against the resource
        manager's ``resourceMaxQuota``, which ``taskplug run`` meets when it loads them.
        Kept out of :meth:`load` so that ``render`` and ``status`` do not import the web-API engine."""
        from taskplug.engine.webapi import ConfigValidationError, validate_plugin_config

        manager = self.config.get(RESOURCE_MANAGER_SECTION)
        for entry in self.enabled_entries():
            if entry.kind != PluginKind.WEBAPI:
                continue
            for section in getattr(entry, "config_sections", ()):
                for where, cfg in _plugin_configs(self.config.get(section), section.path):
                    try:
                        validate_plugin_config(cfg)
                    except ConfigValidationError as e:
                        raise ConfigError(where, "; ".join(e.violations)) from None
                    if manager.type == "noop":
                        continue  # the noop manager takes any quota
                    for namespace, quota in cfg.resource_quotas.items():
                        # The manager refuses, when the plugin loads, a quota outside 1 … resourceMaxQuota.
                        if not 0 < quota <= manager.resource_max_quota:
                            raise ConfigError(
                                f"{where}.resourceQuotas.{namespace}",
                                f"quota {quota} is not between 1 and "
                                f"propeller.resourcemanager.resourceMaxQuota ({manager.resource_max_quota})",
                            )

    def connect(self, kubeconfig: str | Path | None = None) -> KubeClient:
        """A client of the cluster ``kubeconfig`` names (None: in-cluster, ``$KUBECONFIG``, ``~/.kube``),
        with this config's ``propeller.kube-client-config`` (the per-request timeout). The kubeconfig is
        read and checked here: a malformed one is an error naming the file and the field."""
        from taskplug.engine.k8s import connect

        timeout = self.config.get(KUBE_CLIENT_SECTION).timeout.total_seconds()
        return connect(kubeconfig, timeout=timeout or None)

    def _check_plugins(self, user: Mapping[str, Any]) -> None:
        """Refuse, naming the key, plugin ids the file names that no plugin registered (Flyte ignores an
        unknown enabled id, and then every task of the types it meant fails), and the plugin wiring the
        task handler would refuse when the plugins load."""
        cfg = self.config.get(TASKS_SECTION).task_plugins
        path = "tasks.task-plugins"
        tasks = user.get("tasks")
        own = tasks.get("task-plugins") if isinstance(tasks, Mapping) else None
        own = own if isinstance(own, Mapping) else {}
        if own.get("enabled-plugins"):
            _check_plugin_ids(cfg.enabled_plugins, self.registry, f"{path}.enabled-plugins")
        named = own.get("default-for-task-types")
        if isinstance(named, Mapping):
            chosen = {t: cfg.default_for_task_types[t] for t in named if t in cfg.default_for_task_types}
            _check_plugin_ids(chosen, self.registry, f"{path}.default-for-task-types")
        try:
            enabled_plugins(cfg)
        except PluginError as e:
            raise ConfigError(f"{path}.default-for-task-types", e.message) from None
        try:
            self.resolver()
        except PluginError as e:
            raise ConfigError(path, e.message) from None

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


def _check_data_root(root: str) -> None:
    """``executor.data-root`` must be somewhere the data store can write: a local folder (not under a
    file), or a URL whose protocol fsspec knows with its implementation installed. The protocol is read as
    the data store reads it (the text before ``://``)."""
    key = "executor.data-root"
    if "://" in root and not root.startswith("file://"):
        protocol = root.split("://", 1)[0]
        import fsspec  # only a remote data root pays for it

        try:
            fsspec.get_filesystem_class(protocol)
        except ValueError:
            known = ", ".join(sorted(fsspec.available_protocols()))
            raise ConfigError(
                key, f"fsspec knows no protocol {protocol!r} (in {root!r}; known: {known})"
            ) from None
        except ImportError as e:
            raise ConfigError(
                key, f"protocol {protocol!r} needs a package that is not installed: {e}"
            ) from None
        return
    local = Path(root.removeprefix("file://"))
    for folder in (local, *local.parents):
        if folder.exists():
            if not folder.is_dir():
                raise ConfigError(key, f"{root!r} is not a folder: {str(folder)!r} is a file")
            return


def _check_plugin_ids(names: Sequence[str] | Mapping[str, str], registry: PluginRegistry, path: str) -> None:
    """Every plugin id in ``names`` (a list, or a map whose values are ids) is registered (trimmed,
    case-insensitive, as Flyte matches them); else a ConfigError naming the item and listing the ids."""
    known = {e.id.strip().lower() for e in registry.entries}
    items = names.items() if isinstance(names, Mapping) else enumerate(names)
    for where, name in items:
        cleaned = name.strip().lower()
        if cleaned and cleaned not in known:
            suffix = f"[{where}]" if isinstance(where, int) else f".{where}"
            raise ConfigError(
                path + suffix,
                f"no plugin [{name}] is registered (registered: {', '.join(sorted(known)) or 'none'})",
            )


def _plugin_configs(model: BaseModel, path: str) -> list[tuple[str, PluginConfig]]:
    """Every web-API :class:`~taskplug.webapi.PluginConfig` held in ``model``, with its key path."""
    if isinstance(model, PluginConfig):
        return [(path, model)]
    found: list[tuple[str, PluginConfig]] = []
    for name, info in type(model).model_fields.items():
        value = getattr(model, name)
        if isinstance(value, BaseModel):
            key = info.alias or name.replace("_", "-")
            found.extend(_plugin_configs(value, f"{path}.{key}"))
    return found


def _run_sync(coroutine: Coroutine[Any, Any, _T]) -> _T:
    """Run ``coroutine`` to its end from synchronous code, also when an event loop runs in this thread."""
    # Imported here: only a task type no plugin registers gets here; render and status of others skip asyncio.
    import asyncio
    import concurrent.futures

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
