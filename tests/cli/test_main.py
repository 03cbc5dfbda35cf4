"""``taskplug`` itself: ``--help``, ``--version``, the table of commands, and what a quick command loads.

``--help`` lists the commands from :data:`taskplug.cli._main.COMMANDS` without importing them, so the
summaries in that table are checked against the commands' own docstrings here.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from taskplug import __version__
from taskplug.cli._main import COMMANDS, cli

from .conftest import DEADLINE, REPO, invoke


def test_help_lists_every_command_with_its_summary(runner: CliRunner) -> None:
    result = invoke(runner, "--help")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("Usage: taskplug [OPTIONS] COMMAND [ARGS]...")
    listed = result.stdout.split("Commands:", 1)[1].splitlines()
    rows = {line.split(maxsplit=1)[0]: line.split(maxsplit=1)[1] for line in listed if line.strip()}
    assert list(rows) == [
        "run",
        "logs",
        "metrics",
        "signal",
        "render",
        "status",
        "plugins",
        "config",
        "cluster",
        "executor",
        "serve",
        "gc",
        "cache",
        "token",
    ]
    assert rows == {name: summary for name, (_, summary) in COMMANDS.items()}


def test_short_help_flag_is_the_same_as_help(runner: CliRunner) -> None:
    assert invoke(runner, "-h").stdout == invoke(runner, "--help").stdout


def test_version_prints_the_package_version(runner: CliRunner) -> None:
    result = invoke(runner, "--version")
    assert result.exit_code == 0
    assert result.stdout == f"taskplug, version {__version__}\n"


def test_an_unknown_command_exits_2_naming_it(runner: CliRunner) -> None:
    result = invoke(runner, "rnu", "examples/hello.yaml")
    assert result.exit_code == 2
    assert "No such command 'rnu'" in result.stderr


@pytest.mark.parametrize("name", list(COMMANDS))
def test_each_summary_in_the_table_is_the_start_of_its_commands_docstring(name: str) -> None:
    command = cli.get_command(click.Context(cli), name)
    assert isinstance(command, click.Command)
    assert command.name == name
    summary = COMMANDS[name][1].removesuffix("...")
    assert command.help is not None
    first_line = command.help.strip().splitlines()[0]
    assert first_line.startswith(summary), (summary, first_line)
    assert command.get_short_help_str(limit=len(first_line) + 10).startswith(summary)


@pytest.mark.parametrize(
    ("args", "command_help"),
    [
        (("run", "--help"), "Run a task execution to a terminal phase"),
        (("render", "--help"), "Print the Kubernetes object a task execution would create"),
        (("status", "--help"), "--resource"),
        (("plugins", "--help"), "List the registered plugins"),
        (("config", "--help"), "validate"),
        (("config", "show", "--help"), "Print the effective config"),
        (("config", "validate", "--help"), "Check a config file strictly"),
        (("cluster", "--help"), "serve"),
        (("cluster", "serve", "--help"), "--kubeconfig-out"),
        (("token", "create", "--help"), "--role"),
    ],
)
def test_every_command_has_its_own_help(runner: CliRunner, args: tuple[str, ...], command_help: str) -> None:
    result = invoke(runner, *args)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith(f"Usage: taskplug {' '.join(args[:-1])} ")
    assert command_help in result.stdout


HEAVY = (
    "aiohttp",
    "lightkube",
    "grpc",
    "taskplug.localcluster",
    "taskplug.engine.k8s._lightkube",
    # What only other commands or other specs need: asyncio (a run, or a task type to discover), the state
    # stores (sqlite3), the observed-object model (reading a pod), msgpack (a STRUCT input), a map's
    # element machinery and a workflow templateFile's reader (flyteidl.admin's types).
    "asyncio",
    "sqlite3",
    "taskplug.executor._store",
    "taskplug.k8s._observed_model",
    "msgpack",
    "taskplug.executor.nodes._array_context",
    "taskplug.executor._workflow",
    "flyteidl.admin",
)

# Runs in a fresh interpreter: ``taskplug --help`` then ``taskplug render examples/hello.yaml`` through
# ``taskplug.cli.main`` (as the console script does); prints each one's exit code and the start of its output,
# which of the heavy modules got loaded, and for each the chain of frames that first imported it.
_PROBE = textwrap.dedent(
    """
    import contextlib, io, json, sys, traceback

    chains = {}

    class Watch:
        def find_spec(self, name, path=None, target=None):
            if name in HEAVY and name not in chains:
                chains[name] = [
                    f"{f.filename}:{f.lineno} {f.line}"
                    for f in traceback.extract_stack()[:-1]
                    if "importlib" not in f.filename and not f.filename.startswith("<")
                ]
            return None

    sys.meta_path.insert(0, Watch())
    import taskplug.cli._main

    runs = []
    for argv in (["taskplug", "--help"], ["taskplug", "render", "examples/hello.yaml"]):
        sys.argv = argv
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            try:
                taskplug.cli.main()
            except SystemExit as e:
                runs.append([e.code, out.getvalue()[:40]])
    loaded = [m for m in HEAVY if m in sys.modules]
    print(json.dumps({"runs": runs, "loaded": loaded, "chains": {m: chains.get(m) for m in loaded}}))
    """
)


def test_help_and_render_load_no_cluster_http_kubernetes_client_grpc_or_what_render_does_not_use() -> None:
    probe = f"HEAVY = {HEAVY!r}\n{_PROBE}"
    proc = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=DEADLINE, check=False
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    (help_code, help_out), (render_code, render_out) = report["runs"]
    assert (help_code, render_code) == (0, 0), proc.stderr
    assert help_out.startswith("Usage: taskplug")
    assert render_out.replace(" ", "").startswith('{\n"kind":"Pod"')
    assert report["loaded"] == [], json.dumps(report["chains"], indent=2)


_RUN_PROBE = textwrap.dedent(
    """
    import contextlib, io, json, sys

    import taskplug.cli._main

    sys.argv = ["taskplug", "run", "hello.yaml", "-o", "json"]
    out = io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out):
        try:
            taskplug.cli.main()
        except SystemExit as e:
            code = e.code or 0
    print(json.dumps({"code": code, "document": out.getvalue(), "loaded": [m for m in HEAVY if m in sys.modules]}))
    """
)


def test_a_spec_run_on_the_embedded_cluster_loads_no_http_server_kubernetes_client_or_rich_and_prints_its_document(
    tmp_path: Path,
) -> None:
    # The in-process cluster's HTTP façade (aiohttp) and the real cluster's client are for other commands;
    # Rich draws the live view, which a run with `-o json` and without a terminal does not have.
    (tmp_path / "hello.yaml").write_text((REPO / "examples" / "hello.yaml").read_text())
    probe = f"HEAVY = {('aiohttp', 'lightkube', 'taskplug.engine.k8s._lightkube', 'rich')!r}\n{_RUN_PROBE}"
    proc = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.splitlines()[-1])
    assert report["loaded"] == []
    assert report["code"] == 0
    document = json.loads(report["document"])
    assert (document["phase"], document["attempts"], document["outputs"]) == (
        "Success",
        1,
        {"greeting": "hello, world"},
    )
    assert document["execution"].startswith("demo/development/")
