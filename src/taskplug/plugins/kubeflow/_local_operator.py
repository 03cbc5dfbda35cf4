"""A training operator for the embedded local cluster: PyTorchJobs, TFJobs and MPIJobs really run.

The real one is kubeflow's training-operator (v1.8.0); the rules it follows are ``_reconcile`` (pure). This
module is the thin I/O around them, built only on ``taskplug.k8s``: for each job it reads the job, its pods
and its services, makes the missing services (each with a free port on 127.0.0.1, see ``_reconcile``'s
deviations), runs one reconcile, and applies the plan: create and delete pods and services, write the
status, delete a job whose TTL ran out. The embedded cluster's kubelet then runs the replica pods as local
processes, with the environment the operator gave them (``MASTER_ADDR``, ``WORLD_SIZE``, ``RANK``,
``PET_*``, ``TF_CONFIG``, the MPI hostfile).

The embedded cluster calls an operator for the events of one resource type (``LocalCluster.register_operator``,
which ``taskplug run`` does with the entry's ``local_operator`` for the watched type only), so a job's pods
are followed by the operator itself: the first job event starts a runner task that watches the pods of its
kind (label ``training.kubeflow.org/operator-name``) and reconciles the job a pod belongs to whenever one
changes, and that sleeps (on the injected clock) until a job's active deadline or TTL. The runner lives as
long as the task that calls the operator (the cluster's operator task): it is cancelled when that task
ends, or by :meth:`TrainingOperator.aclose`. Deleting a job deletes its pods, services and ConfigMap.

Register one per kind: ``cluster.register_operator(PYTORCH_JOB, PyTorchJobOperator())``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Mapping
from typing import Any

from taskplug.core import Clock, SystemClock
from taskplug.k8s import (
    POD,
    KubeApiError,
    KubeClient,
    ResourceType,
    WatchEvent,
    is_already_exists,
    is_not_found,
)
from taskplug.plugins.kubeflow._kinds import (
    JOB_NAME_LABEL,
    MPI,
    OPERATOR_NAME_LABEL,
    PYTORCH,
    TENSORFLOW,
    JobKind,
)
from taskplug.plugins.kubeflow._reconcile import (
    LOOPBACK,
    Plan,
    config_map_object,
    is_finished,
    owned_by,
    reconcile_job,
    service_object,
    services_wanted,
)

__all__ = [
    "CONFIG_MAP",
    "SERVICE",
    "MPIJobOperator",
    "PyTorchJobOperator",
    "TFJobOperator",
    "TrainingOperator",
]

_log = logging.getLogger(__name__)

SERVICE = ResourceType("v1", "Service", "services")
CONFIG_MAP = ResourceType("v1", "ConfigMap", "configmaps")

KubeObject = dict[str, Any]
_Key = tuple[str, str]


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


class TrainingOperator:
    """The training operator for one job kind (an :class:`taskplug.k8s.Operator`)."""

    def __init__(self, kind: JobKind, *, clock: Clock | None = None) -> None:
        self.kind = kind
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._lock = asyncio.Lock()
        self._dirty: dict[_Key, None] = {}
        self._wakeup = asyncio.Event()
        self._timers: dict[_Key, asyncio.Task[None]] = {}
        self._group: asyncio.TaskGroup | None = None
        self._runner: asyncio.Task[None] | None = None
        self._ports: set[int] = set()

    # -- the Operator protocol ----------------------------------------------------------------------------
    async def __call__(self, event: WatchEvent, client: KubeClient) -> None:
        meta = _meta(event.object)
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        if event.type == "DELETED":
            await self._delete_children(client, namespace, name, str(meta.get("uid") or ""))
            return
        if event.type not in ("ADDED", "MODIFIED"):
            return
        self._start(client)
        await self.reconcile(client, namespace, name)

    async def aclose(self) -> None:
        """Stop following pods and deadlines (the cluster's operator task ending does the same)."""
        runner, self._runner = self._runner, None
        if runner is not None:
            runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await runner

    # -- the runner ---------------------------------------------------------------------------------------
    def _start(self, client: KubeClient) -> None:
        if self._runner is not None and not self._runner.done():
            return
        self._runner = asyncio.create_task(self._run(client), name=f"{self.kind.controller_name}")
        caller = asyncio.current_task()
        if caller is not None:
            runner = self._runner
            # Owned by the task that calls the operator: when it ends, so does the runner.
            caller.add_done_callback(lambda _task: runner.cancel())

    async def _run(self, client: KubeClient) -> None:
        try:
            async with asyncio.TaskGroup() as group:
                self._group = group
                group.create_task(self._follow_pods(client))
                group.create_task(self._work(client))
        finally:
            self._group = None
            self._timers.clear()

    def _mark(self, key: _Key) -> None:
        self._dirty[key] = None
        self._wakeup.set()

    async def _follow_pods(self, client: KubeClient) -> None:
        selector = f"{OPERATOR_NAME_LABEL}={self.kind.controller_name}"
        while True:
            try:
                pods, version = await client.list(POD, None, label_selector=selector)
                for pod in pods:
                    self._mark_pod(pod)
                async for event in client.watch(POD, None, resource_version=version, label_selector=selector):
                    self._mark_pod(event.object)
            except KubeApiError as e:
                # An expired version or a refused call: list again after a pause.
                _log.warning("%s: watching pods: %s", self.kind.controller_name, e)
                await self._clock.sleep(1.0)
                continue
            # The stream ended (the server closed it): list again and go on watching.
            await asyncio.sleep(0)

    def _mark_pod(self, pod: Mapping[str, Any]) -> None:
        meta = _meta(pod)
        job = (meta.get("labels") or {}).get(JOB_NAME_LABEL)
        if job:
            self._mark((str(meta.get("namespace") or ""), str(job)))

    async def _work(self, client: KubeClient) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            while self._dirty:
                key = next(iter(self._dirty))
                del self._dirty[key]
                await self.reconcile(client, *key)

    def _wake_later(self, key: _Key, delay: float) -> None:
        group = self._group
        if group is None:
            return
        previous = self._timers.pop(key, None)
        if previous is not None:
            previous.cancel()

        async def wake() -> None:
            await self._clock.sleep(delay)
            self._timers.pop(key, None)
            self._mark(key)

        self._timers[key] = group.create_task(wake())

    # -- one reconcile --------------------------------------------------------------------------------------
    async def reconcile(self, client: KubeClient, namespace: str, name: str) -> Plan | None:
        """Reconcile one job now; the plan applied, or None when there is no such job. Errors from the API
        are logged, not raised: the next event tries again."""
        async with self._lock:
            try:
                return await self._reconcile(client, namespace, name)
            except KubeApiError as e:
                _log.warning("%s: reconciling %s/%s: %s", self.kind.controller_name, namespace, name, e)
            except Exception:
                _log.exception("%s: reconciling %s/%s failed", self.kind.controller_name, namespace, name)
            return None

    async def _reconcile(self, client: KubeClient, namespace: str, name: str) -> Plan | None:
        kind = self.kind
        try:
            job = await client.get(kind.resource, namespace, name)
        except KubeApiError as e:
            if is_not_found(e):
                return None
            raise
        uid = str(_meta(job).get("uid") or "")
        selector = f"{JOB_NAME_LABEL}={name},{OPERATOR_NAME_LABEL}={kind.controller_name}"
        services, _ = await client.list(SERVICE, namespace, label_selector=selector)
        ports: dict[str, int] = {}
        for service in services:
            if owned_by(service, uid):
                service_ports = (service.get("spec") or {}).get("ports") or []
                if service_ports:
                    ports[str(_meta(service).get("name"))] = int(service_ports[0].get("port") or 0)
        for wanted in services_wanted(kind, job):
            if wanted.name not in ports:
                port = self._free_port()
                await self._create(client, SERVICE, service_object(kind, job, wanted, port))
                ports[wanted.name] = port
        if kind is MPI and not is_finished(job.get("status") or {}):
            await self._create(client, CONFIG_MAP, config_map_object(job))
        pods, _ = await client.list(POD, namespace, label_selector=selector)
        pods = [p for p in pods if owned_by(p, uid)]
        plan = reconcile_job(kind, job, pods, ports, self._clock.now())
        await self._apply(client, namespace, name, plan)
        return plan

    async def _apply(self, client: KubeClient, namespace: str, name: str, plan: Plan) -> None:
        for pod_name in plan.delete_pods:
            await self._delete(client, POD, namespace, pod_name)
        for service_name in plan.delete_services:
            await self._delete(client, SERVICE, namespace, service_name)
        for pod in plan.create_pods:
            await self._create(client, POD, pod)
        if plan.status is not None:
            try:
                await client.patch(
                    self.kind.resource,
                    namespace,
                    name,
                    [{"op": "add", "path": "/status", "value": plan.status}],  # type: ignore[arg-type]
                    patch_type="json",
                )
            except KubeApiError as e:
                if not is_not_found(e):
                    raise
        if plan.delete_job:
            await self._delete(client, self.kind.resource, namespace, name)
        elif plan.wake_after is not None:
            self._wake_later((namespace, name), plan.wake_after)

    async def _delete_children(self, client: KubeClient, namespace: str, name: str, uid: str) -> None:
        """A deleted job's pods, services and ConfigMap go with it (the garbage collector's work)."""
        timer = self._timers.pop((namespace, name), None)
        if timer is not None:
            timer.cancel()
        selector = f"{JOB_NAME_LABEL}={name},{OPERATOR_NAME_LABEL}={self.kind.controller_name}"
        for rtype in (POD, SERVICE):
            items, _ = await client.list(rtype, namespace, label_selector=selector)
            for item in items:
                if owned_by(item, uid):
                    await self._delete(client, rtype, namespace, str(_meta(item).get("name")))
        if self.kind is MPI:
            try:
                config = await client.get(CONFIG_MAP, namespace, f"{name}-config")
            except KubeApiError as e:
                if is_not_found(e):
                    return
                raise
            if owned_by(config, uid):
                await self._delete(client, CONFIG_MAP, namespace, f"{name}-config")

    # -- API helpers ----------------------------------------------------------------------------------------
    @staticmethod
    async def _create(client: KubeClient, rtype: ResourceType, obj: KubeObject) -> None:
        try:
            await client.create(rtype, obj)
        except KubeApiError as e:
            if not is_already_exists(e):
                raise

    @staticmethod
    async def _delete(client: KubeClient, rtype: ResourceType, namespace: str, name: str) -> None:
        try:
            await client.delete(rtype, namespace, name)
        except KubeApiError as e:
            if not is_not_found(e):
                raise

    def _free_port(self) -> int:
        """A port on 127.0.0.1 nothing listens on now and this operator has not handed out before."""
        while True:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
                probe.bind((LOOPBACK, 0))
                port = int(probe.getsockname()[1])
            if port not in self._ports:
                self._ports.add(port)
                return port


class PyTorchJobOperator(TrainingOperator):
    """The training operator for PyTorchJobs."""

    def __init__(self, *, clock: Clock | None = None) -> None:
        super().__init__(PYTORCH, clock=clock)


class TFJobOperator(TrainingOperator):
    """The training operator for TFJobs."""

    def __init__(self, *, clock: Clock | None = None) -> None:
        super().__init__(TENSORFLOW, clock=clock)


class MPIJobOperator(TrainingOperator):
    """The training operator for MPIJobs."""

    def __init__(self, *, clock: Clock | None = None) -> None:
        super().__init__(MPI, clock=clock)
