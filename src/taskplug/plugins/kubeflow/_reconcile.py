"""The training operator's rules, as pure functions: which pods and services a job needs, how each pod is
configured, and what the job's status says given its pods.

Follows github.com/kubeflow/training-operator v1.8.0: ``pkg/controller.v1/common``
(``ReconcileJobs``, ``ReconcilePods``, ``CreateNewService``, ``DeletePodsAndServices``, ``CleanupJob``),
``pkg/core`` (replica statuses, back-off limit, active deadline, restart policy), ``pkg/util/status.go``
(conditions), the PyTorch controller (``setPodEnv``, master and elastic env, ``UpdateJobStatus``), the
TensorFlow controller (``TF_CONFIG``, ``UpdateJobStatus``) and the MPI controller (launcher, workers,
hostfile, ``UpdateJobStatus``). :func:`reconcile_job` is one reconcile of one job;
``_local_operator`` runs it against the embedded cluster.

The embedded cluster's "pods" are processes on this machine: there is no cluster DNS, and all of them
share one network. Hence:

Deviation: every replica's service gets its own free port on 127.0.0.1, and the addresses the operator
hands a replica (``MASTER_ADDR``/``MASTER_PORT``, ``PET_RDZV_ENDPOINT``, ``TF_CONFIG``) are
``127.0.0.1:<that port>``: the address is the loopback where a real cluster has the service's DNS name
and the container's port (each pod there has an IP of its own).

Deviation: PyTorch workers get no ``init-pytorch`` container (it waits with ``nslookup`` until the
master's DNS name resolves, which never happens here; the master's address is known from the start).

Deviation: MPI pods go through the same per-replica reconciliation as PyTorch and TensorFlow pods. The
launcher's hostfile (the real names ``{job}-worker-{i} slots=N``, also kept in the ``{job}-config``
ConfigMap) is written by an init container into the pod's working directory, and
``OMPI_MCA_orte_default_hostfile`` points there (``etc/mpi/hostfile``) where a real launcher mounts the
ConfigMap at ``/etc/mpi``; no ServiceAccount, Role, RoleBinding or kubectl delivery is made.

Deviation: the back-off limit's "new failures since the last sync" rule counts no requeues (there is no
work queue): only restarts and failed pods count.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from taskplug.k8s import deep_copy, parse_k8s_time
from taskplug.plugins.kubeflow._kinds import (
    JOB_NAME_LABEL,
    JOB_ROLE_LABEL,
    MPI,
    OPERATOR_NAME_LABEL,
    PYTORCH,
    REPLICA_INDEX_LABEL,
    REPLICA_TYPE_LABEL,
    TENSORFLOW,
    JobKind,
)

__all__ = [
    "HOSTFILE_PATH",
    "LOOPBACK",
    "Plan",
    "Replica",
    "ServiceWanted",
    "config_map_object",
    "generic_labels",
    "hostfile",
    "is_finished",
    "owned_by",
    "pod_name",
    "reconcile_job",
    "replicas_of",
    "service_object",
    "services_wanted",
]

KubeObject = dict[str, Any]

LOOPBACK = "127.0.0.1"
HOSTFILE_PATH = "etc/mpi/hostfile"
"""Where the MPI launcher finds its hostfile, relative to its working directory (the pod's)."""
KUBEXEC_PATH = "/etc/mpi/kubexec.sh"
EXIT_CODE_POLICY = "ExitCode"
_NO_EXIT_CODE = 0xBEEF  # the operator's "no exit code seen" marker

# The order each controller walks replica types in (Go walks maps, except TF's UpdateJobStatus; these orders
# make the outcome of a round deterministic: a master/chief/launcher verdict is reached first).
_ORDER = {
    PYTORCH.task_type: ("Master", "Worker"),
    TENSORFLOW.task_type: ("Chief", "Evaluator", "Master", "PS", "Worker"),
    MPI.task_type: ("Launcher", "Worker"),
}
_DEFAULT_RESTART_POLICY = {
    PYTORCH.task_type: "OnFailure",
    TENSORFLOW.task_type: "Never",
    MPI.task_type: "Never",
}


def _fmt(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


# -- the job's replicas -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Replica:
    """One replica type of a job, with the operator's defaults applied."""

    type: str
    spec: Mapping[str, Any]
    replicas: int
    restart_policy: str


def replicas_of(kind: JobKind, job: Mapping[str, Any]) -> list[Replica]:
    """The job's replica types in the controller's order (Scheme defaults: 1 replica, or 0 for MPI workers;
    the kind's default restart policy)."""
    specs = (job.get("spec") or {}).get(kind.replica_specs_key) or {}
    out = []
    for replica_type in _ORDER[kind.task_type]:
        spec = specs.get(replica_type)
        if spec is None:
            continue
        default = 0 if kind is MPI and replica_type == "Worker" else 1
        replicas = spec.get("replicas")
        policy = str(spec.get("restartPolicy") or _DEFAULT_RESTART_POLICY[kind.task_type])
        out.append(Replica(replica_type, spec, default if replicas is None else int(replicas), policy))
    return out


def pod_name(kind: JobKind, job_name: str, replica_type: str, index: int) -> str:
    """``{job}-{type}-{index}``; the MPI launcher is ``{job}-launcher``."""
    if kind is MPI and replica_type == "Launcher":
        return f"{job_name}-launcher"
    return f"{job_name}-{replica_type.lower()}-{index}".replace("/", "-")


def generic_labels(kind: JobKind, job_name: str) -> dict[str, str]:
    return {OPERATOR_NAME_LABEL: kind.controller_name, JOB_NAME_LABEL: job_name.replace("/", "-")}


def _replica_labels(kind: JobKind, job_name: str, replica_type: str, index: int) -> dict[str, str]:
    return {
        **generic_labels(kind, job_name),
        REPLICA_TYPE_LABEL: replica_type.lower(),
        REPLICA_INDEX_LABEL: str(index),
    }


def _is_master_role(kind: JobKind, types: Sequence[str], replica_type: str, index: int) -> bool:
    if kind is MPI:
        return replica_type == "Launcher"
    leaders = ("Master",) if kind is PYTORCH else ("Chief", "Master")
    if any(t in types for t in leaders):
        return replica_type in leaders
    return replica_type == "Worker" and index == 0


def owned_by(obj: Mapping[str, Any], uid: str) -> bool:
    """Whether ``obj``'s controller reference points at the object with ``uid``."""
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return any(ref.get("uid") == uid and ref.get("controller") for ref in refs)


def _owner_reference(kind: JobKind, job: Mapping[str, Any]) -> KubeObject:
    meta = job.get("metadata") or {}
    return {
        "apiVersion": kind.resource.api_version,
        "kind": kind.kind,
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
        "controller": True,
        "blockOwnerDeletion": True,
    }


# -- services ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ServiceWanted:
    """A headless service the operator makes for one replica (same name and labels as its pod)."""

    name: str
    labels: Mapping[str, str]


def services_wanted(kind: JobKind, job: Mapping[str, Any]) -> list[ServiceWanted]:
    """One service per PyTorch/TensorFlow replica while the job runs (MPI makes none)."""
    status = job.get("status") or {}
    suspended = ((job.get("spec") or {}).get("runPolicy") or {}).get("suspend") is True
    if kind is MPI or is_finished(status) or suspended:
        return []
    name = str((job.get("metadata") or {}).get("name") or "")
    return [
        ServiceWanted(pod_name(kind, name, r.type, i), _replica_labels(kind, name, r.type, i))
        for r in replicas_of(kind, job)
        for i in range(r.replicas)
    ]


def service_object(kind: JobKind, job: Mapping[str, Any], wanted: ServiceWanted, port: int) -> KubeObject:
    """The headless Service for a replica; its one port is the loopback port its replica listens on."""
    meta = job.get("metadata") or {}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": wanted.name,
            "namespace": meta.get("namespace", ""),
            "labels": dict(wanted.labels),
            "ownerReferences": [_owner_reference(kind, job)],
        },
        "spec": {
            "clusterIP": "None",
            "selector": dict(wanted.labels),
            "ports": [{"name": kind.port_name, "port": port}],
        },
    }


