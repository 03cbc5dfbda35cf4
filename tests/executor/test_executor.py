"""The executor's round loop with a scripted core plugin: retries, budgets, cleanup, abort, resume."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from flyteidl.core import literals_pb2

from taskplug.core import (
    BadTaskSpecification,
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


# -- bounded trouble: a session ends ---------------------------------------------------------------------


class LeftoverError(Exception):
    """What a plugin's cleanup raises when the API cannot be reached: it says what may be left behind."""

    def __init__(self, message: str, leftovers: list[dict[str, str]]) -> None:
        super().__init__(message)
        self.leftovers = tuple(leftovers)


POD_LEFT = {"kind": "Pod", "namespace": "p-d", "name": "e1-n0-0"}


class UnreachablePlugin(ScriptedPlugin):
    """A plugin whose API is gone: every call from ``fail_from`` on raises a connection error."""

    def __init__(self, script: Sequence[PhaseInfo], *, fail_handle: bool = False) -> None:
        super().__init__(script)
        self.fail_handle = fail_handle
        self.finalize_calls = 0
        self.abort_calls = 0

    async def handle(self, tctx: TaskExecutionContext) -> Transition:
        if self.fail_handle:
            self.rounds += 1
            raise ConnectionError("cannot reach the Kubernetes API at http://127.0.0.1:9: refused")
        return await super().handle(tctx)

    async def abort(self, tctx: TaskExecutionContext) -> None:
        self.abort_calls += 1
        raise LeftoverError("abort: failed to delete [p-d/e1-n0-0]", [POD_LEFT])

    async def finalize(self, tctx: TaskExecutionContext) -> None:
        self.finalize_calls += 1
        raise LeftoverError(
            "finalize: failed to delete [p-d/e1-n0-0]: cannot reach the Kubernetes API at http://127.0.0.1:9",
            [POD_LEFT],
        )


def _bounded(tmp_path: Path, rounds: int = 3) -> ExecutorSettings:
    return ExecutorSettings(
        data_root=str(tmp_path / "data"), workers=2, resync_period=0.001, max_round_errors=rounds
    )


