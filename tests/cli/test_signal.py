"""``taskplug signal list|set|approve|reject`` against a local state DB: values read by the signal's type,
approvals, overwrites, and exit 2 with a message that says what is wrong (no state DB, unknown execution,
a signal whose gate has not started — naming the known ones —, a value not of the type — naming it)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner
from flyteidl.core import types_pb2

from taskplug.core import plain_to_literal
from taskplug.executor import ExecutionRecord, SQLiteStateStore

from .conftest import assert_bad_input, invoke

KEY = "proj/dev/wf-7/n0"
BOOL = types_pb2.LiteralType(simple=types_pb2.SimpleType.BOOLEAN)
INT = types_pb2.LiteralType(simple=types_pb2.SimpleType.INTEGER)
STR = types_pb2.LiteralType(simple=types_pb2.SimpleType.STRING)
LIST_FLOAT = types_pb2.LiteralType(collection_type=types_pb2.LiteralType(simple=types_pb2.SimpleType.FLOAT))


@pytest.fixture
def state_db(tmp_path: Path) -> Path:
    """A state DB holding one execution whose gates created four signals."""
    path = tmp_path / "state.db"
    store = SQLiteStateStore(path)
    try:
        store.save(ExecutionRecord(key=KEY))
        for signal_id, literal_type in (
            ("approve-y", BOOL),
            ("count", INT),
            ("name", STR),
            ("xs", LIST_FLOAT),
        ):
            store.get_or_create_signal(KEY, signal_id, literal_type)
    finally:
        store.close()
    return path


def _value(path: Path, signal_id: str) -> object:
    store = SQLiteStateStore(path)
    try:
        return next(s.value for s in store.list_signals(KEY) if s.signal_id == signal_id)
    finally:
        store.close()


def test_list_shows_each_signal_its_type_and_that_it_waits(runner: CliRunner, state_db: Path) -> None:
    result = invoke(runner, "signal", "list", KEY, "--state-db", state_db)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines() == [
        "approve-y  BOOLEAN     (waiting)",
        "count      INTEGER     (waiting)",
        "name       STRING      (waiting)",
        "xs         list[FLOAT]  (waiting)",
    ]


@pytest.mark.parametrize(
    ("signal_id", "text", "expected", "literal_type"),
    [
        ("count", "3", 3, INT),
        ("name", "3", "3", STR),  # a STRING takes the text as it is
        ("name", "hello world", "hello world", STR),
        ("xs", "[1, 2.5]", [1.0, 2.5], LIST_FLOAT),
        ("approve-y", "true", True, BOOL),
    ],
)
def test_set_reads_the_value_by_the_signal_type(
    runner: CliRunner,
    state_db: Path,
    signal_id: str,
    text: str,
    expected: object,
    literal_type: types_pb2.LiteralType,
) -> None:
    result = invoke(runner, "signal", "set", KEY, signal_id, text, "--state-db", state_db)
    assert result.exit_code == 0, result.stderr
    assert (
        result.stdout
        == f"signal {signal_id} of {KEY} set to {orjson.dumps(expected).decode().replace(',', ', ')}\n"
    )
    assert _value(state_db, signal_id) == plain_to_literal(expected, literal_type, "v")


def test_approve_and_reject_set_the_approve_signal_and_the_last_answer_wins(
    runner: CliRunner, state_db: Path
) -> None:
    # The execution has one BOOLEAN signal: its id may be left out.
    assert invoke(runner, "signal", "approve", KEY, "--state-db", state_db).exit_code == 0
    assert _value(state_db, "approve-y") == plain_to_literal(True, BOOL, "v")
    assert invoke(runner, "signal", "reject", KEY, "approve-y", "--state-db", state_db).exit_code == 0
    assert _value(state_db, "approve-y") == plain_to_literal(False, BOOL, "v")
    listed = invoke(runner, "signal", "list", KEY, "--state-db", state_db, "-o", "json")
    views = orjson.loads(listed.stdout)
    assert views[0] == {
        "signal_id": "approve-y",
        "type": {"simple": "BOOLEAN"},
        "type_name": "BOOLEAN",
        "is_set": True,
        "value": False,
    }


def test_an_execution_may_be_named_alone(runner: CliRunner, state_db: Path) -> None:
    assert invoke(runner, "signal", "set", "wf-7", "count", "5", "--state-db", state_db).exit_code == 0
    assert _value(state_db, "count") == plain_to_literal(5, INT, "v")


def test_a_value_not_of_the_type_is_refused_naming_the_type(runner: CliRunner, state_db: Path) -> None:
    result = invoke(runner, "signal", "set", KEY, "count", "three", "--state-db", state_db)
    assert_bad_input(result, "VALUE", "signal 'count''s type INTEGER", "expected an integer, got 'three'")
    assert _value(state_db, "count") is None


def test_approving_a_signal_that_is_no_approval_is_refused(runner: CliRunner, state_db: Path) -> None:
    result = invoke(runner, "signal", "approve", KEY, "count", "--state-db", state_db)
    assert_bad_input(result, "signal 'count' is of type INTEGER, not an approval")


def test_a_signal_whose_gate_has_not_started_is_refused_naming_the_known_ones(
    runner: CliRunner, state_db: Path
) -> None:
    result = invoke(runner, "signal", "set", KEY, "other", "1", "--state-db", state_db)
    assert_bad_input(
        result, "has no signal 'other'", "its gate has not started", "'approve-y', 'count', 'name', 'xs'"
    )


def test_an_unknown_execution_or_state_db_is_refused(
    runner: CliRunner, state_db: Path, tmp_path: Path
) -> None:
    assert_bad_input(
        invoke(runner, "signal", "list", "proj/dev/nope/n0", "--state-db", state_db),
        "no execution 'proj/dev/nope/n0' in state DB",
    )
    missing = tmp_path / "elsewhere" / "state.db"
    assert_bad_input(invoke(runner, "signal", "list", KEY, "--state-db", missing), "no state DB at")
    assert not missing.exists()  # a signal command never creates a state DB
    assert_bad_input(
        invoke(runner, "signal", "list", KEY, "--state-db", state_db, "--server", "http://127.0.0.1:1"),
        "--state-db",
    )


def test_an_execution_without_signals_says_its_gates_have_not_started(
    runner: CliRunner, tmp_path: Path
) -> None:
    path = tmp_path / "state.db"
    store = SQLiteStateStore(path)
    store.save(ExecutionRecord(key=KEY))
    store.close()
    result = invoke(runner, "signal", "list", KEY, "--state-db", path)
    assert (result.exit_code, result.stdout) == (
        0,
        f"execution {KEY} has no signals yet: its gates have not started\n",
    )
    assert_bad_input(invoke(runner, "signal", "approve", KEY, "--state-db", path), "has no approve signals")


def test_an_ended_execution_takes_no_answer(runner: CliRunner, state_db: Path) -> None:
    store = SQLiteStateStore(state_db)
    store.save(ExecutionRecord(key=KEY, terminal=True, outcome="Failed"))
    store.close()
    result = invoke(runner, "signal", "approve", KEY, "--state-db", state_db)
    assert_bad_input(result, "has already ended Failed: its gates wait for nothing")
    assert _value(state_db, "approve-y") is None