# -- MPI's hostfile ---------------------------------------------------------------------------------------


def _is_gpu_launcher(job: Mapping[str, Any]) -> bool:
    launcher = ((job.get("spec") or {}).get(MPI.replica_specs_key) or {}).get("Launcher") or {}
    containers = ((launcher.get("template") or {}).get("spec") or {}).get("containers") or []
    return any(
        str(name).endswith(".com/gpu")
        for c in containers
        for name in ((c.get("resources") or {}).get("limits") or {})
    )


def hostfile(job: Mapping[str, Any]) -> str:
    """``{job}-worker-{i} slots={slotsPerWorker}`` per worker (the launcher first when it has GPUs)."""
    name = str((job.get("metadata") or {}).get("name") or "")
    spec = job.get("spec") or {}
    slots = spec.get("slotsPerWorker")
    slots = 1 if slots is None else int(slots)
    workers = next((r.replicas for r in replicas_of(MPI, job) if r.type == "Worker"), 0)
    lines = [f"{name}-launcher slots={slots}\n"] if _is_gpu_launcher(job) else []
    lines += [f"{name}-worker-{i} slots={slots}\n" for i in range(workers)]
    return "".join(lines)


def config_map_object(job: Mapping[str, Any]) -> KubeObject:
    """The MPI job's ``{job}-config`` ConfigMap: the hostfile and the kubectl-exec shim."""
    meta = job.get("metadata") or {}
    name = str(meta.get("name") or "")
    kubexec = '#!/bin/sh\nset -x\nPOD_NAME=$1\nshift\n/opt/kube/kubectl exec ${POD_NAME} -- /bin/sh -c "$*"'
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": f"{name}-config",
            "namespace": meta.get("namespace", ""),
            "labels": {"app": name},
            "ownerReferences": [_owner_reference(MPI, job)],
        },
        "data": {"hostfile": hostfile(job), "kubexec.sh": kubexec},
    }


