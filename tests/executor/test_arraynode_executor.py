"""An ArrayNode driven by the executor, each element through a scripted core plugin, time moved by a
FakeClock (rounds come from resyncs, never from sleeping): handler_test.go's cases end to end."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from flyteidl.core import literals_pb2

from taskplug.core import (
    ErrorCode,
    FakeClock,
    PhaseInfo,
    PluginEntry,
    PluginError,
    PluginProperties,
    PluginResolver,
    TaskExecutionContext,
    TaskInfo,
    TaskLog,
    Transition,
)
from taskplug.executor import ExecutionSpec, parse_spec
from taskplug.executor._executor import ExecutionResult, Executor, ExecutorSettings
from taskplug.executor._store import MemoryStateStore, SQLiteStateStore, StateStore
from taskplug.executor.nodes._settings import ArrayNodeSettings, ParallelismBehavior

Script = Callable[[int, int], Sequence[PhaseInfo]]

RUN_THEN_SUCCEED: Script = lambda index, attempt: [  # noqa: E731
    PhaseInfo.queued(None, 0, "submitted"),
    PhaseInfo.running(0),
    PhaseInfo.success(),
]


class MapPlugin:
    """Each element attempt reports its script (chosen by index and attempt) one phase per round; at
    Success it writes ``o0 = x * x``. Records what an element's first round (a create), abort and finalize
    saw, by generated name."""

    def __init__(self, script: Script = RUN_THEN_SUCCEED, *, raise_for: set[int] | None = None) -> None:
        self.script = script
        self.raise_for = raise_for or set()
        self.created: list[str] = []
        self.handled: list[str] = []
        self.aborted: list[str] = []
        self.finalized: list[str] = []
        self.contexts: dict[str, TaskExecutionContext] = {}

    @property
    def id(self) -> str:
        return "map-scripted"

    def get_properties(self) -> PluginProperties:
        return PluginProperties()

    async def handle(self, tctx: TaskExecutionContext) -> Transition:
        meta = tctx.metadata
        name = meta.task_execution_id.generated_name
        index = int(meta.environment_variables["FLYTE_K8S_ARRAY_INDEX"])
        if index in self.raise_for:
            raise PluginError(ErrorCode.SYSTEM_ERROR, f"element {index} cannot be decided")
        attempt = meta.task_execution_id.id.retry_attempt
        _, state = tctx.plugin_state_reader.get()
        if state is None:
            self.created.append(name)
        self.handled.append(name)
        self.contexts[name] = tctx
        step = (state or {}).get("step", 0)
        script = self.script(index, attempt)
        info = script[min(step, len(script) - 1)]
        tctx.plugin_state_writer.put(1, {"step": step + 1})
        if info.phase.is_success:
            inputs = tctx.input_reader.get()
            assert inputs is not None
            x = inputs.literals["x"].scalar.primitive.integer
            out = literals_pb2.LiteralMap()
            out.literals["o0"].scalar.primitive.integer = x * x
            path = Path(tctx.output_writer.output_prefix)
            path.mkdir(parents=True, exist_ok=True)
            (path / "outputs.pb").write_bytes(out.SerializeToString())
        return Transition.to(info)

    async def abort(self, tctx: TaskExecutionContext) -> None:
        self.aborted.append(tctx.metadata.task_execution_id.generated_name)

    async def finalize(self, tctx: TaskExecutionContext) -> None:
        self.finalized.append(tctx.metadata.task_execution_id.generated_name)


def map_spec(
    xs: Sequence[int],
    *,
    name: str = "m1",
    array: dict[str, Any] | None = None,
    execution: dict[str, Any] | None = None,
    offset: int | None = None,
) -> ExecutionSpec:
    inputs: dict[str, Any] = {"x": {"type": {"collectionType": {"simple": "INTEGER"}}}}
    values: dict[str, Any] = {"x": list(xs)}
    if offset is not None:
        inputs["offset"] = {"type": {"simple": "INTEGER"}}
        values["offset"] = offset
    return parse_spec(
        {
            "template": {
                "id": {"resourceType": "TASK", "project": "p", "domain": "d", "name": "sq", "version": "v1"},
                "type": "map-scripted",
                "interface": {
                    "inputs": {"variables": inputs},
                    "outputs": {"variables": {"o0": {"type": {"collectionType": {"simple": "INTEGER"}}}}},
                },
            },
            "arrayNode": array or {},
            "execution": {"id": {"project": "p", "domain": "d", "name": name}, **(execution or {})},
            "inputs": values,
        }
    )


def resolver(plugin: MapPlugin) -> PluginResolver:
    entry = PluginEntry("map-scripted", ("map-scripted",), lambda _: plugin)
    return PluginResolver([(entry, plugin)], {})


def settings(tmp_path: Path, **array: Any) -> ExecutorSettings:
    # The retry strategy is every node's (executor.node); the rest is the ArrayNode's.
    node = {key: array.pop(key) for key in ("default_max_attempts", "ignore_retry_cause") if key in array}
    return ExecutorSettings(
        data_root=str(tmp_path / "data"),
        workers=4,
        resync_period=1.0,
        max_system_failures=3,
        array=ArrayNodeSettings(**array),
        **node,
    )


async def settle() -> None:
    """Let the rounds that are due run (they never sleep on the fake clock)."""
    for _ in range(30):
        await asyncio.sleep(0)


async def tick(clock: FakeClock, times: int = 1) -> None:
    """Move fake time one resync period ``times`` times, letting the rounds run in between."""
    for _ in range(times):
        await clock.advance(1.0)
        await settle()


async def drive(clock: FakeClock, ex: Executor, key: str, *, max_steps: int = 200) -> ExecutionResult:
    """Advance fake time one resync period at a time until the execution ends."""
    waiter = asyncio.ensure_future(ex.wait(key))
    try:
        for _ in range(max_steps):
            await settle()
            if waiter.done():
                return waiter.result()
            await clock.advance(1.0)
        raise AssertionError(f"{key} did not end within {max_steps} fake seconds")
    finally:
        waiter.cancel()


async def run_map(
    tmp_path: Path,
    plugin: MapPlugin,
    spec: ExecutionSpec,
    *,
    store: StateStore | None = None,
    **array: Any,
) -> ExecutionResult:
    clock = FakeClock()
    async with Executor(
        resolver=resolver(plugin),
        store=store or MemoryStateStore(),
        settings=settings(tmp_path, **array),
        clock=clock,
    ) as ex:
        key = await ex.submit(spec)
        return await drive(clock, ex, key)


def phases(result: ExecutionResult) -> list[str]:
    assert result.elements is not None
    return [e["phase"] for e in result.elements]


# -- None: starting (TestHandleArrayNodePhaseNone) ---------------------------------------------------------


async def test_the_first_event_is_queued_with_every_element_undefined(tmp_path: Path) -> None:
    result = await run_map(tmp_path, MapPlugin(), map_spec([1, 2, 3]))
    first = result.events[0]
    assert (first["phase"], first["version"]) == ("Queued", 0)
    assert [(r["index"], r["phase"], r["retryAttempt"]) for r in first["externalResources"]] == [
        (0, "Undefined", 0),
        (1, "Undefined", 0),
        (2, "Undefined", 0),
    ]
    assert first["externalResources"][2]["externalId"] == "m1-n0-0-n2-0"


async def test_lists_of_different_lengths_fail_the_node_before_any_element_starts(tmp_path: Path) -> None:
    plugin = MapPlugin()
    spec = parse_spec(
        {
            "template": {
                "id": {"name": "sq"},
                "type": "map-scripted",
                "interface": {
                    "inputs": {
                        "variables": {
                            "x": {"type": {"collectionType": {"simple": "INTEGER"}}},
                            "y": {"type": {"collectionType": {"simple": "INTEGER"}}},
                        }
                    }
                },
            },
            "arrayNode": {},
            "execution": {"id": {"name": "bad"}},
            "inputs": {"x": [1, 2], "y": [3]},
        }
    )
    result = await run_map(tmp_path, plugin, spec)
    assert result.phase == "PermanentFailure"
    assert result.error == {
        "code": "InvalidArrayLength",
        "message": "input arrays have different lengths: expecting '2' found '1'",
        "kind": "USER",
    }
    assert plugin.handled == [] and result.elements == []


# -- Executing: the window (StartAllSubNodes, StartOneSubNodeParallelism, UtilizeWfParallelism) -------------


def running_until(release: set[int]) -> Script:
    """Elements stay Running until their index is added to ``release``."""

    def script(index: int, attempt: int) -> Sequence[PhaseInfo]:
        if index in release:
            return [PhaseInfo.success()]
        return [PhaseInfo.running(0)]

    return script


async def _started_after_rounds(tmp_path: Path, spec: ExecutionSpec, **array: Any) -> list[list[str]]:
    """Which elements had been created after each of three resyncs (nothing ever finishes)."""
    plugin = MapPlugin(running_until(set()))
    clock = FakeClock()
    seen = []
    async with Executor(
        resolver=resolver(plugin), store=MemoryStateStore(), settings=settings(tmp_path, **array), clock=clock
    ) as ex:
        key = await ex.submit(spec)
        for _ in range(3):
            await settle()
            seen.append(sorted(plugin.created))
            await clock.advance(1.0)
        ex.abort(key)
        await drive(clock, ex, key)
    return seen


async def test_parallelism_0_starts_every_element_at_once(tmp_path: Path) -> None:
    seen = await _started_after_rounds(tmp_path, map_spec([1, 2, 3], array={"parallelism": 0}))
    assert seen[0] == ["m1-n0-0-n0-0", "m1-n0-0-n1-0", "m1-n0-0-n2-0"]


async def test_parallelism_1_runs_one_element_at_a_time(tmp_path: Path) -> None:
    seen = await _started_after_rounds(tmp_path, map_spec([1, 2, 3], array={"parallelism": 1}))
    assert seen == [["m1-n0-0-n0-0"]] * 3


@pytest.mark.parametrize(
    ("behavior", "parallelism", "max_parallelism", "started"),
    [
        (ParallelismBehavior.UNLIMITED, None, 2, 4),
        (ParallelismBehavior.WORKFLOW, None, 2, 2),
        (ParallelismBehavior.WORKFLOW, 0, 2, 2),
        (ParallelismBehavior.HYBRID, None, 2, 2),
        (ParallelismBehavior.HYBRID, 0, 2, 4),
        (ParallelismBehavior.WORKFLOW, 3, 2, 3),
        (ParallelismBehavior.WORKFLOW, None, 0, 4),  # Deviation: 0 = no limit, not a node that hangs
    ],
)
async def test_an_unset_or_zero_parallelism_follows_the_configured_behavior(
    tmp_path: Path,
    behavior: ParallelismBehavior,
    parallelism: int | None,
    max_parallelism: int,
    started: int,
) -> None:
    array = {} if parallelism is None else {"parallelism": parallelism}
    seen = await _started_after_rounds(
        tmp_path,
        map_spec([1, 2, 3, 4], array=array),
        parallelism_behavior=behavior,
        max_parallelism=max_parallelism,
    )
    assert len(seen[-1]) == started


async def test_a_finished_element_frees_its_slot_for_the_next(tmp_path: Path) -> None:
    release: set[int] = set()
    plugin = MapPlugin(running_until(release))
    clock = FakeClock()
    async with Executor(
        resolver=resolver(plugin), store=MemoryStateStore(), settings=settings(tmp_path), clock=clock
    ) as ex:
        key = await ex.submit(map_spec([1, 2, 3], array={"parallelism": 2}))
        await tick(clock)
        assert sorted(plugin.created) == ["m1-n0-0-n0-0", "m1-n0-0-n1-0"]
        release.add(1)
        release.add(0)
        await tick(clock)
        assert "m1-n0-0-n2-0" in plugin.created
        release.add(2)
        result = await drive(clock, ex, key)
    assert result.outputs == {"o0": [1, 4, 9]}
    assert Counter(plugin.created) == Counter(["m1-n0-0-n0-0", "m1-n0-0-n1-0", "m1-n0-0-n2-0"])


# -- success and outputs (AllSubNodesSucceeded, Succeeding) -------------------------------------------------


async def test_every_element_succeeding_gathers_outputs_in_order_and_finalizes_each(tmp_path: Path) -> None:
    plugin = MapPlugin()
    result = await run_map(tmp_path, plugin, map_spec([3, 1, 2]))
    assert (result.phase, result.error) == ("Success", None)
    assert result.outputs == {"o0": [9, 1, 4]}
    assert phases(result) == ["Succeeded"] * 3
    assert sorted(plugin.finalized) == ["m1-n0-0-n0-0", "m1-n0-0-n1-0", "m1-n0-0-n2-0"]
    last = result.events[-1]
    assert (last["phase"], last["version"]) == ("Success", 0)
    assert [r["phase"] for r in last["externalResources"]] == ["Success"] * 3
    written = literals_pb2.LiteralMap.FromString(
        (tmp_path / "data/metadata/p/d/m1/n0/0/outputs.pb").read_bytes()
    )
    assert [lit.scalar.primitive.integer for lit in written.literals["o0"].collection.literals] == [9, 1, 4]


async def test_elements_run_with_their_index_their_slice_of_the_inputs_and_their_own_paths(
    tmp_path: Path,
) -> None:
    plugin = MapPlugin()
    await run_map(tmp_path, plugin, map_spec([5, 6], offset=7, array={"boundInputs": ["offset"]}))
    tctx = plugin.contexts["m1-n0-0-n1-0"]
    meta = tctx.metadata
    assert meta.task_execution_id.unique_node_id == "n0-0-n1"
    assert meta.task_execution_id.id.node_execution_id.node_id == "n1"
    assert meta.labels["node-id"] == "n1"
    assert meta.environment_variables["BATCH_JOB_ARRAY_INDEX_VAR_NAME"] == "FLYTE_K8S_ARRAY_INDEX"
    inputs = tctx.input_reader.get()
    assert inputs is not None
    assert inputs.literals["x"].scalar.primitive.integer == 6
    assert inputs.literals["offset"].scalar.primitive.integer == 7
    data = str(tmp_path / "data/metadata/p/d/m1/n0")
    assert tctx.input_reader.input_path == f"{data}/inputs.pb"  # the one file with the full lists
    full = literals_pb2.LiteralMap.FromString(Path(f"{data}/inputs.pb").read_bytes())
    assert len(full.literals["x"].collection.literals) == 2
    assert tctx.output_writer.output_prefix == f"{data}/0/1/0"
    assert tctx.output_writer.raw_output_prefix.endswith("/raw/m1-n0-0-n1-0")
    template = tctx.task_reader.read()
    assert template.interface.outputs.variables["o0"].type.simple != 0  # de-listed
    assert template.interface.inputs.variables["x"].type.HasField("collection_type")


async def test_zero_elements_succeed_with_empty_lists(tmp_path: Path) -> None:
    plugin = MapPlugin()
    result = await run_map(tmp_path, plugin, map_spec([]))
    assert (result.phase, result.outputs) == ("Success", {"o0": []})
    assert plugin.handled == []


# -- failure and min successes (MinSuccessRatio, Failing) --------------------------------------------------


def fail_indices(failing: set[int], *, retryable: bool = False) -> Script:
    def script(index: int, attempt: int) -> Sequence[PhaseInfo]:
        if index in failing:
            failure = (
                PhaseInfo.retryable_failure("Boom", f"element {index} broke")
                if retryable
                else PhaseInfo.failure("Boom", f"element {index} broke")
            )
            return [PhaseInfo.running(0), failure]
        return [PhaseInfo.running(0), PhaseInfo.success()]

    return script


async def test_at_the_ratio_the_node_succeeds_with_none_where_elements_failed(tmp_path: Path) -> None:
    result = await run_map(
        tmp_path, MapPlugin(fail_indices({1})), map_spec([1, 2], array={"minSuccessRatio": 0.5})
    )
    assert (result.phase, result.error) == ("Success", None)
    assert result.outputs == {"o0": [1, None]}
    assert phases(result) == ["Succeeded", "Failed"]
    assert result.elements is not None
    assert result.elements[1]["error"] == {"code": "Boom", "message": "element 1 broke", "kind": "USER"}


async def test_without_a_ratio_one_failure_fails_the_node_and_aborts_what_still_runs(tmp_path: Path) -> None:
    def script(index: int, attempt: int) -> Sequence[PhaseInfo]:
        if index == 0:
            return [PhaseInfo.failure("Boom", "element 0 broke")]
        return [PhaseInfo.running(0)]

    plugin = MapPlugin(script)
    result = await run_map(tmp_path, plugin, map_spec([1, 2, 3], array={"parallelism": 2}))
    assert result.phase == "PermanentFailure"
    assert result.error == {"code": "", "message": "[0]: element 0 broke\n", "kind": "UNKNOWN"}
    # Element 1 was running: aborted and finalized. Element 2 never started: nothing to abort.
    assert plugin.aborted == ["m1-n0-0-n1-0"]
    assert sorted(plugin.finalized) == ["m1-n0-0-n0-0", "m1-n0-0-n1-0"]
    assert phases(result) == ["Failed", "Aborted", "NotYetStarted"]
    last = result.events[-1]
    assert (last["phase"], last["version"], last["error"]) == ("PermanentFailure", 0, result.error)
    assert [r["phase"] for r in last["externalResources"]] == ["PermanentFailure", "Aborted", "Undefined"]


async def test_below_the_ratio_the_error_lists_every_failed_element(tmp_path: Path) -> None:
    # Deviation: Flyte keeps only the messages of the round the node was decided in.
    def script(index: int, attempt: int) -> Sequence[PhaseInfo]:
        if index == 0:
            return [PhaseInfo.failure("Boom", "first")]
        if index == 2:
            return [PhaseInfo.running(0), PhaseInfo.running(0), PhaseInfo.failure("Boom", "second")]
        return [PhaseInfo.running(0), PhaseInfo.success()]

    result = await run_map(
        tmp_path, MapPlugin(script), map_spec([1, 2, 3, 4], array={"minSuccessRatio": 0.75})
    )
    assert result.phase == "PermanentFailure"
    assert result.error is not None
    assert result.error["message"] == "[0]: first\n[2]: second\n"


async def test_min_successes_out_of_reach_fails_without_waiting_for_the_rest(tmp_path: Path) -> None:
    def script(index: int, attempt: int) -> Sequence[PhaseInfo]:
        return [PhaseInfo.failure("Boom", "x")] if index < 2 else [PhaseInfo.running(0)]

    plugin = MapPlugin(script)
    result = await run_map(tmp_path, plugin, map_spec([1, 2, 3], array={"minSuccesses": 2}))
    assert result.phase == "PermanentFailure"
    assert result.error is not None and result.error["message"] == "[0-1]: x\n"
    assert plugin.aborted == ["m1-n0-0-n2-0"]


async def test_reaching_min_successes_early_still_waits_for_every_element(tmp_path: Path) -> None:
    release: set[int] = {0}
    plugin = MapPlugin(running_until(release))
    clock = FakeClock()
    async with Executor(
        resolver=resolver(plugin), store=MemoryStateStore(), settings=settings(tmp_path), clock=clock
    ) as ex:
        key = await ex.submit(map_spec([1, 2], array={"minSuccesses": 1}))
        await tick(clock, 5)
        assert not ex.status(key).terminal
        release.add(1)
        result = await drive(clock, ex, key)
    assert result.outputs == {"o0": [1, 4]}


# -- retries (SubNodeFailures, DeltaTimestampUpdates) ------------------------------------------------------


async def test_a_retryable_failure_runs_the_element_again_under_the_next_name(tmp_path: Path) -> None:
    def script(index: int, attempt: int) -> Sequence[PhaseInfo]:
        if attempt == 0:
            return [PhaseInfo.running(0), PhaseInfo.retryable_failure("Flaky", "try again")]
        return [PhaseInfo.running(0), PhaseInfo.success()]

    plugin = MapPlugin(script)
    result = await run_map(tmp_path, plugin, map_spec([2], array={"retries": 1}))
    assert (result.phase, result.outputs) == ("Success", {"o0": [4]})
    assert plugin.created == ["m1-n0-0-n0-0", "m1-n0-0-n0-1"]
    assert plugin.finalized == ["m1-n0-0-n0-0", "m1-n0-0-n0-1"]
    assert result.elements is not None
    assert (result.elements[0]["attempts"], result.elements[0]["name"]) == (2, "m1-n0-0-n0-1")
    retried = [(r["phase"], r["retryAttempt"]) for e in result.events for r in e.get("externalResources", [])]
    assert ("RetryableFailure", 0) in retried and ("Success", 1) in retried


@pytest.mark.parametrize(
    ("kind", "ignore", "attempts"),
    [("user", False, 3), ("system", False, 4), ("user", True, 3), ("system", True, 3)],
)
async def test_user_and_system_failures_spend_separate_budgets(
    tmp_path: Path, kind: str, ignore: bool, attempts: int
) -> None:
    def script(index: int, attempt: int) -> Sequence[PhaseInfo]:
        if kind == "user":
            return [PhaseInfo.retryable_failure("Boom", "user")]
        return [PhaseInfo.system_retryable_failure("Lost", "node went away")]

    plugin = MapPlugin(script)
    result = await run_map(tmp_path, plugin, map_spec([1], array={"retries": 2}), ignore_retry_cause=ignore)
    assert result.phase == "PermanentFailure"
    assert len(plugin.created) == attempts
    assert result.elements is not None
    error = result.elements[0]["error"]
    assert error["code"] == ("RetriesExhausted|Boom" if kind == "user" else "RetriesExhausted|Lost")
    assert error["kind"] == "USER"
    assert "currentAttempt done. Last Error: " in error["message"]


async def test_without_retries_the_default_max_attempts_applies(tmp_path: Path) -> None:
    plugin = MapPlugin(lambda i, a: [PhaseInfo.retryable_failure("Boom", "again")])
    result = await run_map(tmp_path, plugin, map_spec([1]), default_max_attempts=2)
    assert result.phase == "PermanentFailure"
    assert plugin.created == ["m1-n0-0-n0-0", "m1-n0-0-n0-1"]


async def test_a_failure_asking_for_cleanup_aborts_the_elements_object(tmp_path: Path) -> None:
    plugin = MapPlugin(lambda i, a: [PhaseInfo.failure_with_cleanup("Stuck", "image pull")])
    result = await run_map(tmp_path, plugin, map_spec([1]))
    assert result.phase == "PermanentFailure"
    assert plugin.aborted == ["m1-n0-0-n0-0"] and plugin.finalized == ["m1-n0-0-n0-0"]


async def test_an_attempt_past_its_timeout_is_aborted_and_retried(tmp_path: Path) -> None:
    def script(index: int, attempt: int) -> Sequence[PhaseInfo]:
        return [PhaseInfo.running(0)] if attempt == 0 else [PhaseInfo.success()]

    plugin = MapPlugin(script)
    result = await run_map(tmp_path, plugin, map_spec([3], array={"retries": 1, "timeout": "5s"}))
    assert (result.phase, result.outputs) == ("Success", {"o0": [9]})
    assert plugin.aborted == ["m1-n0-0-n0-0"]
    timed_out = [
        r for e in result.events for r in e.get("externalResources", []) if r["phase"] == "RetryableFailure"
    ]
    assert timed_out[0]["reason"] == "task execution timeout [5s] expired"


# -- the plugin that cannot decide ------------------------------------------------------------------------


async def test_an_element_whose_plugin_raises_does_not_stop_the_others_and_fails_after_its_budget(
    tmp_path: Path,
) -> None:
    plugin = MapPlugin(raise_for={1})
    result = await run_map(tmp_path, plugin, map_spec([1, 2, 3], array={"minSuccesses": 2}))
    assert result.phase == "Success"
    assert result.outputs == {"o0": [1, None, 9]}
    assert result.elements is not None
    assert result.elements[1]["error"]["message"].startswith(
        "[3/3] currentAttempt done. Last Error: SYSTEM::"
    )


# -- abort (Abort) ----------------------------------------------------------------------------------------


async def test_an_abort_aborts_and_finalizes_every_started_element_and_nothing_else(tmp_path: Path) -> None:
    release: set[int] = {0}
    plugin = MapPlugin(running_until(release))
    clock = FakeClock()
    async with Executor(
        resolver=resolver(plugin), store=MemoryStateStore(), settings=settings(tmp_path), clock=clock
    ) as ex:
        key = await ex.submit(map_spec([1, 2, 3], array={"parallelism": 2}))
        await tick(clock, 3)
        ex.abort(key)
        result = await drive(clock, ex, key)
    assert result.phase == "Aborted"
    # Element 0 had succeeded (and was finalized then); 1 and 2 were running: aborted and finalized.
    assert phases(result) == ["Succeeded", "Aborted", "Aborted"]
    assert sorted(plugin.aborted) == ["m1-n0-0-n1-0", "m1-n0-0-n2-0"]
    assert sorted(plugin.finalized) == ["m1-n0-0-n0-0", "m1-n0-0-n1-0", "m1-n0-0-n2-0"]
    assert result.error == {"code": "Aborted", "message": "aborted by request", "kind": "USER"}
    last = result.events[-1]
    assert last["phase"] == "Aborted"
    assert [r["phase"] for r in last["externalResources"]] == ["Success", "Aborted", "Aborted"]


async def test_an_abort_before_anything_started_aborts_nothing(tmp_path: Path) -> None:
    plugin = MapPlugin(running_until(set()))
    clock = FakeClock()
    async with Executor(
        resolver=resolver(plugin), store=MemoryStateStore(), settings=settings(tmp_path), clock=clock
    ) as ex:
        key = await ex.submit(map_spec([1, 2], array={"parallelism": 1}))
        ex.abort(key)
        result = await drive(clock, ex, key)
    assert result.phase == "Aborted"
    assert plugin.aborted == [] and plugin.created == []


# -- events and what users see ----------------------------------------------------------------------------


async def test_round_events_list_only_the_elements_that_changed_with_indexed_log_names(
    tmp_path: Path,
) -> None:
    link = TaskLog(uri="http://logs/x", name="Kubernetes Logs (User)")

    def script(index: int, attempt: int) -> Sequence[PhaseInfo]:
        if index == 0:
            return [PhaseInfo.running(0, TaskInfo(logs=(link,))), PhaseInfo.success()]
        return [PhaseInfo.running(0), PhaseInfo.running(0), PhaseInfo.running(0), PhaseInfo.success()]

    result = await run_map(tmp_path, MapPlugin(script), map_spec([1, 2]))
    running = [e for e in result.events if e["phase"] == "Running"]
    versions = [e["version"] for e in running]
    assert versions == sorted(versions) and len(set(versions)) == len(versions)
    indices = [[r["index"] for r in e["externalResources"]] for e in running]
    assert [1] in indices or [0] in indices  # some round reported one element only
    first_running = next(r for e in running for r in e["externalResources"] if r["index"] == 0)
    assert first_running["logs"] == [{**link.to_json(), "name": "Kubernetes Logs (User)-0"}]
    assert result.elements is not None
    assert result.elements[0]["logs"] == [{**link.to_json(), "name": "Kubernetes Logs (User)-0"}]


# -- resume -----------------------------------------------------------------------------------------------


async def test_a_restarted_executor_continues_every_element_without_creating_one_twice(
    tmp_path: Path,
) -> None:
    db = tmp_path / "state.db"
    release: set[int] = {0}
    first = MapPlugin(running_until(release))
    clock = FakeClock()
    store = SQLiteStateStore(db)
    async with Executor(
        resolver=resolver(first), store=store, settings=settings(tmp_path), clock=clock
    ) as ex:
        key = await ex.submit(map_spec([1, 2, 3, 4], array={"parallelism": 3}))
        await tick(clock, 3)
    store.close()
    assert sorted(first.created) == ["m1-n0-0-n0-0", "m1-n0-0-n1-0", "m1-n0-0-n2-0", "m1-n0-0-n3-0"]

    second = MapPlugin(running_until({0, 1, 2, 3}))
    store = SQLiteStateStore(db)
    clock = FakeClock()
    async with Executor(
        resolver=resolver(second), store=store, settings=settings(tmp_path), clock=clock
    ) as ex:
        key = await ex.submit(map_spec([1, 2, 3, 4], array={"parallelism": 3}))
        result = await drive(clock, ex, key)
    store.close()
    assert result.outputs == {"o0": [1, 4, 9, 16]}
    assert second.created == []  # every element's plugin state came back: nothing was created again


class CrashableStore(MemoryStateStore):
    """Writes reach "disk" only at ``flush()`` (as a commit would); after :meth:`crash` nothing more is
    written, as when the process dies at that instant."""

    def __init__(self) -> None:
        super().__init__()
        self._pending: list[Callable[[], None]] = []
        self.crashed = False

    def save(self, record: Any) -> None:
        if not self.crashed:
            row = record.to_row()
            self._pending.append(lambda: MemoryStateStore.save(self, type(record).from_row(row)))

    def save_elements(self, key: str, elements: list[Any]) -> None:
        if not self.crashed:
            rows = [type(e).from_row(e.to_row()) for e in elements]
            self._pending.append(lambda: MemoryStateStore.save_elements(self, key, rows))

    def append_event(self, key: str, event: Any) -> None:
        if not self.crashed:
            self._pending.append(lambda: MemoryStateStore.append_event(self, key, event))

    def flush(self) -> None:
        if self.crashed:
            return
        for write in self._pending:
            write()
        self._pending.clear()

    def crash(self) -> None:
        self.crashed = True
        self._pending.clear()


async def test_a_crash_right_after_an_element_was_finalized_does_not_run_it_again(tmp_path: Path) -> None:
    store = CrashableStore()
    spec = map_spec([1, 2, 3], array={"parallelism": 1})
    first = MapPlugin(lambda i, a: [PhaseInfo.success()])
    crash_on_finalize = first.finalize

    async def finalize_then_die(tctx: TaskExecutionContext) -> None:
        await crash_on_finalize(tctx)
        store.crash()

    first.finalize = finalize_then_die  # type: ignore[method-assign]
    clock = FakeClock()
    async with Executor(
        resolver=resolver(first), store=store, settings=settings(tmp_path), clock=clock
    ) as ex:
        await ex.submit(spec)
        await tick(clock, 2)
    assert first.finalized[0] == "m1-n0-0-n0-0" and store.crashed

    store.crashed = False
    second = MapPlugin(lambda i, a: [PhaseInfo.success()])
    clock = FakeClock()
    async with Executor(
        resolver=resolver(second), store=store, settings=settings(tmp_path), clock=clock
    ) as ex:
        result = await drive(clock, ex, await ex.submit(spec))
    assert result.outputs == {"o0": [1, 4, 9]}
    # Element 0's end was on disk before its cleanup: the restart finished the cleanup, never re-ran it.
    assert "m1-n0-0-n0-0" not in second.handled
    assert second.finalized[0] == "m1-n0-0-n0-0"


# -- cleanup that cannot reach the API is bounded (issue 13) ---------------------------------------------


class UnreachableCleanupPlugin(MapPlugin):
    """Elements run as scripted, but every delete fails (the API is gone) from ``broken`` on, saying what
    may be left behind, as the plugin manager's ``CleanupError`` does."""

    def __init__(self, script: Script = RUN_THEN_SUCCEED) -> None:
        super().__init__(script)
        self.cleanup_calls: Counter[str] = Counter()

    def _left(self, tctx: TaskExecutionContext, step: str) -> PluginError:
        name = tctx.metadata.task_execution_id.generated_name
        self.cleanup_calls[name] += 1
        error = PluginError(ErrorCode.SYSTEM_ERROR, f"{step}: failed to delete [p-d/{name}]: API unreachable")
        error.leftovers = ({"kind": "Pod", "namespace": "p-d", "name": name},)  # type: ignore[attr-defined]
        return error

    async def abort(self, tctx: TaskExecutionContext) -> None:
        raise self._left(tctx, "abort")

    async def finalize(self, tctx: TaskExecutionContext) -> None:
        raise self._left(tctx, "finalize")


