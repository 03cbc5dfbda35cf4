"""The dask operator for the embedded local cluster: it really runs the Dask cluster and the job.

Follows the dask-kubernetes operator at commit abd02cd17b26 (``dask_kubernetes/operator/controller/
controller.py``), with the names, labels and environment it gives things:

* a new DaskJob gets ``status.jobStatus: JobCreated``;
* on ``JobCreated`` it creates the DaskCluster named exactly like the job (labels and annotations from
  the job and ``spec.cluster.metadata``, plus ``dask.org/cluster-name``), then the cluster's parts: the
  scheduler Service ``{cluster}-scheduler`` (Flyte's service spec), the scheduler pod, one pod per worker
  named after its worker Deployment ``{cluster}-default-worker-{uuid}`` (env ``DASK_WORKER_NAME``,
  ``DASK_SCHEDULER_ADDRESS``), and the job runner pod ``{job}-runner`` (labels
  ``dask.org/cluster-name``, ``dask.org/component: job-runner``, ``sidecar.istio.io/inject: "false"``; every
  container gets ``DASK_SCHEDULER_ADDRESS``); then ``status: {clusterName, jobStatus: ClusterCreated,
  jobRunnerPodName}``;
* the runner pod's phase drives the job: ``Running`` → ``jobStatus: Running`` + ``startTime``;
  ``Succeeded`` / ``Failed`` → the DaskCluster is deleted (scheduler and workers stop), then
  ``jobStatus: Successful`` / ``Failed`` + ``endTime``.

Every pod is owned (ownerReferences) by the DaskCluster or the DaskJob; deleting the job deletes them all
(the operator stands in for the garbage collector, which the local cluster does not have).

The embedded cluster's kubelet runs containers as local processes, so the Dask processes are real: the
scheduler runs ``dask scheduler``, each worker ``dask worker``, and the runner the task's own command,
whose ``distributed.Client(os.environ["DASK_SCHEDULER_ADDRESS"])`` computes on those workers.

Deviation: loopback where a real cluster has DNS. The scheduler listens on 127.0.0.1 on a port chosen when
the cluster is created, ``DASK_SCHEDULER_ADDRESS`` is ``tcp://127.0.0.1:{port}`` instead of
``tcp://{cluster}-scheduler.{namespace}.svc.cluster.local:8786``, and the Service carries ``clusterIP:
127.0.0.1`` with that port in place of 8786 (the dashboard likewise); the scheduler and worker commands get
``--host 127.0.0.1`` and their ports appended. Nothing listens beyond 127.0.0.1.

Deviation: the operator creates the scheduler and worker pods itself, named as a Deployment names its pods
(``{deployment}-`` and a random suffix); no Deployment or DaskWorkerGroup objects are made (nothing in the
embedded cluster would run them).

Deviation: the ``dask-scheduler`` / ``dask-worker`` console scripts Flyte writes (removed from current
``distributed``) run as ``dask scheduler`` / ``dask worker`` with the same arguments.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from taskplug.core import Clock
from taskplug.k8s import (
    POD,
    KubeClient,
    ObjectKey,
    ReconcilingOperator,
    Requeue,
    create_or_get,
    deep_copy,
    delete_if_present,
    loopback_port,
    owned_by,
    owner_reference,
)
from taskplug.plugins.dask._states import (
    CLUSTER_CREATED,
    DASK_CLUSTER,
    DASK_JOB,
    FAILED,
    JOB_CREATED,
    RUNNING,
    SERVICE,
    SUCCESSFUL,
)

__all__ = ["DaskLocalOperator", "runner_pod_name"]

CLUSTER_LABEL = "dask.org/cluster-name"
COMPONENT_LABEL = "dask.org/component"
WORKERGROUP_LABEL = "dask.org/workergroup-name"
ISTIO_LABEL = "sidecar.istio.io/inject"
_IGNORED_ANNOTATION_PREFIXES = ("kopf.zalando.org", "kubectl.kubernetes.io")

KubeObject = dict[str, Any]


def runner_pod_name(job_name: str) -> str:
    return f"{job_name}-runner"


def _rfc3339(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _annotations(meta: Mapping[str, Any]) -> dict[str, str]:
    return {
        k: v
        for k, v in (meta.get("annotations") or {}).items()
        if not k.startswith(_IGNORED_ANNOTATION_PREFIXES)
    }


def _labels(meta: Mapping[str, Any]) -> dict[str, str]:
    return dict(meta.get("labels") or {})


def _merged_meta(
    job_meta: Mapping[str, Any], part: Mapping[str, Any]
) -> tuple[dict[str, str], dict[str, str]]:
    """The job's labels and annotations with a part's ``metadata`` merged over them (the operator's rule)."""
    labels, annotations = _labels(job_meta), _annotations(job_meta)
    part_meta = part.get("metadata") or {}
    annotations.update(part_meta.get("annotations") or {})
    labels.update(part_meta.get("labels") or {})
    return labels, annotations


def _with_env(spec: KubeObject, env: list[dict[str, str]]) -> KubeObject:
    for container in spec.get("containers") or []:
        container["env"] = [*(container.get("env") or []), *deep_copy(env)]
    return spec


def _dask_command(container: KubeObject, legacy: str, subcommand: str, extra: list[str]) -> None:
    """Run a ``dask-scheduler`` / ``dask-worker`` container as ``dask <subcommand>`` bound to loopback."""
    argv = [*(container.get("command") or []), *(container.get("args") or [])]
    if argv[:1] == [legacy]:
        argv = ["dask", subcommand, *argv[1:]]
    if argv[:2] != ["dask", subcommand]:
        return  # a command of the user's own: run as given
    container["command"] = [*argv, *extra]
    container.pop("args", None)


class DaskLocalOperator(ReconcilingOperator):
    """Runs DaskJobs on the embedded cluster (see the module docstring)."""

    def __init__(self, clock: Clock | None = None) -> None:
        super().__init__(DASK_JOB, clock=clock)

    def owner_of_pod(self, pod: Mapping[str, Any]) -> ObjectKey | None:
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        # Only the runner's phase moves the job; the cluster name is the job's name.
        if labels.get(COMPONENT_LABEL) != "job-runner" or not labels.get(CLUSTER_LABEL):
            return None
        return str(meta.get("namespace") or ""), str(labels[CLUSTER_LABEL])

    async def reconcile(self, client: KubeClient, obj: KubeObject) -> Requeue | None:
        meta = obj.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            return None
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        status = obj.get("status") or {}
        job_status = str(status.get("jobStatus") or "")
        if job_status == "":
            await self._patch_status(client, namespace, name, {"jobStatus": JOB_CREATED})
        elif job_status == JOB_CREATED:
            await self._create_components(client, obj)
            await self._patch_status(
                client,
                namespace,
                name,
                {
                    "clusterName": name,
                    "jobStatus": CLUSTER_CREATED,
                    "jobRunnerPodName": runner_pod_name(name),
                },
            )
        elif job_status in (CLUSTER_CREATED, RUNNING):
            await self._follow_runner(client, obj, job_status)
        return None

    async def cleanup(self, client: KubeClient, namespace: str, name: str, uid: str) -> None:
        try:
            cluster = await client.get(DASK_CLUSTER, namespace, name)
        except Exception:
            cluster = None
        if cluster is not None and owned_by(cluster, uid):
            await self._delete_cluster(client, namespace, name)
        runner = await self._get_pod(client, namespace, runner_pod_name(name))
        if runner is not None and owned_by(runner, uid):
            await delete_if_present(client, POD, namespace, runner_pod_name(name))

    # -- steps ------------------------------------------------------------------------------------
    async def _patch_status(self, client: KubeClient, namespace: str, name: str, status: KubeObject) -> None:
        await client.patch(DASK_JOB, namespace, name, {"status": status})

    async def _get_pod(self, client: KubeClient, namespace: str, name: str) -> KubeObject | None:
        try:
            return await client.get(POD, namespace, name)
        except Exception:
            return None

    async def _follow_runner(self, client: KubeClient, job: KubeObject, job_status: str) -> None:
        meta = job["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        runner = await self._get_pod(client, namespace, runner_pod_name(name))
        if runner is None:
            return
        phase = str((runner.get("status") or {}).get("phase") or "")
        now = _rfc3339(self.clock.now())
        if phase == "Running" and job_status == CLUSTER_CREATED:
            await self._patch_status(client, namespace, name, {"jobStatus": RUNNING, "startTime": now})
        elif phase in ("Succeeded", "Failed"):
            await self._delete_cluster(client, namespace, name)
            outcome = SUCCESSFUL if phase == "Succeeded" else FAILED
            await self._patch_status(client, namespace, name, {"jobStatus": outcome, "endTime": now})

    async def _delete_cluster(self, client: KubeClient, namespace: str, cluster: str) -> None:
        """Delete the DaskCluster and what hangs off it (scheduler, workers, service)."""
        selector = f"{CLUSTER_LABEL}={cluster}"
        pods, _ = await client.list(POD, namespace, label_selector=selector)
        for pod in pods:
            labels = (pod.get("metadata") or {}).get("labels") or {}
            if labels.get(COMPONENT_LABEL) in ("scheduler", "worker"):
                await delete_if_present(client, POD, namespace, pod["metadata"]["name"])
        services, _ = await client.list(SERVICE, namespace, label_selector=selector)
        for service in services:
            await delete_if_present(client, SERVICE, namespace, service["metadata"]["name"])
        await delete_if_present(client, DASK_CLUSTER, namespace, cluster)

    async def _create_components(self, client: KubeClient, job: KubeObject) -> None:
        meta = job["metadata"]
        namespace, name = str(meta["namespace"]), str(meta["name"])
        spec = job.get("spec") or {}
        cluster_part = spec.get("cluster") or {}
        cluster_spec = cluster_part.get("spec") or {}
        labels, annotations = _merged_meta(meta, cluster_part)
        labels[CLUSTER_LABEL] = name
        cluster = await create_or_get(
            client,
            DASK_CLUSTER,
            {
                "apiVersion": DASK_CLUSTER.api_version,
                "kind": DASK_CLUSTER.kind,
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "labels": labels,
                    "annotations": annotations,
                    "ownerReferences": [owner_reference(job)],
                },
                "spec": {
                    "worker": deep_copy(cluster_spec.get("worker") or {}),
                    "scheduler": deep_copy(cluster_spec.get("scheduler") or {}),
                },
            },
        )
        await client.patch(DASK_CLUSTER, namespace, name, {"status": {"phase": "Created"}})
        address = await self._create_scheduler(client, cluster)
        await self._create_workers(client, cluster, address)
        await client.patch(DASK_CLUSTER, namespace, name, {"status": {"phase": "Running"}})
        await self._create_runner(client, job, name, address)

    async def _create_scheduler(self, client: KubeClient, cluster: KubeObject) -> str:
        """The scheduler Service and pod; returns the scheduler's address."""
        meta = cluster["metadata"]
        namespace, name = str(meta["namespace"]), str(meta["name"])
        scheduler = (cluster.get("spec") or {}).get("scheduler") or {}
        labels, annotations = _merged_meta(meta, scheduler)
        labels.update({CLUSTER_LABEL: name, COMPONENT_LABEL: "scheduler"})
        service_name = f"{name}-scheduler"
        # The ports live in the Service, so a later reconcile (or a restarted operator) finds them there.
        try:
            service = await client.get(SERVICE, namespace, service_name)
        except Exception:
            service = None
        if service is None:
            ports = {"tcp-comm": loopback_port(), "dashboard": loopback_port()}
            service_spec = deep_copy(scheduler.get("service") or {})
            service_spec["clusterIP"] = "127.0.0.1"
            for port in service_spec.get("ports") or []:
                if port.get("name") in ports:
                    port["port"] = ports[port["name"]]
            service = await create_or_get(
                client,
                SERVICE,
                {
                    "apiVersion": "v1",
                    "kind": "Service",
                    "metadata": {
                        "name": service_name,
                        "namespace": namespace,
                        "labels": dict(labels),
                        "annotations": dict(annotations),
                        "ownerReferences": [owner_reference(cluster)],
                    },
                    "spec": service_spec,
                },
            )
        ports = {p.get("name"): int(p.get("port") or 0) for p in service["spec"].get("ports") or []}
        comm, dashboard = ports.get("tcp-comm") or loopback_port(), ports.get("dashboard") or loopback_port()
        existing, _ = await client.list(
            POD, namespace, label_selector=f"{CLUSTER_LABEL}={name},{COMPONENT_LABEL}=scheduler"
        )
        if not existing:
            pod_spec = deep_copy(scheduler.get("spec") or {})
            for container in pod_spec.get("containers") or []:
                _dask_command(
                    container,
                    "dask-scheduler",
                    "scheduler",
                    [
                        "--host",
                        "127.0.0.1",
                        "--port",
                        str(comm),
                        "--dashboard-address",
                        f"127.0.0.1:{dashboard}",
                    ],
                )
            pod_labels = {**labels, ISTIO_LABEL: "false"}
            await client.create(
                POD,
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "generateName": f"{name}-scheduler-",
                        "namespace": namespace,
                        "labels": pod_labels,
                        "annotations": dict(annotations),
                        "ownerReferences": [owner_reference(cluster)],
                    },
                    "spec": pod_spec,
                },
            )
        return f"tcp://127.0.0.1:{comm}"

    async def _create_workers(self, client: KubeClient, cluster: KubeObject, address: str) -> None:
        meta = cluster["metadata"]
        namespace, name = str(meta["namespace"]), str(meta["name"])
        worker = (cluster.get("spec") or {}).get("worker") or {}
        group = f"{name}-default"
        labels, annotations = _merged_meta(meta, worker)
        labels.update(
            {CLUSTER_LABEL: name, WORKERGROUP_LABEL: group, COMPONENT_LABEL: "worker", ISTIO_LABEL: "false"}
        )
        existing, _ = await client.list(
            POD, namespace, label_selector=f"{CLUSTER_LABEL}={name},{COMPONENT_LABEL}=worker"
        )
        for _ in range(len(existing), int(worker.get("replicas") or 0)):
            worker_name = f"{group}-worker-{uuid.uuid4().hex[:10]}"
            pod_spec = _with_env(
                deep_copy(worker.get("spec") or {}),
                [
                    {"name": "DASK_WORKER_NAME", "value": worker_name},
                    {"name": "DASK_SCHEDULER_ADDRESS", "value": address},
                ],
            )
            for container in pod_spec.get("containers") or []:
                # The worker's HTTP server (metrics, even with --no-dashboard) binds 0.0.0.0 unless told not to.
                _dask_command(
                    container,
                    "dask-worker",
                    "worker",
                    ["--host", "127.0.0.1", "--dashboard-address", "127.0.0.1:0"],
                )
            await client.create(
                POD,
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "generateName": f"{worker_name}-",
                        "namespace": namespace,
                        "labels": dict(labels),
                        "annotations": dict(annotations),
                        "ownerReferences": [owner_reference(cluster)],
                    },
                    "spec": pod_spec,
                },
            )

    async def _create_runner(self, client: KubeClient, job: KubeObject, cluster: str, address: str) -> None:
        meta = job["metadata"]
        namespace, name = str(meta["namespace"]), str(meta["name"])
        job_part = (job.get("spec") or {}).get("job") or {}
        labels, annotations = _merged_meta(meta, job_part)
        labels.update({CLUSTER_LABEL: cluster, COMPONENT_LABEL: "job-runner", ISTIO_LABEL: "false"})
        spec = _with_env(
            deep_copy(job_part.get("spec") or {}), [{"name": "DASK_SCHEDULER_ADDRESS", "value": address}]
        )
        await create_or_get(
            client,
            POD,
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": runner_pod_name(name),
                    "namespace": namespace,
                    "labels": labels,
                    "annotations": annotations,
                    "ownerReferences": [owner_reference(job)],
                },
                "spec": spec,
            },
        )
