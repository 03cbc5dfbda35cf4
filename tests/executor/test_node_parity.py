"""One task-node lifecycle: the same failure through a single task and through a map element gets the same
answer (the node step and the task handler are shared), and a task's timeout holds as propeller holds it.

Each case was once decided differently by the two paths: only a single task honoured a plugin's earliest-error
aggregation and recognised a ``@dynamic`` task's ``futures.pb``; only a map element had a timeout.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from flyteidl.core import dynamic_job_pb2, errors_pb2, literals_pb2

from executor.test_arraynode_executor import drive, map_spec, settings
from taskplug.core import (
    FakeClock,
    PhaseInfo,
    PluginEntry,
    PluginProperties,
    PluginResolver,
    TaskExecutionContext,
    Transition,
)
from taskplug.executor import ExecutionSpec, parse_spec
from taskplug.executor._executor import ExecutionResult, Executor
from taskplug.executor._store import MemoryStateStore
from taskplug.executor.nodes import NodePhase, retry_delay

Produce = str  # what a succeeding attempt leaves in its output prefix: "outputs", "errors", "futures"


class ProducingPlugin:
    """Succeeds on its second round, leaving in the output prefix what ``produce`` says; an attempt listed in
    ``hang`` runs for ever instead. Serves single tasks and map elements alike."""

    def __init__(
        self, produce: Produce = "outputs", *, earliest: bool = False, hang: Sequence[int] = ()
    ) -> None:
        self.produce = produce
        self.earliest = earliest
        self.hang = set(hang)
        self.aborted: list[str] = []
        self.finalized: list[str] = []

    @property
    def id(self) -> str:
        return "producing"

    def get_properties(self) -> PluginProperties:
        return PluginProperties(earliest_error_aggregation=self.earliest)

    async def handle(self, tctx: TaskExecutionContext) -> Transition:
        _, state = tctx.plugin_state_reader.get()
        step = (state or {}).get("step", 0)
        tctx.plugin_state_writer.put(1, {"step": step + 1})
        attempt = tctx.metadata.task_execution_id.id.retry_attempt
        if step == 0 or attempt in self.hang:
            return Transition.to(PhaseInfo.running(0))
        prefix = Path(tctx.output_writer.output_prefix)
        prefix.mkdir(parents=True, exist_ok=True)
        if self.produce == "errors":
            # Two replicas' error documents: the later one sorts first by name, the earlier by time.
            for name, seconds, message in [
                ("error-a.pb", 200, "the later failure"),
                ("error-b.pb", 100, "the first failure"),
            ]:
                doc = errors_pb2.ErrorDocument()
                doc.error.code, doc.error.message = "USER:Failed", message
                doc.error.kind = errors_pb2.ContainerError.NON_RECOVERABLE
                doc.error.timestamp.seconds = seconds
                (prefix / name).write_bytes(doc.SerializeToString())
        elif self.produce == "futures":
            job = dynamic_job_pb2.DynamicJobSpec()
            job.nodes.add().id = "dn0"
            (prefix / "futures.pb").write_bytes(job.SerializeToString())
        else:
            out = literals_pb2.LiteralMap()
            out.literals["o0"].scalar.primitive.integer = 9
            (prefix / "outputs.pb").write_bytes(out.SerializeToString())
        return Transition.to(PhaseInfo.success())

    async def abort(self, tctx: TaskExecutionContext) -> None:
        self.aborted.append(tctx.metadata.task_execution_id.generated_name)

    async def finalize(self, tctx: TaskExecutionContext) -> None:
        self.finalized.append(tctx.metadata.task_execution_id.generated_name)


def _resolver(plugin: ProducingPlugin) -> PluginResolver:
    return PluginResolver([(PluginEntry("producing", ("producing",), lambda _: plugin), plugin)], {})


def _single(*, timeout: str | None = None, retries: int = 0) -> ExecutionSpec:
    metadata: dict[str, Any] = {"retries": {"retries": retries}}
    if timeout is not None:
        metadata["timeout"] = timeout
    return parse_spec(
        {
            "template": {
                "id": {"resourceType": "TASK", "project": "p", "domain": "d", "name": "t", "version": "v1"},
                "type": "producing",
                "metadata": metadata,
                "interface": {"outputs": {"variables": {"o0": {"type": {"simple": "INTEGER"}}}}},
            },
            "execution": {"id": {"project": "p", "domain": "d", "name": "s1"}},
        }
    )


def _map(**array: Any) -> ExecutionSpec:
    spec = map_spec([3], array=array)
    template = spec.template
    template.type = "producing"
    return spec


async def _run(tmp_path: Path, plugin: ProducingPlugin, spec: ExecutionSpec) -> ExecutionResult:
    clock = FakeClock()
    async with Executor(
        resolver=_resolver(plugin), store=MemoryStateStore(), settings=settings(tmp_path), clock=clock
    ) as ex:
        return await drive(clock, ex, await ex.submit(spec))


def _element_error(result: ExecutionResult) -> dict[str, Any]:
    assert result.elements is not None
    error = result.elements[0]["error"]
    assert error is not None
    return error


async def test_earliest_error_aggregation_picks_the_earliest_document_for_a_task_and_an_element(
    tmp_path: Path,
) -> None:
    single = await _run(tmp_path / "s", ProducingPlugin("errors", earliest=True), _single())
    mapped = await _run(tmp_path / "m", ProducingPlugin("errors", earliest=True), _map())
    assert single.phase == "PermanentFailure" and single.error is not None
    assert single.error["message"] == "the first failure"
    assert _element_error(mapped)["message"] == "the first failure"


async def test_a_dynamic_tasks_futures_are_named_for_a_task_and_an_element(tmp_path: Path) -> None:
    single = await _run(tmp_path / "s", ProducingPlugin("futures"), _single())
    mapped = await _run(tmp_path / "m", ProducingPlugin("futures"), _map())
    assert single.error is not None and single.error["code"] == "DynamicWorkflowNotSupported"
    assert _element_error(mapped)["code"] == "DynamicWorkflowNotSupported"
    assert "dynamic workflow of 1 node(s)" in _element_error(mapped)["message"]


async def test_a_timed_out_attempt_is_aborted_and_retried_for_a_task_and_an_element(tmp_path: Path) -> None:
    task_plugin, element_plugin = ProducingPlugin(hang=[0]), ProducingPlugin(hang=[0])
    single = await _run(tmp_path / "s", task_plugin, _single(timeout="5s", retries=1))
    mapped = await _run(tmp_path / "m", element_plugin, _map(retries=1, timeout="5s"))
    assert (single.phase, single.outputs, single.attempts) == ("Success", {"o0": 9}, 2)
    assert (mapped.phase, mapped.outputs) == ("Success", {"o0": [9]})
    assert task_plugin.aborted == ["s1-n0-0"] and element_plugin.aborted == ["m1-n0-0-n0-0"]
    timed_out = [e for e in single.events if e["phase"] == "RetryableFailure"]
    assert timed_out[0]["error"] == {
        "code": "TimeoutExpired",
        "message": "task execution timeout [5s] expired",
        "kind": "USER",
    }


async def test_a_timeout_without_retries_fails_as_propeller_fails_it_for_a_task_and_an_element(
    tmp_path: Path,
) -> None:
    single = await _run(tmp_path / "s", ProducingPlugin(hang=[0]), _single(timeout="3s"))
    mapped = await _run(tmp_path / "m", ProducingPlugin(hang=[0]), _map(timeout="3s"))
    expected = {
        "code": "RetriesExhausted|TimeoutExpired",
        "message": "[1/1] currentAttempt done. Last Error: USER::task execution timeout [3s] expired",
        "kind": "USER",
    }
    assert single.phase == "PermanentFailure" and single.error == expected
    assert _element_error(mapped) == expected


async def test_past_the_active_deadline_the_node_times_out_whatever_retries_are_left(tmp_path: Path) -> None:
    plugin = ProducingPlugin(hang=range(10))
    single = await _run(tmp_path / "s", plugin, _single(timeout="5s", retries=5))
    mapped = await _run(tmp_path / "m", ProducingPlugin(hang=range(10)), _map(retries=5, timeout="5s"))
    assert single.phase == "PermanentFailure"
    assert single.error == {"code": "Timeout", "message": "task active timeout [10s] expired", "kind": "USER"}
    assert single.attempts == 2  # attempt 0 ran out its 5 s, attempt 1 the node's 10 s
    assert mapped.elements is not None and mapped.elements[0]["phase"] == str(NodePhase.TIMED_OUT)
    assert _element_error(mapped)["code"] == "Timeout"


@pytest.mark.parametrize("errors", [1, 60, 61, 1100, 10**9])
def test_the_back_off_after_many_errors_in_a_row_is_capped_and_never_overflows(errors: int) -> None:
    assert 0 < retry_delay(errors, 10.0) <= 10.0
    assert retry_delay(errors + 1, 10.0) >= retry_delay(errors, 10.0)
