"""The data catalog through the executor: a single task's and each map element's lookup and write-back, the
key's fields, serialized caching's reservations, a corrupted kept copy, overwrite_cache — with a plugin that
computes ``o0 = x * x`` and counts the objects it creates, a SQLite state file and catalog."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from flyteidl.core import literals_pb2, tasks_pb2

from taskplug.core import (
    PhaseInfo,
    PluginEntry,
    PluginProperties,
    PluginResolver,
    TaskExecutionContext,
    Transition,
)
from taskplug.executor import ExecutionSpec, parse_spec
from taskplug.executor._catalog import CatalogKey, SQLiteCatalog, catalog_key, hash_inputs
from taskplug.executor._executor import ExecutionResult, Executor, ExecutorSettings
from taskplug.executor._store import MemoryStateStore, SQLiteStateStore


class SquarePlugin:
    """Creates (counts) an object per attempt, reports Queued, Running, then Success with ``o0 = x * x``
    (every element's ``x`` for a map). ``hold``: an event the task waits on before it succeeds."""

    def __init__(self, hold: asyncio.Event | None = None) -> None:
        self.created: list[str] = []
        self.hold = hold

    @property
    def id(self) -> str:
        return "square"

    def get_properties(self) -> PluginProperties:
        return PluginProperties()

    async def handle(self, tctx: TaskExecutionContext) -> Transition:
        _, state = tctx.plugin_state_reader.get()
        step = (state or {}).get("step", 0)
        if state is None:
            self.created.append(tctx.metadata.task_execution_id.generated_name)
        tctx.plugin_state_writer.put(1, {"step": step + 1})
        if step == 0:
            return Transition.to(PhaseInfo.queued(None, 0, "created"))
        if step == 1 or (self.hold is not None and not self.hold.is_set()):
            return Transition.to(PhaseInfo.running(0))
        inputs = tctx.input_reader.get()
        assert inputs is not None
        x = inputs.literals["x"].scalar.primitive.integer
        out = literals_pb2.LiteralMap()
        out.literals["o0"].scalar.primitive.integer = x * x
        path = Path(tctx.output_writer.output_prefix)
        path.mkdir(parents=True, exist_ok=True)
        (path / "outputs.pb").write_bytes(out.SerializeToString())
        return Transition.to(PhaseInfo.success())

    async def abort(self, tctx: TaskExecutionContext) -> None:
        pass

    async def finalize(self, tctx: TaskExecutionContext) -> None:
        pass


def _template(
    *, version: str = "1", body: str = "v1", serialize: bool = False, ignore: tuple[str, ...] = ()
) -> dict[str, Any]:
    return {
        "id": {"resourceType": "TASK", "project": "p", "domain": "d", "name": "sq", "version": body},
        "type": "square",
        "metadata": {
            "discoverable": True,
            "discoveryVersion": version,
            "cacheSerializable": serialize,
            "cacheIgnoreInputVars": list(ignore),
        },
        "interface": {
            "inputs": {
                "variables": {"x": {"type": {"simple": "INTEGER"}}, "y": {"type": {"simple": "INTEGER"}}}
            },
            "outputs": {"variables": {"o0": {"type": {"simple": "INTEGER"}}}},
        },
    }


def task_spec(name: str, x: int = 3, *, overwrite: bool = False, **template: Any) -> ExecutionSpec:
    execution: dict[str, Any] = {"id": {"project": "p", "domain": "d", "name": name}}
    if overwrite:
        execution["overwriteCache"] = True
    return parse_spec({"template": _template(**template), "execution": execution, "inputs": {"x": x, "y": 0}})


def _map_template() -> dict[str, Any]:
    return {
        "id": {"resourceType": "TASK", "project": "p", "domain": "d", "name": "sq", "version": "v1"},
        "type": "square",
        "metadata": {"discoverable": True, "discoveryVersion": "1"},
        "interface": {
            "inputs": {"variables": {"x": {"type": {"collectionType": {"simple": "INTEGER"}}}}},
            "outputs": {"variables": {"o0": {"type": {"collectionType": {"simple": "INTEGER"}}}}},
        },
    }


def map_spec(name: str, xs: list[int]) -> ExecutionSpec:
    return parse_spec(
        {
            "template": _map_template(),
            "arrayNode": {},
            "execution": {"id": {"project": "p", "domain": "d", "name": name}},
            "inputs": {"x": xs},
        }
    )


def _settings(tmp_path: Path, heartbeat: float = 10.0) -> ExecutorSettings:
    return ExecutorSettings(
        data_root=str(tmp_path / "data"), workers=8, resync_period=0.01, cache_heartbeat=heartbeat
    )


async def run(
    tmp_path: Path, plugin: SquarePlugin, spec: ExecutionSpec, *, heartbeat: float = 10.0
) -> ExecutionResult:
    db = tmp_path / "state.db"
    store = SQLiteStateStore(db)
    catalog = SQLiteCatalog(store)
    entry = PluginEntry("square", ("square",), lambda _: plugin)
    try:
        async with Executor(
            resolver=PluginResolver([(entry, plugin)], {}),
            store=store,
            settings=_settings(tmp_path, heartbeat),
            catalog=catalog,
        ) as ex:
            return await asyncio.wait_for(ex.run(spec), 30)
    finally:
        store.close()
        catalog.close()


# -- a single task ---------------------------------------------------------------------------------------


async def test_the_same_inputs_run_once_and_hit_the_second_time(tmp_path: Path) -> None:
    plugin = SquarePlugin()
    first = await run(tmp_path, plugin, task_spec("e1"))
    assert first.outputs == {"o0": 9}
    assert first.to_json()["cacheStatus"] == "CACHE_POPULATED"
    assert first.events[0]["cacheStatus"] == "CACHE_MISS"
    assert first.events[-1]["cacheStatus"] == "CACHE_POPULATED"
    second = await run(tmp_path, plugin, task_spec("e2"))
    assert plugin.created == ["e1-n0-0"]  # one object for both executions
    assert second.outputs == {"o0": 9}
    assert second.to_json()["cacheStatus"] == "CACHE_HIT"
    # A hit is the task's SUCCEEDED only, saying where it came from.
    assert [(e["phase"], e["cacheStatus"]) for e in second.events] == [("Success", "CACHE_HIT")]
    assert (tmp_path / "data/metadata/p/d/e2/n0/0/outputs.pb").exists()


async def test_a_changed_input_or_cache_version_misses_an_ignored_input_or_a_new_body_hits(
    tmp_path: Path,
) -> None:
    plugin = SquarePlugin()
    await run(tmp_path, plugin, task_spec("a1", ignore=("y",)))
    assert (await run(tmp_path, plugin, task_spec("a2", x=4, ignore=("y",)))).outputs == {"o0": 16}
    assert (await run(tmp_path, plugin, task_spec("a3", version="2", ignore=("y",)))).cache_status == (
        "CACHE_POPULATED"
    )
    assert (
        await run(tmp_path, plugin, task_spec("a4", body="v2", ignore=("y",)))
    ).cache_status == "CACHE_HIT"
    assert len(plugin.created) == 3


def test_the_key_names_the_task_its_cache_version_and_interface_not_its_version() -> None:
    template = parse_spec({"template": _template(ignore=("y",)), "inputs": {"x": 1, "y": 2}}).template
    inputs = literals_pb2.LiteralMap()
    inputs.literals["x"].scalar.primitive.integer = 1
    inputs.literals["y"].scalar.primitive.integer = 2
    key = catalog_key(template, inputs, project="p", domain="d")
    assert key.dataset == "flyte_task-sq"
    assert key.version.startswith("1-") and len(key.version.split("-")) == 3
    assert key.tag.startswith("flyte_cached-")
    other = tasks_pb2.TaskTemplate()
    other.CopyFrom(template)
    other.id.version = "another"
    inputs.literals["y"].scalar.primitive.integer = 5  # ignored
    assert catalog_key(other, inputs, project="p", domain="d") == key
    other.interface.outputs.variables["o1"].type.simple = 1
    assert catalog_key(other, inputs, project="p", domain="d").version != key.version
    # A literal's own hash stands for it (a large offloaded value keyed by its hash).
    a, b = literals_pb2.LiteralMap(), literals_pb2.LiteralMap()
    a.literals["x"].scalar.primitive.integer = 1
    a.literals["x"].hash = "h"
    b.literals["x"].scalar.primitive.integer = 2
    b.literals["x"].hash = "h"
    assert hash_inputs(a) == hash_inputs(b)
    template.metadata.discovery_version = ""
    with pytest.raises(Exception, match="discoveryVersion"):
        catalog_key(template, inputs, project="p", domain="d")


async def test_a_corrupted_or_missing_kept_copy_is_a_miss_and_is_recomputed(tmp_path: Path) -> None:
    plugin = SquarePlugin()
    await run(tmp_path, plugin, task_spec("c1"))
    kept = next((tmp_path / "data/catalog").rglob("outputs.pb"))
    kept.write_bytes(b"\xff\xff not a literal map")
    again = await run(tmp_path, plugin, task_spec("c2"))
    assert again.outputs == {"o0": 9} and again.cache_status == "CACHE_POPULATED"
    kept.unlink()
    assert (await run(tmp_path, plugin, task_spec("c3"))).cache_status == "CACHE_POPULATED"
    assert (await run(tmp_path, plugin, task_spec("c4"))).cache_status == "CACHE_HIT"
    assert len(plugin.created) == 3


async def test_the_kept_copy_outlives_the_execution_that_produced_it(tmp_path: Path) -> None:
    plugin = SquarePlugin()
    await run(tmp_path, plugin, task_spec("d1"))
    import shutil

    shutil.rmtree(tmp_path / "data/metadata/p/d/d1")
    assert (await run(tmp_path, plugin, task_spec("d2"))).cache_status == "CACHE_HIT"


async def test_overwrite_cache_runs_the_task_and_replaces_the_result(tmp_path: Path) -> None:
    plugin = SquarePlugin()
    await run(tmp_path, plugin, task_spec("o1"))
    over = await run(tmp_path, plugin, task_spec("o2", overwrite=True))
    assert over.events[0]["cacheStatus"] == "CACHE_SKIPPED"
    assert over.cache_status == "CACHE_POPULATED"
    catalog = SQLiteCatalog(tmp_path / "state.db")
    (entry,) = catalog.entries(task="sq")
    assert entry.source == "p/d/o2/n0"
    catalog.close()
    assert len(plugin.created) == 2


# -- map tasks --------------------------------------------------------------------------------------------


async def test_a_map_rerun_with_appended_elements_runs_only_the_new_ones(tmp_path: Path) -> None:
    plugin = SquarePlugin()
    first = await run(tmp_path, plugin, map_spec("m1", list(range(100))))
    assert first.phase == "Success" and len(plugin.created) == 100
    second = await run(tmp_path, plugin, map_spec("m2", list(range(110))))
    assert second.phase == "Success"
    assert len(plugin.created) == 110  # 10 more objects
    assert second.outputs == {"o0": [x * x for x in range(110)]}
    assert second.elements is not None
    statuses = [e["cacheStatus"] for e in second.elements]
    assert statuses == ["CACHE_HIT"] * 100 + ["CACHE_POPULATED"] * 10
    final = second.events[-1]["externalResources"]
    assert final[0]["cacheStatus"] == "CACHE_HIT" and final[105]["cacheStatus"] == "CACHE_POPULATED"


async def test_a_map_element_and_a_single_task_share_no_key(tmp_path: Path) -> None:
    # The element's key is the de-listed interface's: a single task of the same name is another dataset.
    plugin = SquarePlugin()
    await run(tmp_path, plugin, map_spec("m1", [3]))
    result = await run(tmp_path, plugin, task_spec("t1"))
    assert result.cache_status == "CACHE_POPULATED"


# -- serialized caching -----------------------------------------------------------------------------------


async def test_two_executions_racing_on_a_serialized_task_run_one_object_and_both_get_its_outputs(
    tmp_path: Path,
) -> None:
    db = tmp_path / "state.db"
    hold = asyncio.Event()
    plugin = SquarePlugin(hold)
    entry = PluginEntry("square", ("square",), lambda _: plugin)
    SQLiteStateStore(db).close()
    # Two executors, each with its own state (as two processes would be) and its own connection to one
    # catalog.
    stores = [MemoryStateStore(), MemoryStateStore()]
    catalogs = [SQLiteCatalog(db), SQLiteCatalog(db)]
    try:
        async with (
            Executor(
                resolver=PluginResolver([(entry, plugin)], {}),
                store=stores[0],
                settings=_settings(tmp_path, 0.05),
                catalog=catalogs[0],
            ) as one,
            Executor(
                resolver=PluginResolver([(entry, plugin)], {}),
                store=stores[1],
                settings=_settings(tmp_path, 0.05),
                catalog=catalogs[1],
            ) as two,
        ):
            k1 = await one.submit(task_spec("r1", serialize=True))
            k2 = await two.submit(task_spec("r2", serialize=True))
            for _ in range(100):
                await asyncio.sleep(0.01)
                if plugin.created:
                    break
            await asyncio.sleep(0.2)  # the other is waiting on the reservation meanwhile
            hold.set()
            r1, r2 = await asyncio.wait_for(asyncio.gather(one.wait(k1), two.wait(k2)), 30)
    finally:
        for s in stores:
            s.close()
        for c in catalogs:
            c.close()
    assert len(plugin.created) == 1
    assert r1.outputs == r2.outputs == {"o0": 9}
    assert sorted([r1.cache_status, r2.cache_status]) == ["CACHE_HIT", "CACHE_POPULATED"]
    waiter = r1 if r1.cache_status == "CACHE_HIT" else r2
    assert any(e.get("reason") == "waiting on serialized cache" for e in waiter.events)


async def test_an_expired_reservation_is_taken_over(tmp_path: Path) -> None:
    # A holder that died (SIGKILL: it never releases nor extends) leaves a reservation that expires.
    spec = task_spec("x1", serialize=True)
    db = tmp_path / "state.db"
    SQLiteStateStore(db).close()
    catalog = SQLiteCatalog(db)
    inputs = spec.inputs
    key: CatalogKey = catalog_key(spec.template, inputs, project="p", domain="d")
    held = catalog.get_or_extend_reservation(key, "p/d/dead/n0", 0.5)
    assert catalog.get_or_extend_reservation(key, "someone-else", 10).owner == "p/d/dead/n0"
    catalog.close()
    plugin = SquarePlugin()
    result = await run(tmp_path, plugin, spec, heartbeat=0.05)
    assert result.outputs == {"o0": 9} and len(plugin.created) == 1
    assert result.events[0]["phase"] == "WaitingForCache"
    assert held.expires_at > 0
    catalog = SQLiteCatalog(db)
    # Released when the node ended: the next owner takes it at once.
    assert catalog.get_or_extend_reservation(key, "next", 10).owner == "next"
    catalog.close()


async def test_overwrite_cache_reruns_every_map_element(tmp_path: Path) -> None:
    plugin = SquarePlugin()
    await run(tmp_path, plugin, map_spec("m1", [1, 2, 3]))
    over = parse_spec(
        {
            "template": _map_template(),
            "arrayNode": {},
            "execution": {"id": {"project": "p", "domain": "d", "name": "m2"}, "overwriteCache": True},
            "inputs": {"x": [1, 2, 3]},
        }
    )
    result = await run(tmp_path, plugin, over)
    assert result.elements is not None
    assert [e["cacheStatus"] for e in result.elements] == ["CACHE_POPULATED"] * 3
    assert len(plugin.created) == 6


async def test_serialized_map_elements_of_two_maps_run_each_element_once(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    SQLiteStateStore(db).close()
    plugin = SquarePlugin()
    entry = PluginEntry("square", ("square",), lambda _: plugin)
    template = _map_template()
    template["metadata"]["cacheSerializable"] = True
    specs = [
        parse_spec(
            {
                "template": template,
                "arrayNode": {},
                "execution": {"id": {"project": "p", "domain": "d", "name": name}},
                "inputs": {"x": [1, 2, 3, 4]},
            }
        )
        for name in ("s1", "s2")
    ]
    catalogs = [SQLiteCatalog(db), SQLiteCatalog(db)]
    try:
        async with (
            Executor(
                resolver=PluginResolver([(entry, plugin)], {}),
                store=MemoryStateStore(),
                settings=_settings(tmp_path, 0.05),
                catalog=catalogs[0],
            ) as one,
            Executor(
                resolver=PluginResolver([(entry, plugin)], {}),
                store=MemoryStateStore(),
                settings=_settings(tmp_path, 0.05),
                catalog=catalogs[1],
            ) as two,
        ):
            k1, k2 = await one.submit(specs[0]), await two.submit(specs[1])
            r1, r2 = await asyncio.wait_for(asyncio.gather(one.wait(k1), two.wait(k2)), 30)
    finally:
        for c in catalogs:
            c.close()
    assert r1.outputs == r2.outputs == {"o0": [1, 4, 9, 16]}
    assert len(plugin.created) == 4  # each element computed by one of the two maps
