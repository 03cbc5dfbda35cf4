"""Beyond one process: executor replicas sharing executions through PostgreSQL, an HTTP API, a web view.

The design follows the research in the project's service notes (Flyte's sharded propellers and the
FlyteWorkflow CRD as state; Temporal's fenced shard writes; the PostgreSQL job queues): liveness on a replica
row with a heartbeat in database time, fencing on the execution row (owner + epoch checked in the statement
of every write), claims by short ``FOR UPDATE SKIP LOCKED`` statements, NOTIFY as a wake-up hint behind a
poll. The schema is numbered SQL files in ``migrations/`` (:func:`migrate`).
"""

from taskplug.service._migrations import MIGRATIONS, SchemaError, migrate, schema_version

__all__ = ["MIGRATIONS", "SchemaError", "migrate", "schema_version"]
