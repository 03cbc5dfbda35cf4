"""KubeRay for the embedded local cluster: it really runs the Ray cluster's pods and the job's entrypoint.

Follows KubeRay v1.5.1's RayJob and RayCluster controllers (``ray-operator/controllers/ray/
{rayjob_controller.go, raycluster_controller.go, common/pod.go, common/job.go}``), with
the names, labels and environment KubeRay gives things:

* validation first: an invalid RayJob (name longer than 47 characters or not a DNS-1035 label, a negative
  TTL, a TTL without ``shutdownAfterJobFinishes``, no cluster spec) gets ``jobDeploymentStatus`` and
  ``reason: ValidationFailed`` with KubeRay's message, and is never touched again;
* ``""`` (New): the finalizer ``ray.io/rayjob-finalizer``; ``jobId`` and ``rayClusterName``
  (``{name}-{5 random}``), ``startTime``, ``jobDeploymentStatus: Initializing``;
* Initializing: the RayCluster ``{rayClusterName}`` (the RayJob's labels plus
  ``ray.io/originated-from-crd: RayJob``, ``ray.io/originated-from-cr-name``), its head Service
  ``{cluster}-head-svc``, the head pod ``{cluster}-head-{random}`` and ``replicas`` pods per worker group
  ``{cluster}-{group}-worker-{random}`` (labels ``ray.io/cluster``, ``ray.io/node-type``, ``ray.io/group``,
  ``ray.io/identifier``, ``ray.io/is-ray-node``, ``app.kubernetes.io/{name,created-by}``; env
  ``RAY_ADDRESS``, ``RAY_PORT``, ``RAY_CLUSTER_NAME``, ``KUBERAY_GEN_RAY_START_CMD``, …); while the cluster is
  not ``ready`` its status is copied into ``status.rayClusterStatus``; once ready: ``dashboardURL``, the
  submitter Kubernetes Job named like the RayJob (``backoffLimit: 2``) from ``submitterPodTemplate``, whose
  pod ``{job}-{random}`` gets ``PYTHONUNBUFFERED``, ``RAY_DASHBOARD_ADDRESS``, ``RAY_JOB_SUBMISSION_ID``;
  then ``jobDeploymentStatus: Running``;
* Running: the RayJob's own head Service ``{job}-head-svc``; ``jobStatus`` follows the entrypoint: PENDING
  until it starts, RUNNING, then SUCCEEDED → ``Complete``, or FAILED → ``Failed`` with ``reason: AppFailed``
  and Ray's message (``Job entrypoint command failed with exit code N, …``); a submitter pod that fails
  without running the entrypoint (evicted, its node shut down) → ``Failed``, ``reason: SubmissionFailed``,
  ``Job submission has failed. Reason: … Message: …``; ``endTime``, ``rayJobInfo``, ``succeeded`` /
  ``failed`` as KubeRay counts them;
* Complete / Failed with ``shutdownAfterJobFinishes``: ``ttlSecondsAfterFinished`` after ``endTime`` the
  RayCluster (head, workers, its Service) is deleted; the submitter Job and the RayJob remain;
* a RayJob being deleted gets its entrypoint stopped and its finalizer removed; once it is gone, everything
  it owns is deleted (the operator stands in for the garbage collector the local cluster lacks).

Every object has an ownerReference to its owner (RayJob → RayCluster, Job, Service; RayCluster → pods,
Service; Job → submitter pod).

The embedded cluster's kubelet runs containers as local processes. Ray itself is not installed, so the head
and worker pods run small stand-ins (``_standin.py``: the head listens on the GCS and dashboard ports, a
worker connects to the head and stays), and KubeRay's ``ray start`` command is only recorded in
``KUBERAY_GEN_RAY_START_CMD``. The submitter runs the job's entrypoint itself, once the head accepts
connections, and its exit code is the Ray job's outcome.

Deviation: loopback where a real cluster has DNS. The head listens on 127.0.0.1 on ports chosen when the
cluster is created; ``RAY_ADDRESS`` is ``127.0.0.1:{gcs port}`` (head, workers and the entrypoint),
``dashboardURL`` / ``RAY_DASHBOARD_ADDRESS`` ``127.0.0.1:{dashboard port}`` instead of
``{cluster}-head-svc.{namespace}.svc.cluster.local:8265``, and the head Services carry ``clusterIP:
127.0.0.1`` with those ports. Nothing listens beyond 127.0.0.1.

Deviation: the head and worker containers run the stand-ins of ``_standin.py`` instead of ``ray start``
(Ray is not installed); KubeRay's command is kept in ``KUBERAY_GEN_RAY_START_CMD``. Readiness is a TCP
connection to the head (the embedded kubelet runs no probes).

Deviation: the submitter container, when it has no command of its own, runs ``/bin/bash -ce --
{entrypoint}`` instead of ``ray job submit … -- {entrypoint}``, with ``RAY_ADDRESS`` (what Ray's job
supervisor gives an entrypoint) and the runtime env's ``env_vars``; the runtime env's other keys (``pip``,
``working_dir``) are not applied. A submitter container with a command of its own runs as given, and its
exit code counts as the Ray job's (KubeRay would find no Ray job and fail the RayJob).

Deviation: the operator plays the Job controller for the submitter with one pod and no retries (the
entrypoint runs at most once, as KubeRay's duplicate-submission check ensures); autoscaling and suspension
are not simulated.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import random
import re
from collections.abc import Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Final

import yaml

from taskplug.core import Clock, Quantity, QuantityError
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
    parse_k8s_time,
)
from taskplug.plugins.ray._states import (
    COMPLETE,
    FAILED,
    INITIALIZING,
    JOB,
    JOB_FAILED,
    JOB_PENDING,
    JOB_RUNNING,
    JOB_SUCCEEDED,
    NEW,
    RAY_CLUSTER,
    RAY_JOB,
    RUNNING,
    SERVICE,
    VALIDATION_FAILED,
)

__all__ = ["FINALIZER", "RayLocalOperator", "validate_ray_job"]

FINALIZER: Final = "ray.io/rayjob-finalizer"
MAX_RAY_JOB_NAME_LENGTH: Final = 47
SUBMITTER_BACKOFF_LIMIT: Final = 2

CLUSTER_LABEL = "ray.io/cluster"
NODE_TYPE_LABEL = "ray.io/node-type"
GROUP_LABEL = "ray.io/group"
IDENTIFIER_LABEL = "ray.io/identifier"
IS_RAY_NODE_LABEL = "ray.io/is-ray-node"
ORIGIN_NAME_LABEL = "ray.io/originated-from-cr-name"
ORIGIN_CRD_LABEL = "ray.io/originated-from-crd"
APP_NAME_LABEL = "app.kubernetes.io/name"
CREATED_BY_LABEL = "app.kubernetes.io/created-by"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
HEAD_GROUP = "headgroup"
COMPONENT = "kuberay-operator"

PENDING_MESSAGE = (
    "Job has not started yet. It may be waiting for resources (CPUs, GPUs, memory, custom resources) to become "
    "available. It may be waiting for the runtime environment to be set up."
)
RUNNING_MESSAGE = "Job is currently running."
SUCCEEDED_MESSAGE = "Job finished successfully."

_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery/pkg/util/rand
_DNS1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_DNS1035_MESSAGE = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
    "character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for "
    "validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)
_PROBE_INTERVAL = 0.1

KubeObject = dict[str, Any]


@functools.cache
def _standin_source() -> str:
    # Read when a pod is first built, not when plugins are discovered.
    return Path(__file__).with_name("_standin.py").read_text(encoding="utf-8")


def _random_suffix() -> str:
    return "".join(random.choice(_NAME_ALPHABET) for _ in range(5))


def _rfc3339(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def validate_ray_job(job: Mapping[str, Any]) -> str:
    """KubeRay's validation of a RayJob (the checks a Flyte-built RayJob can fail); "" when it is valid."""
    name = str((job.get("metadata") or {}).get("name") or "")
    spec = job.get("spec") or {}
    if len(name) > MAX_RAY_JOB_NAME_LENGTH:
        return (
            "The RayJob metadata is invalid: RayJob name should be no more than "
            f"{MAX_RAY_JOB_NAME_LENGTH} characters"
        )
    if len(name) > 63 or not _DNS1035.fullmatch(name):
        return f"The RayJob metadata is invalid: RayJob name should be a valid DNS1035 label: [{_DNS1035_MESSAGE}]"
    shutdown = bool(spec.get("shutdownAfterJobFinishes"))
    ttl = int(spec.get("ttlSecondsAfterFinished") or 0)
    if spec.get("suspend") and not shutdown:
        return (
            "The RayJob spec is invalid: a RayJob with shutdownAfterJobFinishes set to false is not allowed to "
            "be suspended"
        )
    if ttl < 0:
        return "The RayJob spec is invalid: TTLSecondsAfterFinished must be a non-negative integer"
    if not shutdown and ttl > 0:
        return (
            "The RayJob spec is invalid: a RayJob with shutdownAfterJobFinishes set to false cannot have "
            "TTLSecondsAfterFinished"
        )
    if not spec.get("rayClusterSpec"):
        return "The RayJob spec is invalid: one of RayClusterSpec or ClusterSelector must be set"
    return ""


