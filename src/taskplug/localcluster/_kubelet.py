"""The process kubelet: runs a pod's containers as local processes and reports them like the kubelet.

Follows pkg/kubelet/kuberuntime at the level the API shows:

* init containers run one after another, then the regular containers (primary and sidecars) together;
  the image is ignored (the command runs on this host), ``command`` + ``args`` are expanded with
  ``$(VAR)`` from the container's env, which sits on a minimal host env (``PATH`` with this Python's
  ``bin`` first, ``HOME``, ``HOSTNAME``) in a per-pod working directory;
* native sidecars (init containers with ``restartPolicy: Always``) start in their turn among the init
  containers, the next one starting once the sidecar has started; they run beside the regular containers,
  restart whatever the pod's policy, and once the regular containers are done for good they are stopped,
  last started first: SIGTERM, then SIGKILL after the pod's ``terminationGracePeriodSeconds`` (30 s by
  default) — what flyte-copilot's uploader waits for (its signal watcher);
* an ``emptyDir`` volume is a folder of the pod's directory, shared by every container that mounts it;
* a container whose executable is named ``flyte-copilot`` (co-pilot's downloader and uploader) runs
  taskplug's implementation of flyte-copilot's contract (:mod:`._copilot`) with this Python, with the
  container's arguments, log, exit code and status as for any command; it starts with SIGTERM blocked, so
  a termination sent before the uploader watches for it stays pending instead of killing it;
* container states ``waiting: ContainerCreating`` → ``running.startedAt`` → ``terminated{exitCode, reason
  Completed|Error|OOMKilled, message, startedAt, finishedAt, containerID}``; a process killed by signal N
  exits 128+N; a container with no command cannot run (``ContainerCannotRun``, exit 128); a process that
  cannot be started (a missing executable, an exec format error, an argument or environment entry no
  process can hold) gives ``StartError`` (exit 128) with the OS's words, as containerd reports it, and a
  restarting container then waits with ``RunContainerError``;
* the termination message is read from the container's ``terminationMessagePath``, mapped to a file in
  the pod directory whose path is in ``$TERMINATION_MESSAGE_PATH`` (at most 4096 bytes); with
  ``FallbackToLogsOnError`` a failed container with no message reports the last 80 lines / 2048 bytes of
  its log;
* ``limits.memory`` is enforced by sampling the resident memory of the container's process group from
  /proc; above the limit the group is SIGKILLed and the container is ``OOMKilled`` with exit code 137;
* restartPolicy Never / OnFailure / Always with the CrashLoopBackOff delay (10 s doubling to 5 min, on the
  cluster's clock);
* deleting a pod sends SIGTERM, then SIGKILL after a short grace; leaving the cluster kills everything;
* a container is its process group (its own session): when its first process ends, what it left in the
  group is killed, as a container's processes end with it. Its processes also die with the process that runs
  the kubelet, even a SIGKILLed one: the first has a parent-death signal (``prctl(PR_SET_PDEATHSIG)``), and a
  small reaper process (one per kubelet, started with the first container) holds the list of groups and
  kills them when its pipe from the kubelet closes, which the kernel does when the kubelet's process dies;
* a container runs as the user its security context asks for (:mod:`._runas`): switched to that uid and
  those gids between fork and exec when the kubelet is root — its working directory and volumes opened to
  it, its termination-message file made for it —, else not run at all (``CreateContainerConfigError``
  naming the field), and refused with the kubelet's words when ``runAsNonRoot`` meets root;
* an error while running one pod fails that pod alone (see :mod:`._kubeletbase`).

Deviation: ``args`` without ``command`` is run as the command (there is no image entrypoint); a
container's env ``valueFrom`` supports ``fieldRef`` and ``resourceFieldRef`` only (``secretKeyRef`` and
``configMapKeyRef`` give ``CreateContainerConfigError``); ``envFrom``, probes and volumes other than
``emptyDir`` and ``hostPath`` (admitted only by a cluster that allows privileged pods; its ``type`` is not
checked) are not supported (``sizeLimit`` and ``medium`` are not enforced). A process has no mount
namespace: a container sees a volume at its ``mountPath`` (``subPath`` included) through the text it is
given — each mount path in its ``command``, ``args`` and ``env`` values, as a whole path or the start of
one, is rewritten to the volume's folder — so a program that finds a mount path elsewhere (in a file it
reads, in its own code) does not see the volume.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path, PurePosixPath
from typing import Any, Final

from taskplug.core import Clock, Quantity, QuantityError
from taskplug.localcluster._errors import go_quote
from taskplug.localcluster._events import EventRecorder
from taskplug.localcluster._kubeletbase import KubeletBase
from taskplug.localcluster._podstatus import ImagePolicy, PodRuntime, container_id, crash_loop_delay
from taskplug.localcluster._runas import RunAs, RunAsError, current_identity, run_as
from taskplug.localcluster._store import Store
from taskplug.localcluster._zygote import _PRCTL, ForkedProcess, Zygote, _die_with, warm_launch

__all__ = [
    "COPILOT_EXECUTABLE",
    "MemorySampler",
    "ProcessKubelet",
    "copilot_argv",
    "expand_vars",
    "mount_path_mapper",
    "process_group_rss",
    "tail_for_termination_message",
]

_log = logging.getLogger(__name__)

_VAR_RE: Final = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.\-]*)\)")
_FIELD_RE: Final = re.compile(r"^metadata\.(labels|annotations)\['([^']*)'\]$")
_PAGE: Final = os.sysconf("SC_PAGE_SIZE")
_STAT_BYTES: Final = 4096  # /proc/<pid>/stat is at most ~1 KB: 52 numbers and a command name of 16 bytes
_MESSAGE_LIMIT: Final = 4096
_LOG_TAIL_LINES: Final = 80
_LOG_TAIL_BYTES: Final = 2048
_DEFAULT_GRACE_SECONDS: Final = 30.0
COPILOT_EXECUTABLE: Final = "flyte-copilot"
_COPILOT_MODULE: Final = "taskplug.localcluster._copilot"
# Where the taskplug package is imported from, so the co-pilot process imports the same one.
_PACKAGE_ROOT: Final = str(Path(__file__).resolve().parents[2])


def expand_vars(text: str, env: dict[str, str]) -> str:
    """Kubernetes' ``$(VAR)`` expansion: defined variables are replaced, ``$$`` escapes, others stay."""

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        return env.get(match.group(1), match.group(0))

    return _VAR_RE.sub(replace, text)


