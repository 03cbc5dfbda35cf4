"""A pod's status as the kubelet reports it, shared by the process and the simulated kubelet.

Follows pkg/kubelet/kubelet_pods.go (``getPhase``: Pending while an init container is unfinished or a
container is waiting for its first start; Running while any runs, a native sidecar included; then
Succeeded/Failed by restartPolicy, a sidecar's own exit not counted)
and pkg/kubelet/status/generate.go (conditions ``Initialized`` — ``ContainersNotInitialized``, ``containers
with incomplete status: [a]`` —, ``ContainersReady`` and ``Ready`` — ``ContainersNotReady``, ``containers
with unready status: [a b]``, or ``PodCompleted`` once the pod is done), with container statuses in the
kubelet's three states (``waiting`` → ``running`` → ``terminated``) and ``lastState`` across restarts.
Image-name checks follow github.com/distribution/reference (``InvalidImageName``); configured patterns
make a pull fail (``ErrImagePull`` then ``ImagePullBackOff``).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Sequence
from typing import Any, Final

from taskplug.localcluster._resources import TERMINAL_PHASES, set_condition

__all__ = ["ImagePolicy", "PodRuntime", "container_id", "crash_loop_delay"]

_DOMAIN: Final = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*(?::[0-9]+)?"
_COMPONENT: Final = r"[a-z0-9]+(?:(?:[_.]|__|[-]*)[a-z0-9]+)*"
_REFERENCE_RE: Final = re.compile(
    rf"^(?:{_DOMAIN}/)?{_COMPONENT}(?:/{_COMPONENT})*(?::[\w][\w.-]{{0,127}})?"
    r"(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$"
)


class ImagePolicy:
    """Which images cannot be used: invalid references always, and those matching a failure pattern."""

    def __init__(self, pull_failures: Sequence[str] = ()) -> None:
        self._patterns = tuple(pull_failures)

    def problem(self, image: str) -> tuple[str, str] | None:
        """``(waiting reason, message)`` for an image the kubelet cannot use, else None."""
        if not _REFERENCE_RE.match(image) or len(image) > 255:
            detail = (
                "repository name must be lowercase" if image.lower() != image else "invalid reference format"
            )
            return (
                "InvalidImageName",
                f'Failed to apply default image tag "{image}": couldn\'t parse image name "{image}": '
                f"invalid reference format{': ' + detail if detail != 'invalid reference format' else ''}",
            )
        if any(fnmatch.fnmatchcase(image, p) for p in self._patterns):
            return (
                "ErrImagePull",
                f'failed to pull and unpack image "{image}": failed to resolve reference "{image}": '
                f"{image.rpartition(':')[0] or image}: not found",
            )
        return None


def crash_loop_delay(restarts: int) -> float:
    """The kubelet's container restart back-off: 10 s, doubling, capped at 5 min."""
    return float(min(300, 10 * 2 ** max(0, restarts - 1)))


def container_id(seed: str) -> str:
    return f"taskplug://{seed}"


