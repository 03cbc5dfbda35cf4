"""A state DB written by the release before node records (``fixtures/state_v2.sqlite``, schema version 2,
made by ``fixtures/state_v2.py``) is upgraded when opened — its map elements become node records at
``n0/<index>``, every record speaks today's key names — and both executions it holds mid-run, a single task
and a map of three elements, resume to Success from their stored plugin state, creating nothing again."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import orjson

from executor.fixtures.state_v2 import (
    MAP_INPUTS,
    MAP_KEY,
    SINGLE_KEY,
    STEPS_BEFORE_STOP,
    ProgressPlugin,
    map_spec,
    resolver,
    settings,
    single_spec,
)
from taskplug.executor import ExecutionRecord, SQLiteStateStore
from taskplug.executor._executor import Executor

FIXTURE = Path(__file__).with_name("fixtures") / "state_v2.sqlite"


def _copy(tmp_path: Path) -> Path:
    path = tmp_path / "state.sqlite"
    shutil.copyfile(FIXTURE, path)
    return path


def test_opening_a_version_2_state_db_converts_its_elements_into_node_records(tmp_path: Path) -> None:
    path = _copy(tmp_path)
    SQLiteStateStore(path).close()

    db = sqlite3.connect(path)
    try:
        assert db.execute("PRAGMA user_version").fetchone() == (5,)
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert "elements" not in tables and {"nodes", "signals", "catalog", "catalog_reservations"} <= tables
        nodes = db.execute("SELECT key, path, record FROM nodes ORDER BY path").fetchall()
        records = dict(db.execute("SELECT key, record FROM executions").fetchall())
    finally:
        db.close()
    assert [(key, path) for key, path, _ in nodes] == [(MAP_KEY, f"n0/{i}") for i in range(len(MAP_INPUTS))]
    for _, node_path, raw in nodes:
        record = orjson.loads(raw)
        assert record["path"] == node_path and record["attempt"] == 0
        assert record["plugin_state"] == {"step": STEPS_BEFORE_STOP}
        assert not {"index", "attempts"} & record.keys()
    single = orjson.loads(records[SINGLE_KEY])
    assert (single["path"], single["task_phase"], single["plugin_state"]) == (
        "n0",
        5,
        {"step": STEPS_BEFORE_STOP},
    )
    assert not {"phase", "user_failures"} & single.keys()


async def test_executions_in_a_version_2_state_db_resume_to_success_without_creating_again(
    tmp_path: Path,
) -> None:
    path = _copy(tmp_path)
    plugin = ProgressPlugin(finish_at=STEPS_BEFORE_STOP + 2)
    store = SQLiteStateStore(path)
    try:
        async with Executor(
            resolver=resolver(plugin), store=store, settings=settings(tmp_path / "data")
        ) as ex:
            single = await ex.run(single_spec())
            mapped = await ex.run(map_spec())
    finally:
        store.close()

    assert (single.phase, single.outputs, single.attempts, single.node) == ("Success", {"o0": 9}, 1, "n0")
    assert (mapped.phase, mapped.outputs, mapped.node) == (
        "Success",
        {"o0": [x * x for x in MAP_INPUTS]},
        "n0",
    )
    assert mapped.elements is not None
    assert [(e["node"], e["phase"], e["attempts"]) for e in mapped.elements] == [
        (f"n0/{i}", "Succeeded", 1) for i in range(len(MAP_INPUTS))
    ]
    # Every attempt went on from the plugin state the old release stored: nothing was created again.
    assert plugin.created == []
    assert plugin.resumed_at == {
        "single-v2-n0-0": STEPS_BEFORE_STOP,
        **{f"map-v2-n0-0-n{i}-0": STEPS_BEFORE_STOP for i in range(len(MAP_INPUTS))},
    }


def test_a_version_4_state_db_gets_the_catalog_tables_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    store = SQLiteStateStore(path)
    store.save(ExecutionRecord(key="p/d/e1/n0", outcome="Success", terminal=True))
    store.close()
    db = sqlite3.connect(path)
    db.execute("DROP TABLE catalog")
    db.execute("DROP TABLE catalog_reservations")
    db.execute("PRAGMA user_version = 4")
    db.commit()
    db.close()
    store = SQLiteStateStore(path)
    try:
        record = store.load("p/d/e1/n0")
        assert record is not None and record.outcome == "Success"
    finally:
        store.close()
    db = sqlite3.connect(path)
    try:
        assert db.execute("PRAGMA user_version").fetchone() == (5,)
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert {"catalog", "catalog_reservations"} <= tables
    finally:
        db.close()
