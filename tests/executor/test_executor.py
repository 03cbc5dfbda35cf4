"""The executor's round loop with a scripted core plugin: retries, budgets, cleanup, abort, resume."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest
from flyteidl.core import literals_pb2

from taskplug.core import (
    PhaseInfo,
    PluginEntry,
    PluginProperties,
    PluginResolver,
    TaskExecutionContext,
    Transition,
)
from taskplug.executor import parse_spec
from taskplug.executor._executor import Executor, ExecutorSettings
from taskplug.executor._store import MemoryStateStore, SQLiteStateStore


class ScriptedPlugin:
    """Reports the next PhaseInfo of a script each round; records abort/finalize calls."""

    def __init__(self, script: Sequence[PhaseInfo], *, outputs: dict[str, int] | None = None) -> None:
        self.script = list(script)
        self.outputs = outputs
        self.rounds = 0
        self.aborted: list[str] = []
        self.finalized: list[str] = []

    @property
    def id(self) -> str:
        return "scripted"

    def get_properties(self) -> PluginProperties:
        return PluginProperties()

    async def handle(self, tctx: TaskExecutionContext) -> Transition:
        _, state = tctx.plugin_state_reader.get()
        step = (state or {}).get("step", 0)
        info = self.script[min(step, len(self.script) - 1)]
        tctx.plugin_state_writer.put(1, {"step": step + 1})
        self.rounds += 1
        if info.phase.is_success and self.outputs is not None:
            out = literals_pb2.LiteralMap()
            for name, value in self.outputs.items():
                out.literals[name].scalar.primitive.integer = value
            path = Path(tctx.output_writer.output_prefix)
            path.mkdir(parents=True, exist_ok=True)
            (path / "outputs.pb").write_bytes(out.SerializeToString())
            tctx.output_writer.put(None)
        return Transition.to(info)

    async def abort(self, tctx: TaskExecutionContext) -> None:
        self.aborted.append(tctx.metadata.task_execution_id.generated_name)

    async def finalize(self, tctx: TaskExecutionContext) -> None:
        self.finalized.append(tctx.metadata.task_execution_id.generated_name)


def _spec(name: str = "e1", max_attempts: int = 1, outputs: bool = False) -> object:
    template: dict[str, object] = {
        "id": {"resourceType": "TASK", "project": "p", "domain": "d", "name": "t", "version": "v1"},
        "type": "scripted",
    }
    if outputs:
        template["interface"] = {"outputs": {"variables": {"o0": {"type": {"simple": "INTEGER"}}}}}
    return parse_spec(
        {"template": template, "execution": {"id": {"name": name}, "maxAttempts": max_attempts}}
    )


def _resolver(plugin: ScriptedPlugin) -> PluginResolver:
    entry = PluginEntry("scripted", ("scripted",), lambda _: plugin)
    return PluginResolver([(entry, plugin)], {})


def _settings(tmp_path: Path) -> ExecutorSettings:
    return ExecutorSettings(data_root=str(tmp_path / "data"), workers=4, resync_period=0.001)


async def test_success_reads_the_outputs_the_task_wrote_and_finalizes(tmp_path: Path) -> None:
    plugin = ScriptedPlugin(
        [PhaseInfo.queued(None, 0, "submitted"), PhaseInfo.running(0), PhaseInfo.success()],
        outputs={"o0": 42},
    )
    async with Executor(
        resolver=_resolver(plugin), store=MemoryStateStore(), settings=_settings(tmp_path)
    ) as ex:
        result = await asyncio.wait_for(ex.run(_spec(outputs=True)), 10)
    assert result.phase == "Success"
    assert result.outputs == {"o0": 42}
    assert [e["phase"] for e in result.events] == ["Queued", "Running", "Success"]
    assert plugin.finalized == ["e1-n0-0"]
    assert (tmp_path / "data/metadata/p/d/e1/n0/inputs.pb").exists()


async def test_success_without_the_declared_outputs_fails_with_outputs_not_found(tmp_path: Path) -> None:
    plugin = ScriptedPlugin([PhaseInfo.success()])
    async with Executor(
        resolver=_resolver(plugin), store=MemoryStateStore(), settings=_settings(tmp_path)
    ) as ex:
        result = await asyncio.wait_for(ex.run(_spec(outputs=True)), 10)
    assert result.phase == "PermanentFailure"
    assert result.error is not None and result.error["code"] == "OutputsNotFound"


async def test_user_failures_spend_max_attempts_then_fail(tmp_path: Path) -> None:
    plugin = ScriptedPlugin([PhaseInfo.retryable_failure("Boom", "user code raised")])
    async with Executor(
        resolver=_resolver(plugin), store=MemoryStateStore(), settings=_settings(tmp_path)
    ) as ex:
        result = await asyncio.wait_for(ex.run(_spec(max_attempts=3)), 10)
    # The budget spent, the execution fails for good as propeller fails the node (nodes/executor.go).
    assert result.phase == "PermanentFailure"
    assert result.attempts == 3
    assert result.error == {
        "code": "RetriesExhausted|Boom",
        "message": "[3/3] currentAttempt done. Last Error: USER::user code raised",
        "kind": "USER",
    }
    assert plugin.finalized == ["e1-n0-0", "e1-n0-1", "e1-n0-2"]
    last_two = [(e["attempt"], e["phase"], e.get("error", {}).get("code")) for e in result.events[-2:]]
    assert last_two == [(2, "RetryableFailure", "Boom"), (2, "PermanentFailure", "RetriesExhausted|Boom")]


async def test_system_failures_have_their_own_budget(tmp_path: Path) -> None:
    plugin = ScriptedPlugin([PhaseInfo.system_retryable_failure("Interrupted", "node went away")])
    settings = ExecutorSettings(
        data_root=str(tmp_path), workers=2, resync_period=0.001, max_system_failures=2
    )
    async with Executor(resolver=_resolver(plugin), store=MemoryStateStore(), settings=settings) as ex:
        result = await asyncio.wait_for(ex.run(_spec(max_attempts=1)), 10)
    # maxAttempts 1 leaves no user retry, yet two system retries happen before the third failure ends it.
    assert result.attempts == 3
    assert result.phase == "PermanentFailure"
    assert result.error == {
        "code": "RetriesExhausted|Interrupted",
        "message": "[2/2] currentAttempt done. Last Error: SYSTEM::node went away",
        "kind": "USER",
    }


async def test_permanent_failure_is_not_retried(tmp_path: Path) -> None:
    plugin = ScriptedPlugin([PhaseInfo.failure("BadTaskFormat", "no")])
    async with Executor(
        resolver=_resolver(plugin), store=MemoryStateStore(), settings=_settings(tmp_path)
    ) as ex:
        result = await asyncio.wait_for(ex.run(_spec(max_attempts=5)), 10)
    assert (result.phase, result.attempts) == ("PermanentFailure", 1)


async def test_a_failure_with_cleanup_aborts_before_finalizing(tmp_path: Path) -> None:
    plugin = ScriptedPlugin([PhaseInfo.retryable_failure_with_cleanup("ImagePullBackOff", "grace exceeded")])
    async with Executor(
        resolver=_resolver(plugin), store=MemoryStateStore(), settings=_settings(tmp_path)
    ) as ex:
        await asyncio.wait_for(ex.run(_spec()), 10)
    assert plugin.aborted == ["e1-n0-0"]
    assert plugin.finalized == ["e1-n0-0"]


async def test_a_failure_without_cleanup_does_not_abort(tmp_path: Path) -> None:
    plugin = ScriptedPlugin([PhaseInfo.retryable_failure("Boom", "x")])
    async with Executor(
        resolver=_resolver(plugin), store=MemoryStateStore(), settings=_settings(tmp_path)
    ) as ex:
        await asyncio.wait_for(ex.run(_spec()), 10)
    assert plugin.aborted == []


async def test_abort_request_aborts_finalizes_and_ends_aborted(tmp_path: Path) -> None:
    plugin = ScriptedPlugin([PhaseInfo.running(0)])
    async with Executor(
        resolver=_resolver(plugin), store=MemoryStateStore(), settings=_settings(tmp_path)
    ) as ex:
        key = await ex.submit(_spec())
        while plugin.rounds < 2:
            await asyncio.sleep(0.001)
        ex.abort(key)
        result = await asyncio.wait_for(ex.wait(key), 10)
    assert result.phase == "Aborted"
    assert plugin.aborted == ["e1-n0-0"] and plugin.finalized == ["e1-n0-0"]


async def test_same_phase_and_version_records_no_new_event(tmp_path: Path) -> None:
    running = PhaseInfo.running(0)
    plugin = ScriptedPlugin([running, running, running, PhaseInfo.running(1), PhaseInfo.success()])
    async with Executor(
        resolver=_resolver(plugin), store=MemoryStateStore(), settings=_settings(tmp_path)
    ) as ex:
        result = await asyncio.wait_for(ex.run(_spec()), 10)
    assert [(e["phase"], e["version"]) for e in result.events] == [
        ("Running", 0),
        ("Running", 1),
        ("Success", 0),
    ]


async def test_a_restarted_executor_resumes_from_the_sqlite_store(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    first = ScriptedPlugin([PhaseInfo.running(0), PhaseInfo.running(0), PhaseInfo.running(0)] * 50)
    store = SQLiteStateStore(db)
    async with Executor(resolver=_resolver(first), store=store, settings=_settings(tmp_path)) as ex:
        await ex.submit(_spec())
        while first.rounds < 3:
            await asyncio.sleep(0.001)
    store.close()
    steps_done = first.rounds

    # A new process: the plugin state (the script's step) comes back from the store.
    second = ScriptedPlugin([PhaseInfo.running(0)] * steps_done + [PhaseInfo.success()])
    store = SQLiteStateStore(db)
    async with Executor(resolver=_resolver(second), store=store, settings=_settings(tmp_path)) as ex:
        result = await asyncio.wait_for(ex.run(_spec()), 10)
    store.close()
    assert result.phase == "Success"
    assert second.rounds == 1  # it continued at the stored step instead of starting over


async def test_a_finished_execution_is_not_run_again(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    plugin = ScriptedPlugin([PhaseInfo.success()])
    store = SQLiteStateStore(db)
    async with Executor(resolver=_resolver(plugin), store=store, settings=_settings(tmp_path)) as ex:
        await asyncio.wait_for(ex.run(_spec()), 10)
    store.close()
    again = ScriptedPlugin([PhaseInfo.failure("X", "must not run")])
    store = SQLiteStateStore(db)
    async with Executor(resolver=_resolver(again), store=store, settings=_settings(tmp_path)) as ex:
        result = await asyncio.wait_for(ex.run(_spec()), 10)
    store.close()
    assert result.phase == "Success" and again.rounds == 0


async def test_an_unknown_task_type_is_refused_at_submit(tmp_path: Path) -> None:
    from taskplug.core import PluginError

    plugin = ScriptedPlugin([PhaseInfo.success()])
    spec = parse_spec({"template": {"type": "ray"}, "execution": {"id": {"name": "x"}}})
    async with Executor(
        resolver=_resolver(plugin), store=MemoryStateStore(), settings=_settings(tmp_path)
    ) as ex:
        with pytest.raises(PluginError, match=r"no plugin defined for Handler type \[ray\]"):
            await ex.submit(spec)


async def test_log_links_a_plugin_reports_are_kept_in_the_events(tmp_path: Path) -> None:
    from taskplug.core import TaskInfo, TaskLog

    link = TaskLog(uri="http://logs.example/e1", name="Kubernetes Logs (User)")
    plugin = ScriptedPlugin([PhaseInfo.running(0, TaskInfo(logs=(link,))), PhaseInfo.success()])
    async with Executor(
        resolver=_resolver(plugin), store=MemoryStateStore(), settings=_settings(tmp_path)
    ) as ex:
        result = await asyncio.wait_for(ex.run(_spec()), 10)
    assert result.events[0]["logs"] == [link.to_json()]
    assert "logs" not in result.events[1]


async def test_a_lower_version_of_the_same_phase_records_no_event(tmp_path: Path) -> None:
    # MaybeUpdatePhaseVersion bumps a Queued reason change to v1, then the plugin reports v0 again.
    queued = PhaseInfo.queued(None, 0, "Demistify Pending")
    plugin = ScriptedPlugin([queued.with_version(1), queued, queued, PhaseInfo.success()])
    async with Executor(
        resolver=_resolver(plugin), store=MemoryStateStore(), settings=_settings(tmp_path)
    ) as ex:
        result = await asyncio.wait_for(ex.run(_spec()), 10)
    assert [(e["phase"], e["version"]) for e in result.events] == [("Queued", 1), ("Success", 0)]


async def test_a_new_reason_at_a_lower_version_is_still_an_event(tmp_path: Path) -> None:
    # The web-API adapter reports Queued v2 "launched"; a connector then reports its progress at v0.
    plugin = ScriptedPlugin(
        [
            PhaseInfo.queued(None, 2, "launched"),
            PhaseInfo.queued(None, 0, "poll 1 -> QUEUED"),
            PhaseInfo.success(),
        ]
    )
    async with Executor(
        resolver=_resolver(plugin), store=MemoryStateStore(), settings=_settings(tmp_path)
    ) as ex:
        result = await asyncio.wait_for(ex.run(_spec()), 10)
    assert [(e["phase"], e["version"], e["reason"]) for e in result.events] == [
        ("Queued", 2, "launched"),
        ("Queued", 0, "poll 1 -> QUEUED"),
        ("Success", 0, ""),
    ]


async def test_many_wake_ups_within_a_resync_period_leave_one_resync_round(tmp_path: Path) -> None:
    from taskplug.core import FakeClock

    clock = FakeClock()
    plugin = ScriptedPlugin([PhaseInfo.running(0)] * 1000)
    settings = ExecutorSettings(data_root=str(tmp_path), workers=2, resync_period=10.0)
    async with Executor(
        resolver=_resolver(plugin), store=MemoryStateStore(), settings=settings, clock=clock
    ) as ex:
        key = await ex.submit(_spec())
        await clock.advance(0.1)
        for _ in range(20):  # e.g. informer events, 0.1 s apart: each wakes a round that asks for a resync
            ex.wake(key)
            await clock.advance(0.1)
        # t = 2.1 s. The first resync is due at 10.1 s and the next one 10 s after that round.
        before = plugin.rounds
        await clock.advance(10.0)
        assert plugin.rounds == before + 1
