"""The README as a new user reads it: every file its ``taskplug`` commands name is in the repository, the
``status`` example runs as written, what a run leaves in the user's project (``.taskplug/``) and how a task
gets a secret locally are said, and setup installs what a DataFrame task needs."""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from taskplug.cli import cli

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()


def _commands() -> list[list[str]]:
    """The README's ``.venv/bin/taskplug …`` lines (comments dropped), as argument lists."""
    found = []
    for line in README.splitlines():
        if line.startswith(".venv/bin/taskplug "):
            found.append(shlex.split(line.split("#", 1)[0].rstrip(" \\"))[1:])
    return found


def test_every_file_a_readme_command_names_is_in_the_repository() -> None:
    named = {arg for command in _commands() for arg in command if re.fullmatch(r"examples/[\w./-]+", arg)}
    assert "examples/observed-pod.json" in named
    missing = sorted(arg for arg in named if not (REPO / arg).exists())
    assert missing == []


def test_the_readmes_status_example_runs_as_written(monkeypatch: pytest.MonkeyPatch) -> None:
    (status,) = [c for c in _commands() if c[0] == "status" and "--resource" in c]
    monkeypatch.chdir(REPO)
    result = CliRunner().invoke(cli, status, prog_name="taskplug", catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["phase"] == "RetryableFailure"  # the image pull's grace period is over


def test_the_readme_says_what_a_run_leaves_and_how_a_task_gets_a_secret_locally() -> None:
    assert ".taskplug/" in README and ".taskplug/state.db" in README and ".taskplug/cluster/" in README
    assert "-e _FSEC_" in README and "taskplug logs" in README


def test_setup_installs_what_a_dataframe_task_needs() -> None:
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(requirement.startswith("pyarrow") for requirement in extras["test"])
    assert "taskplug[test" in " ".join(extras["dev"])
    assert '-e ".[dev]"' in (REPO / "scripts" / "setup").read_text()
