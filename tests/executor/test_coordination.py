"""The single process's side of the seams replicas share: the SQLite store's fenced writes and the
:class:`LocalCoordinator`.

A lease is taken after the kernel lock; every write of a held execution checks the lease in its own
statement. The lock file can be removed from under a running process (or not reach another host), so these
tests take a second lease on the same file the way a second process would once past the lock, and check that
the first process's writes are refused, reported lost and never applied, and that the new holder's land.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from executor.test_executor import ScriptedPlugin, _resolver, _spec
from support.waiting import wait_until
from taskplug.core import PhaseInfo
from taskplug.executor import (
    Event,
    ExecutionRecord,
    FencedError,
    FencedStateStore,
    Lease,
    LocalCoordinator,
    NodeRecord,
    SQLiteStateStore,
    StateStoreError,
)
from taskplug.executor._executor import Executor, ExecutorSettings

KEY = "demo/development/fenced-1/n0"
KEY_SPEC = _spec("fenced-2")


def _event(phase: str) -> Event:
    return Event(attempt=0, phase=phase, version=0, reason="", occurred_at=None)


def _stored(path: Path) -> ExecutionRecord | None:
    reader = SQLiteStateStore(path)
    try:
        return reader.load(KEY)
    finally:
        reader.close()


def test_sqlite_store_is_a_fenced_store(tmp_path: Path) -> None:
    store = SQLiteStateStore(tmp_path / "state.db")
    try:
        assert isinstance(store, FencedStateStore)
    finally:
        store.close()


def test_a_write_under_a_superseded_lease_is_refused_reported_and_never_applied(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    first, second = SQLiteStateStore(path), SQLiteStateStore(path)
    lost: list[set[str]] = []
    first.on_lost = lambda keys: lost.append(set(keys))
    try:
        lease = first.acquire_lease(KEY, "first")
        assert lease == Lease("first", 1)
        first.save(ExecutionRecord(key=KEY, reason="first wrote this"))
        first.flush()

        assert second.acquire_lease(KEY, "second") == Lease("second", 2)
        first.save(ExecutionRecord(key=KEY, reason="first, after the takeover"))
        first.append_event(KEY, _event("Running"))
        first.save_nodes(KEY, [NodeRecord(path="n0/0", reason="stale")])
        first.flush()

        assert lost == [{KEY}]  # reported once, at the first refused write
        assert KEY in first.lost
        assert first.lease_of(KEY) is None
        stored = _stored(path)
        assert stored is not None and stored.reason == "first wrote this"
        assert second.events(KEY) == [] and second.load_nodes(KEY) == []

        second.save(ExecutionRecord(key=KEY, reason="second wrote this"))
        second.append_event(KEY, _event("Running"))
        second.flush()
        stored = _stored(path)
        assert stored is not None and stored.reason == "second wrote this"
        assert [e.phase for e in second.events(KEY)] == ["Running"]
    finally:
        first.close()
        second.close()


def test_forget_under_a_superseded_lease_deletes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    first, second = SQLiteStateStore(path), SQLiteStateStore(path)
    try:
        first.acquire_lease(KEY, "first")
        first.save(ExecutionRecord(key=KEY, reason="kept"))
        first.flush()
        second.acquire_lease(KEY, "second")
        first.forget(KEY)
        assert KEY in first.lost
        stored = _stored(path)
        assert stored is not None and stored.reason == "kept"
    finally:
        first.close()
        second.close()


def test_an_execution_without_a_lease_is_written_as_before(tmp_path: Path) -> None:
    store = SQLiteStateStore(tmp_path / "state.db")
    try:
        store.save(ExecutionRecord(key=KEY, reason="unfenced"))
        store.flush()
        assert store.lost == set()
    finally:
        store.close()
    stored = _stored(tmp_path / "state.db")
    assert stored is not None and stored.reason == "unfenced"


def test_a_version_1_state_db_is_upgraded_and_keeps_its_records(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    db = sqlite3.connect(path)
    db.executescript(
        "CREATE TABLE executions (key TEXT PRIMARY KEY, record BLOB NOT NULL);"
        "CREATE TABLE events (key TEXT NOT NULL, seq INTEGER PRIMARY KEY AUTOINCREMENT, event BLOB NOT NULL);"
        "CREATE TABLE elements (key TEXT NOT NULL, idx INTEGER NOT NULL, record BLOB NOT NULL, "
        "PRIMARY KEY (key, idx));"
        f"PRAGMA application_id = {0x74706C67}; PRAGMA user_version = 1;"
    )
    db.execute("INSERT INTO executions VALUES (?, ?)", (KEY, ExecutionRecord(key=KEY, reason="old").to_row()))
    db.commit()
    db.close()

    store = SQLiteStateStore(path)
    try:
        record = store.load(KEY)
        assert record is not None and record.reason == "old"
        assert store.acquire_lease(KEY, "me").epoch == 1
    finally:
        store.close()
    db = sqlite3.connect(path)
    try:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 5
    finally:
        db.close()


def test_local_coordinator_holds_fences_and_releases(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    store, other = SQLiteStateStore(path), SQLiteStateStore(path)
    coordinator, rival = LocalCoordinator(store), LocalCoordinator(other)
    try:
        with coordinator.hold(KEY) as lease:
            assert lease.owner == coordinator.owner and lease.epoch == 1
            assert coordinator.driving() == {KEY}
            assert store.lease_of(KEY) == lease
            # The lock refuses a second process at once, naming the holder.
            with pytest.raises(StateStoreError, match="being run by another process"), rival.hold(KEY):
                pass
        assert coordinator.driving() == set()
        assert store.lease_of(KEY) is None
        with rival.hold(KEY) as lease:  # free again: the next holder's epoch follows
            assert lease.epoch == 2
    finally:
        store.close()
        other.close()


async def test_local_coordinator_stops_driving_what_another_process_took_over(tmp_path: Path) -> None:
    """The lock file removed while a run holds it: a second process takes the execution over; the first
    one's next write is refused, its executor forgets the execution (no more rounds, no abort, no finalize),
    and the coordinator says so."""
    path = tmp_path / "state.db"
    store, other = SQLiteStateStore(path), SQLiteStateStore(path)
    coordinator, rival = LocalCoordinator(store), LocalCoordinator(other)
    plugin = ScriptedPlugin([PhaseInfo.running(0)])  # runs until told otherwise; a new state every round
    settings = ExecutorSettings(data_root=str(tmp_path / "data"), workers=2, resync_period=0.01)
    try:
        async with Executor(resolver=_resolver(plugin), store=store, settings=settings) as ex:
            coordinator.drive(ex)
            with coordinator.hold(KEY_SPEC.execution_key):
                key = await ex.submit(KEY_SPEC)
                await wait_until(lambda: plugin.rounds >= 2, what="two rounds")
                for lock in Path(f"{path}.locks").iterdir():
                    lock.unlink()
                # What `taskplug run`'s committer does every 0.25 s; the rival, in this same thread, would
                # otherwise wait on the open batch's write lock while blocking the loop that commits it.
                store.flush()
                with rival.hold(key):
                    await asyncio.wait_for(ex.wait(key), 10)
                    rounds = plugin.rounds
                    await asyncio.sleep(0.1)  # ten resync periods
                    assert plugin.rounds == rounds  # no round after the refused write
                    assert coordinator.driving() == set()
                    with pytest.raises(StateStoreError, match="taken over by another process"):
                        coordinator.check(key)
                    with pytest.raises(FencedError, match="taken over"):
                        await coordinator.guard()  # what its GuardedKubeClient asks before a create or delete
                    other.save(ExecutionRecord(key=key, reason="the new holder's"))
                    other.flush()
        assert plugin.aborted == [] and plugin.finalized == []
        reader = SQLiteStateStore(path)
        try:
            stored = reader.load(KEY_SPEC.execution_key)
        finally:
            reader.close()
        assert stored is not None and stored.reason == "the new holder's"
    finally:
        store.close()
        other.close()
