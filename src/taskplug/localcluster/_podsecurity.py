"""Pod Security admission at the ``baseline`` level: the pods the embedded cluster refuses to create.

Follows k8s.io/pod-security-admission: the baseline checks of policy/check_*.go that a process kubelet could
be asked to honour — ``hostNamespaces`` (``spec.hostNetwork``/``hostPID``/``hostIPC``), ``hostPorts``,
``privileged``, then the overlapping ones, ``capabilities_baseline`` (``capabilities.add`` beyond the
default set) and ``hostPathVolumes`` — each worded as its ``CheckResult`` (reason, detail), aggregated as
``AggregateCheckResults(...).ForbiddenDetail()`` and refused as admission/admission.go refuses a pod:
403 ``pods "x" is forbidden: violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true),
privileged (container "c" must not set securityContext.privileged=true), hostPath volumes (volume "v")``.

Why it matters here more than on a real cluster: the kubelet runs a pod's commands as processes of this
machine, so a hostPath volume, a privileged container or the host's namespaces would be granted in full
(or silently not, which is worse). A cluster started with ``pod_security="privileged"`` (``taskplug cluster
serve --allow-privileged-pods``) admits every pod, as the ``privileged`` level does.

Deviation: the level is the cluster's, not a namespace's (no ``pod-security.kubernetes.io/enforce``
labels), only pods are checked (not the templates of workloads), and the baseline checks the kubelet here
cannot be asked to honour anyway (AppArmor, SELinux, seccomp, procMount, sysctls, Windows host process,
probes' hosts) are not made.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final, Literal

from taskplug.k8s import ResourceType
from taskplug.localcluster._errors import forbidden
from taskplug.localcluster._resources import POD

__all__ = ["POD_SECURITY_LEVELS", "PodSecurityAdmission", "PodSecurityLevel", "baseline_violations"]

PodSecurityLevel = Literal["baseline", "privileged"]
POD_SECURITY_LEVELS: Final[tuple[PodSecurityLevel, ...]] = ("baseline", "privileged")

# check_capabilities_baseline.go: capabilities_allowed_1_0.
_ALLOWED_CAPABILITIES: Final = frozenset(
    {
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    }
)


def _join_quote(items: list[str]) -> str:
    return '"' + '", "'.join(items) + '"' if items else ""


def _plural(singular: str, plural: str, count: int) -> str:
    return singular if count == 1 else plural


def _containers(spec: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """visitContainers: init containers, then containers, then ephemeral containers."""
    for field in ("initContainers", "containers", "ephemeralContainers"):
        for container in spec.get(field) or []:
            if isinstance(container, dict):
                yield container


def _security(container: dict[str, Any]) -> dict[str, Any]:
    context = container.get("securityContext")
    return context if isinstance(context, dict) else {}


def _host_namespaces(spec: dict[str, Any]) -> str | None:
    shared = [f"{field}=true" for field in ("hostNetwork", "hostPID", "hostIPC") if spec.get(field) is True]
    return ", ".join(shared) if shared else None


def _host_ports(spec: dict[str, Any]) -> str | None:
    bad: list[str] = []
    ports: set[int] = set()
    for container in _containers(spec):
        used: list[int] = [
            p["hostPort"]
            for p in container.get("ports") or []
            if isinstance(p, dict) and isinstance(p.get("hostPort"), int) and p["hostPort"] != 0
        ]
        if used:
            bad.append(str(container.get("name")))
            ports.update(used)
    if not bad:
        return None
    listed = sorted(str(p) for p in ports)  # sets.NewString(...).List(): sorted as strings
    return (
        f"{_plural('container', 'containers', len(bad))} {_join_quote(bad)} "
        f"{_plural('uses', 'use', len(bad))} {_plural('hostPort', 'hostPorts', len(listed))} {', '.join(listed)}"
    )


def _privileged(spec: dict[str, Any]) -> str | None:
    bad = [str(c.get("name")) for c in _containers(spec) if _security(c).get("privileged") is True]
    if not bad:
        return None
    return (
        f"{_plural('container', 'containers', len(bad))} {_join_quote(bad)} "
        "must not set securityContext.privileged=true"
    )


def _capabilities(spec: dict[str, Any]) -> str | None:
    bad: list[str] = []
    added: set[str] = set()
    for container in _containers(spec):
        capabilities = _security(container).get("capabilities")
        extra = [
            str(c)
            for c in (capabilities.get("add") or [] if isinstance(capabilities, dict) else [])
            if c not in _ALLOWED_CAPABILITIES
        ]
        if extra:
            bad.append(str(container.get("name")))
            added.update(extra)
    if not bad:
        return None
    return (
        f"{_plural('container', 'containers', len(bad))} {_join_quote(bad)} must not include "
        f"{_join_quote(sorted(added))} in securityContext.capabilities.add"
    )


def _host_path_volumes(spec: dict[str, Any]) -> str | None:
    bad = [
        str(v.get("name"))
        for v in spec.get("volumes") or []
        if isinstance(v, dict) and v.get("hostPath") is not None
    ]
    return f"{_plural('volume', 'volumes', len(bad))} {_join_quote(bad)}" if bad else None


# The order the evaluator runs them in at the baseline level: the baseline checks, then the overlapping ones.
_CHECKS: Final = (
    ("host namespaces", _host_namespaces),
    ("hostPort", _host_ports),
    ("privileged", _privileged),
    ("non-default capabilities", _capabilities),
    ("hostPath volumes", _host_path_volumes),
)


def baseline_violations(spec: dict[str, Any]) -> list[str]:
    """What a pod spec does that the baseline level forbids, each as ``reason (detail)``; empty when none."""
    found = []
    for reason, check in _CHECKS:
        detail = check(spec)
        if detail is not None:
            found.append(f"{reason} ({detail})")
    return found


class PodSecurityAdmission:
    """The admission hook: a pod that violates the baseline level is refused at create (403)."""

    def __init__(self, level: PodSecurityLevel) -> None:
        if level not in POD_SECURITY_LEVELS:
            raise ValueError(f"pod_security must be one of {list(POD_SECURITY_LEVELS)}, not {level!r}")
        self.level = level

    def admit(self, rtype: ResourceType, obj: dict[str, Any]) -> None:
        if rtype != POD or self.level == "privileged":
            return
        spec = obj.get("spec")
        violations = baseline_violations(spec if isinstance(spec, dict) else {})
        if violations:
            name = str((obj.get("metadata") or {}).get("name") or "")
            raise forbidden(POD, name, f'violates PodSecurity "baseline:latest": {", ".join(violations)}')