def _bounded_settings(tmp_path: Path, rounds: int = 3) -> ExecutorSettings:
    return ExecutorSettings(
        data_root=str(tmp_path / "data"), workers=4, resync_period=1.0, max_round_errors=rounds
    )


async def test_an_elements_finalize_that_keeps_failing_is_given_up_and_the_node_ends_with_its_leftovers(
    tmp_path: Path,
) -> None:
    # Element 0 succeeds at once; element 1 keeps running, so the node must also abort it (bounded too).
    plugin = UnreachableCleanupPlugin(
        lambda index, attempt: [PhaseInfo.success()] if index == 0 else [PhaseInfo.running(0)]
    )
    clock = FakeClock()
    store = SQLiteStateStore(tmp_path / "state.db")
    async with Executor(
        resolver=resolver(plugin), store=store, settings=_bounded_settings(tmp_path), clock=clock
    ) as ex:
        key = await ex.submit(map_spec([1, 2]))
        result = await drive(clock, ex, key)
    record = store.load(key)
    store.close()
    # Each element's cleanup was tried max-round-errors times, then no more.
    assert plugin.cleanup_calls == Counter({"m1-n0-0-n0-0": 3, "m1-n0-0-n1-0": 3})
    assert result.phase == "PermanentFailure"
    assert result.error is not None
    assert (result.error["code"], result.error["kind"]) == ("CleanupFailed", "SYSTEM")
    assert "element 0: the attempt ended (Success)" in result.error["message"]
    assert "last finalize error" in result.error["message"]
    assert "element 1: the attempt ended (Running)" in result.error["message"]
    assert "last abort error" in result.error["message"]
    assert result.leftovers == [
        {"kind": "Pod", "namespace": "p-d", "name": "m1-n0-0-n0-0"},
        {"kind": "Pod", "namespace": "p-d", "name": "m1-n0-0-n1-0"},
    ]
    assert "leftovers" not in result.error
    assert result.events[-1]["phase"] == "PermanentFailure"
    assert record is not None and record.terminal
    assert record.error is not None and len(record.error["leftovers"]) == 2