# -- pods -------------------------------------------------------------------------------------------------


def _default_container(spec: Mapping[str, Any], kind: JobKind) -> dict[str, Any] | None:
    for container in spec.get("containers") or []:
        if container.get("name") == kind.container_name:
            return container  # type: ignore[no-any-return]
    return None


def _append_env(container: dict[str, Any], env: Sequence[Mapping[str, str]]) -> None:
    container["env"] = [*(container.get("env") or []), *(dict(e) for e in env)]


def _address(ports: Mapping[str, int], service: str) -> str:
    port = ports.get(service)
    if port is None:
        raise KeyError(f"no service {service} yet")
    return f"{LOOPBACK}:{port}"


def _pytorch_env(
    job: Mapping[str, Any],
    replicas: Sequence[Replica],
    replica_type: str,
    index: int,
    ports: Mapping[str, int],
) -> list[dict[str, str]]:
    """``setPodEnv``: the master's address, world size and rank; elastic rendezvous variables."""
    name = str((job.get("metadata") or {}).get("name") or "")
    spec = job.get("spec") or {}
    elastic = spec.get("elasticPolicy")
    total = sum(r.replicas for r in replicas)
    nproc = spec.get("nprocPerNode")
    if nproc is None and (elastic is None or elastic.get("nProcPerNode") is None):
        nproc = "auto"  # the Scheme default
    try:
        per_node = int(str(nproc))
    except ValueError:
        per_node = 1
    env = [{"name": "PYTHONUNBUFFERED", "value": "1"}]
    if any(r.type == "Master" for r in replicas):
        host, _, port = _address(ports, pod_name(PYTORCH, name, "Master", 0)).rpartition(":")
        rank = index + 1 if replica_type == "Worker" else index
        env += [
            {"name": "MASTER_PORT", "value": port},
            {"name": "PET_MASTER_PORT", "value": port},
            {"name": "MASTER_ADDR", "value": host},
            {"name": "PET_MASTER_ADDR", "value": host},
            {"name": "WORLD_SIZE", "value": str(total * per_node)},
            {"name": "RANK", "value": str(rank)},
            {"name": "PET_NODE_RANK", "value": str(rank)},
        ]
    if nproc is not None:
        env.append({"name": "PET_NPROC_PER_NODE", "value": str(nproc)})
    if elastic is None:
        env.append({"name": "PET_NNODES", "value": str(total)})
        return env
    # The rendezvous runs on worker 0 unless the policy names a host or port.
    host = str(elastic["rdzvHost"]) if elastic.get("rdzvHost") is not None else LOOPBACK
    if elastic.get("rdzvPort") is not None:
        endpoint = f"{host}:{int(elastic['rdzvPort'])}"
    else:
        endpoint = f"{host}:{_address(ports, pod_name(PYTORCH, name, 'Worker', 0)).rpartition(':')[2]}"
    env.append({"name": "PET_RDZV_ENDPOINT", "value": endpoint})
    backend = elastic.get("rdzvBackend")
    env.append({"name": "PET_RDZV_BACKEND", "value": "c10d" if backend is None else str(backend)})
    low, high = elastic.get("minReplicas"), elastic.get("maxReplicas")
    workers = next((r.replicas for r in replicas if r.type == "Worker"), 0)
    # The Scheme fills a missing bound from the other one, or both from the worker count.
    low = high if low is None else low
    high = low if high is None else high
    low = workers if low is None else low
    high = workers if high is None else high
    env.append({"name": "PET_NNODES", "value": f"{low}:{high}"})
    if elastic.get("maxRestarts") is not None:
        env.append({"name": "PET_MAX_RESTARTS", "value": str(int(elastic["maxRestarts"]))})
    if elastic.get("nProcPerNode") is not None:
        env.append({"name": "PET_NPROC_PER_NODE", "value": str(int(elastic["nProcPerNode"]))})
    if elastic.get("rdzvId") is not None:
        env.append({"name": "PET_RDZV_ID", "value": str(elastic["rdzvId"])})
    conf = elastic.get("rdzvConf")
    if conf is not None and len(conf) > 0:
        value = ",".join(f"{c.get('key', '')}={c.get('value', '')}" for c in conf)
        env.append({"name": "PET_RDZV_CONF", "value": value})
    if elastic.get("standalone") is True:
        env.append({"name": "PET_STANDALONE", "value": ""})
    return env


