"""The orphan reaper: delete the Kubernetes objects of attempts that are already finished.

Kubernetes cannot fence a create: an ex-owner paused after its create guard passed can have its create land
after the new owner finished and cleaned up that attempt, resurrecting its object (docs/service.md, "No
object created twice", item 5).
Flyte gets rid of such objects through owner references to the FlyteWorkflow CR (garbage collection when
the workflow is deleted); taskplug's executions are rows, so every replica runs this pass instead: objects
carrying taskplug's ``execution-id`` label whose execution is terminal, or whose name is an attempt its
execution has moved past, are deleted. Objects of executions this database does not know (a ``taskplug
run`` on the same cluster) are left alone. The pass is idempotent, so every replica may run it.

It looks at every kind the enabled Kubernetes plugins create (:func:`reaped_resource_types`: Pods, and the
custom resources of Spark, Kubeflow, Ray, Dask, … plugins), since a resurrected SparkApplication holds a
driver and its executors as surely as a resurrected Pod holds a node. A kind the cluster does not serve (its
operator, hence its CRD, is not installed: the list answers 404) is skipped: no object of it can exist.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from taskplug.core import PluginKind
from taskplug.k8s import (
    EXECUTION_ID_LABEL,
    FINALIZER,
    POD,
    K8sPluginEntry,
    KubeClient,
    ResourceType,
    is_conflict,
    is_not_found,
)

if TYPE_CHECKING:
    import psycopg

    from taskplug.executor import Platform

__all__ = ["reap_orphans", "reaped_resource_types"]

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


def reaped_resource_types(platform: Platform) -> tuple[ResourceType, ...]:
    """Every kind the enabled Kubernetes plugins create (each entry's ``resource_to_watch``, the type the
    plugin manager creates and watches), Pods first and always (pod and container tasks, and the elements
    of map tasks, whatever the enabled plugins), each once: two entries naming one type, or a plugin naming
    it with another spelling of its kind, give one list request per pass, as the API server serves one
    collection per ``(apiVersion, plural)``. Plugins are not loaded: the entries say it."""
    found: dict[tuple[str, str], ResourceType] = {(POD.api_version, POD.plural): POD}
    for entry in platform.enabled_entries():
        if entry.kind != PluginKind.K8S or not isinstance(entry, K8sPluginEntry):
            continue
        rtype = entry.resource_to_watch
        found.setdefault((rtype.api_version, rtype.plural.lower()), rtype)
    return tuple(found.values())


async def reap_orphans(
    conn: psycopg.AsyncConnection[Any],
    kube: KubeClient,
    *,
    rtypes: Iterable[ResourceType] = (POD,),
    grace: float = 1.0,
    keep_finished: bool = False,
) -> list[tuple[str, str]]:
    """One pass; the ``(namespace, name)`` of every object deleted (or let go: a deletion that waited on
    taskplug's finalizer, which no owner is left to drop). ``grace``: seconds an execution or
    attempt must have been finished for, so that its owner's own cleanup goes first. ``keep_finished``:
    finished objects are kept on purpose (``plugins.k8s.delete-resource-on-finalize`` off, Flyte's default,
    so that their logs stay readable): then only an object created after its attempt finished is an orphan
    (a create that landed late; a legitimate object existed before, so such a create could only succeed
    after the object had been deleted). ``rtypes``: the kinds to look at (:func:`reaped_resource_types`); one
    the cluster does not serve is skipped."""
    deleted: list[tuple[str, str]] = []
    for rtype in rtypes:
        try:
            objects, _ = await kube.list(rtype, None, label_selector=EXECUTION_ID_LABEL)
        except Exception as e:
            if not is_not_found(e):
                raise
            continue  # not served here (no CRD, e.g. no Ray operator on this cluster): nothing to reap
        if not objects:
            continue
        found: list[tuple[str, str, str, Mapping[str, Any]]] = []
        for obj in objects:
            meta = obj.get("metadata") or {}
            if meta.get("deletionTimestamp") and FINALIZER not in (meta.get("finalizers") or ()):
                continue  # going away by itself
            namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
            owner = f"{namespace}/{(meta.get('labels') or {}).get(EXECUTION_ID_LABEL, '')}"
            found.append((namespace, name, owner, meta))
        if not found:
            continue
        cur = await conn.execute(_FINISHED_OWNERS, (sorted({f[2] for f in found}), grace))
        finished_owners: dict[str, datetime] = dict(await cur.fetchall())
        cur = await conn.execute(_FINISHED_ATTEMPTS, (sorted({f[1] for f in found}), grace))
        finished_names: dict[str, datetime] = dict(await cur.fetchall())
        for namespace, name, owner, meta in found:
            finished = finished_owners.get(owner) or finished_names.get(name)
            if finished is None:
                continue
            deleting = bool(meta.get("deletionTimestamp"))
            if not deleting and keep_finished:
                created = _created(meta)
                if created is None or created <= finished:
                    continue
            if await _reap(kube, rtype, namespace, name, meta, delete=not deleting):
                deleted.append((namespace, name))
    return deleted


async def _reap(
    kube: KubeClient, rtype: ResourceType, namespace: str, name: str, meta: Mapping[str, Any], *, delete: bool
) -> bool:
    """Drop taskplug's finalizer (when the plugin manager injected one, ``plugins.k8s.inject-finalizer``: no
    owner is left to drop it, so the object would wait for it forever), then delete. False when someone else
    changed or deleted the object meanwhile: the next pass looks again."""
    finalizers = list(meta.get("finalizers") or [])
    try:
        if FINALIZER in finalizers:
            remaining = [f for f in finalizers if f != FINALIZER]
            # Conditional on the version listed, as the plugin manager's own removal is: a concurrent
            # writer's change is not lost, the patch answers Conflict.
            patch = {
                "metadata": {"finalizers": remaining or None, "resourceVersion": meta.get("resourceVersion")}
            }
            await kube.patch(rtype, namespace, name, patch, patch_type="merge")
        if delete:
            await kube.delete(rtype, namespace, name)
    except Exception as e:
        if is_not_found(e) or is_conflict(e):
            return False
        raise
    return True


def _created(meta: Mapping[str, Any]) -> datetime | None:
    try:
        return datetime.fromisoformat(str(meta.get("creationTimestamp") or "").replace("Z", "+00:00"))
    except ValueError:
        return None
