"""The PostgreSQL data catalog every replica shares: results by Flyte's key, reservations taken by one
owner at a time, extended by it, taken over once expired, released — the same protocol as the SQLite one,
and two executors (two replicas' worth) racing on a serialized task through it run one object."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from executor.test_cache import SquarePlugin, task_spec
from taskplug.core import PluginEntry, PluginResolver
from taskplug.executor import CatalogEntry, CatalogKey
from taskplug.executor._executor import Executor, ExecutorSettings
from taskplug.executor._store import MemoryStateStore
from taskplug.service import PostgresCatalog, migrate

KEY = CatalogKey("p", "d", "flyte_task-sq", "1-abcdefgh-ijklmnop", "flyte_cached-xyz")


@pytest.fixture
def catalog(postgres_dsn: str) -> Iterator[PostgresCatalog]:
    with psycopg.connect(postgres_dsn) as conn:
        migrate(conn)
        conn.execute("DELETE FROM taskplug_catalog")
        conn.execute("DELETE FROM taskplug_catalog_reservations")
    found = PostgresCatalog(psycopg.connect(postgres_dsn, autocommit=True))
    yield found
    found.close()


def test_a_result_is_kept_by_its_key_and_listed_by_task_and_version(catalog: PostgresCatalog) -> None:
    assert catalog.get(KEY) is None
    entry = CatalogEntry(KEY, "/data/catalog/x/outputs.pb", "p/d/e1/n0", "v7", time.time() - 100)
    catalog.put(entry)
    got = catalog.get(KEY)
    assert got is not None and (got.uri, got.source, got.task_version) == (entry.uri, entry.source, "v7")
    assert [e.key for e in catalog.entries(task="sq", version="1")] == [KEY]
    assert catalog.entries(task="other") == [] and catalog.entries(version="2") == []
    assert catalog.entries(older_than=time.time() - 1000) == []
    assert catalog.delete(catalog.entries(older_than=time.time())) == 1
    assert catalog.get(KEY) is None


def test_a_reservation_is_one_owners_until_it_expires(catalog: PostgresCatalog) -> None:
    assert catalog.get_or_extend_reservation(KEY, "a", 0.3).owner == "a"
    assert catalog.get_or_extend_reservation(KEY, "b", 10).owner == "a"
    assert catalog.get_or_extend_reservation(KEY, "a", 0.3).owner == "a"  # extended
    time.sleep(0.5)
    assert catalog.get_or_extend_reservation(KEY, "b", 10).owner == "b"  # expired: taken over
    catalog.release_reservation(KEY, "a")  # not a's any more: left alone
    assert catalog.get_or_extend_reservation(KEY, "c", 10).owner == "b"
    catalog.release_reservation(KEY, "b")
    assert catalog.get_or_extend_reservation(KEY, "c", 10).owner == "c"


async def test_two_replicas_racing_on_a_serialized_task_run_one_object(
    postgres_dsn: str, catalog: PostgresCatalog, tmp_path: Path
) -> None:
    hold = asyncio.Event()
    plugin = SquarePlugin(hold)
    entry = PluginEntry("square", ("square",), lambda _: plugin)
    other = PostgresCatalog(psycopg.connect(postgres_dsn, autocommit=True))
    settings = ExecutorSettings(
        data_root=str(tmp_path / "data"), workers=8, resync_period=0.01, cache_heartbeat=0.05
    )
    try:
        async with (
            Executor(
                resolver=PluginResolver([(entry, plugin)], {}),
                store=MemoryStateStore(),
                settings=settings,
                catalog=catalog,
            ) as one,
            Executor(
                resolver=PluginResolver([(entry, plugin)], {}),
                store=MemoryStateStore(),
                settings=settings,
                catalog=other,
            ) as two,
        ):
            k1 = await one.submit(task_spec("r1", serialize=True))
            k2 = await two.submit(task_spec("r2", serialize=True))
            for _ in range(200):
                await asyncio.sleep(0.01)
                if plugin.created:
                    break
            await asyncio.sleep(0.2)
            hold.set()
            r1, r2 = await asyncio.wait_for(asyncio.gather(one.wait(k1), two.wait(k2)), 30)
    finally:
        other.close()
    assert len(plugin.created) == 1
    assert r1.outputs == r2.outputs == {"o0": 9}
    assert sorted([r1.cache_status, r2.cache_status]) == ["CACHE_HIT", "CACHE_POPULATED"]


def test_gc_forgets_old_cached_results_only_when_asked(postgres_dsn: str, catalog: PostgresCatalog) -> None:
    from click.testing import CliRunner

    from taskplug.cli._gc import gc

    old = CatalogEntry(KEY, "/x/outputs.pb", "p/d/e1/n0", "v1", time.time() - 10 * 86400)
    catalog.put(old)
    kept = CliRunner().invoke(gc, ["--store", postgres_dsn, "--older-than", "7d"])
    assert kept.exit_code == 0, kept.output
    assert catalog.get(KEY) is not None
    runner_result = CliRunner().invoke(gc, ["--store", postgres_dsn, "--older-than", "7d", "--catalog"])
    assert runner_result.exit_code == 0, runner_result.output
    assert "deleted 1 cached result(s)" in runner_result.output
    assert catalog.get(KEY) is None