async def test_a_finalize_that_keeps_failing_is_given_up_within_the_bound_listing_what_is_left(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    plugin = UnreachablePlugin([PhaseInfo.success()])
    async with Executor(
        resolver=_resolver(plugin), store=MemoryStateStore(), settings=_bounded(tmp_path)
    ) as ex:
        result = await asyncio.wait_for(ex.run(_spec()), 10)
    assert plugin.finalize_calls == 3  # max-round-errors attempts, then no more
    assert result.phase == "PermanentFailure"
    assert result.error is not None
    assert (result.error["code"], result.error["kind"]) == ("CleanupFailed", "SYSTEM")
    assert "the attempt ended (Success)" in result.error["message"]
    assert "http://127.0.0.1:9" in result.error["message"]
    assert "may be left behind: Pod p-d/e1-n0-0" in result.error["message"]
    assert result.leftovers == [POD_LEFT]
    assert result.to_json()["leftovers"] == [POD_LEFT]
    assert "leftovers" not in result.error
    assert result.events[-1]["phase"] == "PermanentFailure"
    # Expected API trouble is one line each, never a traceback.
    assert all(r.exc_info is None for r in caplog.records)
    assert any("left behind: Pod p-d/e1-n0-0" in r.getMessage() for r in caplog.records)


async def test_a_given_up_cleanup_is_stored_as_the_executions_end(tmp_path: Path) -> None:
    plugin = UnreachablePlugin([PhaseInfo.success()])
    store = SQLiteStateStore(tmp_path / "state.db")
    async with Executor(resolver=_resolver(plugin), store=store, settings=_bounded(tmp_path)) as ex:
        key = await ex.submit(_spec())
        await asyncio.wait_for(ex.wait(key), 10)
    record = store.load(key)
    store.close()
    assert record is not None and record.terminal and record.closing is None
    assert record.error is not None and record.error["leftovers"] == [POD_LEFT]


async def test_a_plugin_that_cannot_reach_its_api_fails_the_attempt_then_its_cleanup_is_bounded_too(
    tmp_path: Path,
) -> None:
    plugin = UnreachablePlugin([PhaseInfo.running(0)], fail_handle=True)
    async with Executor(
        resolver=_resolver(plugin), store=MemoryStateStore(), settings=_bounded(tmp_path)
    ) as ex:
        result = await asyncio.wait_for(ex.run(_spec()), 10)
    assert plugin.rounds == 3  # the round-error bound
    assert plugin.finalize_calls == 3  # the same bound for the cleanup the system retry needs first
    assert result.error is not None and result.error["code"] == "CleanupFailed"
    assert "the attempt ended (RetryableFailure)" in result.error["message"]
    phases = [e["phase"] for e in result.events]
    assert phases == ["RetryableFailure", "PermanentFailure"]
    assert "the plugin failed 3 rounds in a row" in result.events[0]["reason"]


async def test_an_abort_that_cannot_reach_the_api_ends_within_the_bound(tmp_path: Path) -> None:
    plugin = UnreachablePlugin([PhaseInfo.running(0)] * 1000)
    async with Executor(
        resolver=_resolver(plugin), store=MemoryStateStore(), settings=_bounded(tmp_path)
    ) as ex:
        key = await ex.submit(_spec())
        while plugin.rounds == 0:
            await asyncio.sleep(0.001)
        ex.abort(key)
        result = await asyncio.wait_for(ex.wait(key), 10)
    assert plugin.abort_calls == 3 and plugin.finalize_calls == 0
    assert result.error is not None and result.error["code"] == "CleanupFailed"
    assert "last abort error" in result.error["message"]
    assert result.leftovers == [POD_LEFT]


async def test_a_cleanup_that_recovers_within_the_bound_ends_as_decided(tmp_path: Path) -> None:
    class Flaky(ScriptedPlugin):
        failures = 2

        async def finalize(self, tctx: TaskExecutionContext) -> None:
            if self.failures:
                self.failures -= 1
                raise ConnectionError("cannot reach the Kubernetes API at http://127.0.0.1:9")
            await super().finalize(tctx)

    plugin = Flaky([PhaseInfo.success()])
    async with Executor(
        resolver=_resolver(plugin), store=MemoryStateStore(), settings=_bounded(tmp_path)
    ) as ex:
        result = await asyncio.wait_for(ex.run(_spec()), 10)
    assert result.phase == "Success" and result.leftovers is None
    assert plugin.finalized == ["e1-n0-0"]


async def test_a_round_that_fails_unexpectedly_is_retried_then_ends_the_execution(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    class Buggy(ScriptedPlugin):
        def get_properties(self) -> PluginProperties:
            self.rounds += 1
            raise RuntimeError("a bug")

    plugin = Buggy([PhaseInfo.running(0)])
    async with Executor(
        resolver=_resolver(plugin), store=MemoryStateStore(), settings=_bounded(tmp_path)
    ) as ex:
        result = await asyncio.wait_for(ex.run(_spec()), 10)
    assert plugin.rounds == 3
    assert result.phase == "PermanentFailure"
    assert result.error is not None and result.error["kind"] == "SYSTEM"
    assert "taskplug failed 3 rounds in a row" in result.error["message"]
    assert "RuntimeError: a bug" in result.error["message"]
    assert sum(r.exc_info is not None for r in caplog.records) == 1  # the traceback once


async def test_a_data_store_that_refuses_the_inputs_errors_the_round_within_the_bound(tmp_path: Path) -> None:
    (tmp_path / "data").write_text("a file where the data root's folder should be")
    plugin = ScriptedPlugin([PhaseInfo.success()])
    async with Executor(
        resolver=_resolver(plugin), store=MemoryStateStore(), settings=_bounded(tmp_path)
    ) as ex:
        result = await asyncio.wait_for(ex.run(_spec()), 10)
    assert plugin.rounds == 0  # never asked to decide: the inputs could not be written
    # Each attempt errors max-round-errors rounds, fails as a system error, and the system budget (3) retries
    # it: the run ends after 4 attempts, naming the cause.
    assert (result.phase, result.attempts) == ("PermanentFailure", 4)
    assert result.error is not None and result.error["code"] == "RetriesExhausted|SystemError"
    assert "Not a directory" in result.error["message"]
    assert plugin.finalized == ["e1-n0-0", "e1-n0-1", "e1-n0-2", "e1-n0-3"]


# -- refused at submit, before anything runs ------------------------------------------------------------


class CheckingPlugin(ScriptedPlugin):
    """A plugin that checks a task before it runs (as the Kubernetes plugin manager builds its object)."""

    def __init__(self, script: Sequence[PhaseInfo], refuse: str | None) -> None:
        super().__init__(script)
        self.refuse = refuse
        self.checked: list[str] = []

    def check_task(self, tctx: TaskExecutionContext) -> None:
        self.checked.append(tctx.metadata.task_execution_id.generated_name)
        if self.refuse is not None:
            raise BadTaskSpecification(self.refuse)


async def test_a_task_its_plugin_refuses_is_refused_at_submit_and_nothing_is_saved(tmp_path: Path) -> None:
    plugin = CheckingPlugin([PhaseInfo.success()], refuse="Failed to parse resource as a valid quantity")
    store = MemoryStateStore()
    async with Executor(resolver=_resolver(plugin), store=store, settings=_settings(tmp_path)) as ex:
        spec = _spec()
        with pytest.raises(BadTaskSpecification, match="valid quantity"):
            await ex.submit(spec)
        assert list(ex.keys) == []
    assert plugin.checked == ["e1-n0-0"] and plugin.rounds == 0
    assert store.load("p/d/e1/n0") is None
    assert not (tmp_path / "data").exists()  # not even the inputs were written


async def test_a_task_its_plugin_accepts_is_checked_once_then_runs(tmp_path: Path) -> None:
    plugin = CheckingPlugin([PhaseInfo.success()], refuse=None)
    async with Executor(
        resolver=_resolver(plugin), store=MemoryStateStore(), settings=_settings(tmp_path)
    ) as ex:
        ex.check(_spec())
        result = await asyncio.wait_for(ex.run(_spec()), 10)
    assert result.phase == "Success"
    assert plugin.checked == ["e1-n0-0", "e1-n0-0"]  # check(), then submit; never per round


# -- run refuses what render refuses: one check, the plugin manager's build ---------------------------------


def _bad_quantity_spec(*, array: bool = False) -> object:
    import yaml

    document = yaml.safe_load((Path(__file__).resolve().parents[2] / "examples/hello.yaml").read_text())
    document["template"]["container"]["resources"]["requests"][0]["value"] = "2x50m"
    if array:
        document["template"]["interface"]["inputs"]["variables"]["name"] = {
            "type": {"collectionType": {"simple": "STRING"}}
        }
        document["inputs"] = {"name": ["a", "b", "c"]}
        document["arrayNode"] = {"parallelism": 2}
    return parse_spec(document)


@pytest.mark.parametrize("array", [False, True], ids=["task", "map-task"])
async def test_the_executor_refuses_at_submit_the_object_render_refuses_and_creates_nothing(
    tmp_path: Path, array: bool
) -> None:
    from taskplug.executor import Platform, open_executor, render_object
    from taskplug.k8s import POD
    from taskplug.localcluster import LocalCluster

    platform = Platform.load(document={"executor": {"data-root": str(tmp_path / "data")}})
    spec = _bad_quantity_spec(array=array)
    with pytest.raises(BadTaskSpecification) as rendered:
        render_object(platform, spec, data_root=str(tmp_path / "data"))  # type: ignore[arg-type]
    store = MemoryStateStore()
    async with (
        LocalCluster(mode="simulated") as cluster,
        open_executor(platform, kube_client=cluster.client(), store=store) as ex,
    ):
        with pytest.raises(BadTaskSpecification) as submitted:
            await ex.submit(spec)  # type: ignore[arg-type]
        assert list(cluster.store.iter(POD)) == []
    assert str(submitted.value) == str(rendered.value)
    assert "Failed to parse resource as a valid quantity. [CPU: '2x50m']" in str(submitted.value)
    assert store.load(spec.execution_key) is None  # type: ignore[attr-defined]
    assert not (tmp_path / "data").exists()


class _ListingClient:
    """The local cluster's client, remembering how many objects each list returned."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.listed: list[int] = []
        self.calls: dict[str, int] = {}

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.inner, name)
        if name in ("create", "get", "delete", "patch", "replace"):

            async def counted(*args: Any, **kwargs: Any) -> Any:
                self.calls[name] = self.calls.get(name, 0) + 1
                return await method(*args, **kwargs)

            return counted
        return method

    async def list(self, *args: Any, **kwargs: Any) -> Any:
        items, version = await self.inner.list(*args, **kwargs)
        self.listed.append(len(items))
        return items, version


async def test_tasks_submitted_as_the_executor_opens_are_watched_from_before_their_first_create(
    tmp_path: Path,
) -> None:
    from taskplug.executor import Platform, open_executor
    from taskplug.localcluster import LocalCluster

    platform = Platform.load(document={"executor": {"data-root": str(tmp_path / "data")}})
    specs = [
        parse_spec(
            {
                "template": {
                    "id": {
                        "resourceType": "TASK",
                        "project": "p",
                        "domain": "d",
                        "name": "t",
                        "version": "1",
                    },
                    "type": "container",
                    "container": {"image": "busybox", "command": ["true"]},
                },
                "execution": {"id": {"project": "p", "domain": "d", "name": f"e{i}", "nodeId": "n0"}},
            }
        )
        for i in range(20)
    ]
    async with LocalCluster(mode="simulated") as cluster:
        client = _ListingClient(cluster.client())
        async with open_executor(platform, kube_client=client, store=MemoryStateStore()) as ex:
            keys = [await ex.submit(spec) for spec in specs]  # type: ignore[arg-type]
            results = await asyncio.wait_for(asyncio.gather(*(ex.wait(k) for k in keys)), 60)
    assert [r.phase for r in results] == ["Success"] * 20
    # The pod informer's one list came before any pod existed; every pod was then seen through the watch.
    assert client.listed == [0]
    assert client.calls.get("create") == 20 and client.calls.get("get", 0) == 0


# -- forgetting an execution ----------------------------------------------------------------------------


async def test_a_forgotten_execution_leaves_no_trace_in_memory_and_its_wake_ups_are_ignored(
    tmp_path: Path,
) -> None:
    plugin = ScriptedPlugin([PhaseInfo.running(0)] * 1000)
    async with Executor(
        resolver=_resolver(plugin), store=MemoryStateStore(), settings=_settings(tmp_path)
    ) as ex:
        done = await ex.submit(_spec("done"))
        running = await ex.submit(_spec("running"))
        waiter = asyncio.ensure_future(ex.wait(running))
        while plugin.rounds < 5:
            await asyncio.sleep(0.001)
        ex.forget(running)
        ex.forget(done)
        ex.forget("never-known")  # nothing to do
        result = await asyncio.wait_for(waiter, 10)  # a waiter is released with what was known
        assert result.key == running and not result.succeeded
        rounds = plugin.rounds
        ex.wake(running)
        ex.enqueue_task_execution("running-n0-0")
        ex.enqueue_owner("p-d", "running")
        for _ in range(20):
            await asyncio.sleep(0.005)
        assert plugin.rounds <= rounds + 2  # at most the rounds already under way
        assert list(ex.keys) == []
        assert ex._owners == {} and ex._by_generated_name == {} and ex._deadlines == {}
        with pytest.raises(KeyError):
            ex.status(running)


async def test_a_forgotten_terminal_execution_can_be_loaded_again_from_its_store(tmp_path: Path) -> None:
    plugin = ScriptedPlugin([PhaseInfo.success()])
    store = SQLiteStateStore(tmp_path / "state.db")
    async with Executor(resolver=_resolver(plugin), store=store, settings=_settings(tmp_path)) as ex:
        first = await asyncio.wait_for(ex.run(_spec()), 10)
        ex.forget(first.key)
        assert list(ex.keys) == []
        again = await asyncio.wait_for(ex.run(_spec()), 10)
    store.close()
    assert again.phase == first.phase == "Success"
    assert plugin.rounds == 1  # loaded as finished, not run again
