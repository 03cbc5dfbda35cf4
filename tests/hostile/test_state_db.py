"""The state DB is taskplug's or refused, and a task runs once.

- A file that is not SQLite, a corrupt one, another program's SQLite database, a newer schema, a path under
  a regular file or a directory: ``StateStoreError`` / exit 2 naming the file, the file byte for byte as it
  was and nothing created beside it. A stored record that does not decode: exit 2 naming the execution.
- Two ``taskplug run`` of one execution on one state DB at once: the task's command runs once; the second
  refuses naming the holder.
- A finished execution is reported as such (stored outcome and code, stderr says when and how to rerun), not
  run again; ``--rerun`` runs it again; a resume whose spec changed is refused.

Every ``run`` is a fresh interpreter with a deadline, on the embedded cluster in process mode (the task's
command really runs, as a local process that appends to a ledger file the test reads).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from taskplug.executor import ExecutionRecord, SQLiteStateStore, StateStoreError

TASKPLUG = (sys.executable, "-m", "taskplug.cli")
DEADLINE = 90.0
KEY = "demo/development/once-1/n0"


def _task_document(
    ledger: Path,
    *,
    sleep: float = 0.0,
    exit_code: int = 0,
    note: str = "ran",
    until: Path | None = None,
) -> dict[str, Any]:
    """A container task that appends ``note`` to ``ledger``, sleeps (or waits, within a deadline, for the
    file ``until`` to exist), and exits with ``exit_code``."""
    wait = (
        f"deadline = time.monotonic() + {DEADLINE}\n"
        f"while not os.path.exists({str(until)!r}) and time.monotonic() < deadline:\n"
        "    time.sleep(0.05)\n"
        if until is not None
        else f"time.sleep({sleep})\n"
    )
    script = (
        "import os, sys, time\n"
        f"open({str(ledger)!r}, 'a').write({note!r} + '\\n')\n" + wait + f"sys.exit({exit_code})\n"
    )
    return {
        "template": {
            "id": {
                "resourceType": "TASK",
                "project": "demo",
                "domain": "development",
                "name": "once",
                "version": "v1",
            },
            "type": "container",
            "interface": {"inputs": {"variables": {}}, "outputs": {"variables": {}}},
            "container": {"image": "python:3.11-slim", "command": ["python", "-c"], "args": [script]},
        },
        "execution": {"id": {"project": "demo", "domain": "development", "name": "once-1", "nodeId": "n0"}},
    }


def _write(path: Path, document: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def _start(cwd: Path, *args: str | Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*TASKPLUG, "run", *map(str, args)],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _run(cwd: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*TASKPLUG, "run", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
    )


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _wait_for(predicate: Any, what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


# -- a file that is not taskplug's is refused and left untouched -------------------------------------------------


def _not_sqlite(path: Path) -> Path:
    path.write_text("a note, not a database\n")
    return path


def _foreign(path: Path) -> Path:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE users (name TEXT)")
    db.execute("INSERT INTO users VALUES ('ada')")
    db.commit()
    db.close()
    return path


def _foreign_application_id(path: Path) -> Path:
    db = sqlite3.connect(path)
    db.execute("PRAGMA application_id = 1234")
    db.execute("CREATE TABLE executions (key TEXT PRIMARY KEY, record BLOB NOT NULL)")
    db.commit()
    db.close()
    return path


def _corrupt(path: Path) -> Path:
    store = SQLiteStateStore(path)
    store.save(ExecutionRecord(key=KEY))
    store.close()
    data = path.read_bytes()
    # The header kept, every page after the first overwritten.
    path.write_bytes(data[:100] + bytes((i * 7 + 3) % 256 for i in range(len(data) - 100)))
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return path


def _truncated(path: Path) -> Path:
    _corrupt(path)
    path.write_bytes(path.read_bytes()[:300])
    return path


def _newer_schema(path: Path) -> Path:
    store = SQLiteStateStore(path)
    store.close()
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version = 99")
    db.commit()
    db.close()
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return path


BAD_FILES = {
    "not-sqlite": (_not_sqlite, "not an SQLite database"),
    "foreign-tables": (_foreign, "another program's SQLite database"),
    "foreign-application-id": (_foreign_application_id, "another program's SQLite database"),
    "corrupt": (_corrupt, "corrupt"),
    "truncated": (_truncated, "malformed"),
    "newer-schema": (_newer_schema, "newer taskplug"),
}


def _snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in directory.iterdir() if p.is_file()}


@pytest.mark.parametrize("make", list(BAD_FILES.values()), ids=list(BAD_FILES))
def test_a_state_db_that_is_not_taskplugs_is_refused_naming_it_and_left_untouched(
    make: Any, tmp_path: Path
) -> None:
    build, says = make
    path = build(tmp_path / "state.db")
    before = _snapshot(tmp_path)
    with pytest.raises(StateStoreError) as caught:
        SQLiteStateStore(path)
    assert str(path) in str(caught.value) and says in str(caught.value)
    assert _snapshot(tmp_path) == before  # no byte changed, no -wal / -shm / lock files beside it


@pytest.mark.parametrize("make", list(BAD_FILES.values()), ids=list(BAD_FILES))
def test_run_on_a_state_db_that_is_not_taskplugs_exits_2_naming_it(make: Any, tmp_path: Path) -> None:
    build, says = make
    path = build(tmp_path / "state.db")
    ledger = tmp_path / "ledger"
    spec = _write(tmp_path / "spec.yaml", _task_document(ledger))
    before = _snapshot(tmp_path)
    proc = _run(tmp_path, spec, "--state-db", path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr
    assert str(path) in proc.stderr and says in proc.stderr
    assert _snapshot(tmp_path) == before
    assert not ledger.exists()


@pytest.mark.parametrize(
    ("where", "says"),
    [
        ("file/state.db", "which is not a directory"),
        ("file/deeper/state.db", "which is not a directory"),
        (".", "is a directory"),
    ],
    ids=["under-a-file", "deeper-under-a-file", "a-directory"],
)
def test_a_state_db_path_that_cannot_be_a_file_exits_2_naming_it(
    where: str, says: str, tmp_path: Path
) -> None:
    (tmp_path / "file").write_text("x")
    spec = _write(tmp_path / "spec.yaml", _task_document(tmp_path / "ledger"))
    proc = _run(tmp_path, spec, "--state-db", where)
    assert proc.returncode == 2, proc.stderr
    assert where in proc.stderr and says in proc.stderr
    assert "Traceback" not in proc.stderr
    assert (tmp_path / "file").read_text() == "x"


@pytest.mark.parametrize(
    ("table", "row", "says"),
    [
        ("executions", "not json {", "record"),
        ("executions", '{"key": "k", "no_such_field": 1}', "record"),
        ("executions", "[1, 2]", "record"),
        ("events", "\xff\xfe", "events"),
    ],
    ids=["record-not-json", "record-unknown-field", "record-not-an-object", "event-not-json"],
)
def test_a_stored_row_that_does_not_decode_exits_2_naming_the_execution(
    table: str, row: str, says: str, tmp_path: Path
) -> None:
    path = tmp_path / "state.db"
    store = SQLiteStateStore(path)
    store.save(ExecutionRecord(key=KEY))
    store.close()
    db = sqlite3.connect(path)
    if table == "executions":
        db.execute("UPDATE executions SET record = ? WHERE key = ?", (row, KEY))
    else:
        db.execute("INSERT INTO events (key, event) VALUES (?, ?)", (KEY, row))
    db.commit()
    db.close()
    ledger = tmp_path / "ledger"
    proc = _run(tmp_path, _write(tmp_path / "spec.yaml", _task_document(ledger)), "--state-db", path)
    assert proc.returncode == 2, proc.stderr
    assert KEY in proc.stderr and str(path) in proc.stderr and says in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not ledger.exists()


def test_a_state_db_from_before_the_marker_is_adopted_with_its_records(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE executions (key TEXT PRIMARY KEY, record BLOB NOT NULL)")
    db.execute("INSERT INTO executions VALUES (?, ?)", (KEY, ExecutionRecord(key=KEY, attempt=3).to_row()))
    db.commit()
    db.close()
    store = SQLiteStateStore(path)
    try:
        record = store.load(KEY)
        assert record is not None and record.attempt == 3
        assert store.events(KEY) == []
    finally:
        store.close()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA application_id").fetchone()[0] != 0
    db.close()


# -- one execution, one driver ------------------------------------------------------------------------------------


def test_an_execution_locked_by_one_store_is_refused_to_another_naming_the_holder(tmp_path: Path) -> None:
    first = SQLiteStateStore(tmp_path / "state.db")
    second = SQLiteStateStore(tmp_path / "state.db")
    try:
        with first.lock(KEY):
            with pytest.raises(StateStoreError) as caught, second.lock(KEY):
                pass
            assert f"pid {os.getpid()}" in str(caught.value) and KEY in str(caught.value)
            with second.lock("demo/development/other/n0"):  # another execution is free
                pass
        with second.lock(KEY):  # released with the block
            pass
    finally:
        first.close()
        second.close()


def test_a_killed_holders_lock_is_released_with_it(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from taskplug.executor import SQLiteStateStore\n"
            f"store = SQLiteStateStore({str(tmp_path / 'state.db')!r})\n"
            f"with store.lock({KEY!r}):\n"
            "    print('held', flush=True)\n"
            "    time.sleep(600)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        store = SQLiteStateStore(tmp_path / "state.db")
        try:
            with pytest.raises(StateStoreError, match=f"pid {holder.pid}"), store.lock(KEY):
                pass
            holder.send_signal(signal.SIGKILL)
            holder.wait(timeout=DEADLINE)
            with store.lock(KEY):
                pass
        finally:
            store.close()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()


@pytest.mark.integration
def test_two_runs_of_one_execution_at_once_run_its_command_once(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    release = tmp_path / "release"
    spec = _write(tmp_path / "spec.yaml", _task_document(ledger, until=release))
    first = _start(tmp_path, spec, "-o", "json", "--state-db", "state.db")
    try:
        _wait_for(lambda: ledger.exists() or first.poll() is not None, "the first run's task to start")
        # The first run's task holds until the second run has ended.
        second = _run(tmp_path, spec, "-o", "json", "--state-db", "state.db")
        release.touch()
        out, err = first.communicate(timeout=DEADLINE)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert first.returncode == 0, err
    assert json.loads(out)["phase"] == "Success"
    assert second.returncode == 2, second.stderr
    assert "being run by another process" in second.stderr and f"pid {first.pid}" in second.stderr
    assert second.stdout == ""
    # And after it: the finished execution is reported, not run again.
    third = _run(tmp_path, spec, "-o", "json", "--state-db", "state.db")
    assert third.returncode == 0, third.stderr
    assert json.loads(third.stdout) == json.loads(out)
    assert _lines(ledger) == ["ran"]


@pytest.mark.integration
def test_a_run_whose_execution_another_run_took_over_stops_and_the_other_finishes_it(tmp_path: Path) -> None:
    """The lock is not the fence: with the lock file removed under a running ``run``, a second ``run`` takes
    the execution over (a new lease), adopts its pod on the shared cluster and finishes it; the first one's
    next write is refused, and it exits 2 saying so, deleting nothing. The command ran once."""
    from service.replica_helpers import serve_cluster

    ledger = tmp_path / "ledger"
    release = tmp_path / "release"
    spec = _write(tmp_path / "spec.yaml", _task_document(ledger, until=release))
    with serve_cluster(tmp_path, mode="process") as cluster:
        args = (spec, "-o", "json", "--state-db", "state.db", "--kubeconfig", cluster.kubeconfig)
        first = _start(tmp_path, *args)
        second: subprocess.Popen[str] | None = None
        try:
            _wait_for(lambda: ledger.exists() or first.poll() is not None, "the first run's task to start")
            assert first.poll() is None
            for lock in (tmp_path / "state.db.locks").iterdir():
                lock.unlink()
            second = _start(tmp_path, *args)
            # The second run holds the execution once its lease is in the file.
            _wait_for(lambda: _lease_epoch(tmp_path / "state.db") == 2, "the second run's lease")
            release.touch()
            out, err = second.communicate(timeout=DEADLINE)
            first_out, first_err = first.communicate(timeout=DEADLINE)
        finally:
            for process in (first, second):
                if process is not None and process.poll() is None:
                    process.kill()
                    process.wait()
    assert second.returncode == 0, err
    assert json.loads(out)["phase"] == "Success"
    assert first.returncode == 2, first_err
    assert "taken over by another process" in first_err and "deleted nothing" in first_err
    assert first_out == ""
    assert _lines(ledger) == ["ran"]


def _lease_epoch(path: Path) -> int:
    db = sqlite3.connect(path, timeout=5)
    try:
        row = db.execute("SELECT max(epoch) FROM leases").fetchone()
    except sqlite3.OperationalError:
        return 0
    finally:
        db.close()
    return int(row[0] or 0)


# -- a finished execution is not run again; a changed spec is not resumed -----------------------------------------


@pytest.mark.integration
def test_a_finished_execution_reports_its_stored_outcome_and_code_and_rerun_runs_it_again(
    tmp_path: Path,
) -> None:
    ledger = tmp_path / "ledger"
    spec = _write(tmp_path / "spec.yaml", _task_document(ledger, exit_code=3))
    first = _run(tmp_path, spec, "--state-db", "state.db")
    assert first.returncode == 1, first.stderr
    assert "already finished" not in first.stderr

    again = _run(tmp_path, spec, "--state-db", "state.db")
    assert again.returncode == 1, again.stderr
    assert f"execution {KEY} already finished: " in again.stderr
    assert "state.db" in again.stderr and "--rerun" in again.stderr and "execution.id.name" in again.stderr
    assert "not run again" in again.stdout
    assert _lines(ledger) == ["ran"]

    # Edited to succeed: the stored failure is another spec's outcome, so it is refused (exit 2, nothing on
    # stdout for a script to take), saying what differs and how to run it; --rerun runs the edit.
    _write(spec, _task_document(ledger, note="fixed"))
    edited = _run(tmp_path, spec, "-o", "json", "--state-db", "state.db")
    assert edited.returncode == 2, edited.stderr
    assert edited.stdout == ""
    assert "with another spec: the task (its template" in edited.stderr
    assert "--rerun" in edited.stderr and "execution.id.name" in edited.stderr
    assert _lines(ledger) == ["ran"]

    rerun = _run(tmp_path, spec, "-o", "json", "--state-db", "state.db", "--rerun")
    assert rerun.returncode == 0, rerun.stderr
    document = json.loads(rerun.stdout)
    assert document["phase"] == "Success"
    # A new history: only the new run's events, its attempts numbered after the earlier ones.
    # Its own attempt count and retry budget: a first-try success is one attempt (numbered 1 after the earlier 0).
    assert document["attempts"] == 1
    assert {event["attempt"] for event in document["events"]} == {1}
    assert _lines(ledger) == ["ran", "fixed"]


@pytest.mark.integration
def test_a_resume_whose_spec_changed_is_refused_and_the_original_spec_resumes(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    original = _task_document(ledger, sleep=3)
    spec = _write(tmp_path / "spec.yaml", original)
    first = _start(tmp_path, spec, "--state-db", "state.db")
    try:
        _wait_for(lambda: ledger.exists() or first.poll() is not None, "the first run's task to start")
        assert first.poll() is None
    finally:
        first.send_signal(signal.SIGKILL)
        first.communicate(timeout=DEADLINE)

    changed = _task_document(ledger, sleep=0, note="changed")
    _write(spec, changed)
    refused = _run(tmp_path, spec, "--state-db", "state.db")
    assert refused.returncode == 2, refused.stderr
    assert "started from another spec" in refused.stderr and KEY in refused.stderr
    assert "execution.id.name" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert "changed" not in _lines(ledger)

    refused_rerun = _run(tmp_path, spec, "--state-db", "state.db", "--rerun")
    assert refused_rerun.returncode == 2 and "has not finished" in refused_rerun.stderr

    original["template"]["container"]["args"] = _task_document(ledger, sleep=0)["template"]["container"][
        "args"
    ]
    # Only the command's sleep differs from what it started with: still another spec.
    assert _run(tmp_path, _write(spec, original), "--state-db", "state.db").returncode == 2
    # Under a new name it runs.
    original["execution"]["id"]["name"] = "once-2"
    fresh = _run(tmp_path, _write(spec, original), "-o", "json", "--state-db", "state.db")
    assert fresh.returncode == 0, fresh.stderr
    assert json.loads(fresh.stdout)["phase"] == "Success"


@pytest.mark.integration
def test_another_execution_on_the_same_state_db_runs_while_the_first_is_held(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    release = tmp_path / "release"
    spec = _write(tmp_path / "spec.yaml", _task_document(ledger, until=release))
    first = _start(tmp_path, spec, "-o", "json", "--state-db", "state.db")
    try:
        _wait_for(lambda: ledger.exists() or first.poll() is not None, "the first run's task to start")
        other = _task_document(ledger, note="other")
        other["execution"]["id"]["name"] = "once-2"
        second = _run(
            tmp_path, _write(tmp_path / "other.yaml", other), "-o", "json", "--state-db", "state.db"
        )
        release.touch()
        _, err = first.communicate(timeout=DEADLINE)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert second.returncode == 0, second.stderr
    assert first.returncode == 0, err
    assert sorted(_lines(ledger)) == ["other", "ran"]