def _ray_start_command(head: bool, params: Mapping[str, str], container: Mapping[str, Any]) -> str:
    """The ``ray start`` command KubeRay would run (generateRayStartCommand), for the record."""
    full = dict(params)
    limits = (container.get("resources") or {}).get("limits") or {}
    with contextlib.suppress(QuantityError):
        if "num-cpus" not in full and limits.get("cpu"):
            full["num-cpus"] = str(Quantity.from_json(limits["cpu"]).value())
        if "memory" not in full and limits.get("memory"):
            full["memory"] = str(Quantity.from_json(limits["memory"]).value())
    if head:
        full.setdefault("dashboard-host", "0.0.0.0")
    full.setdefault("metrics-export-port", "8080")
    full.setdefault("dashboard-agent-listen-port", "52365")
    full["block"] = "true"
    flags = " ".join(f"--{k}" if k == "block" else f"--{k}={v}" for k, v in sorted(full.items()))
    return f"ray start {'--head ' if head else ''}{flags}"


def _env(container: KubeObject, *variables: Mapping[str, Any], overwrite: bool = False) -> None:
    """Append env variables (``overwrite``: replace a variable of the same name; else keep the first)."""
    env = list(container.get("env") or [])
    names = {e.get("name") for e in env}
    for var in variables:
        if var["name"] in names:
            if overwrite:
                env = [e for e in env if e.get("name") != var["name"]]
            else:
                continue
        env.append(dict(var))
    container["env"] = env


