"""Warm interpreters for the process kubelet: a fork server (a "zygote") that starts a container's Python entry
point by forking a child of an interpreter that has already imported what the entry point needs.

A container whose command is ``pyflyte-execute`` starts a new interpreter that imports flytekit (over a
second on a small machine) and the task's module before the task's first line runs; ``taskplug run module.py
task`` must import both anyway to serialize the task. :meth:`Zygote.fork` forks the calling process — before it
starts an event loop or a thread — into a small server that runs ``prepare`` first (``taskplug run``: import
flytekit and the user's module, serialize the task) and hands its result back (:meth:`Zygote.prepared`) while
the calling process goes on with its own work (``taskplug run``: load the platform), then imports the entry
points' modules (``preload``) and waits; for each container the kubelet hands it, it forks a child that becomes
the container's process. When ``prepare`` raises, the forked process is no zygote: it goes on from the fork
with the exception, as the calling process would have (the command reports the error and exits), and
:meth:`Zygote.prepared` raises :class:`PrepareFailed` with its exit code. While it prepares it is in the
caller's process group (the module is imported with the command's terminal and job control), with SIGINT and
SIGTERM blocked, and dies with the calling process: a Ctrl-C is the caller's to answer, once. In the spirit of Flyte 2's reusable containers (an environment's image kept
running between tasks), on one machine and for one process at a time: the child is used once and ends with
its container.

Only commands that are known Python entry points of this very interpreter are forked (:func:`warm_launch`):
``pyflyte-execute``, ``pyflyte-fast-execute`` and ``pyflyte-map-execute`` found on the container's ``PATH``
in this interpreter's ``bin`` folder and starting with its ``#!`` line, and ``python -m MODULE ...`` where
``python`` is this interpreter; anything else (and any container run as another user, and co-pilot) is
exec'd as before. The child keeps a pod's process semantics, as an exec'd container has them:

* its environment is the container's alone (``os.environ`` replaced), its working directory the pod's,
  ``sys.argv`` and ``sys.path`` those a new ``python SCRIPT`` (or ``python -m``) would have with that
  environment (the script's folder or the working directory, then ``PYTHONPATH``, then the interpreter's
  own folders), ``PYTHONUNBUFFERED`` and ``PYTHONDONTWRITEBYTECODE`` honoured;
* stdin is ``/dev/null``, stdout and stderr go to the container's kept log (new stream objects: what the
  zygote's streams held is gone);
* it is the leader of its own process group, which the kubelet signals, samples for its memory limit
  (OOM kill) and kills when the container ends, exactly as an exec'd container's; signal dispositions and
  mask are those of a new interpreter (SIGINT raises KeyboardInterrupt, SIGPIPE and SIGXFSZ ignored, the
  others default, none blocked) before the entry point's own;
* its exit code is the interpreter's: ``SystemExit``'s code, 1 for an uncaught exception (its traceback in
  the log), death by signal N reported as -N (the kubelet's 128+N), after the non-daemon threads and the
  ``atexit`` functions ran and the streams were flushed;
* it dies with the cluster: its parent-death signal is armed against the zygote, and the zygote kills the
  process group of every child it still has — what the kubelet's reaper does for exec'd containers — when
  the process that forked it closes it or is gone (its end of the control socket closes, which the kernel
  does for a SIGKILLed process too), then exits.

Deviation: a real kubelet starts every container from its image. A forked container is the zygote's
interpreter: the modules the zygote imported (flytekit, and what the forking process had imported) are
already imported, from the zygote's ``sys.path`` — a container whose ``PYTHONPATH`` holds another copy of
one of them gets the zygote's. With ``taskplug run``, that includes the user's module: its top-level code ran
once, in the zygote (a copy of the command's process, forked before flytekit was imported) with the command's
environment, and the task runs from it (a module that reads
its environment when imported sees the command's, not the pod's); interpreter settings fixed at startup (hash seed, ``-X`` options, the locale's
encoding, warnings filters) are the zygote's; flytekit's import-time state that depends on the environment is
made again for the container's (its loggers, its default context) but its temporary folder is the zygote's.
Its memory is counted as the kubelet counts any process's — the resident pages of its group, which include
those it shares with the zygote (as a new interpreter would have loaded them itself).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import copyreg
import ctypes
import gc
import importlib
import io
import json
import os
import pickle
import runpy
import select
import selectors
import shutil
import signal
import socket
import sys
import tempfile
import threading
import traceback
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "FLYTEKIT_PRELOAD",
    "KNOWN_SCRIPTS",
    "ForkedProcess",
    "Launch",
    "PrepareFailed",
    "Zygote",
    "warm_launch",
]

KNOWN_SCRIPTS: Final = frozenset({"pyflyte-execute", "pyflyte-fast-execute", "pyflyte-map-execute"})
"""The console scripts a zygote may run in a forked child (flytekit's task entry points)."""

FLYTEKIT_PRELOAD: Final = (
    "flytekit",
    "flytekit.bin.entrypoint",
    # What pyflyte-execute imports on its way to the task (its type transformers, loaded lazily).
    "flytekit.types.numpy",
    "flytekit.types.schema.types_pandas",
    "flytekit.types.structured.basic_dfs",
    "mashumaro.mixins.orjson",
    "botocore.exceptions",
)
"""What a zygote for flytekit tasks imports before its first fork: pyflyte-execute's module and what it
imports while it loads and runs a task."""

_PR_SET_PDEATHSIG: Final = 1
_MAX_FDS: Final = 3
_MAX_REQUEST: Final = 1 << 20
_KILLED: Final = -int(signal.SIGKILL)


@dataclass(frozen=True, slots=True)
class Launch:
    """A Python entry point a forked child runs: a script file (``script``), or a module (``module``, as
    ``python -m``), with the arguments after it."""

    script: str | None
    module: str | None
    args: tuple[str, ...]


def _is_module_name(name: str) -> bool:
    return bool(name) and all(part.isidentifier() for part in name.split("."))


def warm_launch(argv: Sequence[str], env: Mapping[str, str]) -> Launch | None:
    """The entry point ``argv`` names when a zygote of this interpreter may run it (see the module
    docstring), looked up on the container's ``PATH`` as exec would; None when it is to be exec'd."""
    if not argv:
        return None
    command = argv[0]
    if "/" in command:
        found: str | None = command if os.access(command, os.X_OK) else None
    else:
        found = shutil.which(command, path=env.get("PATH", ""))
    if found is None:
        return None
    found = os.path.abspath(found)
    executable = sys.executable
    if not executable or os.path.dirname(found) != os.path.dirname(executable):
        return None  # another interpreter's (another virtual environment's) script
    if os.path.basename(found) in KNOWN_SCRIPTS:
        try:
            with open(found, "rb") as fh:
                first = fh.readline(4096)
        except OSError:
            return None
        if first.rstrip(b"\r\n") != b"#!" + os.fsencode(executable):
            return None
        return Launch(script=found, module=None, args=tuple(argv[1:]))
    try:
        same = os.path.samefile(found, executable)
    except OSError:
        return None
    if same and len(argv) >= 3 and argv[1] == "-m" and _is_module_name(argv[2]):
        return Launch(script=None, module=argv[2], args=tuple(argv[3:]))
    return None


def _load_prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    return prctl


_PRCTL: Final = _load_prctl()


def _die_with(parent: int) -> None:
    """SIGKILL when ``parent`` dies (it may have died already)."""
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGKILL)


