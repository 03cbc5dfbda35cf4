"""ResourceQuota admission for pods and the quota's ``status.used``.

Follows plugin/pkg/admission/resourcequota/controller.go (``checkRequest``): for every quota in the pod's
namespace, first the constraint check — a quota that tracks cpu or memory needs every container to state it
(``failed quota: NAME: must specify limits.cpu for: main``) — then the usage check: usage + request must stay
within ``spec.hard`` for each tracked resource, else 403 ``exceeded quota: NAME, requested: …, used: …,
limited: …`` listing only the exceeded resources, sorted, with canonical quantities. Usage counts the
non-terminal pods of the namespace and is kept incrementally, so admission is O(quotas), not O(pods), and
a pod admitted a microsecond ago is already counted (the real admission plugin also charges the quota
before the pod is stored).

Deviation: quota scopes and scope selectors (Terminating, BestEffort, PriorityClass) are ignored; every
quota in the namespace applies to every pod.
"""

from __future__ import annotations

from typing import Any, Final

from taskplug.core import Quantity, QuantityError
from taskplug.k8s import ResourceType
from taskplug.localcluster._errors import forbidden
from taskplug.localcluster._podres import (
    ResourceList,
    add_resources,
    container_usage_names,
    format_resources,
    pod_quota_usage,
)
from taskplug.localcluster._resources import POD, RESOURCE_QUOTA, TERMINAL_PHASES
from taskplug.localcluster._store import Store, StoredEvent

__all__ = ["QuotaController"]

# Resources a container must specify when a quota tracks them (the pod evaluator's validationSet).
_MUST_SPECIFY: Final = frozenset(
    {"cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"}
)


def _hard(quota: dict[str, Any]) -> ResourceList:
    hard: ResourceList = {}
    for key, value in ((quota.get("spec") or {}).get("hard") or {}).items():
        try:
            hard[key] = Quantity(str(value))
        except QuantityError:
            continue
    return hard


class QuotaController:
    """Admission hook + synchronous observer on the store."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._counted: dict[str, tuple[str, ResourceList]] = {}  # pod uid → (namespace, usage)
        self._usage: dict[str, ResourceList] = {}  # namespace → usage of its non-terminal pods
        store.admission.append(self.admit)
        store.observers.append(self.observe)

    def usage(self, namespace: str) -> ResourceList:
        return dict(self._usage.get(namespace, {}))

    def admit(self, rtype: ResourceType, pod: dict[str, Any]) -> None:
        if rtype != POD:
            return
        namespace = pod["metadata"]["namespace"]
        quotas = sorted(self._store.iter(RESOURCE_QUOTA, namespace), key=lambda q: q["metadata"]["name"])
        if not quotas:
            return
        name = str(pod["metadata"].get("name") or "")
        spec = pod.get("spec") or {}
        containers = (spec.get("containers") or []) + (spec.get("initContainers") or [])
        for quota in quotas:
            required = set(_hard(quota)) & _MUST_SPECIFY
            missing: dict[str, set[str]] = {}
            for container in containers:
                for res in required - container_usage_names(container):
                    missing.setdefault(res, set()).add(str(container.get("name")))
            if missing:
                why = "; ".join(
                    f"must specify {res} for: {','.join(sorted(missing[res]))}" for res in sorted(missing)
                )
                raise forbidden(POD, name, f"failed quota: {quota['metadata']['name']}: {why}")
        requested = pod_quota_usage(spec)
        used = self._usage.get(namespace, {})
        for quota in quotas:
            hard = _hard(quota)
            exceeded = [
                res
                for res, limit in hard.items()
                if res in requested and (used.get(res, Quantity(0)) + requested[res]).nanos > limit.nanos
            ]
            if exceeded:
                raise forbidden(
                    POD,
                    name,
                    f"exceeded quota: {quota['metadata']['name']}, "
                    f"requested: {format_resources(requested, exceeded)}, "
                    f"used: {format_resources(used, exceeded)}, "
                    f"limited: {format_resources(hard, exceeded)}",
                )

    def observe(self, rtype: ResourceType, event: StoredEvent) -> None:
        if rtype == POD:
            self._observe_pod(event)
        elif rtype == RESOURCE_QUOTA and event.type != "DELETED":
            self._refresh(event.obj)

    def _observe_pod(self, event: StoredEvent) -> None:
        obj = event.obj
        uid = obj["metadata"]["uid"]
        counts = event.type != "DELETED" and (obj.get("status") or {}).get("phase") not in TERMINAL_PHASES
        if counts == (uid in self._counted):
            return
        namespace = obj["metadata"]["namespace"]
        totals = self._usage.setdefault(namespace, {})
        if counts:
            usage = pod_quota_usage(obj.get("spec") or {})
            self._counted[uid] = (namespace, usage)
            add_resources(totals, usage)
        else:
            add_resources(totals, self._counted.pop(uid)[1], sign=-1)
        for quota in list(self._store.iter(RESOURCE_QUOTA, namespace)):
            self._refresh(quota)

    def _refresh(self, quota: dict[str, Any]) -> None:
        meta = quota["metadata"]
        hard = _hard(quota)
        used = self._usage.get(meta["namespace"], {})
        status = {
            "hard": {k: str(v) for k, v in hard.items()},
            "used": {k: str(used.get(k, Quantity(0))) for k in hard},
        }
        if quota.get("status") != status:

            def set_status(obj: dict[str, Any]) -> None:
                obj["status"] = status

            self._store.update(RESOURCE_QUOTA, meta["namespace"], meta["name"], set_status)