async def test_an_elements_cleanup_that_recovers_within_the_bound_ends_as_decided(tmp_path: Path) -> None:
    class Flaky(MapPlugin):
        failures = 2

        async def finalize(self, tctx: TaskExecutionContext) -> None:
            if self.failures:
                self.failures -= 1
                raise ConnectionError("cannot reach the Kubernetes API at http://127.0.0.1:9")
            await super().finalize(tctx)

    plugin = Flaky()
    clock = FakeClock()
    async with Executor(
        resolver=resolver(plugin),
        store=MemoryStateStore(),
        settings=_bounded_settings(tmp_path),
        clock=clock,
    ) as ex:
        key = await ex.submit(map_spec([1]))
        result = await drive(clock, ex, key)
    assert result.phase == "Success" and result.leftovers is None
    assert plugin.finalized == ["m1-n0-0-n0-0"]


class _DeletesFail:
    """A KubeClient over the embedded cluster's whose deletes cannot reach the API (creates, reads and
    watches work): the plugin manager's cleanup raises ``CleanupError`` naming what it could not delete."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.deletes = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def delete(self, rtype: Any, namespace: str, name: str) -> None:
        self.deletes += 1
        raise ConnectionError("cannot reach the Kubernetes API at http://127.0.0.1:9: connection refused")


async def test_a_map_whose_pods_cannot_be_deleted_ends_cleanup_failed_listing_them(tmp_path: Path) -> None:
    from taskplug.executor import Platform, open_executor
    from taskplug.k8s import POD
    from taskplug.localcluster import LocalCluster

    platform = Platform.load(
        document={
            "executor": {"data-root": str(tmp_path / "data"), "resync-period": "1s", "max-round-errors": 2},
            "plugins": {"k8s": {"delete-resource-on-finalize": True}},
        }
    )
    spec = parse_spec(
        {
            "template": {
                "id": {"resourceType": "TASK", "project": "p", "domain": "d", "name": "t", "version": "v1"},
                "type": "container",
                "interface": {
                    "inputs": {"variables": {"x": {"type": {"collectionType": {"simple": "INTEGER"}}}}}
                },
                "container": {"image": "busybox", "command": ["true"]},
            },
            "arrayNode": {"parallelism": 0},
            "execution": {"id": {"project": "p", "domain": "d", "name": "m"}, "namespace": "default"},
            "inputs": {"x": [1, 2]},
        }
    )
    async with LocalCluster(mode="simulated") as cluster:
        client = _DeletesFail(cluster.client())
        async with open_executor(platform, kube_client=client, store=MemoryStateStore()) as ex:
            result = await asyncio.wait_for(ex.run(spec), 60)
        left = sorted(o["metadata"]["name"] for o in cluster.store.iter(POD))
    assert result.phase == "PermanentFailure"
    assert result.error is not None and result.error["code"] == "CleanupFailed"
    assert "element 0: the attempt ended (Success)" in result.error["message"]
    assert "http://127.0.0.1:9" in result.error["message"]
    names = ["m-n0-0-n0-0", "m-n0-0-n1-0"]
    assert sorted(o["name"] for o in result.leftovers or []) == names == left
    assert {(o["kind"], o["namespace"]) for o in result.leftovers or []} == {("Pod", "default")}
    assert client.deletes >= 4  # each element's delete, tried max-round-errors times
