"""What both kubelets share: following the pods bound to a node, publishing status, image checks.

Follows pkg/kubelet's pod workers at the level the API shows: a bound pod is picked up once, its status is
written back as a whole (``status`` subresource), image problems surface as waiting reasons plus the events
``Pulling``/``Failed``/``BackOff``/``InspectFailed`` worded as the kubelet words them, and a node shutdown
fails the node's pods with ``status.reason`` ``NodeShutdown``.

Nothing a pod holds stops the kubelet: an error while handling one pod is logged with the pod's name and
fails that pod alone — ``status.phase`` ``Failed``, ``status.reason`` ``UnexpectedAdmissionError`` (what a
kubelet reports for a pod it rejects for an unexpected reason), the error in ``status.message``, containers
that never started ``waiting`` with ``RunContainerError`` — and the loop goes on with every other pod.
Deviation: a real kubelet would retry such a pod for ever; failing it tells whoever waits for it.
"""

from __future__ import annotations

import abc
import itertools
import logging
from typing import Any, Final

from taskplug.core import Clock
from taskplug.localcluster._events import EventRecorder
from taskplug.localcluster._podstatus import ImagePolicy, PodRuntime
from taskplug.localcluster._resources import NODE, POD, TERMINAL_PHASES, format_time, set_condition
from taskplug.localcluster._store import Store

__all__ = ["REJECTED_REASON", "SHUTDOWN_MESSAGE", "SHUTDOWN_REASON", "KubeletBase", "describe_error"]

SHUTDOWN_REASON: Final = "NodeShutdown"
SHUTDOWN_MESSAGE: Final = "Pod was terminated in response to imminent node shutdown."
REJECTED_REASON: Final = "UnexpectedAdmissionError"

_log = logging.getLogger(__name__)


def describe_error(err: BaseException) -> str:
    """``TypeError: …`` for an error, the first leaf of an exception group (a task group's failure)."""
    while isinstance(err, BaseExceptionGroup) and err.exceptions:
        err = err.exceptions[0]
    return f"{type(err).__name__}: {err}"


