"""Create-time validation (422 ``Invalid``) and defaulting, for names and pods.

Follows k8s.io/apimachinery/pkg/util/validation (DNS-1123 subdomain and label rules and their messages),
pkg/apis/core/validation (a pod needs containers, each with a name and an image) and
pkg/apis/core/v1/defaults.go (requests default to limits, restartPolicy ``Always``, terminationMessagePath
``/dev/termination-log``, …).

Deviation: only the rules the machinery can trip over are checked; a real API server validates every
field (and makes most of a pod's spec immutable on update, which is not enforced here).
"""

from __future__ import annotations

import re
from typing import Any, Final

from taskplug.k8s import ResourceType
from taskplug.localcluster._errors import FieldError, invalid
from taskplug.localcluster._resources import NAMESPACE, POD

__all__ = ["default_pod", "pod_qos_class", "validate_create"]

_SUBDOMAIN_RE: Final = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_RE: Final = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SUBDOMAIN_MSG: Final = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
_LABEL_MSG: Final = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and "
    "end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)


def _name_errors(field: str, name: str, *, label: bool) -> list[FieldError]:
    limit, pattern, message = (63, _LABEL_RE, _LABEL_MSG) if label else (253, _SUBDOMAIN_RE, _SUBDOMAIN_MSG)
    errors = []
    if len(name) > limit:
        errors.append(FieldError(field, "Invalid value", f"must be no more than {limit} characters", name))
    if not pattern.match(name):
        errors.append(FieldError(field, "Invalid value", message, name))
    return errors


def validate_create(rtype: ResourceType, obj: dict[str, Any]) -> None:
    """Raise 422 when ``obj`` (name already generated) may not be created."""
    metadata = obj.get("metadata") or {}
    name = str(metadata.get("name") or "")
    errors: list[FieldError] = []
    if not name:
        errors.append(FieldError("metadata.name", "Required value", "name or generateName is required"))
    else:
        errors += _name_errors("metadata.name", name, label=rtype == NAMESPACE)
    if rtype == POD:
        errors += _pod_errors(obj.get("spec") or {})
    if errors:
        raise invalid(str(obj.get("kind") or rtype.kind), rtype, name, errors)


def _pod_errors(spec: dict[str, Any]) -> list[FieldError]:
    errors: list[FieldError] = []
    containers = spec.get("containers") or []
    if not containers:
        errors.append(FieldError("spec.containers", "Required value"))
    seen: set[str] = set()
    for field, listing in (
        ("spec.initContainers", spec.get("initContainers") or []),
        ("spec.containers", containers),
    ):
        for i, container in enumerate(listing):
            path = f"{field}[{i}]"
            cname = str(container.get("name") or "")
            if not cname:
                errors.append(FieldError(f"{path}.name", "Required value"))
            else:
                errors += _name_errors(f"{path}.name", cname, label=True)
                if cname in seen:
                    errors.append(FieldError(f"{path}.name", "Duplicate value", value=cname))
                seen.add(cname)
            if not container.get("image"):
                errors.append(FieldError(f"{path}.image", "Required value"))
    return errors


def _default_container(container: dict[str, Any]) -> None:
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    image = str(container.get("image") or "")
    tagless = ":" not in image.rpartition("/")[2] and "@" not in image
    container.setdefault(
        "imagePullPolicy", "Always" if tagless or image.endswith(":latest") else "IfNotPresent"
    )
    resources = container.setdefault("resources", {})
    limits = resources.get("limits") or {}
    if limits:
        # SetDefaults_Pod: a limit with no request makes the request equal to the limit.
        requests = resources.setdefault("requests", {})
        for key, value in limits.items():
            requests.setdefault(key, value)


def default_pod(pod: dict[str, Any]) -> None:
    """Apply the API server's pod defaults in place (on a private copy) and set the initial status."""
    spec = pod.setdefault("spec", {})
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("serviceAccountName", "default")
    spec.setdefault("securityContext", {})
    spec.setdefault("priority", 0)
    for container in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        _default_container(container)
    status = pod.setdefault("status", {})
    status.setdefault("phase", "Pending")
    status["qosClass"] = pod_qos_class(spec)


def pod_qos_class(spec: dict[str, Any]) -> str:
    """BestEffort, Burstable or Guaranteed (pkg/apis/core/v1/helper/qos), for cpu and memory."""
    requests_seen = limits_seen = False
    guaranteed = True
    for container in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        resources = container.get("resources") or {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        for res in ("cpu", "memory"):
            if res in requests:
                requests_seen = True
            if res in limits:
                limits_seen = True
            if res not in limits or str(requests.get(res, limits.get(res))) != str(limits[res]):
                guaranteed = False
    if not requests_seen and not limits_seen:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"