def process_group_rss() -> dict[int, int]:
    """Resident bytes of every process group on the machine, by group id, from one pass over ``/proc``.

    Each process's ``stat`` is read by a bare ``os.read`` rather than a Python file object, which took a third
    more CPU per pass (the whole file fits in one read)."""
    groups: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            fd = os.open(f"/proc/{entry.name}/stat", os.O_RDONLY)
        except OSError:
            continue  # the process is gone
        try:
            stat = os.read(fd, _STAT_BYTES)
        except OSError:
            continue
        finally:
            os.close(fd)
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 21:
            pgid = int(fields[2])
            groups[pgid] = groups.get(pgid, 0) + int(fields[21]) * _PAGE
    return groups


class MemorySampler:
    """The resident bytes of containers' process groups for their memory limits, from a pass over ``/proc``
    shared by every container sampled within ``max_age`` seconds of it.

    Every running container is sampled at each poll (20 a second), and a pass reads the ``stat`` of every
    process on the machine: with N containers running, N passes per poll interval became at most two (one
    when their polls fall together), the rest of the CPU left to the containers. A container's sample is at
    most ``max_age`` old (half a poll interval), so a group over its limit is killed at most that much later
    than by a pass of its own, and one that started after the pass is sampled by the next."""

    def __init__(self, max_age: float, clock: Callable[[], float]) -> None:
        self._max_age = max_age
        self._clock = clock
        self._taken = -math.inf
        self._groups: dict[int, int] = {}

    def rss(self, pgid: int) -> int:
        now = self._clock()
        if now - self._taken >= self._max_age:
            self._groups = process_group_rss()
            self._taken = now
        return self._groups.get(pgid, 0)


def copilot_argv(argv: Sequence[str]) -> list[str] | None:
    """The command running taskplug's flyte-copilot for a container whose executable is named
    ``flyte-copilot`` (any folder: ``/bin/flyte-copilot`` in Flyte's pods), with the same arguments; else
    None."""
    if not argv or PurePosixPath(argv[0]).name != COPILOT_EXECUTABLE:
        return None
    return [sys.executable, "-m", _COPILOT_MODULE, *argv[1:]]


def mount_path_mapper(mounts: Sequence[tuple[str, str]]) -> Callable[[str], str]:
    """A function rewriting each ``(mount path, host folder)``'s mount path in a text to the folder, where
    it stands as a path of its own (``/var/inputs``, ``/var/inputs/a``, ``--dir=/var/inputs``) and not
    inside another (``/x/var/inputs``, ``/var/inputs2``); the longest mount path wins."""
    folders = {path.rstrip("/"): host for path, host in mounts if path.rstrip("/")}
    if not folders:
        return lambda text: text
    alternatives = "|".join(re.escape(p) for p in sorted(folders, key=len, reverse=True))
    pattern = re.compile(rf"(?<![\w.~/-])({alternatives})(?![\w.-])")
    return lambda text: pattern.sub(lambda m: folders[m.group(1)], text)


