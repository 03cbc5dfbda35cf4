"""How ``taskplug run`` answers SIGINT and SIGTERM, from its first instant to its last.

A signal is never turned into an exception raised wherever Python happens to be (``KeyboardInterrupt``, or
flytekit's own SIGINT handler, which calls ``exit(1)``): raised inside a half-finished import, a library's
bare ``except:`` swallows it (the task then runs to the end) or leaves a half-initialised module behind (an
``AttributeError`` blamed on the user's module). Instead one handler, installed for the whole command, decides
by what the run has done so far:

- **nothing created yet** (from ``main()``, before even ``run``'s module is imported; the options, the flytekit module's import, the platform): exit 1 at once. While the
  user's module and flytekit are imported the two signals are blocked in this thread and a helper thread
  waits for them, so that the handler flytekit installs when imported never sees one (and ours is put back
  after it).
- **the event loop is running, nothing submitted**: the run's main task is cancelled, which unwinds what it
  opened (the embedded cluster, the client).
- **submitted**: the first signal aborts the execution (its objects deleted, finalized) and the run ends as
  the abort does, exit 1. A second one, or an abort still unfinished after :data:`ABORT_PATIENCE` seconds
  (an API server that does not answer), stops waiting: the main task is cancelled.
- **the outcome decided** (``run`` returned or exits): the signals are blocked, so that the process ends
  with the outcome's code instead of dying by a signal in the interpreter's shutdown.
- whenever the main task is cancelled, a watchdog thread ends the process (exit 1) if the unwinding has not
  within :data:`UNWIND_PATIENCE` seconds; the embedded cluster's reaper kills its containers when this
  process is gone. A third signal ends it at once.

Follows what kubectl and flytekit's ``pyflyte run`` do with a first and second Ctrl-C (the first cleans up,
the second stops waiting), with exit code 1 in every case, never death by the signal.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading

TYPE_CHECKING = False  # not typing's: this module is imported first thing, and importing typing takes time
if TYPE_CHECKING:  # asyncio is imported when the loop attaches: ``taskplug --help`` loads nothing but click
    import asyncio
    from collections.abc import Callable, Iterator, Sequence
    from types import FrameType
    from typing import NoReturn, TypeAlias

    _Handler: TypeAlias = Callable[[int, FrameType | None], object] | int | signal.Handlers | None

__all__ = ["ABORT_PATIENCE", "UNWIND_PATIENCE", "Interrupts", "for_run", "install_early", "release", "settle"]

ABORT_PATIENCE = 5.0
"""Seconds a first signal's abort may take before the run stops waiting for it, as a second signal would."""

UNWIND_PATIENCE = 3.0
"""Seconds the run may take to unwind once it stops waiting, before the process ends anyway."""

_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_EXIT_CODE = 1


def _say(message: str) -> None:
    """Write a line to stderr from a signal handler or a thread: one unbuffered write, no stream locks."""
    with contextlib.suppress(OSError):
        os.write(2, f"{message}\n".encode())


def _exit_now(message: str, *, flush: bool = True) -> NoReturn:
    # What was printed before stays printed (a pipe's buffer); a flush interrupted mid-write is given up. Not
    # from another thread: it would wait for the stream's lock, maybe behind a write to a full pipe.
    for stream in (sys.stdout, sys.stderr) if flush else ():
        with contextlib.suppress(Exception):
            stream.flush()
    _say(message)
    os._exit(_EXIT_CODE)


