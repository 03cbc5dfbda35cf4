"""The ``taskplug`` command line.

Each command lives in its own module, imported only when that command runs: ``taskplug --help`` loads
nothing but click, and ``taskplug render`` never loads the embedded cluster, aiohttp, lightkube or grpc. The
one table of commands is :data:`COMMANDS`; ``tests/cli`` checks that its summaries match the commands.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import NoReturn

import click

from taskplug import __version__
from taskplug.cli._interrupts import install_early, settle
from taskplug.cli._process import collector_paused, is_the_command

__all__ = ["COMMANDS", "cli", "main"]

COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("taskplug.cli._run:run", "Run a task execution to a terminal phase and print its timeline..."),
    "logs": (
        "taskplug.cli._logs:logs",
        "Print what an execution's containers printed, attempt by attempt...",
    ),
    "metrics": (
        "taskplug.cli._jobs:metrics",
        "Print a connector task's metrics, as its connector gives them...",
    ),
    "signal": ("taskplug.cli._signal_cmd:signal", "Answer the gate nodes an execution waits on..."),
    "render": ("taskplug.cli._render:render", "Print the Kubernetes object a task execution would create..."),
    "status": (
        "taskplug.cli._status:status",
        "Print an execution's state from the state DB (a workflow's nodes)...",
    ),
    "plugins": (
        "taskplug.cli._plugins_cmd:plugins",
        "List the registered plugins and the task types each...",
    ),
    "config": (
        "taskplug.cli._config_cmd:config",
        "Inspect and check platform config files (Flyte's layout:...",
    ),
    "cluster": ("taskplug.cli._cluster:cluster", "The embedded local Kubernetes cluster."),
    "executor": ("taskplug.cli._executor_cmd:executor", "Run one executor replica until stopped."),
    "serve": ("taskplug.cli._serve:serve", "Serve the HTTP API and the live web view of the executions..."),
    "gc": ("taskplug.cli._gc:gc", "Delete executions that finished long ago (replicas' database)."),
    "cache": (
        "taskplug.cli._cache_cmd:cache",
        "The data catalog: the results cacheable tasks (cache=True) keep.",
    ),
    "token": ("taskplug.cli._token_cmd:token", "API tokens for `taskplug serve`: create, list, revoke."),
}
"""name → (``module:attribute`` of the click command, its summary as ``--help`` lists it)."""


class _LazyGroup(click.Group):
    """A group whose commands are imported when used; ``--help`` lists them from :data:`COMMANDS`."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module, _, attribute = target[0].partition(":")
        with collector_paused():
            command = getattr(importlib.import_module(module), attribute)
        assert isinstance(command, click.Command)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, summary) for name, (_, summary) in COMMANDS.items()])


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="taskplug")
def cli() -> None:
    """taskplug: run typed Flyte tasks on Kubernetes and on remote services, through plugins."""


def main() -> None:
    install_early(sys.argv)
    code: object = 0
    try:
        try:
            cli(prog_name="taskplug")
        finally:
            settle()
    except SystemExit as done:
        if not is_the_command():
            raise
        code = done.code
    if is_the_command():
        _end(code)


def _end(code: object) -> NoReturn:
    """Exit with ``code`` as the interpreter would — after the non-daemon threads, the ``atexit`` functions
    and a flush of stdout and stderr — but without tearing the interpreter down: freeing every object of
    flytekit and of what it imports took longer than the task itself (a second on a loaded two-core
    machine), and the operating system frees a process's memory at once."""
    import atexit
    import threading

    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code & 0xFF
    else:
        print(code, file=sys.stderr)
        status = 1
    shutdown = getattr(threading, "_shutdown", None)
    if shutdown is not None:
        shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            status = status or 120  # as the interpreter exits when it cannot flush stdout
    os._exit(status)