class KubeletBase(abc.ABC):
    def __init__(self, store: Store, recorder: EventRecorder, images: ImagePolicy, clock: Clock) -> None:
        self.store = store
        self.recorder = recorder
        self.images = images
        self.clock = clock
        self.runs: dict[str, PodRuntime] = {}
        self._ips = itertools.count(2)

    def now(self) -> str:
        return format_time(self.clock.now())

    async def run(self) -> None:
        watcher = self.store.watch(POD, internal=True)
        try:
            while (item := await watcher.next()) is not None:
                try:
                    self.on_pod(item[0], item[1].obj)
                except Exception as err:
                    if item[0] != "DELETED":
                        self.reject(item[1].obj, err)
                    else:
                        _log.exception("kubelet: could not stop a deleted pod")
        finally:
            watcher.close()

    def reject(self, pod: dict[str, Any], err: BaseException) -> None:
        """Fail the one pod whose handling raised ``err`` (logged with its name); the others go on."""
        found = pod.get("metadata")
        meta: dict[str, Any] = found if isinstance(found, dict) else {}
        namespace, name, uid = meta.get("namespace"), meta.get("name"), meta.get("uid")
        _log.error("kubelet: pod %s/%s failed: %s", namespace, name, describe_error(err), exc_info=err)
        message = f"Pod was rejected: the kubelet could not run it: {describe_error(err)}"
        try:
            runtime = self.runs.pop(uid, None) if isinstance(uid, str) else None
            if runtime is not None:
                runtime.fail(REJECTED_REASON, message)
                self.stop(runtime, deleted=True)  # whatever was started for it stops
                self.publish(runtime)
                return
            if not isinstance(name, str) or not isinstance(namespace, str):
                return

            def mark(obj: dict[str, Any]) -> None:
                status = obj.get("status")
                if not isinstance(status, dict):
                    status = obj["status"] = {}
                status.update(phase="Failed", reason=REJECTED_REASON, message=message)

            self.store.update(POD, namespace, name, mark)
        except Exception:
            _log.exception("kubelet: could not mark pod %s/%s failed", namespace, name)

    def fail_runtime(self, runtime: PodRuntime, err: BaseException) -> None:
        """A pod's worker hit ``err``: the pod fails with it (logged with its name)."""
        namespace, name = runtime.key
        _log.error("kubelet: pod %s/%s failed: %s", namespace, name, describe_error(err), exc_info=err)
        runtime.fail(
            REJECTED_REASON, f"Pod was rejected: the kubelet could not run it: {describe_error(err)}"
        )
        try:
            self.publish(runtime)
        except Exception:
            _log.exception("kubelet: could not mark pod %s/%s failed", namespace, name)

    def on_pod(self, type_: str, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        uid = meta["uid"]
        if type_ == "DELETED":
            if uid in self.runs:
                self.stop(self.runs.pop(uid), deleted=True)
            return
        if uid in self.runs:
            if meta.get("deletionTimestamp"):
                self.stop(self.runs[uid], deleted=False)
            return
        node = (pod.get("spec") or {}).get("nodeName")
        if (
            not node
            or meta.get("deletionTimestamp")
            or (pod.get("status") or {}).get("phase") in TERMINAL_PHASES
        ):
            return
        if self.store.try_get(NODE, None, node) is None:
            return  # not one of our nodes
        runtime = PodRuntime(pod, now=self.now, pod_ip=self.pod_ip(), host_ip="127.0.0.1")
        self.runs[uid] = runtime
        self.start(runtime)

    def pod_ip(self) -> str:
        n = next(self._ips)
        return f"10.244.{(n >> 8) & 0xFF}.{n & 0xFF}"

    def publish(self, runtime: PodRuntime) -> bool:
        """Write the runtime's status to the pod; False when the pod is gone."""
        namespace, name = runtime.key
        current = self.store.try_get(POD, namespace, name)
        if current is None or current["metadata"]["uid"] != runtime.uid:
            return False
        return self.store.update(POD, namespace, name, runtime.apply) is not None

    def event(
        self,
        runtime: PodRuntime,
        reason: str,
        note: str,
        *,
        warning: bool = False,
        container: str | None = None,
    ) -> None:
        namespace, name = runtime.key
        current = self.store.try_get(POD, namespace, name) or runtime.pod
        self.recorder.record(
            current,
            reason,
            note,
            type_="Warning" if warning else "Normal",
            field_path=f"spec.containers{{{container}}}" if container else None,
        )

    def images_usable(self, runtime: PodRuntime) -> bool:
        """Check every image (init containers first); on a problem, report it and leave the pod Pending."""
        bad = False
        for group in (runtime.init_names, runtime.names):
            for name in group:
                image = runtime.images[name]
                problem = self.images.problem(image)
                if problem is None:
                    continue
                bad = True
                reason, message = problem
                if reason == "InvalidImageName":
                    self.event(runtime, "InspectFailed", message, warning=True, container=name)
                    self.event(runtime, "Failed", f"Error: {reason}", warning=True, container=name)
                    runtime.waiting(name, reason, message)
                    continue
                self.event(runtime, "Pulling", f'Pulling image "{image}"', container=name)
                self.event(
                    runtime,
                    "Failed",
                    f'Failed to pull image "{image}": {message}',
                    warning=True,
                    container=name,
                )
                self.event(runtime, "Failed", "Error: ErrImagePull", warning=True, container=name)
                runtime.waiting(name, "ErrImagePull", message)
                self.publish(runtime)
                self.event(runtime, "BackOff", f'Back-off pulling image "{image}"', container=name)
                self.event(runtime, "Failed", "Error: ImagePullBackOff", warning=True, container=name)
                runtime.waiting(name, "ImagePullBackOff", f'Back-off pulling image "{image}"')
            if bad:
                break
        if bad:
            self.publish(runtime)
        return not bad

    def shutdown_node(self, node: str) -> None:
        """Kill the node's pods (Failed, ``NodeShutdown``, containers 137) and stop scheduling onto it."""
        for runtime in list(self.runs.values()):
            if (runtime.spec.get("nodeName")) == node and not runtime.finished:
                runtime.reason, runtime.message = SHUTDOWN_REASON, SHUTDOWN_MESSAGE
                self.kill(runtime)
        now = self.now()

        def cordon(obj: dict[str, Any]) -> None:
            obj.setdefault("spec", {})["unschedulable"] = True
            set_condition(
                obj.setdefault("status", {}),
                "Ready",
                "False",
                now,
                "KubeletNotReady",
                "node is shutting down",
            )

        self.store.update(NODE, None, node, cordon)

    def restore_node(self, node: str) -> None:
        now = self.now()

        def uncordon(obj: dict[str, Any]) -> None:
            obj.setdefault("spec", {}).pop("unschedulable", None)
            set_condition(
                obj.setdefault("status", {}),
                "Ready",
                "True",
                now,
                "KubeletReady",
                "kubelet is posting ready status",
            )

        self.store.update(NODE, None, node, uncordon)

    @abc.abstractmethod
    def start(self, runtime: PodRuntime) -> None:
        """Begin running a newly bound pod."""

    @abc.abstractmethod
    def stop(self, runtime: PodRuntime, *, deleted: bool) -> None:
        """The pod is being deleted: stop its containers (and report them, unless it is already gone)."""

    @abc.abstractmethod
    def kill(self, runtime: PodRuntime) -> None:
        """Kill the pod's containers now (exit 137) and report the pod Failed (node shutdown)."""

    def logs(self, namespace: str, name: str, container: str | None) -> str:
        return ""