class PrepareFailed(Exception):
    """A zygote's ``prepare`` raised: the forked process went on with the exception as the caller would have,
    and ended with :attr:`exit_code` (-N: killed by signal N)."""

    def __init__(self, exit_code: int) -> None:
        super().__init__(f"the zygote's preparation ended the forked process with exit code {exit_code}")
        self.exit_code = exit_code


class ForkedProcess:
    """A container's process forked by a zygote, as the kubelet sees it: ``pid`` (its process group),
    ``returncode`` (None while it runs; -N when killed by signal N), ``await wait()``."""

    def __init__(self, pid: int, reader: Any, writer: Any) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._reader = reader
        self._writer = writer
        self._waiter: asyncio.Future[int] | None = None

    async def wait(self) -> int:
        if self._waiter is None:
            self._waiter = asyncio.ensure_future(self._read_exit())
        return await asyncio.shield(self._waiter)

    async def _read_exit(self) -> int:
        try:
            line = await self._reader.readline()
        except (ConnectionError, OSError):
            line = b""
        finally:
            self._writer.close()
        # No status: the zygote died, and its children with it (their parent-death signal).
        code = int(line.split()[1]) if line.startswith(b"exit ") else _KILLED
        self.returncode = code
        return code


class Zygote:
    """The fork server (see the module docstring). :meth:`fork` starts it; :meth:`spawn` starts a container's
    entry point in it; :meth:`close` ends it (and what it still runs)."""

    def __init__(self, pid: int, control: socket.socket, prepared: int | None = None) -> None:
        self.pid = pid
        self._control: socket.socket | None = control
        self._prepared = prepared  # the read end of the pipe prepare's result comes on
        self._reaped = False
        self._lock = threading.Lock()

    @classmethod
    def fork(cls, *, preload: Sequence[str] = (), prepare: Callable[[], object] | None = None) -> Zygote:
        """Fork this process into a zygote that runs ``prepare`` (its result, pickled, for :meth:`prepared`),
        then imports ``preload``. Call it before any thread or event loop starts in this process: only the
        calling thread is forked. When ``prepare`` raises, this call raises it in the forked process, which
        is then no zygote but this process's copy, going on with the exception (see the module docstring)."""
        pythonpath = set(filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep)))
        # The interpreter's own folders (stdlib, site-packages, .pth entries): this process's path without
        # its script's folder and its PYTHONPATH (a container has its own).
        base = [p for p in sys.path[1:] if p not in pythonpath]
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        result = os.pipe() if prepare is not None else None  # (read end, write end)
        parent = os.getpid()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        pid = os.fork()
        if pid == 0:  # the zygote: never returns, unless prepare raises
            ours.close()
            if prepare is not None and result is not None:
                os.close(result[0])
                _prepare(prepare, parent, result[1])
            code = 70
            try:
                _Server(theirs, base_path=base).serve(preload)
                code = 0
            finally:
                os._exit(code)
        theirs.close()
        if result is not None:
            os.close(result[1])
        # A zygote that is busy (importing, forking) may not drain its requests at once: a full socket makes
        # the kubelet exec that container instead of blocking its event loop.
        ours.setblocking(False)
        return cls(pid, ours, None if result is None else result[0])

    def prepared(self) -> Any:
        """What ``prepare`` returned in the zygote, once it has (blocking). :class:`PrepareFailed` when it
        raised: the forked process reported it as the caller would have and ended; it is reaped here, and
        this zygote takes nothing."""
        fd, self._prepared = self._prepared, None
        if fd is None:
            raise RuntimeError("this zygote was forked without prepare, or its result was read already")
        chunks = []
        try:
            while chunk := os.read(fd, 1 << 16):
                chunks.append(chunk)
        finally:
            os.close(fd)
        if chunks:
            return pickle.loads(b"".join(chunks))
        self.release()
        self._reaped = True
        try:
            _, status = os.waitpid(self.pid, 0)
        except ChildProcessError:
            raise PrepareFailed(_KILLED) from None
        raise PrepareFailed(os.waitstatus_to_exitcode(status))

    async def spawn(
        self, launch: Launch, *, env: Mapping[str, str], cwd: str, log_fd: int, reaper_fd: int | None
    ) -> ForkedProcess | None:
        """Start ``launch`` in a child of the zygote, its stdout and stderr on ``log_fd``; the child registers
        its group on ``reaper_fd`` first. None when the zygote cannot take it (gone, or the request too
        large): the caller execs the command instead."""
        request = json.dumps(
            {
                "script": launch.script,
                "module": launch.module,
                "args": list(launch.args),
                "env": dict(env),
                "cwd": cwd,
            }
        ).encode()
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            fds = [log_fd, theirs.fileno(), *([] if reaper_fd is None else [reaper_fd])]
            with self._lock:
                control = self._control
                if control is None or len(request) > _MAX_REQUEST:
                    mine.close()
                    return None
                try:
                    socket.send_fds(control, [request], fds)
                except OSError:
                    mine.close()
                    return None
        finally:
            theirs.close()
        reader, writer = await asyncio.open_unix_connection(sock=mine)
        line = await reader.readline()
        if not line.startswith(b"pid "):
            writer.close()
            return None  # the zygote ended before forking: exec'd instead
        return ForkedProcess(int(line.split()[1]), reader, writer)

    def release(self) -> None:
        """Let the zygote end while the caller goes on: it kills the children it still has, reaps them and
        exits; :meth:`close` then reaps it."""
        if self._prepared is not None:
            os.close(self._prepared)
            self._prepared = None
        with self._lock:
            control, self._control = self._control, None
        if control is not None:
            control.close()

    def close(self, timeout: float = 10.0) -> None:
        """End the zygote: it kills the children it still has, reaps them and exits (SIGKILLed after
        ``timeout`` seconds); reaped here."""
        self.release()
        if self._reaped:
            return
        self._reaped = True
        with contextlib.suppress(ChildProcessError):
            try:
                ended = os.pidfd_open(self.pid)
            except ProcessLookupError:  # reaped already (by a SIGCHLD handler of the caller's)
                return
            try:
                exited, _, _ = select.select([ended], [], [], timeout)
            finally:
                os.close(ended)
            if not exited:
                os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)

    def __enter__(self) -> Zygote:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- inside the zygote ---------------------------------------------------------------------------------------


