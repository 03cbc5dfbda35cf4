"""Beyond one process: executor replicas sharing executions through PostgreSQL, an HTTP API, a web view.

The design (docs/service.md) follows research into (Flyte's sharded propellers and the
FlyteWorkflow CRD as state; Temporal's fenced shard writes; the PostgreSQL job queues): liveness on a replica
row with a heartbeat in database time, fencing on the execution row (owner + epoch checked in the statement
of every write), claims by short ``FOR UPDATE SKIP LOCKED`` statements, NOTIFY as a wake-up hint behind a
poll. The schema is numbered SQL files in ``migrations/`` (:func:`migrate`).
"""

from typing import TYPE_CHECKING

from taskplug.core import lazy_exports
from taskplug.service._migrations import MIGRATIONS, SchemaError, migrate, schema_version

if TYPE_CHECKING:  # loaded on first use: they need psycopg (the `postgres` extra), the web view the `web` one
    from taskplug.service._api_app import create_app, serve_http
    from taskplug.service._api_submit import platform_task_types
    from taskplug.service._auth import AuthSettings, OidcSettings, auth_settings, local_warning
    from taskplug.service._catalog import PostgresCatalog
    from taskplug.service._gc import GcReport, collect_garbage
    from taskplug.service._hosts import HostPolicy, host_policy
    from taskplug.service._job_logs import JobLogs
    from taskplug.service._limits import ServeLimits
    from taskplug.service._pgstore import PostgresStateStore
    from taskplug.service._reaper import reap_orphans
    from taskplug.service._replica import Replica, ReplicaSettings
    from taskplug.service._tokens import TokenInfo, create_token, list_tokens, revoke_token

__all__ = [
    "MIGRATIONS",
    "AuthSettings",
    "GcReport",
    "HostPolicy",
    "JobLogs",
    "OidcSettings",
    "PostgresCatalog",
    "PostgresStateStore",
    "Replica",
    "ReplicaSettings",
    "SchemaError",
    "ServeLimits",
    "TokenInfo",
    "auth_settings",
    "collect_garbage",
    "create_app",
    "create_token",
    "host_policy",
    "list_tokens",
    "local_warning",
    "migrate",
    "platform_task_types",
    "reap_orphans",
    "revoke_token",
    "schema_version",
    "serve_http",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "PostgresCatalog": "taskplug.service._catalog",
        "PostgresStateStore": "taskplug.service._pgstore",
        "Replica": "taskplug.service._replica",
        "ReplicaSettings": "taskplug.service._replica",
        "reap_orphans": "taskplug.service._reaper",
        "GcReport": "taskplug.service._gc",
        "collect_garbage": "taskplug.service._gc",
        "create_app": "taskplug.service._api_app",
        "serve_http": "taskplug.service._api_app",
        "AuthSettings": "taskplug.service._auth",
        "OidcSettings": "taskplug.service._auth",
        "auth_settings": "taskplug.service._auth",
        "local_warning": "taskplug.service._auth",
        "TokenInfo": "taskplug.service._tokens",
        "create_token": "taskplug.service._tokens",
        "list_tokens": "taskplug.service._tokens",
        "revoke_token": "taskplug.service._tokens",
        "ServeLimits": "taskplug.service._limits",
        "HostPolicy": "taskplug.service._hosts",
        "host_policy": "taskplug.service._hosts",
        "JobLogs": "taskplug.service._job_logs",
        "platform_task_types": "taskplug.service._api_submit",
    },
)