def tail_for_termination_message(log: bytes) -> str:
    """The last 80 lines of a log, then its last 2048 bytes (the kubelet's FallbackToLogsOnError)."""
    lines = log.splitlines(keepends=True)[-_LOG_TAIL_LINES:]
    return b"".join(lines)[-_LOG_TAIL_BYTES:].decode("utf-8", "replace")


def die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the child get SIGKILL when the process starting it dies (Linux), or None
    where there is no such signal. Resolved before the fork: the child only calls into libc."""
    if _PRCTL is None:
        return None
    parent = os.getpid()

    def arm() -> None:
        _die_with(parent)  # the zygote's children arm it the same way

    return arm


def _preexec(*, block_sigterm: bool, reaper_fd: int | None) -> Callable[[], None] | None:
    """What a container's process does between fork and exec: arm its parent-death signal, tell the reaper
    its process group (written by the child itself, so no container can outrun its registration — the
    kubelet learns the pid only some event-loop turns later), and block SIGTERM for co-pilot."""
    arm = die_with_parent()
    if not block_sigterm and arm is None and reaper_fd is None:
        return None

    def run() -> None:
        if block_sigterm:
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        if arm is not None:
            arm()
        if reaper_fd is not None:
            # One short write to a pipe is atomic; the group is this process's (start_new_session).
            with contextlib.suppress(OSError):
                os.write(reaper_fd, b"+%d\n" % os.getpid())
            os.close(reaper_fd)

    return run


def start_error_message(executable: str, err: Exception) -> str:
    """containerd's words for a process that could not be started."""
    if isinstance(err, OSError):
        if isinstance(err, FileNotFoundError) and "/" not in executable:
            reason = "executable file not found in $PATH"
        else:
            text = err.strerror or str(err)
            reason = text[:1].lower() + text[1:]  # Go's errno strings are lower case
    else:
        reason = f"invalid argument ({err})"
    return (
        "failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create "
        f"failed: unable to start container process: exec: {go_quote(executable)}: {reason}: unknown"
    )


# The reaper: reads "+PGID" / "-PGID" lines; when its stdin closes (the kubelet's process is gone, or the
# kubelet is done), it kills every group still listed. It ignores the signals a terminal or a `kill` of the
# kubelet's group would send, so only the pipe decides.
_REAPER_SOURCE: Final = """
import os, signal, sys
for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
    signal.signal(sig, signal.SIG_IGN)
groups = set()
for line in sys.stdin.buffer:
    try:
        pgid = int(line[1:])
    except ValueError:
        continue
    if line[:1] == b"+":
        groups.add(pgid)
    else:
        groups.discard(pgid)
for pgid in groups:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass
"""


class _Reaper:
    """The kubelet's reaper process (started with the first container, ended with the kubelet)."""

    def __init__(self) -> None:
        self._proc: asyncio.subprocess.Process | None = None
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        """Start the reaper if it is not running yet (before the first container, so none escapes it)."""
        async with self._lock:
            if self._proc is None:
                # Without a reaper, the parent-death signal still covers each container's first process.
                with contextlib.suppress(OSError):
                    self._proc = await asyncio.create_subprocess_exec(
                        sys.executable,
                        "-I",
                        "-S",
                        "-c",
                        _REAPER_SOURCE,
                        stdin=asyncio.subprocess.PIPE,
                        stdout=asyncio.subprocess.DEVNULL,
                        stderr=asyncio.subprocess.DEVNULL,
                        start_new_session=True,
                    )

    def watch(self, pgid: int) -> None:
        self._send(self._proc, f"+{pgid}\n")

    def fd(self) -> int | None:
        """The write end of the reaper's pipe, for a container's process to register itself before exec."""
        proc = self._proc
        if proc is None or proc.stdin is None or proc.returncode is not None:
            return None
        pipe = proc.stdin.transport.get_extra_info("pipe")
        return pipe.fileno() if pipe is not None else None

    def forget(self, pgid: int) -> None:
        self._send(self._proc, f"-{pgid}\n")

    @staticmethod
    def _send(proc: asyncio.subprocess.Process | None, line: str) -> None:
        if proc is None or proc.stdin is None or proc.returncode is not None:
            return
        with contextlib.suppress(ConnectionError, RuntimeError):
            proc.stdin.write(line.encode())

    async def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.stdin is not None:
            with contextlib.suppress(ConnectionError, RuntimeError):
                proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), timeout=10)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()