class PodRuntime:
    """The kubelet's view of one pod: container states, and the status they add up to."""

    def __init__(self, pod: dict[str, Any], *, now: Callable[[], str], pod_ip: str, host_ip: str) -> None:
        self.pod = pod
        self.spec: dict[str, Any] = pod.get("spec") or {}
        self.now = now
        self.pod_ip = pod_ip
        self.host_ip = host_ip
        self.start_time = now()
        self.restart_policy: str = self.spec.get("restartPolicy") or "Always"
        self.init_names = [c["name"] for c in self.spec.get("initContainers") or []]
        # Native sidecars (restartable init containers): initialized once started, running beside the
        # containers, their exit never deciding the pod's phase.
        self.sidecar_names = {
            c["name"] for c in self.spec.get("initContainers") or [] if c.get("restartPolicy") == "Always"
        }
        self.names = [c["name"] for c in self.spec.get("containers") or []]
        self.images = {
            c["name"]: c.get("image", "")
            for c in (self.spec.get("initContainers") or []) + (self.spec.get("containers") or [])
        }
        initial = "PodInitializing" if self.init_names else "ContainerCreating"
        self.statuses: dict[str, dict[str, Any]] = {}
        for name in self.init_names + self.names:
            self.statuses[name] = self._status(name, {"waiting": {"reason": initial}})
        self.reason: str | None = None  # status.reason (e.g. NodeShutdown)
        self.message: str | None = None
        self.finished = False

    @property
    def key(self) -> tuple[str, str]:
        return (self.pod["metadata"]["namespace"], self.pod["metadata"]["name"])

    @property
    def uid(self) -> str:
        return str(self.pod["metadata"]["uid"])

    def _status(self, name: str, state: dict[str, Any]) -> dict[str, Any]:
        return {
            "name": name,
            "image": self.images[name],
            "imageID": "",
            "ready": False,
            "started": False,
            "restartCount": 0,
            "state": state,
            "lastState": {},
        }

    # -- container state changes -------------------------------------------------------------------------
    def waiting(self, name: str, reason: str, message: str | None = None) -> None:
        status = self.statuses[name]
        status["state"] = {"waiting": {"reason": reason, **({"message": message} if message else {})}}
        status["ready"] = status["started"] = False

    def running(self, name: str, cid: str) -> str:
        started = self.now()
        status = self.statuses[name]
        status["state"] = {"running": {"startedAt": started}}
        status["containerID"] = cid
        status["ready"] = status["started"] = True
        return started

    def terminated(self, name: str, exit_code: int, *, reason: str | None = None, message: str = "") -> None:
        status = self.statuses[name]
        started = (status["state"].get("running") or {}).get("startedAt") or self.now()
        state: dict[str, Any] = {
            "exitCode": exit_code,
            "reason": reason or ("Completed" if exit_code == 0 else "Error"),
            "startedAt": started,
            "finishedAt": self.now(),
            "containerID": status.get("containerID", container_id(f"{self.uid}-{name}")),
        }
        if message:
            state["message"] = message
        status["state"] = {"terminated": state}
        status["ready"] = status["started"] = False

    def restart(self, name: str, reason: str = "CrashLoopBackOff", message: str | None = None) -> None:
        """The container ended and will start again: its last run moves to ``lastState``."""
        status = self.statuses[name]
        status["lastState"] = status["state"]
        status["restartCount"] += 1
        self.waiting(name, reason, message)

    def fail(self, reason: str, message: str) -> None:
        """The kubelet gave up on the pod: it is Failed with ``reason``; containers that never started wait
        with ``RunContainerError``, running ones are reported killed (137)."""
        self.reason, self.message = reason, message
        for name in self.init_names + self.names:
            state = self.state(name)
            if state == "waiting":
                self.waiting(name, "RunContainerError", message)
            elif state == "running":
                self.terminated(name, 137, reason="Error", message=message)
        self.finished = True

    def abandon_waiting(self) -> None:
        """The pod stopped before these containers ever ran: the kubelet reports them as lost."""
        for name in self.init_names + self.names:
            if self.state(name) == "waiting":
                self.terminated(
                    name,
                    137,
                    reason="ContainerStatusUnknown",
                    message="The container could not be located when the pod was terminated",
                )

    def state(self, name: str) -> str:
        state: str = next(iter(self.statuses[name]["state"]))
        return state

    def exit_code(self, name: str) -> int | None:
        terminated = self.statuses[name]["state"].get("terminated")
        return None if terminated is None else int(terminated["exitCode"])

    def _init_done(self, name: str) -> bool:
        """An init container no longer holds the pod back: it exited 0, or it is a sidecar that started."""
        if name in self.sidecar_names:
            return self.state(name) != "waiting" or bool(self.statuses[name]["lastState"])
        return self.exit_code(name) == 0

    @property
    def initialized(self) -> bool:
        return all(self._init_done(n) for n in self.init_names)

    # -- the pod's status --------------------------------------------------------------------------------
    def phase(self) -> str:
        if self.reason is not None:
            return "Failed"
        for name in self.init_names:
            code = self.exit_code(name)
            if (
                code is not None
                and code != 0
                and self.restart_policy == "Never"
                and name not in self.sidecar_names
            ):
                return "Failed"
        if not self.initialized:
            return "Pending"
        fresh_waiting = running = failed = 0
        for name in self.names:
            status = self.statuses[name]
            state = self.state(name)
            if state == "waiting" and not status["lastState"]:
                fresh_waiting += 1
            elif state == "running" or state == "waiting":
                running += 1
            elif self.exit_code(name) != 0:
                failed += 1
        # A running sidecar keeps the pod from being terminal (the kubelet stops it after the containers).
        running += sum(1 for n in self.sidecar_names if self.state(n) == "running")
        if fresh_waiting:
            return "Pending"
        if running:
            return "Running"
        if self.restart_policy == "Always":
            return "Running"
        if self.restart_policy == "OnFailure" and failed:
            return "Running"
        return "Failed" if failed else "Succeeded"

    def apply(self, obj: dict[str, Any]) -> None:
        """Write this runtime's status into ``obj`` (a private copy of the stored pod)."""
        status = obj.setdefault("status", {})
        phase = self.phase()
        now = self.now()
        status["phase"] = phase
        status["hostIP"] = self.host_ip
        status["hostIPs"] = [{"ip": self.host_ip}]
        status["podIP"] = self.pod_ip
        status["podIPs"] = [{"ip": self.pod_ip}]
        status["startTime"] = self.start_time
        if self.reason is not None:
            status["reason"] = self.reason
            if self.message:
                status["message"] = self.message
        pending_init = [n for n in self.init_names if not self._init_done(n)]
        if pending_init:
            set_condition(
                status,
                "Initialized",
                "False",
                now,
                "ContainersNotInitialized",
                f"containers with incomplete status: [{' '.join(pending_init)}]",
            )
        else:
            set_condition(status, "Initialized", "True", now)
        unready = [
            n
            for n in self.init_names + self.names
            if (n in self.sidecar_names or n in self.names) and not self.statuses[n]["ready"]
        ]
        for cond in ("ContainersReady", "Ready"):
            if phase in TERMINAL_PHASES:
                set_condition(status, cond, "False", now, "PodCompleted")
            elif unready:
                set_condition(
                    status,
                    cond,
                    "False",
                    now,
                    "ContainersNotReady",
                    f"containers with unready status: [{' '.join(unready)}]",
                )
            else:
                set_condition(status, cond, "True", now)
        if self.init_names:
            status["initContainerStatuses"] = [dict(self.statuses[n]) for n in self.init_names]
        status["containerStatuses"] = [dict(self.statuses[n]) for n in self.names]