def _pickled(value: object) -> bytes:
    """``value`` pickled, read-only mappings (``MappingProxyType``, which does not pickle) as read-only views
    of a copy."""
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = {**copyreg.dispatch_table, types.MappingProxyType: _reduce_mapping_proxy}
    pickler.dump(value)
    return buffer.getvalue()


def _reduce_mapping_proxy(proxy: types.MappingProxyType[Any, Any]) -> tuple[Any, tuple[dict[Any, Any]]]:
    return _mapping_proxy, (dict(proxy),)


def _mapping_proxy(mapping: dict[Any, Any]) -> types.MappingProxyType[Any, Any]:
    return types.MappingProxyType(mapping)


def _prepare(prepare: Callable[[], object], parent: int, result_fd: int) -> None:
    """Run ``prepare`` dying with ``parent`` and deaf to SIGINT and SIGTERM (the caller answers them), and
    write its pickled result on ``result_fd``; what it printed is flushed first, so that it comes before
    what the caller prints next. Its exception propagates (the caller's copy goes on with it)."""
    _die_with(parent)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        result = _pickled(prepare())
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        view = memoryview(result)
        while view:
            view = view[os.write(result_fd, view) :]
    finally:
        os.close(result_fd)
    # A zygote ends when its control socket closes (after it killed its children), not by a signal.
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, 0, 0, 0, 0)


