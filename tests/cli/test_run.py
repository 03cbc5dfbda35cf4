"""``taskplug run`` on the embedded cluster, as a user runs it: a fresh interpreter, ``examples/hello.yaml``,
its exit code and its output. The container really runs, as a local process; the run's data root
(``.taskplug/data``) and state file live in the test's ``tmp_path``.

Resume, Ctrl-C and failed tasks through ``run`` are covered in ``tests/integration/test_cli_run.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from taskplug.cli._hints import EXAMPLE_CONFIGS
from taskplug.cli._progress import Progress, plain_console
from taskplug.cli._run import _print_outcome
from taskplug.core import Phase
from taskplug.executor import Event, ExecutionResult, Platform

from .conftest import (
    DEADLINE,
    EXAMPLES,
    HELLO,
    REPO,
    TASKPLUG,
    assert_bad_input,
    hello_document,
    invoke,
    write_yaml,
)


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
    assert list(document) == ["execution", "phase", "attempts", "error", "outputs", "events", "node"]
    assert (document["phase"], document["attempts"], document["error"]) == ("Success", 1, None)
    assert document["outputs"] == {"greeting": "hello, world"}
    # The fresh name the run gave it, as the key the state DB and `taskplug logs` know it by.
    project, domain, name, node = document["execution"].split("/")
    assert (project, domain, node) == ("demo", "development", "n0") and name

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
    # (hello.yaml names no execution: the run made a fresh name for it.)
    (outputs,) = (tmp_path / ".taskplug/data/metadata/demo/development").glob("*/n0/0/outputs.pb")
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


MARKUP = "[bold]x[/bold] [SystemError] [red] :x: boom"


def test_text_from_the_task_is_printed_verbatim_never_read_as_rich_markup(tmp_path: Path) -> None:
    # The task's own error text (a termination message from its logs) holds what Rich would read as markup,
    # style tags and emoji codes; the live view (stderr) and the outcome (stdout) print it as it is.
    script = f"import sys; print({MARKUP!r}, file=sys.stderr); sys.exit(3)"
    document = {
        "template": {
            "id": {"resourceType": "TASK", "project": "p", "domain": "d", "name": "mk", "version": "v1"},
            "type": "container",
            "container": {"image": "python:3.11", "command": ["python", "-c"], "args": [script]},
        },
        "execution": {"id": {"project": "p", "domain": "d", "name": "mk", "nodeId": "n0"}},
    }
    spec = write_yaml(tmp_path / "markup.yaml", document)
    proc = subprocess.run(
        [*TASKPLUG, "run", str(spec), "--state-db", str(tmp_path / "state.db")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
        # Wide enough that the live view's reason column holds the message on one line.
        env={**os.environ, "COLUMNS": "300"},
    )
    assert proc.returncode == 1, proc.stderr
    assert "PermanentFailure after 1 attempt(s)" in proc.stdout
    assert MARKUP in proc.stdout
    assert "error [RetriesExhausted|Error] (USER)" in proc.stdout
    assert MARKUP in proc.stderr


def test_every_part_of_the_live_view_and_the_outcome_prints_text_as_it_is(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # In-process: each piece the run prints (a plain string, an event's reason, a map element's failure,
    # the error, the elements, the outputs), with text that Rich markup and emoji codes would eat.
    monkeypatch.setenv("COLUMNS", "300")
    console = plain_console()
    console.print(MARKUP)
    progress = Progress(console, "k")
    failing = {"index": 0, "phase": "PermanentFailure", "reason": MARKUP}
    progress.on_event("k", Event(0, "RetryableFailure", 0, MARKUP, None, external_resources=[failing]))
    console.print(progress.render())
    _print_outcome(
        ExecutionResult(
            key="k",
            phase="PermanentFailure",
            attempts=1,
            error={"code": "SystemError", "kind": "USER", "message": MARKUP},
            outputs={"o0": MARKUP},
            events=[],
            elements=[{"index": 0, "phase": "Failed", "attempts": 1, "error": {"message": MARKUP}}],
        )
    )
    out = capsys.readouterr().out
    # The string, the reason, the element's failure in the view; the error, the element, the output after.
    assert out.count(MARKUP) == 6, out
    assert "error [SystemError] (USER): " + MARKUP in out


def test_a_foreign_sqlite_file_as_state_db_is_refused_naming_it_and_left_byte_for_byte(
    tmp_path: Path,
) -> None:
    import sqlite3

    foreign = tmp_path / "theirs.db"
    db = sqlite3.connect(foreign)
    db.execute("CREATE TABLE executions (a, b, c)")  # a table named as taskplug's, with other columns
    db.execute("INSERT INTO executions VALUES (1, 2, 3)")
    db.commit()
    db.close()
    before = foreign.read_bytes()

    proc = _taskplug_run(tmp_path, HELLO, "-o", "json", "--state-db", foreign)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == "" and "Traceback" not in proc.stderr
    assert "theirs.db" in proc.stderr and "executions(a, b, c)" in proc.stderr
    assert foreign.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["theirs.db"]


def test_a_task_type_whose_plugin_is_installed_but_not_enabled_names_the_plugin_the_key_and_a_config(
    tmp_path: Path,
) -> None:
    state_db = tmp_path / "state.db"
    proc = _taskplug_run(
        tmp_path, EXAMPLES / "pytorch" / "pytorch.yaml", "-o", "json", "--state-db", state_db
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == "" and "Traceback" not in proc.stderr
    for said in (
        "plugin [pytorch]",
        "not enabled",
        "tasks.task-plugins.enabled-plugins",
        "default-for-task-types",
    ):
        assert said in proc.stderr, (said, proc.stderr)
    assert f"--config {EXAMPLE_CONFIGS['pytorch']}" in proc.stderr


@pytest.mark.parametrize(("plugin", "config"), sorted(EXAMPLE_CONFIGS.items()))
def test_each_example_config_the_hint_names_enables_its_plugin(plugin: str, config: str) -> None:
    document = yaml.safe_load((REPO / config).read_text())
    assert plugin in document["tasks"]["task-plugins"]["enabled-plugins"]
    platform = Platform.load(REPO / config)
    registered = next(e for e in platform.registry.entries if e.id.lower() == plugin)
    for task_type in registered.registered_task_types:
        assert platform.resolver().resolve(task_type) is not None


FLYTEKIT_ERROR = (
    'Trace:\n\n    Traceback (most recent call last):\n      File "/x/base_task.py", line 767, in dispatch\n'
    '        native_outputs = self.execute(**native_inputs)\n      File "/x/tasks.py", line 9, in check\n'
    '        raise ValueError(f"x={x} is not acceptable")\n    ValueError: x=3 is not acceptable\n\n'
    "Message:\n\n    ValueError: x=3 is not acceptable"
)


def test_a_failures_reason_is_the_errors_last_line_with_the_traceback_one_step_away(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "300")
    console = plain_console()
    progress = Progress(console, "k")
    progress.on_event("k", Event(0, "PermanentFailure", 0, FLYTEKIT_ERROR, None))
    console.print(progress.render())
    error = {"code": "USER:ValueError", "kind": "USER", "message": FLYTEKIT_ERROR}
    _print_outcome(ExecutionResult("k", "PermanentFailure", 1, error, None, []))
    out = capsys.readouterr().out
    assert "Traceback" not in out and "Trace:" not in out
    assert "PermanentFailure  0        ValueError: x=3 is not acceptable" in out
    assert "error [USER:ValueError] (USER): ValueError: x=3 is not acceptable\n" in out
    assert "-o json" in out


def test_with_stdout_to_a_file_the_events_are_written_as_they_happen_not_at_the_end(tmp_path: Path) -> None:
    go = tmp_path / "go"
    document = hello_document()
    # The task waits (within a deadline) for the test to let it finish.
    document["template"]["container"]["args"][0] = (
        f"import os, time\ndeadline = time.monotonic() + {DEADLINE}\n"
        f"while not os.path.exists({str(go)!r}) and time.monotonic() < deadline:\n    time.sleep(0.05)\n"
        + document["template"]["container"]["args"][0]
    )
    spec = write_yaml(tmp_path / "wait.yaml", document)
    log = tmp_path / "log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [*TASKPLUG, "run", str(spec), "--state-db", str(tmp_path / "state.db")],
            cwd=tmp_path,
            stdout=out,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + DEADLINE
            while "Running" not in log.read_text():
                assert proc.poll() is None, log.read_text()
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.05)
            # The run is still waiting on its task, and the file already says what happened so far.
            assert proc.poll() is None
            written = log.read_text()
            assert "attempt 0  Queued" in written and "Success" not in written
            go.touch()
            _, err = proc.communicate(timeout=DEADLINE)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 0, err
    lines = log.read_text().splitlines()
    assert any(line.split()[3:4] == ["Success"] for line in lines), lines
    assert "Success after 1 attempt(s)" in log.read_text()


def test_the_timeline_says_how_many_earlier_events_it_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    console = plain_console()
    progress = Progress(console, "k")
    for version in range(20):
        progress.on_event("k", Event(0, "Running", version, f"round {version}", None))
    with console.capture() as captured:
        console.print(progress.render())
    text = captured.get()
    assert "5 earlier event(s) not shown" in text
    assert "round 4 " not in text and "round 5" in text and "round 19" in text


def test_a_failed_attempts_last_log_lines_are_shown_with_its_error_and_taskplug_logs_prints_them(
    tmp_path: Path,
) -> None:
    document = hello_document()
    document["template"]["container"]["args"][0] = (
        "import sys\nfor i in range(30):\n    print(f'step {i}', flush=True)\n"
        "sys.exit('the task gave up at step 29')\n"
    )
    document["execution"]["id"]["name"] = "logged"
    document["execution"]["maxAttempts"] = 1
    spec = write_yaml(tmp_path / "logged.yaml", document)
    state_db = tmp_path / "state.db"
    proc = _taskplug_run(tmp_path, spec, "--state-db", state_db)
    assert proc.returncode == 1, proc.stderr
    # The outcome comes with the attempt's last lines (not all 30) and where the rest is.
    assert "  | step 29\n" in proc.stdout and "  | step 5\n" not in proc.stdout
    assert "the task gave up at step 29" in proc.stdout
    assert "taskplug logs logged" in proc.stdout

    # The run is over and its embedded cluster gone; its log is still there.
    logs = subprocess.run(
        [*TASKPLUG, "logs", "logged", "--state-db", str(state_db)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
    )
    assert logs.returncode == 0, logs.stderr
    assert [f"step {i}" for i in range(30)] == [
        line for line in logs.stdout.splitlines() if line.startswith("step")
    ]
    key = "demo/development/logged/n0"
    tail = subprocess.run(
        [*TASKPLUG, "logs", key, "--attempt", "0", "--tail", "2", "--state-db", str(state_db)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
    )
    assert tail.returncode == 0, tail.stderr
    assert tail.stdout.splitlines() == ["step 29", "the task gave up at step 29"]
    missing = subprocess.run(
        [*TASKPLUG, "logs", "nobody", "--state-db", str(state_db)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
    )
    assert missing.returncode == 2 and "no logs of 'nobody'" in missing.stderr
    # Only the logs are kept of the pod's folder.
    kept = {
        p.relative_to(tmp_path / "cluster").parts[-2:]
        for p in (tmp_path / "cluster").rglob("*")
        if p.is_file()
    }
    assert kept == {("logs", "logged-n0-0.log")}


def test_a_runs_log_link_opens_the_log_its_container_wrote_unless_the_config_sets_one(tmp_path: Path) -> None:
    proc = _taskplug_run(tmp_path, HELLO, "-o", "json", "--state-db", tmp_path / "state.db")
    assert proc.returncode == 0, proc.stderr
    links = {log["uri"] for event in json.loads(proc.stdout)["events"] for log in event.get("logs") or []}
    (link,) = links
    assert link.startswith("file://")
    # After the run, its embedded cluster gone: the link still opens what the task printed.
    assert Path(link.removeprefix("file://")).read_text() == "hello, world\n"

    config = write_yaml(
        tmp_path / "config.yaml",
        {"plugins": {"logs": {"kubernetes-template-uri": "https://logs.example.com/{{ .podName }}"}}},
    )
    proc = _taskplug_run(
        tmp_path, HELLO, "-o", "json", "--config", config, "--state-db", tmp_path / "state.db"
    )
    assert proc.returncode == 0, proc.stderr
    links = {log["uri"] for event in json.loads(proc.stdout)["events"] for log in event.get("logs") or []}
    assert len(links) == 1 and links.pop().startswith("https://logs.example.com/")


def test_taskplug_logs_follow_prints_what_a_running_task_prints_and_ends_with_its_run(tmp_path: Path) -> None:
    go = tmp_path / "go"
    document = hello_document()
    document["template"]["container"]["args"][0] = (
        f"import os, time\nprint('first', flush=True)\ndeadline = time.monotonic() + {DEADLINE}\n"
        f"while not os.path.exists({str(go)!r}) and time.monotonic() < deadline:\n    time.sleep(0.05)\n"
        "print('second', flush=True)\n" + document["template"]["container"]["args"][0]
    )
    document["execution"]["id"]["name"] = "followed"
    spec = write_yaml(tmp_path / "followed.yaml", document)
    state_db = str(tmp_path / "state.db")
    run = subprocess.Popen(
        [*TASKPLUG, "run", str(spec), "--state-db", state_db],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    follow: subprocess.Popen[str] | None = None
    try:
        deadline = time.monotonic() + DEADLINE
        while not list((tmp_path / "cluster").glob("*/*_followed-n0-0_*/logs/*.log")):
            assert run.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        follow = subprocess.Popen(
            [*TASKPLUG, "logs", "followed", "--follow", "--state-db", state_db],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert follow.stdout is not None
        assert follow.stdout.readline() == "first\n"
        assert follow.poll() is None  # still following: the task has not printed the rest
        go.touch()
        rest, err = follow.communicate(timeout=DEADLINE)  # it ends by itself once the run has
        assert follow.returncode == 0, err
        assert rest.splitlines() == ["second", "hello, world"]
        assert run.wait(timeout=DEADLINE) == 0
    finally:
        for proc in (run, follow):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()


def test_a_spec_whose_file_input_does_not_exist_on_this_machine_exits_2_naming_it(tmp_path: Path) -> None:
    document = hello_document()
    document["template"]["interface"]["inputs"]["variables"]["data"] = {
        "type": {"blob": {"dimensionality": "SINGLE"}}
    }
    document["inputs"]["data"] = (tmp_path / "missing.txt").as_uri()
    spec = write_yaml(tmp_path / "spec.yaml", document)
    state_db = tmp_path / "state.db"
    proc = _taskplug_run(tmp_path, spec, "-o", "json", "--state-db", state_db)
    outcome = (proc.returncode, proc.stdout, "Traceback" in proc.stderr)
    assert outcome == (2, "", False), proc.stderr
    assert "inputs.data" in proc.stderr and "missing.txt" in proc.stderr
    assert not state_db.exists() and not (tmp_path / ".taskplug").exists()


def test_the_live_view_shows_the_tasks_latest_output_under_its_timeline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from taskplug.cli._logs import RunFolder

    monkeypatch.setenv("COLUMNS", "200")
    run = RunFolder(tmp_path / "state.db")
    with run as folder:
        console = plain_console()
        progress = Progress(console, "k", output=run.latest_output)
        progress.on_event("k", Event(0, "Running", 0, "", None))
        with console.capture() as captured:
            console.print(progress.render())
        assert "the task's output" not in captured.get()  # nothing printed yet

        log = folder / "ns_k-n0-0_uid" / "logs" / "main.log"
        log.parent.mkdir(parents=True)
        log.write_text("".join(f"[bold]line {i}[/bold]\n" for i in range(20)))
        with console.capture() as captured:
            console.print(progress.render())
        text = captured.get()
    assert "the task's output" in text
    assert "  | [bold]line 19[/bold]" in text and "line 11" not in text and "line 12" in text


def test_taskplug_logs_finds_an_attempts_pods_its_map_elements_and_the_pods_an_operator_started(
    tmp_path: Path,
) -> None:
    from taskplug.cli._logs import find_logs

    root = tmp_path / "cluster"
    pods = [
        "ns_job-n0-0_u1",  # the attempt's pod
        "ns_job-n0-1-driver_u2",  # a Spark driver of attempt 1
        "ns_job-n0-1-worker-0_u3",  # a PyTorchJob worker
        "ns_job-n0-0-3-1_u4",  # a map element's retry
        "ns_job-n00-0_u5",  # another node
        "ns_jobx-n0-0_u6",  # another execution
    ]
    for pod in pods:
        (root / "run" / pod / "logs").mkdir(parents=True)
        (root / "run" / pod / "logs" / "main.log").write_text(pod)
    found = {(f.pod, f.attempt) for f in find_logs(root, "job", "n0")}
    assert found == {("job-n0-0", 0), ("job-n0-1-driver", 1), ("job-n0-1-worker-0", 1), ("job-n0-0-3-1", 0)}
    assert {f.pod for f in find_logs(root, "job", "n0", attempt=1)} == {
        "job-n0-1-driver",
        "job-n0-1-worker-0",
    }
