"""Task logs on the service: each attempt's container logs, from the cluster while its pod exists and from the
replicas' database after.

Two halves, one table (``taskplug_logs``, migration ``0011``):

- **Keeping** (:class:`LogKeeper`, in every replica). A pod of an execution this database knows (its
  ``execution-id`` label and ``object_owner``) is kept once it has ended, and before the replica deletes it
  (an abort, ``delete-resource-on-finalize``: :class:`LogKeepingKubeClient`): each container's log is read
  through ``pods/log`` and its last ``max_bytes`` stored, keyed by execution, node (the unique node id of the
  pod's attempt annotation), attempt, pod and container. A pod of an execution the replica drives is kept
  from the watch event that shows it ended (the informer's own stream, seen as it passes: no read of the pod)
  and its logs are written in that execution's next batch (:mod:`._pgstore`: fenced like its other writes, no
  statement of their own), committed before the pod is deleted; any other ended pod is found by each reaper
  pass and written on the keeper's own connection. Keeping is best effort: a log that cannot be read is
  logged and the delete goes on, since an attempt's cleanup must not wait on its log.
- **Reading** (:class:`LogReader`, in ``taskplug serve``): an attempt's kept logs, and the logs of its pods
  that are not kept yet read from the cluster (``serve --kubeconfig``); :func:`follow_logs` streams them,
  reading again every ``poll`` seconds while the attempt runs — a running container's log is then streamed
  by the cluster (``pods/log?follow=true``) into the reader, not read whole again each time.

A log is one source among others (:class:`ContainerLog` is what a reader yields): a connector task's job
log is a third, asked of its connector when the server has the platform config (:mod:`._job_logs`).

Flyte keeps no log: flyteadmin stores the log *links* a plugin reports (``flyteplugins/go/tasks/logs``) and
the console opens them; ``kubectl logs`` reads ``pods/log`` while the pod exists. Deviation: the replicas keep
a bounded copy in PostgreSQL, so that a finished attempt's log is readable where its execution is, after its
pod was deleted; the platform's log links are shown as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import psycopg
from psycopg_pool import AsyncConnectionPool

from taskplug.core import FollowsPodLogs, ReadsPodLogs
from taskplug.executor import GuardedKubeClient, StateStoreError
from taskplug.k8s import (
    ATTEMPT_ANNOTATION,
    EXECUTION_ID_LABEL,
    POD,
    KubeApiError,
    KubeClient,
    ResourceType,
    WatchEvent,
    is_not_found,
)
from taskplug.service._job_logs import JOB_CONTAINER, JOB_POD, JobLogs
from taskplug.service._pgstore import PostgresStateStore

__all__ = [
    "DEFAULT_KEEP_BYTES",
    "MAX_LIVE_PODS",
    "ContainerLog",
    "LogKeeper",
    "LogKeepingKubeClient",
    "LogReader",
    "follow_logs",
    "keep_tail",
    "pod_attempt",
]

log = logging.getLogger(__name__)

DEFAULT_KEEP_BYTES: Final = 1024 * 1024
"""The most of one container's log a replica keeps (its end): ``taskplug executor --keep-log-bytes``."""

MAX_FOLLOW_BYTES: Final = 8 * 1024 * 1024
"""The most of a running container's streamed log a reader holds (its end)."""

KEEP_GRACE: Final = 15.0
"""Seconds a followed log waits after its execution ended for a log not found yet (a replica keeps an ended
pod's log at its next reaper pass, every ``--reap`` seconds: 5 by default)."""

MAX_LIVE_PODS: Final = 100
"""The most running pods one read of the cluster reads the logs of (a map's elements: ask for one node)."""

_ENDED: Final = frozenset({"Succeeded", "Failed"})
_JOB_RECORDS: Final = """
SELECT coalesce(record->>'path', ''), record, terminal FROM taskplug_executions
 WHERE id = %s AND record->'plugin_state' ? 'resourceMeta'
UNION ALL
SELECT n.path, n.record, e.terminal FROM taskplug_nodes n JOIN taskplug_executions e ON e.id = n.execution_id
 WHERE n.execution_id = %s AND n.record->'plugin_state' ? 'resourceMeta'
"""

