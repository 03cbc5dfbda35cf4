"""What the data catalog costs: lookups per second from the SQLite and the PostgreSQL catalog, and a single
task's execution on a cache hit beside the same execution with caching off.

* Lookups: N results are kept (``populate``: the copy under the data root, the row), then N lookups of kept
  inputs (``cached_outputs``: the key's hashes, the row, the kept copy read and decoded) and N of inputs never
  kept (the key and the row only), each timed as one sequence.
* Executions: M single-task executions run one after another through the executor, with a plugin that
  succeeds at once (its outputs written, no pod), first with caching off, then — the same inputs, already
  kept — as hits (no plugin call). Printed: executions per second and ms per execution, side by side.

PostgreSQL is a throwaway server started here (as ``benchmarks/replicas.py`` starts one), or ``--dsn``.

    .venv/bin/python benchmarks/cache.py [N] [--executions M] [--dsn postgresql://…] [--no-postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from flyteidl.core import literals_pb2

from taskplug.core import (
    PhaseInfo,
    PluginEntry,
    PluginProperties,
    PluginResolver,
    TaskExecutionContext,
    Transition,
)
from taskplug.executor import (
    Catalog,
    Executor,
    ExecutorSettings,
    SQLiteCatalog,
    SQLiteStateStore,
    cached_outputs,
    parse_spec,
    populate,
)
from taskplug.executor._datastore import DataStore

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _template() -> dict[str, Any]:
    return {
        "id": {"resourceType": "TASK", "project": "p", "domain": "d", "name": "bench", "version": "v1"},
        "type": "instant",
        "metadata": {"discoverable": True, "discoveryVersion": "1"},
        "interface": {
            "inputs": {"variables": {"x": {"type": {"simple": "INTEGER"}}}},
            "outputs": {"variables": {"o0": {"type": {"simple": "INTEGER"}}}},
        },
    }


def _literals(name: str, x: int) -> literals_pb2.LiteralMap:
    out = literals_pb2.LiteralMap()
    out.literals[name].scalar.primitive.integer = x
    return out


def _inputs(x: int) -> literals_pb2.LiteralMap:
    return _literals("x", x)


async def lookups(catalog: Catalog, data_root: str, n: int) -> tuple[float, float, float]:
    """(puts/s, hit lookups/s, miss lookups/s)."""
    template = parse_spec({"template": _template(), "inputs": {"x": 0}}).template
    data = DataStore()
    start = time.perf_counter()
    for x in range(n):
        await populate(
            catalog,
            data,
            data_root,
            template,
            _inputs(x),
            _literals("o0", x),
            project="p",
            domain="d",
            source="b",
        )
    puts = n / (time.perf_counter() - start)
    start = time.perf_counter()
    for x in range(n):
        found = await cached_outputs(catalog, data, template, _inputs(x), project="p", domain="d")
        assert found.outputs is not None
    hits = n / (time.perf_counter() - start)
    start = time.perf_counter()
    for x in range(n, 2 * n):
        found = await cached_outputs(catalog, data, template, _inputs(x), project="p", domain="d")
        assert found.outputs is None
    misses = n / (time.perf_counter() - start)
    return puts, hits, misses


class Instant:
    """Succeeds in its first round with ``o0 = x``; counts its calls."""

    calls = 0

    @property
    def id(self) -> str:
        return "instant"

    def get_properties(self) -> PluginProperties:
        return PluginProperties()

    async def handle(self, tctx: TaskExecutionContext) -> Transition:
        self.calls += 1
        inputs = tctx.input_reader.get()
        assert inputs is not None
        path = Path(tctx.output_writer.output_prefix)
        path.mkdir(parents=True, exist_ok=True)
        x = inputs.literals["x"].scalar.primitive.integer
        (path / "outputs.pb").write_bytes(_literals("o0", x).SerializeToString())
        return Transition.to(PhaseInfo.success())

    async def abort(self, tctx: TaskExecutionContext) -> None:
        pass

    async def finalize(self, tctx: TaskExecutionContext) -> None:
        pass


async def executions(workdir: Path, m: int, *, cached: bool, prefix: str) -> float:
    """Seconds per execution, M executions one after another."""
    plugin = Instant()
    entry = PluginEntry("instant", ("instant",), lambda _: plugin)
    db = workdir / "state.db"
    store = SQLiteStateStore(db)
    catalog = SQLiteCatalog(store) if cached else None
    settings = ExecutorSettings(data_root=str(workdir / "data"), workers=4, resync_period=1.0)
    specs = [
        parse_spec(
            {
                "template": _template(),
                "execution": {"id": {"project": "p", "domain": "d", "name": f"{prefix}{i}"}},
                "inputs": {"x": i},
            }
        )
        for i in range(m)
    ]
    try:
        async with Executor(
            resolver=PluginResolver([(entry, plugin)], {}), store=store, settings=settings, catalog=catalog
        ) as ex:
            start = time.perf_counter()
            for spec in specs:
                result = await ex.run(spec)
                assert result.succeeded, result.error
            elapsed = time.perf_counter() - start
    finally:
        store.close()
    if cached and prefix == "hit":
        assert plugin.calls == 0, f"{plugin.calls} hits ran the plugin"
    return elapsed / m


def _pg_catalog(dsn: str | None) -> Any:
    import contextlib

    import psycopg
    from replicas import fresh_database, postgres  # type: ignore[import-not-found]

    from taskplug.service import PostgresCatalog

    @contextlib.contextmanager
    def opened() -> Any:
        with postgres(dsn) as admin:
            conn = psycopg.connect(fresh_database(admin), autocommit=True)
            try:
                yield PostgresCatalog(conn)
            finally:
                conn.close()

    return opened()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("n", type=int, nargs="?", default=2000)
    parser.add_argument("--executions", type=int, default=200)
    parser.add_argument("--dsn")
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    rows: list[tuple[str, float, float, float]] = []
    with tempfile.TemporaryDirectory(prefix="taskplug-bench-cache-") as tmp:
        work = Path(tmp)
        store = SQLiteStateStore(work / "lookups.db")
        sqlite = SQLiteCatalog(store)
        rows.append(("SQLite", *asyncio.run(lookups(sqlite, str(work / "data"), args.n))))
        store.close()
        if not args.no_postgres:
            with _pg_catalog(args.dsn) as pg:
                rows.append(("PostgreSQL", *asyncio.run(lookups(pg, str(work / "pgdata"), args.n))))
        off = asyncio.run(executions(work / "off", args.executions, cached=False, prefix="off"))
        asyncio.run(executions(work / "hit", args.executions, cached=True, prefix="fill"))
        hit = asyncio.run(executions(work / "hit", args.executions, cached=True, prefix="hit"))
    print(f"catalog lookups ({args.n} results kept)")
    print(f"  {'store':<12}{'puts/s':>12}{'hits/s':>12}{'misses/s':>12}")
    for name, puts, hits, misses in rows:
        print(f"  {name:<12}{puts:>12.0f}{hits:>12.0f}{misses:>12.0f}")
    print(f"single-task executions ({args.executions}, one after another, a plugin that succeeds at once)")
    print(f"  {'':<22}{'ms/execution':>14}{'executions/s':>14}")
    print(f"  {'caching off':<22}{off * 1000:>14.2f}{1 / off:>14.0f}")
    print(f"  {'cache hit':<22}{hit * 1000:>14.2f}{1 / hit:>14.0f}")


if __name__ == "__main__":
    main()
