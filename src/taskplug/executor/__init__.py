"""The executor: drives task executions through their plugins; the execution spec; the platform; state.

``async with open_executor(platform, kube_client=..., store=...) as ex: await ex.run(spec)`` runs a task
execution — or, when the spec has an ``ArrayNodeSpec``, a map task's ArrayNode — to a terminal phase;
``render_object`` / ``observed_phase`` compute what ``taskplug render`` and ``taskplug status`` print.

The platform, the spec and rendering load at once; the executor itself and the engine it opens, the state
stores (sqlite3) and the coordination seams load on first use (PEP 562), so that ``taskplug render`` and
``status`` import neither the engine nor a state store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from taskplug.core import lazy_exports
from taskplug.executor._job_io import web_api_log_lines, web_api_metrics, web_api_resource_meta
from taskplug.executor._limits import SubmissionLimits, check_limits, submission_limits
from taskplug.executor._paths import ExecutionPaths
from taskplug.executor._platform import (
    EXECUTOR_SECTION,
    PLATFORM_DEFAULTS,
    ArrayNodeConfig,
    ExecutorConfig,
    Platform,
)
from taskplug.executor._render import observed_phase, render_object
from taskplug.executor._spec import (
    ArrayNodeSpec,
    ChildLaunch,
    ExecutionSpec,
    NodeKind,
    child_document,
    load_spec,
    parse_spec,
    workflow_spec,
)
from taskplug.executor._tasks import task_context_for

if TYPE_CHECKING:
    from taskplug.executor._catalog import (
        CacheStatus,
        Catalog,
        CatalogEntry,
        CatalogKey,
        Reservation,
        SQLiteCatalog,
        catalog_key,
    )
    from taskplug.executor._coordination import (
        Coordinator,
        FencedStateStore,
        LocalCoordinator,
    )
    from taskplug.executor._executor import (
        ChildExecutions,
        ExecutionResult,
        Executor,
        ExecutorSettings,
        OpenPlugins,
        WritesCreateIntent,
    )
    from taskplug.executor._guard import FencedError, GuardedKubeClient
    from taskplug.executor._runtime import executor_settings, open_executor
    from taskplug.executor._store import (
        SIGNAL_NOT_CASTABLE,
        SIGNAL_NOT_FOUND,
        Event,
        ExecutionRecord,
        KeepsSignals,
        Lease,
        MemoryStateStore,
        NodeRecord,
        Signal,
        SignalError,
        SQLiteStateStore,
        StateStore,
        StateStoreError,
        check_signal_value,
        check_state_file,
        signal_not_found,
    )
    from taskplug.executor.nodes import CLEANUP_FAILED, NodePhase
    from taskplug.executor.nodes._cache import cached_outputs, kept_outputs, populate
    from taskplug.executor.nodes._host import AsyncFlush
    from taskplug.executor.nodes._ids import unique_node_id


__all__ = [
    "CLEANUP_FAILED",
    "EXECUTOR_SECTION",
    "PLATFORM_DEFAULTS",
    "SIGNAL_NOT_CASTABLE",
    "SIGNAL_NOT_FOUND",
    "ArrayNodeConfig",
    "ArrayNodeSpec",
    "AsyncFlush",
    "CacheStatus",
    "Catalog",
    "CatalogEntry",
    "CatalogKey",
    "ChildExecutions",
    "ChildLaunch",
    "Coordinator",
    "Event",
    "ExecutionPaths",
    "ExecutionRecord",
    "ExecutionResult",
    "ExecutionSpec",
    "Executor",
    "ExecutorConfig",
    "ExecutorSettings",
    "FencedError",
    "FencedStateStore",
    "GuardedKubeClient",
    "KeepsSignals",
    "Lease",
    "LocalCoordinator",
    "MemoryStateStore",
    "NodeKind",
    "NodePhase",
    "NodeRecord",
    "OpenPlugins",
    "Platform",
    "Reservation",
    "SQLiteCatalog",
    "SQLiteStateStore",
    "Signal",
    "SignalError",
    "StateStore",
    "StateStoreError",
    "SubmissionLimits",
    "WritesCreateIntent",
    "cached_outputs",
    "catalog_key",
    "check_limits",
    "check_signal_value",
    "check_state_file",
    "child_document",
    "executor_settings",
    "kept_outputs",
    "load_spec",
    "observed_phase",
    "open_executor",
    "parse_spec",
    "populate",
    "render_object",
    "signal_not_found",
    "submission_limits",
    "task_context_for",
    "unique_node_id",
    "web_api_log_lines",
    "web_api_metrics",
    "web_api_resource_meta",
    "workflow_spec",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "AsyncFlush": "taskplug.executor.nodes._host",
        "CacheStatus": "taskplug.executor._catalog",
        "Catalog": "taskplug.executor._catalog",
        "CatalogEntry": "taskplug.executor._catalog",
        "CatalogKey": "taskplug.executor._catalog",
        "Reservation": "taskplug.executor._catalog",
        "SQLiteCatalog": "taskplug.executor._catalog",
        "catalog_key": "taskplug.executor._catalog",
        "cached_outputs": "taskplug.executor.nodes._cache",
        "kept_outputs": "taskplug.executor.nodes._cache",
        "populate": "taskplug.executor.nodes._cache",
        "CLEANUP_FAILED": "taskplug.executor.nodes._step",
        "NodePhase": "taskplug.executor.nodes._phase",
        "unique_node_id": "taskplug.executor.nodes._ids",
        "ChildExecutions": "taskplug.executor._executor",
        "Coordinator": "taskplug.executor._coordination",
        "FencedStateStore": "taskplug.executor._coordination",
        "LocalCoordinator": "taskplug.executor._coordination",
        "ExecutionResult": "taskplug.executor._executor",
        "Executor": "taskplug.executor._executor",
        "ExecutorSettings": "taskplug.executor._executor",
        "WritesCreateIntent": "taskplug.executor._executor",
        "OpenPlugins": "taskplug.executor._executor",
        "FencedError": "taskplug.executor._guard",
        "GuardedKubeClient": "taskplug.executor._guard",
        "executor_settings": "taskplug.executor._runtime",
        "open_executor": "taskplug.executor._runtime",
        "Event": "taskplug.executor._store",
        "ExecutionRecord": "taskplug.executor._store",
        "Lease": "taskplug.executor._store",
        "MemoryStateStore": "taskplug.executor._store",
        "NodeRecord": "taskplug.executor._store",
        "SQLiteStateStore": "taskplug.executor._store",
        "StateStore": "taskplug.executor._store",
        "StateStoreError": "taskplug.executor._store",
        "check_state_file": "taskplug.executor._store",
        "KeepsSignals": "taskplug.executor._store",
        "SIGNAL_NOT_CASTABLE": "taskplug.executor._store",
        "SIGNAL_NOT_FOUND": "taskplug.executor._store",
        "Signal": "taskplug.executor._store",
        "SignalError": "taskplug.executor._store",
        "check_signal_value": "taskplug.executor._store",
        "signal_not_found": "taskplug.executor._store",
    },
)
