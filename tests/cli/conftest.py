"""Shared helpers for the ``taskplug`` command-line tests.

The quick commands (render, status, plugins, config) run in-process through click's ``CliRunner`` on
:data:`taskplug.cli.cli`, with stdout and stderr kept apart, so a test sees exactly the document a script
would read and the error a person would. ``run`` and ``cluster serve`` run as a user runs them: a fresh
interpreter (:data:`TASKPLUG`), its exit code, its output; every wait on them has a deadline.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from click.testing import CliRunner, Result

from taskplug.cli import cli

sys.path.insert(
    0, str(Path(__file__).resolve().parents[1])
)  # tests/, for the shared helpers in tests/support

from support.net import stop_process, wait_until_ready

__all__ = ["stop_process", "wait_until_ready"]  # re-exported for the subprocess tests

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
HELLO = EXAMPLES / "hello.yaml"
TASKPLUG = (sys.executable, "-m", "taskplug.cli")
"""The command line in a fresh interpreter of this virtualenv."""

DEADLINE = 60.0
"""How long a subprocess may take before the test gives up on it (a deadline, not a timing)."""


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def invoke(runner: CliRunner, *args: str | Path) -> Result:
    """``taskplug ARGS`` in-process; exceptions other than ``SystemExit`` propagate to the test."""
    return runner.invoke(cli, [str(a) for a in args], prog_name="taskplug", catch_exceptions=False)


def write_yaml(path: Path, document: Any) -> Path:
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def write_json(path: Path, document: Any) -> Path:
    path.write_bytes(orjson.dumps(document))
    return path


def hello_document() -> dict[str, Any]:
    """``examples/hello.yaml`` as a document, for tests that change one field of it."""
    document: dict[str, Any] = yaml.safe_load(HELLO.read_text())
    return document


def assert_bad_input(result: Result, *named: str) -> None:
    """Exit code 2, nothing on stdout, no traceback, and the message on stderr names each of ``named``."""
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    for name in named:
        assert name in result.stderr, (name, result.stderr)