def _tf_config(
    job: Mapping[str, Any],
    replicas: Sequence[Replica],
    replica_type: str,
    index: int,
    ports: Mapping[str, int],
) -> str | None:
    """``TF_CONFIG`` for a replica of a distributed TFJob (more than one replica in all), else None."""
    if sum(r.replicas for r in replicas) == 1:
        return None
    name = str((job.get("metadata") or {}).get("name") or "")
    cluster = {
        r.type.lower(): [_address(ports, pod_name(TENSORFLOW, name, r.type, i)) for i in range(r.replicas)]
        for r in replicas
    }
    rtype = replica_type.lower()
    task = {"type": rtype, "index": index}
    if (job.get("spec") or {}).get("enableDynamicWorker") is True:
        sparse: dict[str, Any] = {"worker": {}, "ps": []}
        if rtype == "ps":
            sparse["ps"] = [cluster["ps"][index]]
        elif rtype == "worker":
            sparse["ps"] = cluster.get("ps", [])
            sparse["worker"] = {str(index): cluster["worker"][index]}
        document: dict[str, Any] = {"cluster": sparse, "task": task}
    else:
        document = {"cluster": dict(sorted(cluster.items())), "task": task, "environment": "cloud"}
    # Go's json.Marshal: no spaces, map keys sorted, struct fields in declaration order.
    return json.dumps(document, separators=(",", ":"))