class _ConfigError(Exception):
    pass


_Process = asyncio.subprocess.Process | ForkedProcess
"""A container's process: exec'd, or forked by the zygote (:mod:`._zygote`)."""


class _PodWorker:
    def __init__(self, kubelet: ProcessKubelet, runtime: PodRuntime) -> None:
        self.kubelet = kubelet
        self.rt = runtime
        namespace, name = runtime.key
        # A file name holds 255 bytes; a namespace (63) and a pod name (253) together do not fit. The whole
        # uid, as the kubelet's /var/log/pods/<namespace>_<pod>_<uid>: a log link's template can name it.
        self.dir = kubelet.workdir / f"{namespace}_{name[:120]}_{runtime.uid}"
        self.stopping: str | None = None  # "deleted", "deleting" or "shutdown"
        self.stop_event = asyncio.Event()
        self.procs: dict[str, _Process] = {}
        self.containers = {
            c["name"]: c
            for c in (runtime.spec.get("initContainers") or []) + (runtime.spec.get("containers") or [])
        }
        # Where each container sits in the spec, for the messages that name one of its fields.
        self.paths = {
            c["name"]: f"spec.{field}[{i}]"
            for field in ("initContainers", "containers")
            for i, c in enumerate(runtime.spec.get(field) or [])
        }
        self.shared = False  # the pod's folders are opened to the other users its containers run as
        # Native sidecars: restartable init containers.
        self.sidecars = [
            c["name"] for c in runtime.spec.get("initContainers") or [] if c.get("restartPolicy") == "Always"
        ]
        self.sidecar_tasks: dict[str, asyncio.Task[None]] = {}
        self.started: dict[str, asyncio.Event] = {}
        self.sidecars_ending = asyncio.Event()
        self.volumes = {
            str(v.get("name")): self.dir / "volumes" / str(v.get("name"))
            for v in runtime.spec.get("volumes") or []
            if isinstance(v, dict) and "emptyDir" in v and _is_folder_name(v.get("name"))
        }
        # Admitted only on a cluster that allows privileged pods: this machine's folder, as it is.
        self.host_paths = {
            str(v.get("name")): Path(str(v["hostPath"].get("path") or ""))
            for v in runtime.spec.get("volumes") or []
            if isinstance(v, dict)
            and isinstance(v.get("hostPath"), dict)
            and str(v["hostPath"].get("path") or "").startswith("/")
        }

    def stop(self, how: str) -> None:
        if self.stopping is None:
            for name in self.procs:
                self.kubelet.event(self.rt, "Killing", f"Stopping container {name}", container=name)
        if self.stopping is None or how == "shutdown":
            self.stopping = how
        self.stop_event.set()
        sig = signal.SIGKILL if how == "shutdown" else signal.SIGTERM
        for proc in self.procs.values():
            _signal_group(proc, sig)

    def log_path(self, name: str) -> Path:
        return self.dir / "logs" / f"{name}.log"

    async def run(self) -> None:
        failure: Exception | None = None
        try:
            await self._run()
        except Exception as err:
            failure = err  # this pod fails; the kubelet goes on with the others
        finally:
            for proc in list(self.procs.values()):
                _signal_group(proc, signal.SIGKILL)
                with contextlib.suppress(ProcessLookupError):
                    await proc.wait()
            self.rt.finished = True
            self.kubelet.runs.pop(self.rt.uid, None)
        if failure is not None:
            self.kubelet.fail_runtime(self.rt, failure)

    def _link_by_name(self) -> None:
        """``<namespace>_<pod>`` beside the folder, pointing at it (the latest pod of that name): a log link
        whose plugin knows a pod's name but not its uid (a PyTorchJob's replicas) can still name its file."""
        namespace, name = self.rt.key
        link = self.dir.parent / f"{namespace}_{name[:120]}"
        staged = self.dir.parent / f".{link.name}.{self.rt.uid}"
        try:
            staged.unlink(missing_ok=True)
            staged.symlink_to(self.dir.name, target_is_directory=True)
            os.replace(staged, link)  # atomic: a reader finds the old pod's folder or the new one's
        except OSError as e:
            _log.warning("cannot link %s to its pod's folder: %s", link, e)

    async def _run(self) -> None:
        kubelet, rt = self.kubelet, self.rt
        (self.dir / "logs").mkdir(parents=True, exist_ok=True)
        self._link_by_name()
        (self.dir / "termination").mkdir(exist_ok=True)
        (self.dir / "work").mkdir(exist_ok=True)
        for folder in self.volumes.values():
            folder.mkdir(parents=True, exist_ok=True)
        if not kubelet.images_usable(rt):
            await self.stop_event.wait()  # stays Pending (ImagePullBackOff, InvalidImageName) until stopped
        else:
            kubelet.publish(rt)
            async with asyncio.TaskGroup() as sidecars:
                initialized = await self._run_init_containers(sidecars)
                if initialized and self.stopping is None:
                    kubelet.publish(rt)
                    async with asyncio.TaskGroup() as group:
                        for name in rt.names:
                            group.create_task(self._container_loop(name))
                await self._end_sidecars()
            if not initialized:
                return
        if self.stopping is not None:
            self.rt.abandon_waiting()
        kubelet.publish(rt)

    async def _run_init_containers(self, sidecars: asyncio.TaskGroup) -> bool:
        """Run init containers in order; False when one failed for good (the pod is Failed). A native
        sidecar is started in ``sidecars`` and the next init container waits until it has started."""
        for name in self.rt.init_names:
            if name in self.sidecars:
                started = self.started[name] = asyncio.Event()
                self.sidecar_tasks[name] = sidecars.create_task(self._container_loop(name))
                await _first_of(started, self.stop_event)
                continue
            while self.stopping is None:
                code = await self._run_container(name)
                if code == 0 or self.stopping is not None:
                    break
                if self.rt.restart_policy == "Never":
                    self.kubelet.publish(self.rt)
                    return False
                await self._back_off(name)
        return True

    def _ended(self, name: str) -> bool:
        """The container is not to run again: the pod is stopping, or it is a sidecar being stopped."""
        return self.stopping is not None or (name in self.sidecars and self.sidecars_ending.is_set())

    async def _container_loop(self, name: str) -> None:
        while not self._ended(name):
            code = await self._run_container(name)
            policy = "Always" if name in self.sidecars else self.rt.restart_policy
            if self._ended(name) or policy == "Never" or (policy == "OnFailure" and code == 0):
                return
            await self._back_off(name)

    def _grace_period(self) -> float:
        value = self.rt.spec.get("terminationGracePeriodSeconds")
        if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
            return float(value)
        return _DEFAULT_GRACE_SECONDS

    async def _end_sidecars(self) -> None:
        """The regular containers are done (or never start): stop the sidecars, last started first, as the
        kubelet stops restartable init containers — SIGTERM, then SIGKILL after the grace period."""
        self.sidecars_ending.set()
        grace = self._grace_period()
        for name in reversed(self.sidecars):
            task = self.sidecar_tasks.get(name)
            if task is None:
                continue
            proc = self.procs.get(name)
            if proc is not None:
                self.kubelet.event(self.rt, "Killing", f"Stopping container {name}", container=name)
                _signal_group(proc, signal.SIGTERM)
            done, _ = await asyncio.wait({task}, timeout=grace)
            if not done:
                proc = self.procs.get(name)
                if proc is not None:
                    _signal_group(proc, signal.SIGKILL)
                else:  # not running (never started): nothing to wait for
                    task.cancel()
                await asyncio.wait({task})

    async def _back_off(self, name: str) -> None:
        rt = self.rt
        delay = crash_loop_delay(rt.statuses[name]["restartCount"] + 1)
        namespace, pod = rt.key
        terminated = rt.statuses[name]["state"].get("terminated") or {}
        if terminated.get("reason") == "StartError":
            # The kubelet shows the start failure itself while it waits to try again.
            rt.restart(name, reason="RunContainerError", message=terminated.get("message"))
        else:
            rt.restart(
                name,
                message=f"back-off {int(delay)}s restarting failed container={name} pod={pod}_{namespace}({rt.uid})",
            )
        self.kubelet.publish(rt)
        self.kubelet.event(
            rt,
            "BackOff",
            f"Back-off restarting failed container {name} in pod {pod}_{namespace}({rt.uid})",
            warning=True,
            container=name,
        )
        sleeper = asyncio.ensure_future(self.kubelet.clock.sleep(delay))
        stoppers = [asyncio.ensure_future(self.stop_event.wait())]
        if name in self.sidecars:
            stoppers.append(asyncio.ensure_future(self.sidecars_ending.wait()))
        try:
            await asyncio.wait({sleeper, *stoppers}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in (sleeper, *stoppers):
                waiter.cancel()
            await asyncio.gather(sleeper, *stoppers, return_exceptions=True)

    def _mounts(self, container: dict[str, Any]) -> list[tuple[str, str]]:
        """``(mount path, host folder)`` of the container's mounts of the pod's emptyDir and hostPath
        volumes."""
        mounts = []
        for mount in container.get("volumeMounts") or []:
            if not isinstance(mount, dict):
                continue
            volume = str(mount.get("name"))
            host = self.host_paths.get(volume)
            folder = self.volumes.get(volume, host)
            path = str(mount.get("mountPath") or "")
            if folder is None or not path.startswith("/"):
                continue
            sub = str(mount.get("subPath") or "")
            if sub:
                parts = PurePosixPath(sub).parts
                if sub.startswith("/") or ".." in parts:
                    continue
                folder = folder.joinpath(*parts)
                if host is not None:
                    mounts.append((path, str(folder)))
                    continue  # this machine's folder: used as it is, never created or opened up
                folder.mkdir(parents=True, exist_ok=True)
                if self.shared:
                    folder.chmod(0o777)  # as the volume itself (an emptyDir is 0777)
            mounts.append((path, str(folder)))
        return mounts

    def _env(
        self, container: dict[str, Any], term_path: Path, map_paths: Callable[[str], str]
    ) -> dict[str, str]:
        pod = self.rt.pod
        meta, spec = pod["metadata"], pod.get("spec") or {}
        env = {
            "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
            "HOME": os.environ.get("HOME", str(self.dir)),
            "HOSTNAME": meta["name"],
            "LANG": "C.UTF-8",
            "TERMINATION_MESSAGE_PATH": str(term_path),
        }
        fields = {
            "metadata.name": meta["name"],
            "metadata.namespace": meta["namespace"],
            "metadata.uid": meta["uid"],
            "spec.nodeName": spec.get("nodeName", ""),
            "spec.serviceAccountName": spec.get("serviceAccountName", ""),
            "status.podIP": self.rt.pod_ip,
            "status.hostIP": self.rt.host_ip,
        }
        for var in container.get("env") or []:
            name = str(var.get("name"))
            if "value" in var or "valueFrom" not in var:
                env[name] = map_paths(expand_vars(str(var.get("value") or ""), env))
                continue
            source = var["valueFrom"] or {}
            if "fieldRef" in source:
                path = str(source["fieldRef"].get("fieldPath", ""))
                match = _FIELD_RE.match(path)
                env[name] = (
                    (meta.get(match.group(1)) or {}).get(match.group(2), "")
                    if match
                    else fields.get(path, "")
                )
            elif "resourceFieldRef" in source:
                env[name] = self._resource_field(container, source["resourceFieldRef"])
            else:
                ref = source.get("secretKeyRef") or source.get("configMapKeyRef") or {}
                if ref.get("optional"):
                    continue
                kind = "secret" if "secretKeyRef" in source else "configmap"
                raise _ConfigError(f'{kind} "{ref.get("name", "")}" not found')
        return env

    @staticmethod
    def _resource_field(container: dict[str, Any], ref: dict[str, Any]) -> str:
        field, _, resource = str(ref.get("resource", "")).partition(".")
        value = ((container.get("resources") or {}).get(field) or {}).get(resource)
        if value is None:
            return "0"
        try:
            quantity, divisor = Quantity(str(value)), Quantity(str(ref.get("divisor") or "1"))
        except QuantityError:
            return "0"
        return str(-(-quantity.nanos // max(1, divisor.nanos)))  # rounded up, as the kubelet does

    async def _run_container(self, name: str) -> int:
        kubelet, rt = self.kubelet, self.rt
        container = self.containers[name]
        term_path = self.dir / "termination" / name
        term_path.unlink(missing_ok=True)
        euid, egid, groups = current_identity()
        try:
            identity: RunAs | RunAsError = run_as(
                rt.pod, container, self.paths[name], euid=euid, egid=egid, groups=groups
            )
        except RunAsError as err:
            identity = err
        if isinstance(identity, RunAs) and identity.switches:
            self._share_folders()
        map_paths = mount_path_mapper(self._mounts(container))
        try:
            env = self._env(container, term_path, map_paths)
            if isinstance(identity, RunAsError):  # the kubelet checks the user after the environment
                raise _ConfigError(str(identity))
            runas = identity
        except _ConfigError as err:
            rt.waiting(name, "CreateContainerConfigError", str(err))
            kubelet.publish(rt)
            kubelet.event(rt, "Failed", f"Error: {err}", warning=True, container=name)
            await self.stop_event.wait()
            return 1
        if runas.uid is not None:
            env["HOME"] = str(self.dir / "work")  # this machine's HOME is the kubelet user's
        self._open_termination_file(term_path, runas)
        argv = [
            map_paths(expand_vars(str(a), env))
            for a in (container.get("command") or []) + (container.get("args") or [])
        ]
        cid = container_id(f"{rt.uid}-{name}-{rt.statuses[name]['restartCount']}")
        if not argv:
            rt.running(name, cid)
            rt.terminated(name, 128, reason="ContainerCannotRun", message="no command specified")
            kubelet.publish(rt)
            kubelet.event(rt, "Failed", "Error: no command specified", warning=True, container=name)
            return 128
        image = rt.images[name]
        kubelet.event(rt, "Pulled", f'Container image "{image}" already present on machine', container=name)
        kubelet.event(rt, "Created", f"Created container: {name}", container=name)
        launch, copilot = argv, copilot_argv(argv)
        if copilot is not None:
            launch = copilot
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [_PACKAGE_ROOT, env.get("PYTHONPATH")]))
        zygote = kubelet.zygote
        warm = None
        if zygote is not None and copilot is None and not runas.switches:
            warm = warm_launch(launch, env)
        reaper_fd: int | None = None
        with open(self.log_path(name), "ab") as log:  # noqa: ASYNC230 - a local file opens at once
            proc: _Process | None = None
            if warm is not None and zygote is not None:
                # No reaper for a forked container: the zygote kills its children's groups when this process
                # is gone (see _zygote.py), so the first one does not wait for the reaper to start.
                proc = await zygote.spawn(
                    warm, env=env, cwd=str(self.dir / "work"), log_fd=log.fileno(), reaper_fd=None
                )
            if proc is None:
                await kubelet.reaper.start()
                reaper_fd = kubelet.reaper.fd()
            try:
                proc = proc or await asyncio.create_subprocess_exec(
                    *launch,
                    cwd=self.dir / "work",
                    env=env,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=log,
                    stderr=asyncio.subprocess.STDOUT,
                    start_new_session=True,
                    pass_fds=() if reaper_fd is None else (reaper_fd,),
                    preexec_fn=_preexec(block_sigterm=copilot is not None, reaper_fd=reaper_fd),
                    # Switched between fork and exec, before the preexec function (which arms the
                    # parent-death signal, cleared by a change of user).
                    user=runas.uid,
                    group=runas.gid,
                    extra_groups=runas.groups,
                )
            except (OSError, ValueError, subprocess.SubprocessError) as err:
                # ValueError: a NUL in an argument or the environment, '=' in an env name (what no exec can
                # take); SubprocessError: the child failed before exec.
                message = start_error_message(argv[0], err)
                rt.running(name, cid)
                rt.terminated(name, 128, reason="StartError", message=message)
                kubelet.publish(rt)
                kubelet.event(rt, "Failed", f"Error: {message}", warning=True, container=name)
                return 128
        self.procs[name] = proc
        if reaper_fd is None and not isinstance(proc, ForkedProcess):
            kubelet.reaper.watch(proc.pid)
        try:
            rt.running(name, cid)
            kubelet.publish(rt)
            kubelet.event(rt, "Started", f"Started container {name}", container=name)
            if name in self.started:
                self.started[name].set()
                if self.sidecars_ending.is_set():  # started as the sidecars were being stopped
                    _signal_group(proc, signal.SIGTERM)
            code, oom = await self._supervise(proc, self._memory_limit(container))
        finally:
            self.procs.pop(name, None)
            # The container ends with its first process: what it left in its group goes too.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            kubelet.reaper.forget(proc.pid)
        message = self._termination_message(container, term_path, name, code)
        rt.terminated(name, code, reason="OOMKilled" if oom else None, message=message)
        kubelet.publish(rt)
        return code

    def _share_folders(self) -> None:
        """Let a container running as another user than the kubelet reach the pod's folders: the working
        directory (shared, sticky) and the volumes (0777, as an emptyDir is) become writable by all, the
        folders above them traversable but not listable; the logs stay the kubelet's."""
        if self.shared:
            return
        self.shared = True
        for folder in (self.kubelet.workdir, self.dir, self.dir / "termination", self.dir / "volumes"):
            if folder.exists():
                folder.chmod(0o711)
        (self.dir / "logs").chmod(0o700)
        (self.dir / "work").chmod(0o1777)
        for folder in self.volumes.values():
            folder.chmod(0o777)

    @staticmethod
    def _open_termination_file(term_path: Path, identity: RunAs) -> None:
        """Create the termination message file for a container run as another user, owned by it (the
        kubelet creates and mounts it; a process of another user could not create it in the folder)."""
        if not identity.switches:
            return
        term_path.touch(mode=0o600)
        os.chown(
            term_path,
            -1 if identity.uid is None else identity.uid,
            -1 if identity.gid is None else identity.gid,
        )
        if identity.uid is None:
            term_path.chmod(0o660)  # only the group is switched: the group writes it

    @staticmethod
    def _memory_limit(container: dict[str, Any]) -> int | None:
        value = ((container.get("resources") or {}).get("limits") or {}).get("memory")
        if value is None:
            return None
        try:
            return Quantity(str(value)).value()
        except QuantityError:
            return None

    async def _supervise(self, proc: _Process, memory_limit: int | None) -> tuple[int, bool]:
        loop = asyncio.get_running_loop()
        waiter = asyncio.ensure_future(proc.wait())
        oom = False
        term_sent: float | None = None
        try:
            while True:
                done, _ = await asyncio.wait({waiter}, timeout=self.kubelet.poll_interval)
                if done:
                    break
                if memory_limit is not None and not oom and self.kubelet.memory.rss(proc.pid) > memory_limit:
                    oom = True
                    _signal_group(proc, signal.SIGKILL)
                if self.stopping is not None and term_sent is None:
                    _signal_group(proc, signal.SIGKILL if self.stopping == "shutdown" else signal.SIGTERM)
                    term_sent = loop.time()
                elif term_sent is not None and loop.time() - term_sent > self.kubelet.kill_grace:
                    _signal_group(proc, signal.SIGKILL)
        finally:
            if not waiter.done():
                _signal_group(proc, signal.SIGKILL)
                await asyncio.shield(waiter)
        code = proc.returncode if proc.returncode is not None else 137
        if code < 0:
            code = 128 - code
        return (137 if oom else code), oom

    def _termination_message(self, container: dict[str, Any], term_path: Path, name: str, code: int) -> str:
        try:
            with open(term_path, "rb") as fh:
                message = fh.read(_MESSAGE_LIMIT).decode("utf-8", "replace")
        except OSError:
            message = ""
        if not message and code != 0 and container.get("terminationMessagePolicy") == "FallbackToLogsOnError":
            try:
                message = tail_for_termination_message(self.log_path(name).read_bytes())
            except OSError:
                message = ""
        return message


def _is_folder_name(name: object) -> bool:
    return isinstance(name, str) and name not in ("", ".", "..") and "/" not in name and "\0" not in name


async def _first_of(*events: asyncio.Event) -> None:
    waiters = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
        await asyncio.gather(*waiters, return_exceptions=True)


def _signal_group(proc: _Process, sig: int) -> None:
    if proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


class ProcessKubelet(KubeletBase):
    def __init__(
        self,
        store: Store,
        recorder: EventRecorder,
        images: ImagePolicy,
        clock: Clock,
        *,
        workdir: Path,
        poll_interval: float = 0.05,
        kill_grace: float = 2.0,
        zygote: Zygote | None = None,
    ) -> None:
        super().__init__(store, recorder, images, clock)
        self.zygote = zygote
        self.workdir = workdir
        self.poll_interval = poll_interval
        self.kill_grace = kill_grace
        self.memory = MemorySampler(poll_interval / 2, time.monotonic)
        self._workers: dict[str, _PodWorker] = {}
        self._dirs: dict[tuple[str, str], _PodWorker] = {}
        self._group: asyncio.TaskGroup | None = None
        self.reaper = _Reaper()

    async def run(self) -> None:
        try:
            async with asyncio.TaskGroup() as group:
                self._group = group
                try:
                    await super().run()
                finally:
                    self._group = None
                    for worker in self._workers.values():
                        worker.stop("deleted")
        finally:
            await self.reaper.close()

    def start(self, runtime: PodRuntime) -> None:
        assert self._group is not None, "the kubelet is not running"
        worker = _PodWorker(self, runtime)
        self._workers[runtime.uid] = worker
        self._dirs[runtime.key] = worker
        task = self._group.create_task(worker.run())
        task.add_done_callback(lambda _t: self._workers.pop(runtime.uid, None))

    def stop(self, runtime: PodRuntime, *, deleted: bool) -> None:
        worker = self._workers.get(runtime.uid)
        if worker is not None:
            worker.stop("deleted" if deleted else "deleting")

    def kill(self, runtime: PodRuntime) -> None:
        worker = self._workers.get(runtime.uid)
        if worker is not None:
            worker.stop("shutdown")

    def logs(self, namespace: str, name: str, container: str | None) -> str:
        worker = self._dirs.get((namespace, name))
        if worker is None:
            return ""
        names = worker.rt.names
        path = worker.log_path(container or (names[0] if names else ""))
        try:
            return path.read_bytes().decode("utf-8", "replace")
        except OSError:
            return ""
