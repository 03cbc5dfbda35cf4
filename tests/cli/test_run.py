"""``taskplug run`` on the embedded cluster, as a user runs it: a fresh interpreter, ``examples/hello.yaml``,
its exit code and its output. The container really runs, as a local process; the run's data root
(``.taskplug/data``) and state file live in the test's ``tmp_path``.

Resume, Ctrl-C and failed tasks through ``run`` are covered in ``tests/integration/test_cli_run.py``.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from click.testing import CliRunner

from taskplug.core import Phase

from .conftest import DEADLINE, HELLO, TASKPLUG, assert_bad_input, hello_document, invoke, write_yaml


def _taskplug_run(tmp_path: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*TASKPLUG, "run", *map(str, args)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
    )


def test_run_hello_as_json_succeeds_with_its_output_and_a_timeline_of_events(tmp_path: Path) -> None:
    state_db = tmp_path / "state.db"
    proc = _taskplug_run(tmp_path, HELLO, "-o", "json", "--state-db", state_db)
    assert proc.returncode == 0, proc.stderr

    document = json.loads(proc.stdout)
    assert list(document) == ["phase", "attempts", "error", "outputs", "events"]
    assert (document["phase"], document["attempts"], document["error"]) == ("Success", 1, None)
    assert document["outputs"] == {"greeting": "hello, world"}

    events = document["events"]
    for event in events:
        assert {"phase", "version", "reason", "occurredAt", "attempt"} <= set(event)
        assert isinstance(event["version"], int) and isinstance(event["reason"], str)
        assert event["attempt"] == 0
    phases = [Phase.from_name(event["phase"]) for event in events]
    assert phases[0] is Phase.QUEUED
    assert phases[-1] is Phase.SUCCESS
    assert Phase.RUNNING in phases
    assert [int(p) for p in phases] == sorted(int(p) for p in phases), "phases only move forward"

    # What the task wrote, where the run said it would, and the state it kept for a resume.
    outputs = tmp_path / ".taskplug/data/metadata/demo/development/hello-1/n0/0/outputs.pb"
    assert outputs.is_file()
    assert state_db.is_file()


def test_run_with_live_output_prints_the_outcome_and_outputs(tmp_path: Path) -> None:
    proc = _taskplug_run(tmp_path, HELLO, "--state-db", tmp_path / "state.db")
    assert proc.returncode == 0, proc.stderr
    assert "Success after 1 attempt(s)" in proc.stdout
    assert '"greeting": "hello, world"' in proc.stdout
    # The live timeline goes to stderr, so stdout stays the outcome alone.
    assert "Success" in proc.stderr


def test_an_input_the_task_does_not_declare_exits_2_naming_it_and_starts_nothing(tmp_path: Path) -> None:
    document = hello_document()
    document["inputs"] = {"nome": "world"}
    spec = write_yaml(tmp_path / "bad.yaml", document)
    state_db = tmp_path / "state.db"
    proc = _taskplug_run(tmp_path, spec, "-o", "json", "--state-db", state_db)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert "inputs.nome" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not state_db.exists()
    assert not (tmp_path / ".taskplug").exists()


def test_a_bad_config_exits_2_naming_the_key_path(runner: CliRunner, tmp_path: Path) -> None:
    config = write_yaml(tmp_path / "config.yaml", {"executor": {"workers": 2, "unknown-key": 1}})
    result = invoke(runner, "run", HELLO, "--config", config, "--state-db", tmp_path / "state.db")
    assert_bad_input(result, "executor.unknown-key")
    assert not (tmp_path / "state.db").exists()


def test_an_unknown_cluster_mode_exits_2_naming_the_option(runner: CliRunner) -> None:
    result = invoke(runner, "run", HELLO, "--cluster-mode", "kind")
    assert result.exit_code == 2
    assert "'--cluster-mode'" in result.stderr and "'kind'" in result.stderr
