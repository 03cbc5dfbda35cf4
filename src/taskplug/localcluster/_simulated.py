"""The simulated kubelet: no processes; pods go Pending → Running → Succeeded/Failed on the clock.

In the spirit of kwok's fake kubelet and Flyte's ``advancePodPhases`` test loop. A pod is scripted by
annotations: ``taskplug.io/simulate-duration`` (seconds a container runs, default 0),
``taskplug.io/simulate-exit-code`` (default 0), ``taskplug.io/simulate-oom`` (``"true"``: the containers
are OOMKilled, exit 137) and ``taskplug.io/simulate-logs`` (what ``logs`` returns). Restart policies
behave as in the process kubelet (OnFailure / Always restart after a CrashLoopBackOff delay of
10 s doubling to 5 min). Built for throughput: a pod costs two status writes and a timer, no task.
Annotations are the user's text: a duration that is not a finite number counts as 0 (``inf``: the
containers never finish), an exit code that is not an integer counts as 1 and is taken modulo 256 as a
process's would be, and an error while stepping one pod fails that pod alone (see :mod:`._kubeletbase`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Final

from taskplug.core import Clock
from taskplug.localcluster._events import EventRecorder
from taskplug.localcluster._kubeletbase import KubeletBase
from taskplug.localcluster._podstatus import ImagePolicy, PodRuntime, container_id, crash_loop_delay
from taskplug.localcluster._resources import POD
from taskplug.localcluster._store import Store
from taskplug.localcluster._timers import TimerHandle, Timers

__all__ = [
    "ANNOTATION_DURATION",
    "ANNOTATION_EXIT_CODE",
    "ANNOTATION_LOGS",
    "ANNOTATION_OOM",
    "SimulatedKubelet",
]

ANNOTATION_DURATION: Final = "taskplug.io/simulate-duration"
ANNOTATION_EXIT_CODE: Final = "taskplug.io/simulate-exit-code"
ANNOTATION_OOM: Final = "taskplug.io/simulate-oom"
ANNOTATION_LOGS: Final = "taskplug.io/simulate-logs"


class SimulatedKubelet(KubeletBase):
    def __init__(
        self, store: Store, recorder: EventRecorder, images: ImagePolicy, clock: Clock, timers: Timers
    ) -> None:
        super().__init__(store, recorder, images, clock)
        self._timers = timers
        self._pending: dict[str, TimerHandle] = {}

    def _annotation(self, runtime: PodRuntime, key: str, default: str) -> str:
        return str((runtime.pod["metadata"].get("annotations") or {}).get(key, default))

    def start(self, runtime: PodRuntime) -> None:
        if not self.images_usable(runtime):
            return
        for name in runtime.init_names:
            runtime.running(name, container_id(f"{runtime.uid}-{name}"))
            runtime.terminated(name, 0)
        self._run_containers(runtime)

    def _run_containers(self, runtime: PodRuntime) -> None:
        for name in runtime.names:
            if runtime.state(name) != "terminated" or runtime.restart_policy != "Never":
                runtime.running(
                    name, container_id(f"{runtime.uid}-{name}-{runtime.statuses[name]['restartCount']}")
                )
        if not self.publish(runtime):
            return
        for name in runtime.names:
            self.event(runtime, "Started", f"Started container {name}", container=name)
        try:
            duration = float(self._annotation(runtime, ANNOTATION_DURATION, "0"))
        except ValueError:
            duration = 0.0
        if math.isnan(duration):
            duration = 0.0
        if duration != math.inf:
            self._later(duration, runtime, self._finish)

    def _later(self, delay: float, runtime: PodRuntime, step: Callable[[PodRuntime], None]) -> None:
        def fire() -> None:
            try:
                step(runtime)
            except Exception as err:
                self._pending.pop(runtime.uid, None)
                self.runs.pop(runtime.uid, None)
                self.fail_runtime(runtime, err)

        self._pending[runtime.uid] = self._timers.call_later(delay, fire)

    def _finish(self, runtime: PodRuntime) -> None:
        self._pending.pop(runtime.uid, None)
        if runtime.finished or runtime.uid not in self.runs:
            return
        oom = self._annotation(runtime, ANNOTATION_OOM, "false").lower() == "true"
        try:
            code = 137 if oom else int(self._annotation(runtime, ANNOTATION_EXIT_CODE, "0")) % 256
        except ValueError:
            code = 1
        for name in runtime.names:
            runtime.terminated(name, code, reason="OOMKilled" if oom else None)
        restart = runtime.restart_policy == "Always" or (runtime.restart_policy == "OnFailure" and code != 0)
        if not restart:
            runtime.finished = True
            self.runs.pop(runtime.uid, None)
            self.publish(runtime)
            return
        delay = 0.0
        for name in runtime.names:
            restarts = runtime.statuses[name]["restartCount"] + 1
            delay = crash_loop_delay(restarts)
            runtime.restart(
                name,
                message=f"back-off {int(delay)}s restarting failed container={name} "
                f"pod={runtime.key[1]}_{runtime.key[0]}({runtime.uid})",
            )
        if self.publish(runtime):
            self._later(delay, runtime, self._run_containers)

    def stop(self, runtime: PodRuntime, *, deleted: bool) -> None:
        handle = self._pending.pop(runtime.uid, None)
        if handle is not None:
            handle.cancel()
        if deleted or runtime.finished:
            runtime.finished = True
            return
        runtime.finished = True
        for name in runtime.names:
            if runtime.state(name) == "running":
                self.event(runtime, "Killing", f"Stopping container {name}", container=name)
                runtime.terminated(name, 143)  # SIGTERM honoured
        runtime.abandon_waiting()
        self.publish(runtime)

    def kill(self, runtime: PodRuntime) -> None:
        handle = self._pending.pop(runtime.uid, None)
        if handle is not None:
            handle.cancel()
        runtime.finished = True
        for name in runtime.init_names + runtime.names:
            if runtime.state(name) != "terminated":
                runtime.terminated(name, 137)
        self.runs.pop(runtime.uid, None)
        self.publish(runtime)

    def logs(self, namespace: str, name: str, container: str | None) -> str:
        pod = self.store.try_get(POD, namespace, name)
        return "" if pod is None else str((pod["metadata"].get("annotations") or {}).get(ANNOTATION_LOGS, ""))