class _Server:
    def __init__(self, control: socket.socket, *, base_path: list[str]) -> None:
        self.control = control
        self.base_path = base_path
        self.children: dict[int, tuple[int, socket.socket]] = {}  # pidfd → (pid, status socket)
        self.selector = selectors.DefaultSelector()
        self.pid = os.getpid()

    def serve(self, preload: Sequence[str]) -> None:
        os.setsid()  # no terminal's signals (a Ctrl-C is the forking process's to answer)
        # No parent-death signal here: the control socket's end of file (the forking process is gone, or
        # closed it) is what ends the zygote, after it killed its children's groups; a signal would end it
        # before it could.
        # What the forking process registered to run at its exit is not ours (it would remove its folders).
        atexit._clear()
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.close(null)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_SETMASK, set())
        for name in preload:
            with contextlib.suppress(Exception):  # the container imports it itself, and says what fails
                importlib.import_module(name)
        # What is imported now stays shared with every child: the collector leaves it alone, so that
        # children do not copy the pages it would touch. No collection first: the first container would wait
        # a full collection's time for the little garbage imports leave.
        gc.freeze()
        self.selector.register(self.control, selectors.EVENT_READ)
        while True:
            for key, _ in self.selector.select():
                if key.fileobj is self.control:
                    if not self._accept():
                        self._shutdown()
                        return
                else:
                    self._reap(int(key.fd))

    def _accept(self) -> bool:
        try:
            message, fds, _, _ = socket.recv_fds(self.control, _MAX_REQUEST, _MAX_FDS)
        except OSError:
            return False
        if not message:
            for fd in fds:
                os.close(fd)
            return False
        status = socket.socket(fileno=fds[1]) if len(fds) > 1 else None
        try:
            request = json.loads(message)
            log_fd, reaper_fd = fds[0], (fds[2] if len(fds) > 2 else None)
            pid = os.fork()
            if pid == 0:
                _child(self, request, log_fd=log_fd, reaper_fd=reaper_fd)  # never returns
            with contextlib.suppress(OSError):
                os.setpgid(pid, pid)  # also done by the child: its group exists before the kubelet signals it
            pidfd = os.pidfd_open(pid)
        except Exception:
            if status is not None:
                status.close()
            return True
        finally:
            os.close(fds[0])
            if len(fds) > 2:
                os.close(fds[2])
        assert status is not None
        self.children[pidfd] = (pid, status)
        self.selector.register(pidfd, selectors.EVENT_READ)
        with contextlib.suppress(OSError):
            status.sendall(b"pid %d\n" % pid)
        return True

    def _reap(self, pidfd: int) -> None:
        pid, status = self.children.pop(pidfd)
        self.selector.unregister(pidfd)
        os.close(pidfd)
        try:
            _, code = os.waitpid(pid, 0)
            exit_code = os.waitstatus_to_exitcode(code)
        except ChildProcessError:
            exit_code = _KILLED
        with contextlib.suppress(OSError):
            status.sendall(b"exit %d\n" % exit_code)
        status.close()

    def _shutdown(self) -> None:
        for pid, _ in self.children.values():
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
        for pidfd in list(self.children):
            self._reap(pidfd)

    def close_fds(self) -> None:
        """In a child: the zygote's own descriptors (the control socket, the other children's)."""
        self.selector.close()
        self.control.close()
        for pidfd, (_, status) in self.children.items():
            os.close(pidfd)
            status.close()


