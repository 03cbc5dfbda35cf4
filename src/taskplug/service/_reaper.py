"""The orphan reaper: delete the Kubernetes objects of attempts that are already finished.

Kubernetes cannot fence a create: an ex-owner paused after its create guard passed can have its create land
after the new owner finished and cleaned up that attempt, resurrecting its object (service notes §3.4, 5).
Flyte gets rid of such objects through owner references to the FlyteWorkflow CR (garbage collection when
the workflow is deleted); taskplug's executions are rows, so every replica runs this pass instead: objects
carrying taskplug's ``execution-id`` label whose execution is terminal, or whose name is an attempt its
execution has moved past, are deleted. Objects of executions this database does not know (a ``taskplug
run`` on the same cluster) are left alone. The pass is idempotent, so every replica may run it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from taskplug.k8s import EXECUTION_ID_LABEL, POD, KubeClient, ResourceType, is_not_found

if TYPE_CHECKING:
    import psycopg

__all__ = ["reap_orphans"]

_FINISHED_OWNERS = """
SELECT object_owner, max(finished_at) FROM taskplug_executions WHERE object_owner = ANY(%s)
 GROUP BY object_owner HAVING bool_and(terminal AND finished_at < now() - make_interval(secs => %s))
"""
# An attempt is over once its execution moved past it (the record's attempt is committed after the attempt's
# cleanup) or ended — not merely when its final phase was reported, which a new owner may still be acting on.
_FINISHED_ATTEMPTS = """
SELECT a.resource_name, coalesce(a.finished_at, e.updated_at)
  FROM taskplug_attempts a JOIN taskplug_executions e ON e.id = a.execution_id
 WHERE a.resource_name = ANY(%s) AND (e.attempt > a.attempt OR e.terminal)
   AND e.updated_at < now() - make_interval(secs => %s)
"""


async def reap_orphans(
    conn: psycopg.AsyncConnection[Any],
    kube: KubeClient,
    *,
    rtypes: Iterable[ResourceType] = (POD,),
    grace: float = 1.0,
    keep_finished: bool = False,
) -> list[tuple[str, str]]:
    """One pass; the ``(namespace, name)`` of every object deleted. ``grace``: seconds an execution or
    attempt must have been finished for, so that its owner's own cleanup goes first. ``keep_finished``:
    finished objects are kept on purpose (``plugins.k8s.delete-resource-on-finalize`` off, Flyte's default,
    so that their logs stay readable): then only an object created after its attempt finished is an orphan
    (a create that landed late; a legitimate object existed before, so such a create could only succeed
    after the object had been deleted)."""
    deleted: list[tuple[str, str]] = []
    for rtype in rtypes:
        objects, _ = await kube.list(rtype, None, label_selector=EXECUTION_ID_LABEL)
        if not objects:
            continue
        found: list[tuple[str, str, str, datetime | None]] = []
        for obj in objects:
            meta = obj.get("metadata") or {}
            if meta.get("deletionTimestamp"):
                continue
            namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
            owner = f"{namespace}/{(meta.get('labels') or {}).get(EXECUTION_ID_LABEL, '')}"
            found.append((namespace, name, owner, _created(meta)))
        if not found:
            continue
        cur = await conn.execute(_FINISHED_OWNERS, (sorted({f[2] for f in found}), grace))
        finished_owners: dict[str, datetime] = dict(await cur.fetchall())
        cur = await conn.execute(_FINISHED_ATTEMPTS, (sorted({f[1] for f in found}), grace))
        finished_names: dict[str, datetime] = dict(await cur.fetchall())
        for namespace, name, owner, created in found:
            finished = finished_owners.get(owner) or finished_names.get(name)
            if finished is None:
                continue
            if keep_finished and (created is None or created <= finished):
                continue
            try:
                await kube.delete(rtype, namespace, name)
            except Exception as e:
                if not is_not_found(e):
                    raise
                continue
            deleted.append((namespace, name))
    return deleted


def _created(meta: Mapping[str, Any]) -> datetime | None:
    try:
        return datetime.fromisoformat(str(meta.get("creationTimestamp") or "").replace("Z", "+00:00"))
    except ValueError:
        return None
