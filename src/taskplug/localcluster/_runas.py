"""The user a container's process runs as: its security context, merged as the kubelet merges it, checked
against what this process can do.

Follows pkg/securitycontext/util.go (``DetermineEffectiveSecurityContext``: the container's ``runAsUser``,
``runAsGroup`` and ``runAsNonRoot`` override the pod's; ``supplementalGroups`` and ``fsGroup`` are the
pod's) and pkg/kubelet/kuberuntime/security_context_others.go (``verifyRunAsNonRoot``, its messages
word for word). A container that cannot be run as asked is a :class:`RunAsError`, which the kubelet reports
as it reports a container config it cannot create: ``waiting`` with ``CreateContainerConfigError`` and the
message, and a ``Failed`` event ``Error: <message>``.

There is no image here, so the "image user" is the user the kubelet's process runs as. A process that is
root switches to the uid and gids asked for (setgroups, setgid, setuid between fork and exec); one that is
not root cannot, so a container asking for another uid, gid or supplementary group than this process has is
refused, naming the field — never silently run as someone else.

Deviation: without ``runAsGroup``, a container whose ``runAsUser`` is switched to runs with that user's
primary group from this machine's user database, else with ``65534`` (nogroup) — a container runtime would
take the image's ``/etc/passwd``, else group 0, which on a shared host is root's group. Its supplementary
groups are exactly ``supplementalGroups`` and ``fsGroup`` (root's own groups are dropped).
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["NOGROUP", "RunAs", "RunAsError", "current_identity", "run_as"]

NOGROUP: Final = 65534


class RunAsError(Exception):
    """The container cannot be run as its security context asks (the message says why, naming the field)."""


@dataclass(frozen=True, slots=True)
class RunAs:
    """What to switch to before exec; None keeps this process's own (no switch)."""

    uid: int | None = None
    gid: int | None = None
    groups: tuple[int, ...] | None = None

    @property
    def switches(self) -> bool:
        return self.uid is not None or self.gid is not None or self.groups is not None


def _context(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    found = obj.get("securityContext")
    return found if isinstance(found, Mapping) else {}


def _pick(
    field: str, container: Mapping[str, Any], pod: Mapping[str, Any], container_path: str
) -> tuple[Any, str]:
    """The effective value of ``field`` and the path of the field it comes from."""
    value = _context(container).get(field)
    if value is not None:
        return value, f"{container_path}.securityContext.{field}"
    return _context(pod).get(field), f"spec.securityContext.{field}"


def _primary_group(uid: int) -> int:
    try:
        return pwd.getpwuid(uid).pw_gid
    except KeyError:
        return NOGROUP


def run_as(
    pod: Mapping[str, Any],
    container: Mapping[str, Any],
    container_path: str,
    *,
    euid: int,
    egid: int,
    groups: Sequence[int],
) -> RunAs:
    """The identity ``container`` (at ``container_path``, e.g. ``spec.containers[0]``) of ``pod`` runs with,
    for a kubelet whose process has ``euid``, ``egid`` and supplementary ``groups``; :class:`RunAsError`
    when it cannot be run so."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    name = str(container.get("name") or "")
    pod_ref = f"{meta.get('name', '')}_{meta.get('namespace', '')}({meta.get('uid', '')})"  # format.Pod
    uid, uid_field = _pick("runAsUser", container, spec, container_path)
    gid, gid_field = _pick("runAsGroup", container, spec, container_path)
    non_root, _ = _pick("runAsNonRoot", container, spec, container_path)

    if non_root is True:
        if uid is not None:
            if uid == 0:
                raise RunAsError(
                    f'container\'s runAsUser breaks non-root policy (pod: "{pod_ref}", container: {name})'
                )
        elif euid == 0:
            raise RunAsError(
                f'container has runAsNonRoot and image will run as root (pod: "{pod_ref}", container: {name})'
            )

    pod_context = _context(spec)
    extra = [g for g in pod_context.get("supplementalGroups") or [] if isinstance(g, int)]
    fs_group = pod_context.get("fsGroup")
    if isinstance(fs_group, int):
        extra.append(fs_group)
    wanted_groups = tuple(dict.fromkeys(extra))  # in order, once each

    if euid != 0:
        # No switching: every id asked for must be one this process already runs with.
        if uid is not None and uid != euid:
            raise RunAsError(
                f"cannot run container {name!r} as {uid_field}={uid}: the kubelet runs as uid {euid} and, "
                "not being root, cannot switch users"
            )
        if gid is not None and gid != egid:
            raise RunAsError(
                f"cannot run container {name!r} as {gid_field}={gid}: the kubelet runs as gid {egid} and, "
                "not being root, cannot switch groups"
            )
        missing = [g for g in wanted_groups if g != egid and g not in groups]
        if missing:
            field = (
                "spec.securityContext.supplementalGroups"
                if missing[0] in (pod_context.get("supplementalGroups") or [])
                else "spec.securityContext.fsGroup"
            )
            raise RunAsError(
                f"cannot run container {name!r} with group {missing[0]} ({field}): the kubelet is not in that "
                "group and, not being root, cannot add it"
            )
        return RunAs()

    switch_user = uid is not None and uid != euid
    if not switch_user and gid is None and not wanted_groups:
        return RunAs()  # root asked to stay root (or nothing asked): run as this process does
    target_uid = uid if uid is not None else euid
    target_gid = gid if gid is not None else (_primary_group(target_uid) if switch_user else egid)
    return RunAs(
        uid=target_uid if switch_user else None,
        gid=target_gid,
        groups=wanted_groups if (switch_user or wanted_groups) else None,
    )


def current_identity() -> tuple[int, int, tuple[int, ...]]:
    """``(euid, egid, supplementary groups)`` of this process."""
    return os.geteuid(), os.getegid(), tuple(os.getgroups())
