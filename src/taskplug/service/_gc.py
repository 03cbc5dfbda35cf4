"""Pruning the replicas' database: executions that finished long ago, with everything recorded about them.

A replica never deletes: the execution row, its events, attempts, map elements, create intents and kept logs
stay for the API and the web view. ``taskplug gc --older-than 7d`` (:func:`collect_garbage`) deletes the executions
that ended before the cutoff, in batches of short transactions (``FOR UPDATE SKIP LOCKED``, oldest first) so
that it never holds a long lock, never pins the vacuum horizon with one huge ``DELETE``, and can run while
replicas and web servers work; the dependent rows go by the schema's ``ON DELETE CASCADE``. A replica row is
already forgotten by the sweeper once it is fenced and owns nothing.

Flyte keeps finished executions in flyteadmin's database until an operator deletes them (its
``flyteadmin`` has no built-in retention); propeller's FlyteWorkflow objects are garbage-collected after
``max-ttl-hours``. This is the second for the replicas' tables.

The cutoff has a floor (:data:`MIN_AGE`): the orphan reaper recognises an object that a paused ex-owner's
late create made by its execution's row (docs/service.md, "No object created twice", item 5), so a row must
outlive every such create.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Final

from taskplug.core import SpecError, format_go_duration

if TYPE_CHECKING:
    import psycopg

__all__ = ["MIN_AGE", "GcReport", "collect_garbage"]

MIN_AGE: Final = timedelta(minutes=10)
"""The youngest finished execution gc may delete: far past any replica's lease time plus a reaper pass, the
window in which a late create can still land and must be recognised as an orphan by its execution's row."""

_CUTOFF = "SELECT now() - make_interval(secs => %s)"
_COUNT = """
SELECT (SELECT count(*) FROM taskplug_executions WHERE terminal AND finished_at < %(cutoff)s),
       (SELECT count(*) FROM taskplug_events v JOIN taskplug_executions e ON e.id = v.execution_id
         WHERE e.terminal AND e.finished_at < %(cutoff)s)
"""
_LOCK_BATCH = """
SELECT id FROM taskplug_executions WHERE terminal AND finished_at < %s
 ORDER BY finished_at, id LIMIT %s FOR UPDATE SKIP LOCKED
"""
_EVENTS_OF = "SELECT count(*) FROM taskplug_events WHERE execution_id = ANY(%s)"
_DELETE = "DELETE FROM taskplug_executions WHERE id = ANY(%s)"


@dataclass(frozen=True, slots=True)
class GcReport:
    """What one gc pass deleted (or, with ``dry_run``, would delete)."""

    cutoff: datetime
    """Executions that finished before this instant (database time) were deleted."""
    executions: int
    events: int
    """The deleted executions' events (their attempts, elements, create intents and kept logs went with them
    too)."""
    batches: int
    dry_run: bool


def collect_garbage(
    conn: psycopg.Connection[tuple[object, ...]],
    *,
    older_than: timedelta,
    batch: int = 1000,
    dry_run: bool = False,
) -> GcReport:
    """Delete the executions that reached a terminal phase more than ``older_than`` ago, ``batch`` per
    transaction, until none is left (rows another transaction holds are skipped and left for the next run).

    ``conn`` must not be inside a transaction: each batch commits on its own."""
    if older_than < MIN_AGE:
        raise SpecError(
            "--older-than",
            f"{format_go_duration(older_than)} is less than the floor of {format_go_duration(MIN_AGE)}: the "
            "orphan reaper needs a finished execution's row to recognise an object a paused replica's late "
            "create left behind",
        )
    if batch < 1:
        raise SpecError("--batch", f"must be at least 1, not {batch}")
    row = conn.execute(_CUTOFF, (older_than.total_seconds(),)).fetchone()
    assert row is not None
    cutoff = row[0]
    assert isinstance(cutoff, datetime)
    if dry_run:
        counted = conn.execute(_COUNT, {"cutoff": cutoff}).fetchone()
        assert counted is not None
        return GcReport(cutoff, _count(counted[0]), _count(counted[1]), 0, dry_run=True)
    executions = events = batches = 0
    while True:
        with conn.transaction():
            ids = [r[0] for r in conn.execute(_LOCK_BATCH, (cutoff, batch)).fetchall()]
            if not ids:
                break
            # Counted before the delete, under the executions' row locks: a terminal execution gains no
            # event, and the cascade leaves nothing to count afterwards.
            counted = conn.execute(_EVENTS_OF, (ids,)).fetchone()
            conn.execute(_DELETE, (ids,))
        events += _count(counted[0] if counted else 0)
        executions += len(ids)
        batches += 1
    return GcReport(cutoff, executions, events, batches, dry_run=False)


def _count(value: object) -> int:
    assert isinstance(value, int), value  # count(*) is a bigint
    return value
