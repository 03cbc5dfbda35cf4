"""Gate nodes' signals in the executor's state stores (flyteadmin's SignalService semantics): created by the
gate with no value, listed, set only once they exist, only with a value castable to their type, and
overwritten by a later value; the SQLite file's schema 3 is upgraded to 4 (the ``signals`` table) when opened.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from flyteidl.core import literals_pb2, types_pb2

from taskplug.core import plain_to_literal
from taskplug.executor import (
    SIGNAL_NOT_CASTABLE,
    SIGNAL_NOT_FOUND,
    ExecutionRecord,
    KeepsSignals,
    MemoryStateStore,
    Signal,
    SignalError,
    SQLiteStateStore,
    StateStoreError,
)

KEY = "proj/dev/wf-1/n0"
BOOL = types_pb2.LiteralType(simple=types_pb2.SimpleType.BOOLEAN)
INT = types_pb2.LiteralType(simple=types_pb2.SimpleType.INTEGER)
LIST_STR = types_pb2.LiteralType(collection_type=types_pb2.LiteralType(simple=types_pb2.SimpleType.STRING))


def _lit(value: object, literal_type: types_pb2.LiteralType) -> literals_pb2.Literal:
    return plain_to_literal(value, literal_type, "v")


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryStateStore | SQLiteStateStore]:
    if request.param == "memory":
        yield MemoryStateStore()
        return
    sqlite_store = SQLiteStateStore(tmp_path / "state.db")
    yield sqlite_store
    sqlite_store.close()


def test_both_stores_keep_signals(store: MemoryStateStore | SQLiteStateStore) -> None:
    assert isinstance(store, KeepsSignals)


def test_the_gate_creates_its_signal_without_a_value_once(store: MemoryStateStore | SQLiteStateStore) -> None:
    assert store.get_or_create_signal(KEY, "approve-y", BOOL) is None
    assert store.get_or_create_signal(KEY, "approve-y", BOOL) is None
    assert store.list_signals(KEY) == [Signal("approve-y", BOOL, None)]
    assert store.list_signals("proj/dev/other/n0") == []


def test_a_value_set_is_what_the_gate_reads_next(store: MemoryStateStore | SQLiteStateStore) -> None:
    store.get_or_create_signal(KEY, "count", INT)
    store.set_signal(KEY, "count", _lit(3, INT))
    assert store.get_or_create_signal(KEY, "count", INT) == _lit(3, INT)
    assert store.list_signals(KEY) == [Signal("count", INT, _lit(3, INT))]


def test_a_later_value_overwrites_an_earlier_one(store: MemoryStateStore | SQLiteStateStore) -> None:
    store.get_or_create_signal(KEY, "approve-y", BOOL)
    store.set_signal(KEY, "approve-y", _lit(False, BOOL))
    store.set_signal(KEY, "approve-y", _lit(True, BOOL))
    assert store.get_or_create_signal(KEY, "approve-y", BOOL) == _lit(True, BOOL)


def test_a_signal_whose_gate_has_not_run_cannot_be_set(store: MemoryStateStore | SQLiteStateStore) -> None:
    with pytest.raises(SignalError) as raised:
        store.set_signal(KEY, "approve-y", _lit(True, BOOL))
    assert raised.value.code == SIGNAL_NOT_FOUND
    assert str(raised.value).startswith(
        f"failed to validate that signal [execution {KEY!r}, signal 'approve-y'] exists"
    )
    assert store.list_signals(KEY) == []


@pytest.mark.parametrize(
    ("literal_type", "value", "reason"),
    [
        (BOOL, _lit(1, INT), "Expected BOOLEAN, but got INTEGER"),
        (INT, _lit("3", types_pb2.LiteralType(simple=types_pb2.SimpleType.STRING)), "Expected INTEGER"),
        (LIST_STR, _lit([1, 2], types_pb2.LiteralType(collection_type=INT)), "Expected list[STRING]"),
        (INT, literals_pb2.Literal(), "it holds no value"),
    ],
)
def test_a_value_not_castable_to_the_signal_type_is_refused_and_the_signal_keeps_its_value(
    store: MemoryStateStore | SQLiteStateStore,
    literal_type: types_pb2.LiteralType,
    value: literals_pb2.Literal,
    reason: str,
) -> None:
    store.get_or_create_signal(KEY, "s", literal_type)
    with pytest.raises(SignalError) as raised:
        store.set_signal(KEY, "s", value)
    assert raised.value.code == SIGNAL_NOT_CASTABLE
    message = str(raised.value)
    assert (
        message.startswith("requested signal value [")
        and "is not castable to existing signal type [" in message
    )
    assert reason in message
    assert store.list_signals(KEY) == [Signal("s", literal_type, None)]


def test_signals_are_per_execution(store: MemoryStateStore | SQLiteStateStore) -> None:
    other = "proj/dev/wf-2/n0"
    store.get_or_create_signal(KEY, "s", INT)
    store.get_or_create_signal(other, "s", INT)
    store.set_signal(other, "s", _lit(5, INT))
    assert store.get_or_create_signal(KEY, "s", INT) is None
    assert store.get_or_create_signal(other, "s", INT) == _lit(5, INT)


def test_a_signal_set_by_another_process_is_read_by_the_driver_whose_batch_is_open(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    driver = SQLiteStateStore(path, commit_interval=3600)  # its batch stays open until it flushes
    person = SQLiteStateStore(path)
    try:
        driver.save(ExecutionRecord(key=KEY))
        driver.get_or_create_signal(KEY, "approve-y", BOOL)  # creating it committed the open batch
        assert person.list_signals(KEY) == [Signal("approve-y", BOOL, None)]
        assert person.load(KEY) is not None
        person.set_signal(KEY, "approve-y", _lit(True, BOOL))
        assert driver.get_or_create_signal(KEY, "approve-y", BOOL) == _lit(True, BOOL)
    finally:
        person.close()
        driver.close()


def test_forgetting_an_execution_deletes_its_signals(tmp_path: Path) -> None:
    store = SQLiteStateStore(tmp_path / "state.db")
    try:
        store.get_or_create_signal(KEY, "s", INT)
        store.forget(KEY)
        assert store.list_signals(KEY) == []
    finally:
        store.close()


def _version_3_file(path: Path) -> None:
    """A state DB as schema 3 wrote it: today's tables but ``signals``, user_version 3."""
    SQLiteStateStore(path).close()
    db = sqlite3.connect(path)
    try:
        db.execute("DROP TABLE signals")
        db.execute("PRAGMA user_version = 3")
        db.execute(
            "INSERT INTO executions (key, record) VALUES (?, ?)", (KEY, ExecutionRecord(key=KEY).to_row())
        )
        db.commit()
    finally:
        db.close()


def test_opening_a_version_3_state_db_adds_the_signals_table(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    _version_3_file(path)
    store = SQLiteStateStore(path)
    try:
        assert store.load(KEY) == ExecutionRecord(key=KEY)
        assert store.get_or_create_signal(KEY, "s", INT) is None
    finally:
        store.close()
    db = sqlite3.connect(path)
    try:
        assert db.execute("PRAGMA user_version").fetchone() == (5,)
        columns = [row[1] for row in db.execute("PRAGMA table_info(signals)")]
    finally:
        db.close()
    assert columns == ["key", "signal_id", "type", "value"]


def test_a_version_4_state_db_is_refused_by_a_taskplug_that_reads_up_to_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "state.db"
    SQLiteStateStore(path).close()
    monkeypatch.setattr("taskplug.executor._store._SCHEMA_VERSION", 3)
    with pytest.raises(StateStoreError, match="schema version 5, written by a newer taskplug"):
        SQLiteStateStore(path)
