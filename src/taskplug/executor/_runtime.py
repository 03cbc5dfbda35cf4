"""The executor with its plugins: what ``taskplug run`` (and a test, a benchmark, a plugin author) opens.

The executor owns its plugins' lifetime: :func:`open_executor` gives it ``taskplug.engine.open_plugins``
over the platform's registry, config and pod templates, which it opens on entering (every enabled plugin
loaded, its wake-ups routed to the executor) and closes after its workers have stopped.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable

from prometheus_client import CollectorRegistry, Counter

from taskplug.core import TASKS_SECTION, Clock, PluginResolver
from taskplug.engine import open_plugins
from taskplug.executor._catalog import Catalog
from taskplug.executor._executor import ChildExecutions, Executor, ExecutorSettings
from taskplug.executor._limits import submission_limits
from taskplug.executor._platform import EXECUTOR_SECTION, Platform
from taskplug.executor._store import Event, StateStore
from taskplug.executor.nodes._settings import ArrayNodeSettings, ParallelismBehavior
from taskplug.k8s import KubeClient

__all__ = ["executor_settings", "open_executor"]


def executor_settings(platform: Platform) -> ExecutorSettings:
    """The executor's settings from the platform's ``executor`` and ``tasks`` sections."""
    cfg = platform.config.get(EXECUTOR_SECTION)
    array = cfg.array_node
    return ExecutorSettings(
        data_root=cfg.data_root,
        workers=cfg.workers,
        resync_period=cfg.resync_period.total_seconds(),
        max_system_failures=cfg.max_system_failures,
        max_round_errors=cfg.max_round_errors,
        max_plugin_phase_versions=platform.config.get(TASKS_SECTION).max_plugin_phase_versions,
        default_max_attempts=cfg.node.default_max_attempts,
        limits=submission_limits(platform),
        ignore_retry_cause=cfg.node.ignore_retry_cause,
        cache_heartbeat=cfg.cache.reservation_heartbeat.total_seconds(),
        cache_grace_multiplier=cfg.cache.reservation_grace_multiplier,
        array=ArrayNodeSettings(
            parallelism_behavior=ParallelismBehavior(array.default_parallelism_behavior),
            max_parallelism=array.max_parallelism,
            workers=array.node_execution_worker_count,
        ),
    )


@contextlib.asynccontextmanager
async def open_executor(
    platform: Platform,
    *,
    kube_client: KubeClient,
    store: StateStore,
    settings: ExecutorSettings | None = None,
    clock: Clock | None = None,
    on_event: Callable[[str, Event], None] | None = None,
    metrics_registry: CollectorRegistry | None = None,
    catalog: Catalog | None = None,
    children: ChildExecutions | None = None,
) -> AsyncIterator[Executor]:
    """An executor with every enabled plugin loaded, running until the block exits; the plugin machinery's
    metrics (plugin managers, web-API adapters) go to ``metrics_registry`` when given, with the executor's
    ``taskplug_executor_unknown_creates_total`` (web-API creates sent again because an earlier one's outcome
    was lost with its owner). The web-API adapters await :meth:`Executor.before_create` before each create and each sync ``do``.
    """
    clock = clock or platform.clock
    unknown_creates = (
        Counter(
            "taskplug_executor_unknown_creates",
            "Web-API creates sent again because an earlier create's outcome was lost (at-least-once)",
            registry=metrics_registry,
        )
        if metrics_registry is not None
        else None
    )

    def plugins(executor: Executor) -> contextlib.AbstractAsyncContextManager[PluginResolver]:
        return open_plugins(
            platform.config,
            platform.registry,
            kube_client=kube_client,
            wakeups=executor,
            clock=clock,
            pod_templates=platform.pod_templates,
            metrics_registry=metrics_registry,
            before_create=executor.before_create,
        )

    async with Executor(
        plugins=plugins,
        store=store,
        settings=settings or executor_settings(platform),
        clock=clock,
        on_event=on_event,
        on_unknown_create=unknown_creates.inc if unknown_creates is not None else None,
        catalog=catalog,
        children=children,
    ) as executor:
        yield executor