def _node_labels(
    template_labels: Mapping[str, str], cluster: str, node_type: str, group: str
) -> dict[str, str]:
    labels = {
        IS_RAY_NODE_LABEL: "yes",
        CLUSTER_LABEL: cluster,
        NODE_TYPE_LABEL: node_type,
        GROUP_LABEL: group,
        IDENTIFIER_LABEL: f"{cluster}-{node_type}",
        APP_NAME_LABEL: "kuberay",
        CREATED_BY_LABEL: COMPONENT,
    }
    for key, value in template_labels.items():
        # KubeRay never lets a template override the cluster, node type or group.
        if key not in (NODE_TYPE_LABEL, GROUP_LABEL, CLUSTER_LABEL):
            labels[key] = value
    return labels


def _container_state(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return (statuses[0].get("state") or {}) if statuses else {}


def _runtime_env_vars(runtime_env_yaml: str) -> dict[str, str]:
    try:
        runtime_env = yaml.safe_load(runtime_env_yaml) if runtime_env_yaml else None
    except yaml.YAMLError:
        return {}
    env_vars = runtime_env.get("env_vars") if isinstance(runtime_env, dict) else None
    return {str(k): str(v) for k, v in env_vars.items()} if isinstance(env_vars, dict) else {}


class RayLocalOperator(ReconcilingOperator):
    """Runs RayJobs on the embedded cluster (see the module docstring)."""

    def __init__(self, clock: Clock | None = None) -> None:
        super().__init__(RAY_JOB, clock=clock)

    def owner_of_pod(self, pod: Mapping[str, Any]) -> ObjectKey | None:
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        namespace = str(meta.get("namespace") or "")
        if labels.get(CREATED_BY_LABEL) == COMPONENT and labels.get(CLUSTER_LABEL):
            # The cluster of a RayJob is named "{job}-{5 random}".
            job, _, suffix = str(labels[CLUSTER_LABEL]).rpartition("-")
            return (namespace, job) if job and len(suffix) == 5 else None
        if labels.get(JOB_NAME_LABEL):
            return namespace, str(labels[JOB_NAME_LABEL])
        return None

    # -- reconcile ----------------------------------------------------------------------------------
    async def reconcile(self, client: KubeClient, obj: KubeObject) -> Requeue | None:
        meta = obj["metadata"]
        if meta.get("deletionTimestamp"):
            await self._finalize(client, obj)
            return None
        status = obj.get("status") or {}
        deployment = str(status.get("jobDeploymentStatus") or "")
        if deployment == VALIDATION_FAILED:
            return None
        problem = validate_ray_job(obj)
        if problem:
            await self._patch_status(
                client,
                obj,
                {"jobDeploymentStatus": VALIDATION_FAILED, "reason": VALIDATION_FAILED, "message": problem},
            )
            return None
        if deployment == NEW:
            await self._new(client, obj)
            return None
        if deployment == INITIALIZING:
            return await self._initialize(client, obj)
        if deployment == RUNNING:
            await self._run_job(client, obj)
            return None
        if deployment in (COMPLETE, FAILED):
            return await self._shut_down_when_due(client, obj)
        return None

    async def cleanup(self, client: KubeClient, namespace: str, name: str, uid: str) -> None:
        clusters, _ = await client.list(RAY_CLUSTER, namespace, label_selector=f"{ORIGIN_NAME_LABEL}={name}")
        for cluster in clusters:
            if owned_by(cluster, uid):
                await self._delete_cluster(client, namespace, cluster["metadata"]["name"])
        try:
            submitter = await client.get(JOB, namespace, name)
        except Exception:
            submitter = None
        if submitter is not None and owned_by(submitter, uid):
            await self._delete_submitter(client, submitter)
        try:
            service = await client.get(SERVICE, namespace, f"{name}-head-svc")
        except Exception:
            service = None
        if service is not None and owned_by(service, uid):
            await delete_if_present(client, SERVICE, namespace, f"{name}-head-svc")

    # -- New ------------------------------------------------------------------------------------------
    async def _new(self, client: KubeClient, job: KubeObject) -> None:
        meta = job["metadata"]
        finalizers = list(meta.get("finalizers") or [])
        if FINALIZER not in finalizers:
            await self._set_finalizers(client, job, [*finalizers, FINALIZER])
        name = str(meta["name"])
        spec = job.get("spec") or {}
        await self._patch_status(
            client,
            job,
            {
                "jobId": spec.get("jobId") or f"{name}-{_random_suffix()}",
                "rayClusterName": f"{name}-{_random_suffix()}",
                "jobDeploymentStatus": INITIALIZING,
                "startTime": _rfc3339(self.clock.now()),
            },
        )

    # -- Initializing ---------------------------------------------------------------------------------
    async def _initialize(self, client: KubeClient, job: KubeObject) -> Requeue | None:
        cluster = await self._cluster(client, job)
        ports = await self._head_service(client, cluster)
        await self._create_nodes(client, cluster, ports)
        ready, cluster_status, head_running = await self._cluster_status(client, cluster, ports)
        meta = cluster["metadata"]
        await client.patch(RAY_CLUSTER, meta["namespace"], meta["name"], {"status": cluster_status})
        if not ready:
            await self._patch_status(client, job, {"rayClusterStatus": cluster_status})
            # The head's process may be up before it accepts connections: probe again shortly.
            return Requeue(_PROBE_INTERVAL, real_time=True) if head_running else None
        dashboard = f"127.0.0.1:{ports['dashboard']}"
        await self._create_submitter(client, job, ports)
        await self._patch_status(
            client,
            job,
            {"dashboardURL": dashboard, "jobDeploymentStatus": RUNNING, "rayClusterStatus": cluster_status},
        )
        return None

    async def _cluster(self, client: KubeClient, job: KubeObject) -> KubeObject:
        meta = job["metadata"]
        name = str((job.get("status") or {}).get("rayClusterName") or "")
        labels = {**(meta.get("labels") or {}), ORIGIN_NAME_LABEL: meta["name"], ORIGIN_CRD_LABEL: "RayJob"}
        return await create_or_get(
            client,
            RAY_CLUSTER,
            {
                "apiVersion": RAY_CLUSTER.api_version,
                "kind": RAY_CLUSTER.kind,
                "metadata": {
                    "name": name,
                    "namespace": meta["namespace"],
                    "labels": labels,
                    "annotations": dict(meta.get("annotations") or {}),
                    "ownerReferences": [owner_reference(job)],
                },
                "spec": deep_copy((job.get("spec") or {}).get("rayClusterSpec") or {}),
            },
        )

    async def _head_service(self, client: KubeClient, cluster: KubeObject) -> dict[str, int]:
        """The cluster's head Service, with the loopback ports its head listens on (chosen once, kept in the
        Service so that every later reconcile finds them)."""
        meta = cluster["metadata"]
        namespace, name = str(meta["namespace"]), str(meta["name"])
        service_name = f"{name}-head-svc"
        try:
            service = await client.get(SERVICE, namespace, service_name)
        except Exception:
            head = (cluster.get("spec") or {}).get("headGroupSpec") or {}
            service = await create_or_get(
                client,
                SERVICE,
                self._service_object(
                    service_name,
                    namespace,
                    {
                        CLUSTER_LABEL: name,
                        NODE_TYPE_LABEL: "head",
                        IDENTIFIER_LABEL: f"{name}-head",
                        APP_NAME_LABEL: "kuberay",
                        CREATED_BY_LABEL: COMPONENT,
                    },
                    {CLUSTER_LABEL: name, NODE_TYPE_LABEL: "head"},
                    {"gcs-server": loopback_port(), "dashboard": loopback_port()},
                    str(head.get("serviceType") or "ClusterIP"),
                    cluster,
                ),
            )
        return {p["name"]: int(p["port"]) for p in (service.get("spec") or {}).get("ports") or []}

    @staticmethod
    def _service_object(
        name: str,
        namespace: str,
        labels: Mapping[str, str],
        selector: Mapping[str, str],
        ports: Mapping[str, int],
        service_type: str,
        owner: Mapping[str, Any],
    ) -> KubeObject:
        return {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": dict(labels),
                "ownerReferences": [owner_reference(owner)],
            },
            "spec": {
                "type": service_type,
                "clusterIP": "127.0.0.1",
                "selector": dict(selector),
                "ports": [
                    {"name": port_name, "protocol": "TCP", "port": port, "targetPort": port}
                    for port_name, port in ports.items()
                ],
            },
        }

    def _node_pod(
        self,
        cluster: KubeObject,
        template: Mapping[str, Any],
        *,
        node_type: str,
        group: str,
        params: Mapping[str, str],
        ports: Mapping[str, int],
    ) -> KubeObject:
        meta = cluster["metadata"]
        namespace, name = str(meta["namespace"]), str(meta["name"])
        template_meta = template.get("metadata") or {}
        spec = deep_copy(template.get("spec") or {})
        containers = spec.get("containers") or []
        gcs = f"127.0.0.1:{ports['gcs-server']}"
        if containers:
            # KubeRay's Ray container is the first one.
            ray = containers[0]
            start = _ray_start_command(node_type == "head", params, ray)
            if node_type == "head":
                role = [
                    "head",
                    "--gcs-port",
                    str(ports["gcs-server"]),
                    "--dashboard-port",
                    str(ports["dashboard"]),
                ]
            else:
                role = ["worker", "--address", gcs]
            ray["command"] = ["python", "-c", _standin_source(), *role]
            ray.pop("args", None)
            env: list[dict[str, Any]] = []
            if node_type == "worker":
                env += [{"name": "FQ_RAY_IP", "value": "127.0.0.1"}, {"name": "RAY_IP", "value": "127.0.0.1"}]
            env += [
                {
                    "name": "RAY_CLUSTER_NAME",
                    "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{CLUSTER_LABEL}']"}},
                },
                {"name": "RAY_CLOUD_INSTANCE_ID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {
                    "name": "RAY_NODE_TYPE_NAME",
                    "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{GROUP_LABEL}']"}},
                },
                {"name": "KUBERAY_GEN_RAY_START_CMD", "value": start},
                {"name": "RAY_PORT", "value": str(ports["gcs-server"])},
                {"name": "RAY_ADDRESS", "value": gcs},
                {"name": "RAY_USAGE_STATS_KUBERAY_IN_USE", "value": "1"},
                {"name": "RAY_DASHBOARD_ENABLE_K8S_DISK_USAGE", "value": "1"},
            ]
            _env(ray, *env)
        prefix = name if node_type == "head" else f"{name}-{group}"
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "generateName": f"{prefix}-{node_type}-",
                "namespace": namespace,
                "labels": _node_labels(template_meta.get("labels") or {}, name, node_type, group),
                "annotations": dict(template_meta.get("annotations") or {}),
                "ownerReferences": [owner_reference(cluster)],
            },
            "spec": spec,
        }

    async def _create_nodes(self, client: KubeClient, cluster: KubeObject, ports: Mapping[str, int]) -> None:
        meta = cluster["metadata"]
        namespace, name = str(meta["namespace"]), str(meta["name"])
        spec = cluster.get("spec") or {}
        pods, _ = await client.list(POD, namespace, label_selector=f"{CLUSTER_LABEL}={name}")
        by_group: dict[str, int] = {}
        for pod in pods:
            group = ((pod.get("metadata") or {}).get("labels") or {}).get(GROUP_LABEL, "")
            by_group[group] = by_group.get(group, 0) + 1
        head = spec.get("headGroupSpec") or {}
        if not by_group.get(HEAD_GROUP):
            pod = self._node_pod(
                cluster,
                head.get("template") or {},
                node_type="head",
                group=HEAD_GROUP,
                params=head.get("rayStartParams") or {},
                ports=ports,
            )
            await client.create(POD, pod)
        for group in spec.get("workerGroupSpecs") or []:
            group_name = str(group.get("groupName") or "")
            for _ in range(by_group.get(group_name, 0), self._desired_replicas(group)):
                pod = self._node_pod(
                    cluster,
                    group.get("template") or {},
                    node_type="worker",
                    group=group_name,
                    params=group.get("rayStartParams") or {},
                    ports=ports,
                )
                await client.create(POD, pod)

    @staticmethod
    def _desired_replicas(group: Mapping[str, Any]) -> int:
        """GetWorkerGroupDesiredReplicas: replicas kept within [minReplicas, maxReplicas]."""
        low, high = int(group.get("minReplicas") or 0), int(group.get("maxReplicas") or 0)
        replicas = group.get("replicas")
        if low > high:
            return high
        if replicas is None or int(replicas) < low:
            return low
        return min(int(replicas), high)

    async def _cluster_status(
        self, client: KubeClient, cluster: KubeObject, ports: Mapping[str, int]
    ) -> tuple[bool, KubeObject, bool]:
        """Whether the cluster is ready (every pod running, the head accepting connections), its status,
        and whether the head pod is running."""
        meta = cluster["metadata"]
        namespace, name = str(meta["namespace"]), str(meta["name"])
        spec = cluster.get("spec") or {}
        pods, _ = await client.list(POD, namespace, label_selector=f"{CLUSTER_LABEL}={name}")
        heads = [p for p in pods if (p["metadata"].get("labels") or {}).get(NODE_TYPE_LABEL) == "head"]
        workers = [p for p in pods if (p["metadata"].get("labels") or {}).get(NODE_TYPE_LABEL) == "worker"]
        groups = spec.get("workerGroupSpecs") or []
        desired = sum(self._desired_replicas(g) for g in groups)
        running_workers = sum(1 for p in workers if (p.get("status") or {}).get("phase") == "Running")
        head_running = bool(heads) and (heads[0].get("status") or {}).get("phase") == "Running"
        head_ready = head_running and await self._accepts(ports["gcs-server"])
        status: KubeObject = {
            "desiredWorkerReplicas": desired,
            "minWorkerReplicas": sum(int(g.get("minReplicas") or 0) for g in groups),
            "maxWorkerReplicas": sum(int(g.get("maxReplicas") or 0) for g in groups),
            "readyWorkerReplicas": running_workers,
            "availableWorkerReplicas": running_workers,
            "endpoints": {"gcs-server": str(ports["gcs-server"]), "dashboard": str(ports["dashboard"])},
        }
        if heads:
            status["head"] = {
                "podName": heads[0]["metadata"]["name"],
                "podIP": str((heads[0].get("status") or {}).get("podIP") or ""),
                "serviceName": f"{name}-head-svc",
                "serviceIP": "127.0.0.1",
            }
        ready = head_ready and len(workers) == desired and running_workers == desired
        if ready:
            status["state"] = "ready"
        return ready, status, head_running

    @staticmethod
    async def _accepts(port: int) -> bool:
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), timeout=1.0)
        except (OSError, TimeoutError):
            return False
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
        return True

    async def _create_submitter(self, client: KubeClient, job: KubeObject, ports: Mapping[str, int]) -> None:
        meta = job["metadata"]
        namespace, name = str(meta["namespace"]), str(meta["name"])
        spec = job.get("spec") or {}
        status = job.get("status") or {}
        template = deep_copy(spec.get("submitterPodTemplate") or {})
        pod_spec = template.setdefault("spec", {})
        containers = pod_spec.get("containers") or []
        if containers:
            submitter = containers[0]
            if not submitter.get("command"):
                submitter["command"] = ["/bin/bash", "-ce", "--"]
                submitter["args"] = [str(spec.get("entrypoint") or "").strip()]
            _env(
                submitter,
                {"name": "PYTHONUNBUFFERED", "value": "1"},
                {"name": "RAY_DASHBOARD_ADDRESS", "value": f"127.0.0.1:{ports['dashboard']}"},
                {"name": "RAY_JOB_SUBMISSION_ID", "value": str(status.get("jobId") or "")},
            )
            runtime_env = _runtime_env_vars(str(spec.get("runtimeEnvYAML") or ""))
            _env(
                submitter,
                {"name": "RAY_ADDRESS", "value": f"127.0.0.1:{ports['gcs-server']}"},
                *({"name": k, "value": v} for k, v in runtime_env.items()),
                overwrite=True,
            )
        await create_or_get(
            client,
            JOB,
            {
                "apiVersion": JOB.api_version,
                "kind": JOB.kind,
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "labels": {
                        ORIGIN_NAME_LABEL: name,
                        ORIGIN_CRD_LABEL: "RayJob",
                        CREATED_BY_LABEL: COMPONENT,
                    },
                    "ownerReferences": [owner_reference(job)],
                },
                "spec": {"backoffLimit": SUBMITTER_BACKOFF_LIMIT, "template": template},
            },
        )

    # -- Running --------------------------------------------------------------------------------------
    async def _submitter_pod(self, client: KubeClient, submitter: KubeObject) -> KubeObject | None:
        """The submitter Job's pod, created as the Job controller would when there is none yet."""
        meta = submitter["metadata"]
        namespace, name, uid = str(meta["namespace"]), str(meta["name"]), str(meta.get("uid") or "")
        pods, _ = await client.list(POD, namespace, label_selector=f"{JOB_NAME_LABEL}={name}")
        ours = [p for p in pods if owned_by(p, uid)]
        if ours:
            return ours[0]
        if (submitter.get("status") or {}).get("completionTime") or (submitter.get("status") or {}).get(
            "failed"
        ):
            return None
        template = deep_copy((submitter.get("spec") or {}).get("template") or {})
        template_meta = template.get("metadata") or {}
        labels = {
            **(template_meta.get("labels") or {}),
            CONTROLLER_UID_LABEL: uid,
            JOB_NAME_LABEL: name,
            "controller-uid": uid,
            "job-name": name,
        }
        created = await client.create(
            POD,
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "generateName": f"{name}-",
                    "namespace": namespace,
                    "labels": labels,
                    "annotations": dict(template_meta.get("annotations") or {}),
                    "ownerReferences": [owner_reference(submitter)],
                },
                "spec": template.get("spec") or {},
            },
        )
        now = _rfc3339(self.clock.now())
        await client.patch(JOB, namespace, name, {"status": {"startTime": now, "active": 1}})
        return created

    async def _run_job(self, client: KubeClient, job: KubeObject) -> None:
        meta = job["metadata"]
        namespace, name = str(meta["namespace"]), str(meta["name"])
        status = job.get("status") or {}
        cluster_name = str(status.get("rayClusterName") or "")
        try:
            cluster_service = await client.get(SERVICE, namespace, f"{cluster_name}-head-svc")
        except Exception:
            cluster_service = None
        if cluster_service is not None:
            # The RayJob's own head Service, pointing at the current cluster's head (reconcileServices).
            ports = {p["name"]: int(p["port"]) for p in cluster_service["spec"].get("ports") or []}
            service = self._service_object(
                f"{name}-head-svc",
                namespace,
                {
                    ORIGIN_NAME_LABEL: name,
                    ORIGIN_CRD_LABEL: "RayJob",
                    NODE_TYPE_LABEL: "head",
                    IDENTIFIER_LABEL: f"{name}-head",
                },
                {CLUSTER_LABEL: cluster_name, NODE_TYPE_LABEL: "head"},
                ports,
                str(cluster_service["spec"].get("type") or "ClusterIP"),
                job,
            )
            await create_or_get(client, SERVICE, service)
        try:
            submitter = await client.get(JOB, namespace, name)
        except Exception:
            return
        pod = await self._submitter_pod(client, submitter)
        if pod is None:
            return
        update = self._job_progress(pod)
        if update is None:
            return
        if update.get("jobDeploymentStatus") in (COMPLETE, FAILED):
            await self._finish_submitter(client, submitter, pod)
        await self._patch_status(client, job, update)

    def _job_progress(self, pod: Mapping[str, Any]) -> KubeObject | None:
        """The RayJob status the submitter pod's state stands for."""
        phase = str((pod.get("status") or {}).get("phase") or "")
        state = _container_state(pod)
        started = (state.get("running") or state.get("terminated") or {}).get("startedAt")
        info: KubeObject = {}
        if started:
            info["startTime"] = started
        if phase in ("Pending", ""):
            return {"jobStatus": JOB_PENDING, "message": PENDING_MESSAGE, "rayJobInfo": info}
        if phase == "Running":
            return {"jobStatus": JOB_RUNNING, "message": RUNNING_MESSAGE, "rayJobInfo": info}
        now = _rfc3339(self.clock.now())
        terminated = state.get("terminated")
        if terminated and terminated.get("finishedAt"):
            info["endTime"] = terminated["finishedAt"]
        if phase == "Succeeded":
            return {
                "jobStatus": JOB_SUCCEEDED,
                "jobDeploymentStatus": COMPLETE,
                "reason": "",
                "message": SUCCEEDED_MESSAGE,
                "rayJobInfo": info,
                "endTime": now,
                "succeeded": 1,
                "failed": 0,
            }
        if phase != "Failed":
            return None
        if terminated is not None and "exitCode" in terminated:
            message = f"Job entrypoint command failed with exit code {terminated['exitCode']}"
            logs = str(terminated.get("message") or "")
            if logs:
                message += f", last available logs (truncated to 20,000 chars):\n{logs[-20000:]}"
            return {
                "jobStatus": JOB_FAILED,
                "jobDeploymentStatus": FAILED,
                "reason": "AppFailed",
                "message": message,
                "rayJobInfo": info,
                "endTime": now,
                "succeeded": 0,
                "failed": 1,
            }
        pod_status = pod.get("status") or {}
        return {
            "jobDeploymentStatus": FAILED,
            "reason": "SubmissionFailed",
            "message": (
                f"Job submission has failed. Reason: {pod_status.get('reason') or 'PodFailed'}. "
                f"Message: {pod_status.get('message') or ''}"
            ),
            "endTime": now,
            "succeeded": 0,
            "failed": 1,
        }

    async def _finish_submitter(
        self, client: KubeClient, submitter: KubeObject, pod: Mapping[str, Any]
    ) -> None:
        """The submitter Job's final status, as the Job controller writes it."""
        meta = submitter["metadata"]
        succeeded = (pod.get("status") or {}).get("phase") == "Succeeded"
        now = _rfc3339(self.clock.now())
        condition = {
            "type": "Complete" if succeeded else "Failed",
            "status": "True",
            "lastProbeTime": now,
            "lastTransitionTime": now,
        }
        if not succeeded:
            condition.update(
                reason="BackoffLimitExceeded", message="Job has reached the specified backoff limit"
            )
        status: KubeObject = {"active": 0, "conditions": [condition]}
        if succeeded:
            status.update(succeeded=1, completionTime=now)
        else:
            status["failed"] = 1
        await client.patch(JOB, meta["namespace"], meta["name"], {"status": status})

    # -- Complete / Failed ---------------------------------------------------------------------------
    async def _shut_down_when_due(self, client: KubeClient, job: KubeObject) -> Requeue | None:
        spec = job.get("spec") or {}
        status = job.get("status") or {}
        if not spec.get("shutdownAfterJobFinishes"):
            return None
        ended = parse_k8s_time(status.get("endTime"))
        if ended is None:
            return None
        due = ended + timedelta(seconds=int(spec.get("ttlSecondsAfterFinished") or 0))
        now = self.clock.now()
        if now < due:
            return Requeue((due - now).total_seconds())
        cluster = str(status.get("rayClusterName") or "")
        if cluster:
            await self._delete_cluster(client, job["metadata"]["namespace"], cluster)
        return None

    # -- deletion -------------------------------------------------------------------------------------
    async def _finalize(self, client: KubeClient, job: KubeObject) -> None:
        """A RayJob being deleted: stop its Ray job if it still runs, then let it go."""
        meta = job["metadata"]
        if FINALIZER not in (meta.get("finalizers") or []):
            return
        if str((job.get("status") or {}).get("jobStatus") or "") not in (
            JOB_SUCCEEDED,
            JOB_FAILED,
            "STOPPED",
        ):
            try:
                submitter = await client.get(JOB, meta["namespace"], meta["name"])
            except Exception:
                submitter = None
            if submitter is not None:
                # Stopping the Ray job ends its entrypoint, which runs in the submitter pod here.
                await self._delete_submitter_pods(client, submitter)
        remaining = [f for f in meta.get("finalizers") or [] if f != FINALIZER]
        await self._set_finalizers(client, job, remaining)

    @staticmethod
    async def _set_finalizers(client: KubeClient, job: Mapping[str, Any], finalizers: list[str]) -> None:
        # The plugin manager edits the finalizers too: the resourceVersion makes a stale list a conflict
        # (retried with a fresh read) rather than a lost finalizer.
        meta = job["metadata"]
        patch = {
            "metadata": {"finalizers": finalizers or None, "resourceVersion": meta.get("resourceVersion")}
        }
        await client.patch(RAY_JOB, meta["namespace"], meta["name"], patch)

    async def _delete_submitter_pods(self, client: KubeClient, submitter: KubeObject) -> None:
        meta = submitter["metadata"]
        namespace, name = str(meta["namespace"]), str(meta["name"])
        pods, _ = await client.list(POD, namespace, label_selector=f"{JOB_NAME_LABEL}={name}")
        for pod in pods:
            if owned_by(pod, str(meta.get("uid") or "")):
                await delete_if_present(client, POD, namespace, pod["metadata"]["name"])

    async def _delete_submitter(self, client: KubeClient, submitter: KubeObject) -> None:
        await self._delete_submitter_pods(client, submitter)
        meta = submitter["metadata"]
        await delete_if_present(client, JOB, str(meta["namespace"]), str(meta["name"]))

    async def _delete_cluster(self, client: KubeClient, namespace: str, cluster: str) -> None:
        """Delete a RayCluster and what it owns: its head and worker pods, its head Service."""
        pods, _ = await client.list(POD, namespace, label_selector=f"{CLUSTER_LABEL}={cluster}")
        for pod in pods:
            if (pod["metadata"].get("labels") or {}).get(CREATED_BY_LABEL) == COMPONENT:
                await delete_if_present(client, POD, namespace, pod["metadata"]["name"])
        await delete_if_present(client, SERVICE, namespace, f"{cluster}-head-svc")
        await delete_if_present(client, RAY_CLUSTER, namespace, cluster)

    async def _patch_status(self, client: KubeClient, job: Mapping[str, Any], status: KubeObject) -> None:
        meta = job["metadata"]
        await client.patch(RAY_JOB, meta["namespace"], meta["name"], {"status": status})