# The execution of a pod this replica does not drive: its row's objects' owner, and its record's key (the
# executor's: the row's own key is the API's, which a submitter may choose) under the pod's execution prefix.
_OWNER = (
    "SELECT id FROM taskplug_executions WHERE object_owner = %s AND coalesce(record->>'key', key) LIKE %s "
    "ORDER BY id DESC LIMIT 1"
)
# Of ended pods (name, their execution's object owner and key prefix), those whose logs are not kept and
# whose execution no live replica drives (that replica keeps them itself, from the watch event of their end).
_UNKEPT_PODS = """
SELECT p.pod FROM unnest(%s::text[], %s::text[], %s::text[]) AS p(pod, owner, prefix)
 WHERE NOT EXISTS (SELECT 1 FROM taskplug_logs l WHERE l.pod = p.pod AND l.ended)
   AND NOT EXISTS (SELECT 1 FROM taskplug_executions e JOIN taskplug_replicas r ON r.id = e.owner_id
                    WHERE e.object_owner = p.owner AND coalesce(e.record->>'key', e.key) LIKE p.prefix
                      AND NOT e.terminal AND r.fenced_at IS NULL)
"""
_KEEP = """
INSERT INTO taskplug_logs (execution_id, node, attempt, pod, container, log, size, ended)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (execution_id, node, attempt, pod, container) DO UPDATE
   SET log = excluded.log, size = excluded.size, ended = excluded.ended, kept_at = now()
 WHERE excluded.size >= taskplug_logs.size
"""
_OBJECT_OWNER = "SELECT object_owner FROM taskplug_executions WHERE id = %s"
_KEPT = """
SELECT node, attempt, pod, container, log, size, ended FROM taskplug_logs
 WHERE execution_id = %s AND (%s::text IS NULL OR node = %s) AND (%s::int IS NULL OR attempt = %s)
 ORDER BY attempt, node, kept_at, pod, container
"""


def pod_attempt(pod: Mapping[str, Any]) -> tuple[str, str, int] | None:
    """``(execution prefix "project/domain/name/", unique node id, attempt)`` of a pod, from the attempt
    annotation the plugin manager stamps on every object it creates; None for another pod."""
    value = ((pod.get("metadata") or {}).get("annotations") or {}).get(ATTEMPT_ANNOTATION)
    parts = str(value or "").split("/")
    if len(parts) != 5 or not parts[4].isdigit() or not all(parts[:4]):
        return None
    return f"{parts[0]}/{parts[1]}/{parts[2]}/", parts[3], int(parts[4])


def _containers(pod: Mapping[str, Any]) -> list[str]:
    spec = pod.get("spec") or {}
    return [str(c.get("name")) for c in (spec.get("containers") or []) if c.get("name")]