def _mpi_launcher(spec: dict[str, Any], job: Mapping[str, Any], name: str) -> None:
    containers = spec.get("containers") or []
    if not containers:
        return
    container = containers[0]
    env = list(container.get("env") or [])
    env += [
        {"name": "OMPI_MCA_plm_rsh_agent", "value": KUBEXEC_PATH},
        {"name": "OMPI_MCA_orte_default_hostfile", "value": HOSTFILE_PATH},
    ]
    if not _is_gpu_launcher(job):
        env += [
            {"name": "NVIDIA_VISIBLE_DEVICES", "value": ""},
            {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": ""},
        ]
    names = {e.get("name") for e in env}
    if "I_MPI_HYDRA_BOOTSTRAP" not in names:
        env.append({"name": "I_MPI_HYDRA_BOOTSTRAP", "value": "rsh"})
    if "I_MPI_HYDRA_BOOTSTRAP_EXEC" not in names:
        env.append({"name": "I_MPI_HYDRA_BOOTSTRAP_EXEC", "value": KUBEXEC_PATH})
    container["env"] = env
    if not spec.get("serviceAccountName"):
        spec["serviceAccountName"] = f"{name}-launcher"
    writer = (
        "import os, pathlib; p = pathlib.Path(os.environ['HOSTFILE_PATH']); "
        "p.parent.mkdir(parents=True, exist_ok=True); p.write_text(os.environ['HOSTFILE'])"
    )
    spec["initContainers"] = [
        *(spec.get("initContainers") or []),
        {
            "name": "mpi-hostfile",
            "image": str(container.get("image") or ""),
            "command": ["python", "-c", writer],
            "env": [
                {"name": "HOSTFILE", "value": hostfile(job)},
                {"name": "HOSTFILE_PATH", "value": HOSTFILE_PATH},
            ],
        },
    ]


def _ensure_port(container: dict[str, Any], kind: JobKind) -> None:
    ports = list(container.get("ports") or [])
    if not any(p.get("name") == kind.port_name for p in ports):
        ports.append({"name": kind.port_name, "containerPort": kind.default_port})
        container["ports"] = ports


def build_pod(
    kind: JobKind,
    job: Mapping[str, Any],
    replicas: Sequence[Replica],
    replica: Replica,
    index: int,
    ports: Mapping[str, int],
) -> KubeObject:
    """The pod for replica ``index`` of ``replica`` (``createNewPod`` with the kind's ``SetClusterSpec``)."""
    meta = job.get("metadata") or {}
    name = str(meta.get("name") or "")
    template: KubeObject = deep_copy(dict(replica.spec.get("template") or {}))
    template_meta = template.get("metadata") or {}
    spec: KubeObject = template.get("spec") or {}
    labels = {**(template_meta.get("labels") or {}), **_replica_labels(kind, name, replica.type, index)}
    if _is_master_role(kind, [r.type for r in replicas], replica.type, index):
        labels[JOB_ROLE_LABEL] = "master"
    if kind is PYTORCH:
        env = _pytorch_env(job, replicas, replica.type, index, ports)
        for container in spec.get("containers") or []:
            _append_env(container, env)
    elif kind is TENSORFLOW:
        config = _tf_config(job, replicas, replica.type, index, ports)
        container = _default_container(spec, kind)
        if config is not None and container is not None:
            _append_env(container, [{"name": "TF_CONFIG", "value": config}])
    elif replica.type == "Launcher":
        _mpi_launcher(spec, job, name)
    else:
        containers = spec.get("containers") or []
        # The launcher execs into the workers; a worker with nothing to run just waits for it.
        if containers and not containers[0].get("command"):
            containers[0]["command"] = ["sleep"]
            containers[0]["args"] = ["365d"]
    if kind is not MPI:
        container = _default_container(spec, kind)
        if container is not None:
            _ensure_port(container, kind)
    spec["restartPolicy"] = "Never" if replica.restart_policy == EXIT_CODE_POLICY else replica.restart_policy
    pod_meta: KubeObject = {
        "name": pod_name(kind, name, replica.type, index),
        "namespace": meta.get("namespace", ""),
        "labels": labels,
        "ownerReferences": [_owner_reference(kind, job)],
    }
    if template_meta.get("annotations"):
        pod_meta["annotations"] = dict(template_meta["annotations"])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": spec}


# -- conditions (pkg/util/status.go) ----------------------------------------------------------------------


def _is_true(status: Mapping[str, Any], condition_type: str) -> bool:
    return any(
        c.get("type") == condition_type and c.get("status") == "True" for c in status.get("conditions") or []
    )


def is_finished(status: Mapping[str, Any]) -> bool:
    return _is_true(status, "Succeeded") or _is_true(status, "Failed")


def _set_condition(
    status: KubeObject, condition_type: str, value: str, reason: str, message: str, at: str
) -> None:
    """``UpdateJobConditions``: nothing changes once the job failed; the same status and reason leave the
    condition alone; a new condition replaces the old one of its type at the end of the list (keeping its
    transition time when the status is unchanged); Running and Restarting replace each other; Succeeded
    and Failed turn Running False."""
    if _is_true(status, "Failed"):
        return
    conditions: list[KubeObject] = list(status.get("conditions") or [])
    current = next((c for c in conditions if c.get("type") == condition_type), None)
    if current is not None and current.get("status") == value and current.get("reason", "") == reason:
        return
    condition: KubeObject = {"type": condition_type, "status": value}
    if reason:
        condition["reason"] = reason
    if message:
        condition["message"] = message
    condition["lastUpdateTime"] = at
    condition["lastTransitionTime"] = (
        current.get("lastTransitionTime", at)
        if current is not None and current.get("status") == value
        else at
    )
    kept: list[KubeObject] = []
    for c in conditions:
        other = c.get("type")
        if {condition_type, other} == {"Running", "Restarting"} or other == condition_type:
            continue
        if condition_type in ("Failed", "Succeeded") and other == "Running":
            c = {**c, "status": "False"}
        kept.append(c)
    status["conditions"] = [*kept, condition]


# -- the reconcile ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Plan:
    """What one reconcile of a job asks for."""

    status: KubeObject | None = None
    """The job's new status, when it changed."""
    create_pods: tuple[KubeObject, ...] = ()
    delete_pods: tuple[str, ...] = ()
    delete_services: tuple[str, ...] = ()
    delete_job: bool = False
    """The job finished longer than ``ttlSecondsAfterFinished`` ago."""
    wake_after: float | None = None
    """Seconds until a deadline (active deadline, TTL) needs another reconcile."""


def _phase(pod: Mapping[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or "")


def _deleting(pod: Mapping[str, Any]) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _exit_code(pod: Mapping[str, Any], kind: JobKind) -> int:
    code = _NO_EXIT_CODE
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        terminated = (status.get("state") or {}).get("terminated")
        if status.get("name") == kind.container_name and terminated is not None:
            code = int(terminated.get("exitCode", 0))
    return code


def _index(pod: Mapping[str, Any]) -> int | None:
    value = ((pod.get("metadata") or {}).get("labels") or {}).get(REPLICA_INDEX_LABEL)
    try:
        return int(str(value))
    except ValueError:
        return None


def _counts_json(counts: Mapping[str, int], selector: str | None = None) -> KubeObject:
    # Go's omitempty: zero counts are left out.
    out: KubeObject = {k: v for k, v in counts.items() if v}
    if selector:
        out["selector"] = selector
    return out


def _selector(kind: JobKind, job_name: str, replica_type: str) -> str:
    """``metav1.FormatLabelSelector`` of the replica type's labels: ``key=value`` pairs sorted by key."""
    labels = {**generic_labels(kind, job_name), REPLICA_TYPE_LABEL: replica_type.lower()}
    return ",".join(f"{key}={value}" for key, value in sorted(labels.items()))


def _cleanup(pods: Sequence[Mapping[str, Any]], policy: str, finished: bool) -> list[str]:
    """``DeletePodsAndServices``: which pods (and their same-named services) go."""
    if finished and policy == "None":
        return []
    out = []
    for pod in pods:
        if _deleting(pod):
            continue
        if finished and policy == "Running" and _phase(pod) not in ("Running", "Pending"):
            continue
        out.append(_name(pod))
    return out


def _past_backoff_limit(
    kind: JobKind, replicas: Sequence[Replica], pods: Sequence[Mapping[str, Any]], limit: int
) -> bool:
    restarts = 0
    for replica in replicas:
        if replica.restart_policy not in ("OnFailure", "Always", EXIT_CODE_POLICY):
            continue
        for pod in pods:
            labels = (pod.get("metadata") or {}).get("labels") or {}
            if labels.get(REPLICA_TYPE_LABEL) != replica.type.lower() or _phase(pod) != "Running":
                continue
            status = pod.get("status") or {}
            for c in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
                restarts += int(c.get("restartCount") or 0)
    return restarts > 0 if limit == 0 else restarts >= limit


def _seconds_until(deadline: datetime, now: datetime) -> float:
    return max(0.0, (deadline - now).total_seconds())


def reconcile_job(
    kind: JobKind,
    job: Mapping[str, Any],
    pods: Sequence[Mapping[str, Any]],
    ports: Mapping[str, int],
    now: datetime,
) -> Plan:
    """One reconcile of ``job`` given its pods and its services' ports (``ReconcileJobs``)."""
    meta = job.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return Plan()
    name = str(meta.get("name") or "")
    spec = job.get("spec") or {}
    run_policy = spec.get("runPolicy") or {}
    old: KubeObject = dict(job.get("status") or {})
    status: KubeObject = deep_copy(old)
    at = _fmt(now)
    k = kind.kind
    replicas = replicas_of(kind, job)

    def changed() -> KubeObject | None:
        return status if status != old else None

    if not status.get("conditions"):
        # The controller's create-event handler.
        _set_condition(status, "Created", "True", f"{k}Created", f"{k} {name} is created.", at)

    clean_policy = str(run_policy.get("cleanPodPolicy") or spec.get("cleanPodPolicy") or "None")
    if is_finished(status):
        gone = _cleanup(pods, clean_policy, finished=True)
        if _is_true(status, "Succeeded"):
            for stored in (status.get("replicaStatuses") or {}).values():
                active = int(stored.pop("active", 0) or 0)
                if active:
                    stored["succeeded"] = int(stored.get("succeeded", 0) or 0) + active
        delete_job, wake = False, None
        ttl = run_policy.get("ttlSecondsAfterFinished")
        completed = parse_k8s_time(status.get("completionTime"))
        if ttl is not None and completed is not None:
            expires = completed + timedelta(seconds=int(ttl))
            if now >= expires:
                delete_job = True
            else:
                wake = _seconds_until(expires, now)
        return Plan(changed(), (), tuple(gone), tuple(gone), delete_job, wake)

    if run_policy.get("suspend") is True:
        gone = _cleanup(pods, clean_policy, finished=False)
        for stored in (status.get("replicaStatuses") or {}).values():
            stored.pop("active", None)
        message = f"{k} {name} is suspended."
        if _is_true(status, "Running"):
            _set_condition(status, "Running", "False", f"{k}Suspended", message, at)
        if not _is_true(status, "Suspended"):
            _set_condition(status, "Suspended", "True", f"{k}Suspended", message, at)
        return Plan(changed(), (), tuple(gone), tuple(gone))
    if _is_true(status, "Suspended"):
        _set_condition(status, "Suspended", "False", f"{k}Resumed", f"{k} {name} is resumed.", at)
        status["startTime"] = at

    active = sum(1 for p in pods if _phase(p) not in ("Succeeded", "Failed") and not _deleting(p))
    failed = sum(1 for p in pods if _phase(p) == "Failed")
    total = sum(r.replicas for r in replicas)
    previously_failed = sum(
        int(c.get("failed", 0) or 0) for c in (status.get("replicaStatuses") or {}).values()
    )
    failure = ""
    limit = run_policy.get("backoffLimit")
    if limit is not None:
        new_failure = failed > previously_failed and active != total and int(limit) < 1
        if new_failure or _past_backoff_limit(kind, replicas, pods, int(limit)):
            failure = f"Job {name} has failed because it has reached the specified backoff limit"
    deadline = run_policy.get("activeDeadlineSeconds")
    started = parse_k8s_time(status.get("startTime"))
    if (
        not failure
        and deadline is not None
        and started is not None
        and now - started >= timedelta(seconds=int(deadline))
    ):
        failure = f"Job {name} has failed because it was active longer than specified deadline"
    if failure:
        status.setdefault("completionTime", at)
        gone = _cleanup(pods, clean_policy, finished=False)
        _set_condition(status, "Failed", "True", f"{k}Failed", failure, at)
        return Plan(changed(), (), tuple(gone), tuple(gone))

    create: list[KubeObject] = []
    delete: list[str] = []
    counts: dict[str, dict[str, int]] = {}
    for replica in replicas:
        typed: dict[int, list[Mapping[str, Any]]] = {}
        for pod in pods:
            labels = (pod.get("metadata") or {}).get("labels") or {}
            index = _index(pod)
            if labels.get(REPLICA_TYPE_LABEL) == replica.type.lower() and index is not None:
                typed.setdefault(index, []).append(pod)
        replica_counts = counts[replica.type] = {"active": 0, "succeeded": 0, "failed": 0}
        for index in range(max([replica.replicas, *(i + 1 for i in typed)])):
            slot = typed.get(index, [])
            if len(slot) > 1:
                continue  # "too many pods": the operator only warns
            if not slot:
                if index < replica.replicas:
                    create.append(build_pod(kind, job, replicas, replica, index, ports))
                continue
            pod = slot[0]
            if index >= replica.replicas and not _deleting(pod):
                delete.append(_name(pod))
            if _phase(pod) == "Failed":
                code = _exit_code(pod, kind)
                policy = replica.restart_policy
                if (policy == EXIT_CODE_POLICY and code >= 128) or policy in ("OnFailure", "Always"):
                    if not _deleting(pod):
                        delete.append(_name(pod))
                    _set_condition(
                        status,
                        "Restarting",
                        "True",
                        f"{k}Restarting",
                        f"job {name} is restarting because {replica.type} replica(s) failed.",
                        at,
                    )
                elif policy == EXIT_CODE_POLICY:
                    _set_condition(
                        status,
                        "Failed",
                        "True",
                        f"{k}Failed",
                        f'job "{name}" is failing because "{replica.type}" replica(s) failed.',
                        at,
                    )
            phase = _phase(pod)
            if phase == "Running":
                replica_counts["failed" if _deleting(pod) else "active"] += 1
            elif phase == "Succeeded":
                replica_counts["succeeded"] += 1
            elif phase == "Failed":
                replica_counts["failed"] += 1

    if not status.get("startTime"):
        status["startTime"] = at
    _update_job_status(kind, job, replicas, counts, pods, status, at)
    # Only the PyTorch controller fills in each replica type's label selector.
    status["replicaStatuses"] = {
        r: _counts_json(c, _selector(kind, name, r) if kind is PYTORCH else None) for r, c in counts.items()
    }
    wake = None
    started = parse_k8s_time(status.get("startTime"))
    if deadline is not None and started is not None and not is_finished(status):
        wake = _seconds_until(started + timedelta(seconds=int(deadline)), now)
    return Plan(changed(), tuple(create), tuple(delete), (), False, wake)


def _update_job_status(
    kind: JobKind,
    job: Mapping[str, Any],
    replicas: Sequence[Replica],
    counts: Mapping[str, Mapping[str, int]],
    pods: Sequence[Mapping[str, Any]],
    status: KubeObject,
    at: str,
) -> None:
    """The kind's ``UpdateJobStatus``: Running, Succeeded, Restarting and Failed from the replica counts."""
    meta = job.get("metadata") or {}
    name, namespace = str(meta.get("name") or ""), str(meta.get("namespace") or "")
    spec = job.get("spec") or {}
    k = kind.kind
    types = [r.type for r in replicas]

    def complete(message: str) -> None:
        status.setdefault("completionTime", at)
        _set_condition(status, "Succeeded", "True", f"{k}Succeeded", message, at)

    def fail(reason: str, message: str) -> None:
        status.setdefault("completionTime", at)
        _set_condition(status, "Failed", "True", reason, message, at)

    if kind is TENSORFLOW:
        worker0_done = "Worker" not in types or any(
            _index(p) == 0
            and ((p.get("metadata") or {}).get("labels") or {}).get(REPLICA_TYPE_LABEL) == "worker"
            and _phase(p) == "Succeeded"
            and _exit_code(p, kind) == 0
            for p in pods
        )
        restarting = next((c for c in status.get("conditions") or [] if c.get("type") == "Restarting"), None)
        leaders = "Chief" in types or "Master" in types
        all_workers = spec.get("successPolicy") == "AllWorkers"
        for replica in replicas:
            c = counts[replica.type]
            expected = replica.replicas - c["succeeded"]
            if leaders:
                if replica.type in ("Chief", "Master"):
                    if c["active"] > 0:
                        _set_condition(
                            status,
                            "Running",
                            "True",
                            f"{k}Running",
                            f"TFJob {namespace}/{name} is running.",
                            at,
                        )
                    if expected == 0:
                        complete(f"TFJob {namespace}/{name} successfully completed.")
            elif replica.type == "Worker":
                if expected == 0 or (worker0_done and not all_workers):
                    complete(f"TFJob {namespace}/{name} successfully completed.")
                elif c["active"] > 0:
                    _set_condition(
                        status, "Running", "True", f"{k}Running", f"TFJob {namespace}/{name} is running.", at
                    )
            if c["failed"] > 0:
                if restarting is not None:
                    _set_condition(
                        status,
                        "Restarting",
                        "True",
                        str(restarting.get("reason", "")),
                        str(restarting.get("message", "")),
                        at,
                    )
                elif spec.get("enableDynamicWorker") is True and replica.type == "Worker":
                    continue
                else:
                    fail(
                        f"{k}Failed",
                        f"TFJob {namespace}/{name} has failed because {c['failed']} {replica.type} replica(s) failed.",
                    )
        return

    has_master = "Master" in types
    for replica in replicas:
        c = counts[replica.type]
        expected = replica.replicas - c["succeeded"]
        running, failed, succeeded = c["active"], c["failed"], c["succeeded"]
        if kind is MPI:
            if replica.type == "Launcher":
                if running > 0:
                    _set_condition(status, "Running", "True", f"{k}Running", f"MPIJob {name} is running.", at)
                if expected == 0:
                    complete(f"MPIJob {name} is successfully completed.")
                    return
            if failed > 0:
                if replica.restart_policy == EXIT_CODE_POLICY:
                    _set_condition(
                        status,
                        "Restarting",
                        "True",
                        f"{k}Restarting",
                        f"MPIJob {name} is restarting because {failed} {replica.type} replica(s) failed.",
                        at,
                    )
                else:
                    # The operator prefixes the kind twice here.
                    fail(
                        f"{k}{k}Failed",
                        f"MPIJob {name} is failed because {failed} {replica.type} replica(s) failed.",
                    )
            continue
        if has_master:
            if replica.type == "Master":
                if running > 0:
                    _set_condition(
                        status, "Running", "True", f"{k}Running", f"PyTorchJob {name} is running.", at
                    )
                if expected == 0:
                    complete(f"PyTorchJob {name} is successfully completed.")
                    return
        elif replica.type == "Worker":
            if expected == 0 or (spec.get("elasticPolicy") is not None and succeeded > 0):
                complete(f"PyTorchJob {namespace}/{name} successfully completed.")
            elif running > 0:
                _set_condition(
                    status, "Running", "True", f"{k}Running", f"PyTorchJob {namespace}/{name} is running.", at
                )
        if failed > 0 and replica.replicas > succeeded + running:
            if replica.restart_policy != "Never":
                _set_condition(
                    status,
                    "Restarting",
                    "True",
                    f"{k}Restarting",
                    f"PyTorchJob {name} is restarting because {failed} {replica.type} replica(s) failed.",
                    at,
                )
            else:
                fail(
                    f"{k}Failed",
                    f"PyTorchJob {name} is failed because {failed} {replica.type} replica(s) failed.",
                )