class Interrupts:
    """The one SIGINT/SIGTERM handler of a ``taskplug run`` (see the module docstring)."""

    def __init__(self) -> None:
        self.count = 0
        self.cancelled = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._main: asyncio.Task[object] | None = None
        self._abort: Callable[[], None] | None = None
        self._patience: threading.Timer | None = None
        self._previous: dict[int, _Handler] = {}

    # -- the process-wide handler -------------------------------------------------------------------------

    def install(self) -> None:
        for sig in _SIGNALS:
            previous = signal.signal(sig, self._handle)
            if previous != self._handle:
                self._previous.setdefault(sig, previous)

    def uninstall(self) -> None:
        """The handlers from before :meth:`install` back (``run`` invoked inside another program: a test)."""
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous.clear()

    @contextlib.contextmanager
    def deferred(self) -> Iterator[None]:
        """While foreign code is imported (it may install its own handler): the signals are blocked in this
        thread and answered by a helper thread at once; our handler is put back afterwards."""
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
        stop = threading.Event()

        def wait() -> None:  # inherits the blocked mask: a signal stays pending, no handler runs
            # A look every 10 ms (a wake-up costs next to nothing); ``stop`` ends the wait at once. Not
            # sigtimedwait: interrupted past its timeout (the process stopped and continued, a debugger or
            # profiler attached), CPython's returns a signal that never came.
            while not stop.wait(0.01):
                if not signal.sigpending().isdisjoint(_SIGNALS):
                    _exit_now("interrupted: stopped before anything was started", flush=False)

        waiter = threading.Thread(target=wait, name="taskplug-interrupts", daemon=True)
        waiter.start()
        try:
            yield
        finally:
            stop.set()
            if waiter.is_alive():
                waiter.join()
            self.install()
            # A signal that came after the waiter's last look is pending: unblocking delivers it to us.
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            _exit_now(
                "interrupted: stopped before anything was started" if self._abort is None else "interrupted"
            )
        self.count += 1
        if self.count >= 3:
            _exit_now("interrupted a third time: stopped")
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(self._dispatch)

    # -- inside the event loop ----------------------------------------------------------------------------

    def attach(self) -> None:
        """Signals from now on are answered in the running loop, about its current task (the run's main)."""
        import asyncio

        self._loop = asyncio.get_running_loop()
        self._main = asyncio.current_task()
        self.install()  # in case anything imported since replaced it

    def watch(self, abort: Callable[[], None]) -> None:
        """The execution is submitted: a first signal calls ``abort``."""
        self._abort = abort
        if self.count:  # signalled while it was being submitted
            self._dispatch()

    @property
    def submitted(self) -> bool:
        """Whether the execution had been submitted (something may have been created) when signalled."""
        return self._abort is not None

    def detach(self) -> None:
        """The loop is ending: a signal from now on exits at once (nothing is left to clean up)."""
        if self._patience is not None:
            self._patience.cancel()
        self._loop = None
        self._main = None

    def _dispatch(self) -> None:
        if self.count == 1 and self._abort is not None:
            _say(
                "interrupted: aborting the execution (deleting what it created)… "
                "interrupt again to stop without waiting"
            )
            self._abort()
            self._patience = threading.Timer(ABORT_PATIENCE, self._impatient)
            self._patience.daemon = True
            self._patience.start()
            return
        if self._abort is None:
            _say("interrupted: stopping before anything was started")
        else:
            _say("interrupted again: stopping without waiting for the abort…")
        self._stop()

    def _impatient(self) -> None:
        loop = self._loop
        if loop is None or self.cancelled:
            return
        _say(
            f"the abort did not finish within {ABORT_PATIENCE:g} s (is the cluster reachable?): stopping "
            "without waiting for it; what the execution created may be left behind"
        )
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(self._stop)

    def _stop(self) -> None:
        if self.cancelled:
            return
        self.cancelled = True
        if self._main is not None:
            self._main.cancel()
        watchdog = threading.Timer(
            UNWIND_PATIENCE,
            _exit_now,
            (f"interrupted: stopped (the cleanup did not end within {UNWIND_PATIENCE:g} s)",),
            {"flush": False},
        )
        watchdog.daemon = True
        watchdog.start()


_INSTALLED: list[Interrupts] = []
"""The handler ``main()`` installed for this process's ``run`` (at most one)."""


_PROGRAMS = ("taskplug", "__main__.py", "-m")
"""``sys.argv[0]`` of the program: the console script, ``python -m taskplug.cli`` (``-m`` while the package
is imported, the ``__main__`` file's path after)."""


def install_early(argv: Sequence[str]) -> None:
    """For ``taskplug run``, the handler from the first instant: called when ``taskplug.cli`` is imported by
    the program and again first thing by ``main()`` (importing click takes longer than a quick Ctrl-C, and
    ``run``'s module half a second, in which a signal would be a ``KeyboardInterrupt``)."""
    program = os.path.basename(argv[0]) if argv else ""
    if program in _PROGRAMS and len(argv) > 1 and argv[1] == "run" and not _INSTALLED:
        interrupts = Interrupts()
        interrupts.install()
        _INSTALLED.append(interrupts)


def for_run() -> tuple[Interrupts, bool]:
    """The handler of this ``run`` and whether ``run`` installed it itself: the one ``main()`` installed, or
    (``run`` invoked another way, as in a test's ``CliRunner``) a new one installed now, which the caller
    uninstalls when the command ends."""
    if _INSTALLED:
        return _INSTALLED[0], False
    interrupts = Interrupts()
    interrupts.install()
    return interrupts, True


def release() -> None:
    """``run --server`` answers Ctrl-C itself (``KeyboardInterrupt``): the default handlers back."""
    if _INSTALLED:
        _INSTALLED.clear()
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def settle() -> None:
    """Called last by ``main()``: the outcome is decided and printed, so a signal now changes nothing; blocked,
    it cannot kill the process in the interpreter's shutdown (where Python's handlers are gone)."""
    if _INSTALLED:
        signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
