"""What the ``taskplug`` command does to the process it owns: whether this process is the command, and the
garbage collector's settings: paused while a command's module is imported, and those of a command that drives
the executor.

The collector is a process-wide choice, so it is made here, by the command, and only when the process is
the command (a program or a test that calls :func:`taskplug.cli.main` keeps its own).
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
from collections.abc import Iterator

__all__ = ["collector_paused", "is_the_command", "tune_collector_for_executor", "use_executor_collector"]

# Young collections once 50,000 more container objects were made than freed (CPython's default: 700), and
# a full one at most every 10 of the middle generation's. Measured on 3,000 pod tasks in flight on the
# simulated cluster: the collector scanned 126 objects per task instead of 704, and spent 0.09 ms of CPU
# per task instead of 0.39 (of ~2.7), the rest of the run unchanged. Cyclic garbage then waits longer to
# be freed: at most some 50,000 young objects, a few MB.
_THRESHOLDS = (50_000, 20, 10)


def is_the_command() -> bool:
    """Whether this process is the ``taskplug`` command (its console script, or ``python -m taskplug.cli``),
    not a program that calls :func:`taskplug.cli.main` and goes on."""
    main_module = sys.modules.get("__main__")
    spec = getattr(main_module, "__spec__", None)
    if spec is not None and spec.name == "taskplug.cli.__main__":
        return True
    path = getattr(main_module, "__file__", None)
    return isinstance(path, str) and os.path.basename(path) == "taskplug"


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """As the ``taskplug`` command: no cyclic garbage collection while a command's module is imported, and
    what the import made frozen (:func:`gc.freeze`) when it ends.

    Importing a command allocates some hundred thousand objects that live as long as the process (modules,
    classes, functions, pydantic's and protobuf's descriptors) and next to no garbage; the collector,
    triggered every 700 allocations, would walk them again and again (a tenth of ``taskplug render``'s time),
    and every full collection of the command's own work after it would walk them once more. Frozen, they are
    left alone; they are still freed by reference counting, and a cycle among them (none is expected) stays
    until the process ends. A program that calls :func:`taskplug.cli.main` and goes on keeps its collector as
    it is.
    """
    if not is_the_command() or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()


def tune_collector_for_executor() -> None:
    """Called by a command once everything it needs is loaded, right before its executor starts.

    The executor keeps every execution in flight in memory, and the embedded cluster every object; with
    CPython's default thresholds each full collection walks all of them, and there are more of them the
    more tasks run, and so did every module, plugin and schema loaded at start-up. ``gc.freeze`` leaves
    what start-up loaded out of every collection (it lives as long as the process anyway), and the
    thresholds make collections rarer. Nothing changes when the process is not the command."""
    if is_the_command():
        use_executor_collector()


def use_executor_collector() -> None:
    """The collector as a command that drives the executor has it (see :func:`tune_collector_for_executor`),
    whatever the process: for the benchmarks, which measure the executor as the command runs it."""
    gc.freeze()
    gc.set_threshold(*_THRESHOLDS)