def _child(server: _Server, request: dict[str, Any], *, log_fd: int, reaper_fd: int | None) -> None:
    """The container's process: set up as a new interpreter would be for the container, run, exit."""
    code = 128
    try:
        with contextlib.suppress(OSError):
            os.setpgid(0, 0)
        _die_with(server.pid)
        if reaper_fd is not None:
            with contextlib.suppress(OSError):
                os.write(reaper_fd, b"+%d\n" % os.getpid())
            os.close(reaper_fd)
        server.close_fds()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        os.close(log_fd)
        _reset_signals()
        env: dict[str, str] = request["env"]
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(env)
        _new_streams(unbuffered=bool(env.get("PYTHONUNBUFFERED")))
        sys.dont_write_bytecode = bool(env.get("PYTHONDONTWRITEBYTECODE"))
        tempfile.tempdir = None  # found again from the container's TMPDIR
        launch = Launch(request["script"], request["module"], tuple(request["args"]))
        pythonpath = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        first = os.path.dirname(os.path.realpath(launch.script)) if launch.script else os.getcwd()
        sys.path[:] = [first, *pythonpath, *server.base_path]
        sys.argv[:] = [launch.script or launch.module or "", *launch.args]
        importlib.invalidate_caches()
        _renew_flytekit()
    except BaseException:
        with contextlib.suppress(Exception):
            os.write(2, f"taskplug: cannot start the container's process: {traceback.format_exc()}".encode())
        os._exit(code)
    os._exit(_run(launch))


def _reset_signals() -> None:
    """A new interpreter's dispositions: SIGINT raises KeyboardInterrupt, SIGPIPE and SIGXFSZ are ignored,
    every other signal is at its default; nothing blocked."""
    for sig in signal.valid_signals():
        if sig in (signal.SIGKILL, signal.SIGSTOP):
            continue
        with contextlib.suppress(OSError, ValueError, RuntimeError):
            signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_SETMASK, set())


def _new_streams(*, unbuffered: bool) -> None:
    """stdin, stdout and stderr as a new interpreter opens them on descriptors 0, 1 and 2 (not a terminal)."""

    def binary(fd: int, mode: str) -> Any:  # a raw or buffered binary stream
        raw = io.FileIO(fd, mode, closefd=False)
        if unbuffered and mode == "w":
            return raw
        return io.BufferedReader(raw) if mode == "r" else io.BufferedWriter(raw)

    streams = {
        "stdin": io.TextIOWrapper(binary(0, "r"), encoding="utf-8"),
        "stdout": io.TextIOWrapper(binary(1, "w"), encoding="utf-8", write_through=unbuffered),
        "stderr": io.TextIOWrapper(
            binary(2, "w"), encoding="utf-8", errors="backslashreplace", line_buffering=True
        ),
    }
    for name, stream in streams.items():
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def _renew_flytekit() -> None:
    """flytekit's import-time state that depends on the environment, made again for the container's: its
    loggers (plain JSON lines in a pod, not the terminal's rich output) and its default context (its SIGINT
    handler, the sandbox from the container's config)."""
    loggers = sys.modules.get("flytekit.loggers")
    if loggers is not None:
        loggers.initialize_global_loggers()
    context = sys.modules.get("flytekit.core.context_manager")
    if context is not None:
        context.FlyteContextManager.initialize()


def _exit_code(value: object) -> int:
    """What the interpreter exits with for ``SystemExit(value)``."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    with contextlib.suppress(Exception):
        print(value, file=sys.stderr)
    return 1


def _run(launch: Launch) -> int:
    interrupted = False
    try:
        if launch.script is not None:
            runpy.run_path(launch.script, run_name="__main__")
        else:
            assert launch.module is not None
            runpy.run_module(launch.module, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as e:
        code = _exit_code(e.code)
    except KeyboardInterrupt:
        traceback.print_exc()
        code, interrupted = 130, True
    except BaseException:
        with contextlib.suppress(Exception):
            sys.excepthook(*sys.exc_info())
        code = 1
    with contextlib.suppress(BaseException):
        shutdown = getattr(threading, "_shutdown", None)
        if shutdown is not None:
            shutdown()  # the non-daemon threads, as the interpreter waits for them
    with contextlib.suppress(BaseException):
        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BaseException):
            stream.flush()
    if interrupted:  # as the interpreter does for an uncaught KeyboardInterrupt: dies by SIGINT
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    return code
