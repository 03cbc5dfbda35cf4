"""Printing documents and errors for people and for scripts."""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import wraps
from typing import Any, NoReturn, ParamSpec, TypeVar

import click
import orjson
import yaml

from taskplug.core import TaskplugError

__all__ = ["EXIT_BAD_INPUT", "EXIT_TASK_FAILED", "dump", "fail", "handles_bad_input"]

EXIT_TASK_FAILED = 1
EXIT_BAD_INPUT = 2

P = ParamSpec("P")
R = TypeVar("R")


def dump(document: Any, fmt: str = "json") -> str:
    if fmt == "yaml":
        return str(yaml.safe_dump(document, sort_keys=False, default_flow_style=False))
    return orjson.dumps(document, option=orjson.OPT_INDENT_2).decode() + "\n"


def fail(message: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def handles_bad_input(command: Callable[P, R]) -> Callable[P, R]:
    """Turn taskplug's errors (bad spec, bad config, a task that cannot be built) into exit code 2."""

    @wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except TaskplugError as e:
            fail(str(e))

    return wrapper