def _ended(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in _ENDED


def _like_prefix(prefix: str) -> str:
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def keep_tail(data: bytes, max_bytes: int) -> bytes:
    """The last ``max_bytes`` of ``data``, from the start of a line when one begins in the first half of
    them (a cut line is worth less than the room it takes), never splitting a UTF-8 character."""
    if len(data) <= max_bytes:
        return data
    tail = data[len(data) - max_bytes :]
    newline = tail.find(b"\n")
    if 0 <= newline < max_bytes // 2:
        return tail[newline + 1 :]
    while tail and (tail[0] & 0xC0) == 0x80:  # a continuation byte: the character began before the cut
        tail = tail[1:]
    return tail


@dataclass(frozen=True, slots=True)
class ContainerLog:
    """What one container of one attempt printed, as far as known: ``data`` are the bytes from offset
    ``start`` (non-zero when the beginning was cut when it was kept) to ``size``."""

    node: str
    attempt: int
    pod: str
    container: str
    data: bytes
    start: int
    ended: bool
    """The pod had ended: nothing more will be appended."""

    @property
    def size(self) -> int:
        return self.start + len(self.data)

    @property
    def ident(self) -> tuple[str, int, str, str]:
        return self.node, self.attempt, self.pod, self.container


class LogKeeper:
    """Keep the logs of ended (or deleted) pods in ``taskplug_logs`` (see the module docstring). ``conn`` is
    this keeper's own autocommit connection, used for pods of executions ``store`` does not hold; calls are
    serialised on it. A pod of an execution ``store`` holds has its logs kept with that execution's writes
    (:meth:`PostgresStateStore.keep_log <taskplug.service._pgstore.PostgresStateStore.keep_log>`: in its
    next batch, fenced like them); :meth:`seen` starts keeping one as soon as a watch event shows it ended."""

    def __init__(
        self,
        conn: psycopg.AsyncConnection[Any],
        kube: KubeClient,
        *,
        max_bytes: int,
        store: PostgresStateStore | None = None,
    ) -> None:
        self.conn = conn
        self.kube = kube
        self.max_bytes = max_bytes
        self.store = store
        # A protocol's isinstance is slow: asked once.
        self._reads: ReadsPodLogs | None = kube if isinstance(kube, ReadsPodLogs) else None
        self.kept = 0
        self._lock = asyncio.Lock()
        # Pods of the store's executions whose logs a watch event started keeping: (namespace, name) -> the
        # pod's uid and the keeping, answering how many logs were kept and the key whose batch holds them.
        # Dropped when the pod is deleted here or no longer listed.
        self._seen: dict[tuple[str, str], tuple[str, asyncio.Task[tuple[int, str | None]]]] = {}
        # Ended pods this keeper's client is deleting, their logs kept from the event of their end:
        # (namespace, name) -> uid. Until the delete lands, the pod still shows as an ended pod of the
        # store's execution (in events, in a pass's list), whose complete log must not be read and written
        # again. Dropped when the pod is no longer listed.
        self._deleted_here: dict[tuple[str, str], str] = {}

    def seen(self, pod: Mapping[str, Any]) -> None:
        """A watch event showed ``pod``: once it has ended, start keeping its logs when its execution is the
        store's (its log is complete then; the delete that follows finds it kept)."""
        if self.store is None or not _ended(pod):
            return
        meta = pod.get("metadata") or {}
        where = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        if where in self._seen or self._own(pod) is None:
            return
        uid = str(meta.get("uid") or "")
        if uid and self._deleted_here.get(where) == uid:
            return  # being deleted here, its logs kept from its end
        task = asyncio.create_task(self._keep_quietly(pod), name=f"taskplug-keep-log-{where[1]}")
        self._seen[where] = (uid, task)

    def taken(self, namespace: str, name: str) -> asyncio.Task[tuple[int, str | None]] | None:
        """The keeping :meth:`seen` started for this pod, if any, forgotten (the pod is being deleted here;
        one whose logs were kept from its end is not kept again by a later event or pass)."""
        uid, keeping = self._seen.pop((namespace, name), ("", None))
        if keeping is not None and uid:
            self._deleted_here[(namespace, name)] = uid
        return keeping

    def close(self) -> None:
        """Stop the keepings still under way (the incarnation ended: its store writes nothing more)."""
        for _, task in self._seen.values():
            task.cancel()
        self._seen.clear()
        self._deleted_here.clear()

    def _own(self, pod: Mapping[str, Any]) -> tuple[str, str, int] | None:
        """(key, node, attempt) of a pod of an execution the store holds, else None."""
        found = pod_attempt(pod)
        meta = pod.get("metadata") or {}
        label = (meta.get("labels") or {}).get(EXECUTION_ID_LABEL)
        if found is None or not label or self.store is None:
            return None
        key = self.store.key_of_object(f"{meta.get('namespace') or ''}/{label}", found[0])
        return None if key is None else (key, found[1], found[2])

    async def _keep_quietly(self, pod: Mapping[str, Any]) -> tuple[int, str | None]:
        try:
            return await self.keep_pod(pod)
        except (KubeApiError, ConnectionError, TimeoutError, psycopg.Error) as e:
            meta = pod.get("metadata") or {}
            log.warning("cannot keep the logs of pod %s/%s: %s", meta.get("namespace"), meta.get("name"), e)
            return 0, None

    async def keep(self, pod: Mapping[str, Any]) -> int:
        """Keep each container's log of ``pod``; how many were kept (0: not a pod of a known execution, or
        the cluster cannot read logs). A pod of the store's execution waits in the store for its next
        flush."""
        return (await self.keep_pod(pod))[0]

    async def keep_pod(self, pod: Mapping[str, Any]) -> tuple[int, str | None]:
        """:meth:`keep`, and the key whose batch holds the logs (None: written on this keeper's connection,
        or not kept)."""
        reads = self._reads
        if reads is None:
            return 0, None
        found = pod_attempt(pod)
        meta = pod.get("metadata") or {}
        label = (meta.get("labels") or {}).get(EXECUTION_ID_LABEL)
        if found is None or not label:
            return 0, None
        prefix, node, attempt = found
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        own = self._own(pod)
        row = None
        if own is None:
            async with self._lock:
                cur = await self.conn.execute(_OWNER, (f"{namespace}/{label}", _like_prefix(prefix)))
                row = await cur.fetchone()
            if row is None:
                return 0, None
        logs: list[tuple[str, bytes]] = []
        # Read with no lock held: keeping one pod's logs never waits on another's reads.
        for container in _containers(pod):
            try:
                text = await reads.pod_log(namespace, name, container)
            except KubeApiError as e:
                if is_not_found(e):
                    return 0, None  # the pod is gone: nothing left to read
                text = ""  # a container that never started (400): it printed nothing, kept as such
            except (ConnectionError, TimeoutError) as e:
                log.warning("cannot keep the log of %s/%s container %s: %s", namespace, name, container, e)
                continue
            logs.append((container, text.encode()))
        ended = _ended(pod)
        if own is not None and self.store is not None:
            key = own[0]
            for container, data in logs:
                ident = (node, attempt, name, container)
                if not self.store.keep_log(
                    key, ident, keep_tail(data, self.max_bytes), len(data), ended=ended
                ):
                    return 0, None  # no longer this replica's: its new owner keeps it
            self.kept += len(logs)
            return len(logs), key
        assert row is not None
        async with self._lock:
            for container, data in logs:
                kept = keep_tail(data, self.max_bytes)
                await self.conn.execute(
                    _KEEP, (row[0], node, attempt, name, container, kept, len(data), ended)
                )
        self.kept += len(logs)
        return len(logs), None

    async def commit(self, key: str | None) -> None:
        """Return once the logs kept with ``key``'s writes are committed (a grouped flush when they still
        wait; a failed one is logged: keeping is best effort)."""
        if key is None or self.store is None or not self.store.logs_pending(key):
            return
        try:
            await self.store.aflush()
        except StateStoreError as e:
            log.warning("cannot commit the logs kept of %s: %s", key, e)

    async def keep_ended(self, namespace: str | None = None) -> int:
        """One pass: keep the logs of every ended pod of a known execution not kept yet, but for a pod whose
        execution another live replica drives (it keeps its own pods' logs); how many containers' logs were
        kept."""
        pods, _ = await self.kube.list(POD, namespace, label_selector=EXECUTION_ID_LABEL)
        listed = {
            (
                str((p.get("metadata") or {}).get("namespace") or ""),
                str((p.get("metadata") or {}).get("name")),
            )
            for p in pods
        }
        for where in [w for w, (_, task) in self._seen.items() if task.done() and w not in listed]:
            del self._seen[where]  # gone, deleted by someone else
        self._deleted_here = {w: uid for w, uid in self._deleted_here.items() if w in listed}
        ended: dict[str, Mapping[str, Any]] = {}
        mine: list[asyncio.Task[tuple[int, str | None]]] = []
        for p in pods:
            meta = p.get("metadata") or {}
            where = (str(meta.get("namespace") or ""), str(meta.get("name")))
            found = pod_attempt(p)
            if not _ended(p) or found is None or where in self._seen:
                continue
            if self._own(p) is not None:
                self.seen(p)  # its execution's: no watch event showed its end (kept with its writes)
                if where in self._seen:  # else being deleted here, its logs kept from its end
                    mine.append(self._seen[where][1])
            else:
                label = (meta.get("labels") or {}).get(EXECUTION_ID_LABEL)
                ended[where[1]] = {"pod": p, "owner": f"{where[0]}/{label}", "prefix": _like_prefix(found[0])}
        count = 0
        staged: set[str] = set()
        for done, key in [await task for task in mine]:
            count += done
            if key is not None:
                staged.add(key)
        for key in staged:
            await self.commit(key)
        if not ended:
            return count
        names = sorted(ended)
        async with self._lock:
            cur = await self.conn.execute(
                _UNKEPT_PODS,
                (names, [ended[n]["owner"] for n in names], [ended[n]["prefix"] for n in names]),
            )
            unkept = [str(r[0]) for r in await cur.fetchall()]
        for name in unkept:
            count += (await self.keep_pod(ended[name]["pod"]))[0]
        return count


class LogKeepingKubeClient(GuardedKubeClient):
    """The replica's guarded client whose pod watches tell the keeper each pod they show (it keeps an
    ended one's logs at once) and whose pod deletes keep the pod's logs first, committed before the delete
    is sent (best effort: the delete goes on whatever keeping answered)."""

    def __init__(self, inner: KubeClient, guard: Callable[[], Awaitable[None]], keeper: LogKeeper) -> None:
        super().__init__(inner, guard)
        self.keeper = keeper

    def watch(
        self,
        rtype: ResourceType,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        label_selector: str | None = None,
        timeout_seconds: int | None = None,
    ) -> AsyncIterator[WatchEvent]:
        stream = super().watch(
            rtype,
            namespace,
            resource_version=resource_version,
            label_selector=label_selector,
            timeout_seconds=timeout_seconds,
        )
        if not _is_pod(rtype) or self.keeper.store is None:
            return stream
        return self._observed(stream)

    async def list(
        self, rtype: ResourceType, namespace: str | None = None, *, label_selector: str | None = None
    ) -> tuple[list[dict[str, Any]], str]:
        items, version = await super().list(rtype, namespace, label_selector=label_selector)
        if _is_pod(rtype) and self.keeper.store is not None:
            for pod in items:  # an informer's (re)list: an end it shows is no watch event's
                self.keeper.seen(pod)
        return items, version

    async def _observed(self, stream: AsyncIterator[WatchEvent]) -> AsyncIterator[WatchEvent]:
        try:
            async for event in stream:
                if event.type == "ADDED" or event.type == "MODIFIED":
                    self.keeper.seen(event.object)
                yield event
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()

    async def delete(self, rtype: ResourceType, namespace: str, name: str) -> dict[str, Any] | None:
        if _is_pod(rtype):
            keeping = self.keeper.taken(namespace, name)
            try:
                if keeping is not None:
                    _, key = await keeping  # the watch showed it ended: its logs were read from then
                else:
                    _, key = await self.keeper.keep_pod(await self._inner.get(POD, namespace, name))
                await self.keeper.commit(key)
            except KubeApiError as e:
                if not is_not_found(e):  # already gone: nothing to keep, and the delete says so itself
                    log.warning(
                        "cannot keep the logs of pod %s/%s before deleting it: %s", namespace, name, e
                    )
            except (ConnectionError, TimeoutError, psycopg.Error) as e:
                log.warning("cannot keep the logs of pod %s/%s before deleting it: %s", namespace, name, e)
        return await super().delete(rtype, namespace, name)


def _is_pod(rtype: ResourceType) -> bool:
    return rtype.plural == POD.plural and rtype.api_version == POD.api_version


@dataclass(eq=False)
class _Follower:
    """A running container's log as the cluster streams it: ``data`` from offset ``start``."""

    data: bytearray = field(default_factory=bytearray)
    start: int = 0
    failed: bool = False
    task: asyncio.Task[None] | None = None


class LogReader:
    """An execution's container logs: kept ones from the database (``pool``; each read holds one of ``reads``
    while it uses the database, never while it waits on the cluster), the others from the cluster (``kube``;
    None when this server reaches no cluster)."""

    def __init__(
        self,
        pool: AsyncConnectionPool[Any],
        kube: KubeClient | None,
        *,
        reads: asyncio.Semaphore,
        follow: bool = False,
        jobs: JobLogs | None = None,
    ) -> None:
        self.pool = pool
        self.jobs = jobs
        """Where a web-API job's log is asked for (a connector task's; None: not shown)."""
        self.follow = follow
        """Stream running containers' logs from the cluster between reads (:meth:`close` stops them), rather
        than reading each whole log again at every read."""
        self._followers: dict[tuple[str, int, str, str], _Follower] = {}
        self.kube = kube
        self.reads = reads
        self.cluster_problem: str | None = None
        """Why the last read found nothing on the cluster (None when it was read)."""
        self.pods_left_out = 0
        """Running pods the last read matched past :data:`MAX_LIVE_PODS`, whose logs it did not read."""

    async def read(
        self, *, execution_id: int, key: str, node: str | None, attempt: int | None
    ) -> list[ContainerLog]:
        """Every matching container log, kept ones and then the cluster's pods not kept (or kept while still
        running), ordered by attempt, node and pod. The execution's objects are found by its row's
        ``object_owner``, read each time: a queued execution gets one when a replica claims it."""
        found: dict[tuple[str, int, str, str], ContainerLog] = {}
        async with self.reads, self.pool.connection() as conn:
            cur = await conn.execute(_OBJECT_OWNER, (execution_id,))
            row = await cur.fetchone()
            owner = str(row[0]) if row is not None and row[0] else None
            cur = await conn.execute(_KEPT, (execution_id, node, node, attempt, attempt))
            for n, a, pod, container, data, size, ended in await cur.fetchall():
                data = bytes(data)
                found[(n, a, pod, container)] = ContainerLog(
                    n, a, pod, container, data, size - len(data), ended
                )
        for live in await self._live(key, owner, node, attempt, skip=found):
            found[live.ident] = live
        if self.jobs is not None:
            for job in await self._jobs(self.jobs, execution_id, node, attempt):
                found[job.ident] = job
        return sorted(found.values(), key=lambda c: (c.attempt, c.node, c.pod, c.container))

    async def _jobs(
        self, jobs: JobLogs, execution_id: int, node: str | None, attempt: int | None
    ) -> list[ContainerLog]:
        """The logs of the web-API jobs (connector tasks) of the execution's attempts: each record whose
        plugin state names a job (the attempt it is at), asked of the job's service."""
        async with self.reads, self.pool.connection() as conn:
            cur = await conn.execute(_JOB_RECORDS, (execution_id, execution_id))
            records = await cur.fetchall()
        found = []
        for path, record, terminal in records:
            at = int(record.get("attempt") or 0)
            if (node is not None and path != node) or (attempt is not None and at != attempt):
                continue
            data = await jobs.text(record.get("plugin_state"), ended=bool(terminal))
            if data is not None:
                found.append(ContainerLog(str(path), at, JOB_POD, JOB_CONTAINER, data, 0, bool(terminal)))
        return found

    async def _live(
        self,
        key: str,
        object_owner: str | None,
        node: str | None,
        attempt: int | None,
        *,
        skip: Mapping[tuple[str, int, str, str], ContainerLog],
    ) -> list[ContainerLog]:
        kube = self.kube
        if kube is None or not object_owner or "/" not in object_owner:
            self.cluster_problem = "this server reaches no cluster (taskplug serve --kubeconfig)"
            return []
        if not isinstance(kube, ReadsPodLogs):
            self.cluster_problem = "this server's cluster client cannot read pod logs"
            return []
        namespace, label = object_owner.split("/", 1)
        prefix = "/".join(key.split("/")[:3]) + "/"
        try:
            pods, _ = await kube.list(POD, namespace, label_selector=f"{EXECUTION_ID_LABEL}={label}")
        except (KubeApiError, ConnectionError, TimeoutError) as e:
            self.cluster_problem = f"the cluster does not answer: {e}"
            return []
        self.cluster_problem = None
        found: list[ContainerLog] = []
        matching: list[tuple[tuple[str, str, int], dict[str, Any]]] = []
        for pod in pods:
            at = pod_attempt(pod)
            if at is None or at[0] != prefix or (node is not None and at[1] != node):
                continue
            if attempt is not None and at[2] != attempt:
                continue
            matching.append((at, pod))
        # Every read of a followed log reads these again: bounded, so that one request cannot make this server
        # read a large map's every pod log every second (a node's logs are asked for with ``node``).
        matching.sort(
            key=lambda item: (item[0][2], item[0][1], str((item[1].get("metadata") or {}).get("name")))
        )
        self.pods_left_out = max(0, len(matching) - MAX_LIVE_PODS)
        seen: set[tuple[str, int, str, str]] = set()
        for at, pod in matching[:MAX_LIVE_PODS]:
            name = str((pod.get("metadata") or {}).get("name"))
            ended = _ended(pod)
            for container in _containers(pod):
                ident = (at[1], at[2], name, container)
                kept = skip.get(ident)
                if kept is not None and kept.ended:
                    continue
                seen.add(ident)
                follower = self._followers.get(ident)
                if follower is not None and not ended and not follower.failed:
                    # Streamed by the cluster since the last read: nothing to ask it.
                    found.append(ContainerLog(*ident, bytes(follower.data), follower.start, False))
                    continue
                try:
                    text = await kube.pod_log(namespace, name, container)
                except KubeApiError:
                    text = ""  # a container not started yet (400): nothing printed so far
                except (ConnectionError, TimeoutError) as e:
                    self.cluster_problem = f"the cluster does not answer: {e}"
                    continue
                found.append(ContainerLog(*ident, text.encode(), 0, ended))
                if self.follow and not ended and isinstance(kube, FollowsPodLogs):
                    self._start_following(kube, namespace, ident)
        for ident in set(self._followers) - seen:
            self._stop_following(ident)  # kept, gone, or ended: read whole from now on
        return found

    def _start_following(
        self, kube: FollowsPodLogs, namespace: str, ident: tuple[str, int, str, str]
    ) -> None:
        """Stream a running container's log into a buffer (the next reads take it from there)."""
        self._stop_following(ident)
        follower = _Follower()
        _, _, pod, container = ident

        async def pump() -> None:
            try:
                async for text in kube.follow_pod_log(namespace, pod, container):
                    follower.data += text.encode()
                    if len(follower.data) > MAX_FOLLOW_BYTES:
                        cut = len(follower.data) - MAX_FOLLOW_BYTES
                        del follower.data[:cut]
                        follower.start += cut
            except (KubeApiError, ConnectionError, TimeoutError):
                pass
            follower.failed = True  # ended or broke: the next read asks the cluster for the whole log

        follower.task = asyncio.create_task(pump(), name=f"taskplug-follow-log-{pod}-{container}")
        self._followers[ident] = follower

    def _stop_following(self, ident: tuple[str, int, str, str]) -> None:
        follower = self._followers.pop(ident, None)
        if follower is not None and follower.task is not None:
            follower.task.cancel()

    async def close(self) -> None:
        """Stop every stream this reader follows (and wait for them to end)."""
        tasks = [f.task for f in self._followers.values() if f.task is not None]
        self._followers.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _header(log: ContainerLog) -> str:
    return f"==> node {log.node}, attempt {log.attempt}: pod {log.pod}, container {log.container} <==\n"


def _tail_lines(data: bytes, lines: int) -> bytes:
    if lines <= 0:
        return b""
    return b"".join(data.splitlines(keepends=True)[-lines:])


def _cut_note(log: ContainerLog) -> str:
    return (
        f"[the first {log.start} bytes of this log were not kept: the replica keeps the last "
        f"{len(log.data)} (taskplug executor --keep-log-bytes)]\n"
    )


async def follow_logs(
    read: Callable[[], Awaitable[list[ContainerLog]]],
    terminal: Callable[[], Awaitable[bool]],
    *,
    headers: bool,
    tail: int | None,
    follow: bool,
    poll: float,
    first: Sequence[ContainerLog],
    attempt: int | None,
    grace: float = KEEP_GRACE,
) -> AsyncIterator[str]:
    """The text of ``first`` (a read already made), then, with ``follow``, what is appended to those logs
    and the logs that appear, read again (``await read()``) every ``poll`` seconds until the attempt's pods
    have all ended (``attempt`` given) or the execution ended (``await terminal()``) and every log found has
    ended — or ``grace`` seconds after the execution's end, for a log not found yet (a replica keeps an ended
    pod's log at its next reaper pass: without a cluster to read, that is when it shows)."""
    shown: dict[tuple[str, int, str, str], int] = {}
    logs: Sequence[ContainerLog] = first
    ended_at: float | None = None

    def settled(found: Sequence[ContainerLog]) -> bool:
        return bool(found) and all(item.ended for item in found)

    done = attempt is not None and settled(first)
    while True:
        for item in logs:
            at = shown.get(item.ident)
            if at is None:
                text = ""
                if headers:
                    text += _header(item)
                data = item.data
                if item.start:
                    text += _cut_note(item)
                if tail is not None:
                    data = _tail_lines(data, tail)
                shown[item.ident] = item.size
                if text or data:
                    yield text + data.decode("utf-8", "replace")
                continue
            if item.size <= at:
                continue
            if at < item.start:
                yield f"[{item.start - at} bytes not kept]\n" + item.data.decode("utf-8", "replace")
            else:
                yield item.data[at - item.start :].decode("utf-8", "replace")
            shown[item.ident] = item.size
        if not follow or done:
            return
        await asyncio.sleep(poll)
        ended = await terminal()
        logs = await read()  # after the end too: whatever was printed between the last read and the end
        now = time.monotonic()
        if ended and ended_at is None:
            ended_at = now
        done = (attempt is not None and settled(logs)) or (
            ended_at is not None and (settled(logs) or now - ended_at > grace)
        )
