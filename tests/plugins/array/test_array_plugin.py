"""The k8s array plugin round by round (Flyte's array/k8s executor + management + outputs), over an in-memory
cluster, with a fake clock that tests advance and never sleep on.

Each case drives ``handle`` as the executor does: the plugin state one round writes is what the next reads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from array_helpers import (
    INT,
    INT_LIST,
    PARENT,
    FakeKube,
    FakeResourceManager,
    array_template,
    make_plugin,
    rounds_until_checking,
    run_round,
    state_of,
    task_context,
    with_state,
    write_outputs,
)
from flyteidl.core import errors_pb2, literals_pb2

from taskplug.core import (
    ErrorCode,
    ErrorKind,
    ExecutionError,
    FakeClock,
    Phase,
    PluginError,
    literal_map_to_plain,
)
from taskplug.k8s import KubeApiError
from taskplug.plugins.array import ARRAY_FINALIZER, ArrayPhase, ArrayState


def error_doc(
    tctx: Any, index: int, *, recoverable: bool, message: str = "boom", code: str = "USER:ValueError"
) -> None:
    kind = errors_pb2.ContainerError.RECOVERABLE if recoverable else errors_pb2.ContainerError.NON_RECOVERABLE
    document = errors_pb2.ErrorDocument(
        error=errors_pb2.ContainerError(code=code, message=message, kind=kind, origin=1)
    )
    path = Path(tctx.output_writer.output_prefix) / str(index) / "error.pb"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(document.SerializeToString())


def read_error_doc(tctx: Any, index: int | None = None) -> errors_pb2.ErrorDocument:
    prefix = Path(tctx.output_writer.output_prefix)
    path = (prefix / str(index) if index is not None else prefix) / "error.pb"
    return errors_pb2.ErrorDocument.FromString(path.read_bytes())


def finish(
    kube: FakeKube, tctx: Any, index: int, name: str | None = None, *, value: int | None = None
) -> None:
    """Sub-task ``index`` succeeded and wrote ``o0``."""
    write_outputs(tctx, index, value if value is not None else index * 10)
    kube.set_phase(name or f"{PARENT}-{index}", "Succeeded")


async def drive(plugin: Any, tctx: Any, rounds: int = 1) -> tuple[Any, Any]:
    transition = None
    for _ in range(rounds):
        transition, tctx = await run_round(plugin, tctx)
    return transition, tctx


# -- Start ---------------------------------------------------------------------------------------


async def test_start_sizes_the_array_from_its_input_lists_and_lists_every_sub_task(tmp_path: Path) -> None:
    wakes: list[tuple[str, str]] = []
    plugin = make_plugin(FakeKube(), wakes=wakes)
    transition, nxt = await run_round(plugin, task_context(tmp_path, xs=[5, 6, 7]))
    state = state_of(nxt)
    assert (state.phase, state.phase_version, state.reason) == (
        ArrayPhase.PRE_LAUNCH,
        0,
        "Task is not discoverable.",
    )
    assert (state.array_size, state.original_array_size, state.min_success) == (3, 3, 3)
    info = transition.info
    assert (info.phase, info.version) == (Phase.RUNNING, 0)
    resources = info.info.external_resources
    assert [(r.external_id, r.index, r.retry_attempt, r.phase) for r in resources] == [
        (f"{PARENT}-{i}", i, 0, Phase.UNDEFINED) for i in range(3)
    ]
    assert wakes == [("p-d", "exec1")]  # it moved on: the next step is due now


@pytest.mark.parametrize(
    ("ratio", "size", "expected"),
    [
        (1.0, 3, 3),
        (0.5, 3, 2),
        (0.5, 4, 2),
        # The ratio is a float32 in the IDL: 0.1 is 0.10000000149…, so ceil(0.1 × 10) is 2, as in Go.
        (0.1, 10, 2),
        (0.0, 4, 0),
    ],
)
async def test_min_successes_is_the_ceiling_of_ratio_times_size(
    tmp_path: Path, ratio: float, size: int, expected: int
) -> None:
    plugin = make_plugin(FakeKube())
    template = array_template(custom={"minSuccessRatio": ratio})
    _, nxt = await run_round(plugin, task_context(tmp_path, template, xs=list(range(size))))
    assert state_of(nxt).min_success == expected


async def test_a_template_without_custom_needs_every_sub_task(tmp_path: Path) -> None:
    plugin = make_plugin(FakeKube())
    _, nxt = await run_round(plugin, task_context(tmp_path, array_template(), xs=[1, 2]))
    assert state_of(nxt).min_success == 2


async def test_input_lists_of_different_lengths_fail_permanently(tmp_path: Path) -> None:
    plugin = make_plugin(FakeKube())
    template = array_template(inputs={"x": INT_LIST, "y": INT_LIST})
    transition, nxt = await run_round(
        plugin, task_context(tmp_path, template, inputs={"x": [1, 2], "y": [1]})
    )
    assert state_of(nxt).phase is ArrayPhase.PERMANENT_FAILURE
    info = transition.info
    assert info.phase is Phase.PERMANENT_FAILURE
    assert info.err == ExecutionError(
        "ARRAY_JOB_GENERIC_FAILURE", "all maptask input lists must be the same length", ErrorKind.SYSTEM
    )


async def test_scalar_inputs_are_shared_and_the_list_sizes_the_array(tmp_path: Path) -> None:
    plugin = make_plugin(FakeKube())
    template = array_template(inputs={"x": INT_LIST, "offset": INT})
    _, nxt = await run_round(
        plugin, task_context(tmp_path, template, inputs={"x": [1, 2, 3, 4], "offset": 7})
    )
    assert state_of(nxt).array_size == 4


async def test_inputs_without_a_list_cannot_size_the_array(tmp_path: Path) -> None:
    plugin = make_plugin(FakeKube())
    template = array_template(inputs={"offset": INT})
    with pytest.raises(PluginError) as raised:
        await plugin.handle(task_context(tmp_path, template, inputs={"offset": 1}))
    assert raised.value.code == ErrorCode.BAD_TASK_SPECIFICATION
    assert "Unable to determine array size from inputs" in str(raised.value)


@pytest.mark.parametrize(("size", "phase"), [(3, ArrayPhase.PRE_LAUNCH), (4, ArrayPhase.PERMANENT_FAILURE)])
async def test_max_array_job_size_is_the_largest_array_allowed(
    tmp_path: Path, size: int, phase: ArrayPhase
) -> None:
    plugin = make_plugin(FakeKube(), config={"maxArrayJobSize": 3})
    transition, nxt = await run_round(plugin, task_context(tmp_path, xs=list(range(size))))
    assert state_of(nxt).phase is phase
    if phase is ArrayPhase.PERMANENT_FAILURE:
        assert transition.info.err is not None
        assert transition.info.err.message == "array size > max allowed. requested [4]. allowed [3]"
        assert transition.info.err.code == "ARRAY_JOB_GENERIC_FAILURE"


async def test_a_discoverable_map_task_runs_every_sub_task_without_a_catalog(tmp_path: Path) -> None:
    plugin = make_plugin(FakeKube())
    template = array_template(extra={"metadata": {"discoverable": True, "discoveryVersion": "1"}})
    _, nxt = await run_round(plugin, task_context(tmp_path, template, xs=[1, 2]))
    state = state_of(nxt)
    assert (state.phase, state.array_size) == (ArrayPhase.PRE_LAUNCH, 2)
    assert state.reason == "Skipping cache check due to err [taskplug has no data catalog]"


async def test_a_version_0_map_task_takes_its_size_and_min_successes_from_custom(tmp_path: Path) -> None:
    plugin = make_plugin(FakeKube())
    template = array_template(version=0, custom={"size": "4", "minSuccesses": "3"})
    _, nxt = await run_round(plugin, task_context(tmp_path, template, xs=[1]))
    state = state_of(nxt)
    assert (state.array_size, state.min_success) == (4, 3)


# -- PreLaunch, Launch ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("phase", "following", "reason"),
    [
        (ArrayPhase.PRE_LAUNCH, ArrayPhase.LAUNCH, "Nothing to do in PreLaunch phase."),
        (ArrayPhase.LAUNCH, ArrayPhase.CHECKING_SUB_TASK_EXECUTIONS, "Nothing to do in Launch phase."),
        (ArrayPhase.WRITE_TO_DISCOVERY, ArrayPhase.ASSEMBLE_FINAL_OUTPUT, "Task is not discoverable."),
        (
            ArrayPhase.WRITE_TO_DISCOVERY_THEN_FAIL,
            ArrayPhase.ASSEMBLE_FINAL_ERROR,
            "Task is not discoverable.",
        ),
    ],
)
async def test_steps_without_work_move_on_with_a_new_version(
    tmp_path: Path, phase: ArrayPhase, following: ArrayPhase, reason: str
) -> None:
    kube = FakeKube()
    plugin = make_plugin(kube)
    state = ArrayState(phase=phase, phase_version=4, array_size=2, original_array_size=2, min_success=2)
    transition, nxt = await run_round(plugin, with_state(task_context(tmp_path, xs=[1, 2]), state))
    after = state_of(nxt)
    assert (after.phase, after.phase_version, after.reason) == (following, 5, reason)
    assert (transition.info.phase, transition.info.version) == (Phase.RUNNING, 5)
    assert kube.calls == []


# -- launching and checking -----------------------------------------------------------------------


async def test_the_first_checking_round_creates_one_pod_per_sub_task(tmp_path: Path) -> None:
    kube = FakeKube()
    plugin = make_plugin(kube)
    tctx = await rounds_until_checking(plugin, task_context(tmp_path, xs=[1, 2, 3]))
    before = state_of(tctx).phase_version
    transition, nxt = await run_round(plugin, tctx)
    assert kube.created == [f"{PARENT}-0", f"{PARENT}-1", f"{PARENT}-2"]
    state = state_of(nxt)
    assert state.details == (Phase.QUEUED,) * 3
    assert (state.phase, state.phase_version, state.reason) == (
        ArrayPhase.CHECKING_SUB_TASK_EXECUTIONS,
        before + 1,
        "Task is still running",
    )
    assert [r.phase for r in transition.info.info.external_resources] == [Phase.QUEUED] * 3


async def test_the_version_moves_only_when_a_sub_task_phase_changes(tmp_path: Path) -> None:
    kube = FakeKube()
    plugin = make_plugin(kube)
    _, tctx = await drive(plugin, task_context(tmp_path, xs=[1, 2]), 4)
    version = state_of(tctx).phase_version
    _, tctx = await run_round(plugin, tctx)  # pods have no status yet: still queued
    assert state_of(tctx).phase_version == version
    kube.set_phase(f"{PARENT}-0", "Running")
    _, tctx = await run_round(plugin, tctx)
    state = state_of(tctx)
    assert state.details == (Phase.RUNNING, Phase.QUEUED)
    assert state.phase_version == version + 1


async def test_parallelism_caps_the_sub_tasks_running_at_once(tmp_path: Path) -> None:
    kube = FakeKube()
    plugin = make_plugin(kube)
    template = array_template(custom={"parallelism": "2", "minSuccessRatio": 1.0})
    tctx = await rounds_until_checking(plugin, task_context(tmp_path, template, xs=[1, 2, 3, 4, 5]))
    _, tctx = await run_round(plugin, tctx)
    assert kube.created == [f"{PARENT}-0", f"{PARENT}-1"]
    finish(kube, tctx, 0)
    _, tctx = await run_round(plugin, tctx)  # 0 done: one slot free, index 2 starts
    assert kube.created == [f"{PARENT}-0", f"{PARENT}-1", f"{PARENT}-2"]
    assert state_of(tctx).details == (
        Phase.SUCCESS,
        Phase.QUEUED,
        Phase.QUEUED,
        Phase.UNDEFINED,
        Phase.UNDEFINED,
    )


async def test_all_sub_tasks_succeeding_assembles_their_outputs_as_lists_in_index_order(
    tmp_path: Path,
) -> None:
    kube = FakeKube()
    plugin = make_plugin(kube)
    tctx = await rounds_until_checking(plugin, task_context(tmp_path, xs=[3, 1, 2]))
    _, tctx = await run_round(plugin, tctx)
    for i, value in ((2, 4), (0, 9), (1, 1)):
        finish(kube, tctx, i, value=value)
    _, tctx = await run_round(plugin, tctx)
    assert state_of(tctx).phase is ArrayPhase.WRITE_TO_DISCOVERY
    _, tctx = await run_round(plugin, tctx)
    assert state_of(tctx).phase is ArrayPhase.ASSEMBLE_FINAL_OUTPUT
    transition = await plugin.handle(tctx)
    assert transition.info.phase is Phase.SUCCESS
    assert tctx.output_writer.was_put and tctx.output_writer.reader is None  # read {prefix}/outputs.pb
    outputs = literals_pb2.LiteralMap.FromString(
        (Path(tctx.output_writer.output_prefix) / "outputs.pb").read_bytes()
    )
    assert literal_map_to_plain(outputs) == {"o0": [9, 1, 4]}
    state = ArrayState.from_json(tctx.plugin_state.written[2])
    assert (state.phase, state.reason) == (ArrayPhase.SUCCESS, "Assembled outputs")


async def test_finished_sub_tasks_are_not_looked_at_again(tmp_path: Path) -> None:
    kube = FakeKube()
    plugin = make_plugin(kube)
    tctx = await rounds_until_checking(plugin, task_context(tmp_path, xs=[1, 2]))
    _, tctx = await run_round(plugin, tctx)
    finish(kube, tctx, 0)
    _, tctx = await run_round(plugin, tctx)
    kube.calls.clear()
    _, tctx = await run_round(plugin, tctx)
    assert kube.calls == [("get", f"{PARENT}-1")]


# -- failures, retries and success criteria --------------------------------------------------------


async def test_a_failed_sub_task_is_retried_under_a_new_pod_name_while_attempts_remain(
    tmp_path: Path,
) -> None:
    kube = FakeKube()
    plugin = make_plugin(kube)
    tctx = await rounds_until_checking(plugin, task_context(tmp_path, xs=[1, 2], max_attempts=3))
    _, tctx = await run_round(plugin, tctx)
    kube.set_phase(f"{PARENT}-1", "Failed", exit_code=1)
    _, tctx = await run_round(plugin, tctx)
    assert state_of(tctx).details[1] is Phase.RETRYABLE_FAILURE
    transition, tctx = await run_round(plugin, tctx)
    assert kube.created[-1] == f"{PARENT}-1-1"
    state = state_of(tctx)
    assert (state.details[1], state.retry_attempts) == (Phase.QUEUED, (0, 1))
    relaunched = transition.info.info.external_resources[1]
    assert (relaunched.external_id, relaunched.retry_attempt) == (f"{PARENT}-1-1", 1)
    kube.set_phase(f"{PARENT}-1-1", "Failed", exit_code=1)
    _, tctx = await run_round(plugin, tctx)
    _, tctx = await run_round(plugin, tctx)
    assert kube.created[-1] == f"{PARENT}-1-2"
    kube.set_phase(f"{PARENT}-1-2", "Failed", exit_code=1)
    _, tctx = await run_round(plugin, tctx)
    # retry 2 + 1 reaches the 3 attempts: permanent.
    assert state_of(tctx).details[1] is Phase.PERMANENT_FAILURE


@pytest.mark.parametrize(
    ("max_attempts", "expected"), [(1, Phase.PERMANENT_FAILURE), (2, Phase.RETRYABLE_FAILURE)]
)
async def test_a_retryable_failure_on_the_last_attempt_is_permanent(
    tmp_path: Path, max_attempts: int, expected: Phase
) -> None:
    kube = FakeKube()
    plugin = make_plugin(kube)
    tctx = await rounds_until_checking(plugin, task_context(tmp_path, xs=[1], max_attempts=max_attempts))
    _, tctx = await run_round(plugin, tctx)
    kube.set_phase(f"{PARENT}-0", "Failed", exit_code=1)
    _, tctx = await run_round(plugin, tctx)
    assert state_of(tctx).details == (expected,)


async def test_a_failure_without_an_error_document_gets_one_from_its_phase(tmp_path: Path) -> None:
    kube = FakeKube()
    plugin = make_plugin(kube)
    tctx = await rounds_until_checking(plugin, task_context(tmp_path, xs=[1, 2], max_attempts=2))
    _, tctx = await run_round(plugin, tctx)
    kube.set_phase(f"{PARENT}-0", "Failed", exit_code=1)
    error_doc(tctx, 1, recoverable=True, message="the user's own")
    kube.set_phase(f"{PARENT}-1", "Failed", exit_code=2)
    _, tctx = await run_round(plugin, tctx)
    written = read_error_doc(tctx, 0).error
    assert (written.code, written.kind, written.origin) == ("Error", errors_pb2.ContainerError.RECOVERABLE, 1)
    assert f"[{PARENT}-0] terminated with exit code (1)" in written.message
    assert read_error_doc(tctx, 1).error.message == "the user's own"  # an existing document is kept


@pytest.mark.parametrize(
    ("recoverable", "expected"),
    [
        (True, Phase.RETRYABLE_FAILURE),
        # Deviation: Flyte retries whatever the document says.
        (False, Phase.PERMANENT_FAILURE),
    ],
)
async def test_a_succeeded_pod_that_wrote_only_an_error_document_failed(
    tmp_path: Path, recoverable: bool, expected: Phase
) -> None:
    kube = FakeKube()
    plugin = make_plugin(kube)
    tctx = await rounds_until_checking(plugin, task_context(tmp_path, xs=[1], max_attempts=3))
    _, tctx = await run_round(plugin, tctx)
    error_doc(tctx, 0, recoverable=recoverable)
    kube.set_phase(f"{PARENT}-0", "Succeeded")
    _, tctx = await run_round(plugin, tctx)
    assert state_of(tctx).details == (expected,)


async def test_a_succeeded_pod_with_outputs_succeeded_even_beside_an_old_error_document(
    tmp_path: Path,
) -> None:
    kube = FakeKube()
    plugin = make_plugin(kube)
    tctx = await rounds_until_checking(plugin, task_context(tmp_path, xs=[1]))
    _, tctx = await run_round(plugin, tctx)
    error_doc(tctx, 0, recoverable=True)
    finish(kube, tctx, 0)
    _, tctx = await run_round(plugin, tctx)
    assert state_of(tctx).details == (Phase.SUCCESS,)


async def test_a_pod_deleted_behind_the_plugins_back_is_a_system_failure(tmp_path: Path) -> None:
    kube = FakeKube()
    plugin = make_plugin(kube)
    tctx = await rounds_until_checking(plugin, task_context(tmp_path, xs=[1, 2], max_attempts=2))
    _, tctx = await run_round(plugin, tctx)
    del kube.pods[("p-d", f"{PARENT}-0")]
    _, tctx = await run_round(plugin, tctx)
    state = state_of(tctx)
    assert (state.details[0], state.system_failures) == (Phase.RETRYABLE_FAILURE, (1, 0))
    written = read_error_doc(tctx, 0).error
    assert written.code == "ResourceDeletedExternally"
    assert written.origin == 2  # SYSTEM
    assert f"resource not found, name [p-d/{PARENT}-0]" in written.message


async def test_a_pod_being_deleted_before_it_finished_is_a_system_failure(tmp_path: Path) -> None:
    kube = FakeKube()
    plugin = make_plugin(kube, k8s={"inject-finalizer": True})
    tctx = await rounds_until_checking(plugin, task_context(tmp_path, xs=[1], max_attempts=2))
    _, tctx = await run_round(plugin, tctx)
    kube.set_phase(f"{PARENT}-0", "Running")
    kube.pod(f"{PARENT}-0")["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:05Z"
    _, tctx = await run_round(plugin, tctx)
    assert state_of(tctx).details == (Phase.RETRYABLE_FAILURE,)
    written = read_error_doc(tctx, 0).error
    assert (written.code, written.message) == (
        "UnexpectedObjectDeletion",
        f"object [p-d/{PARENT}-0] terminated in the background, manually",
    )


async def test_a_pod_pending_beyond_the_pending_timeout_fails_as_time_passes(tmp_path: Path) -> None:
    clock = FakeClock()
    kube = FakeKube()
    plugin = make_plugin(kube, k8s={"pod-pending-timeout": "1m"}, clock=clock)
    tctx = await rounds_until_checking(plugin, task_context(tmp_path, xs=[1], max_attempts=2))
    _, tctx = await run_round(plugin, tctx)
    pod = kube.pod(f"{PARENT}-0")
    pod["status"] = {
        "phase": "Pending",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ],
    }
    await clock.advance(59)
    _, tctx = await run_round(plugin, tctx)
    assert state_of(tctx).details == (Phase.QUEUED,)
    await clock.advance(1)
    _, tctx = await run_round(plugin, tctx)
    assert state_of(tctx).details == (Phase.RETRYABLE_FAILURE,)
    assert read_error_doc(tctx, 0).error.code == "PodPendingTimeout"


async def test_below_min_successes_the_map_task_aborts_its_sub_tasks_and_fails_with_their_errors(
    tmp_path: Path,
) -> None:
    kube = FakeKube()
    plugin = make_plugin(kube)
    template = array_template(custom={"minSuccessRatio": 0.5})  # 2 of 4 needed
    tctx = await rounds_until_checking(plugin, task_context(tmp_path, template, xs=[1, 2, 3, 4]))
    _, tctx = await run_round(plugin, tctx)
    kube.set_phase(f"{PARENT}-0", "Failed", exit_code=1)
    kube.set_phase(f"{PARENT}-1", "Failed", exit_code=1)
    kube.set_phase(f"{PARENT}-3", "Running")
    _, tctx = await run_round(plugin, tctx)
    assert state_of(tctx).phase is ArrayPhase.CHECKING_SUB_TASK_EXECUTIONS  # 2 may still succeed
    kube.set_phase(f"{PARENT}-2", "Failed", exit_code=1)
    _, tctx = await run_round(plugin, tctx)
    state = state_of(tctx)
    assert state.phase is ArrayPhase.ABORT_SUB_TASKS  # 1 running + 0 succeeded < 2
    _, tctx = await run_round(plugin, tctx)
    assert kube.deleted == [f"{PARENT}-3"]  # the one still running
    assert state_of(tctx).phase is ArrayPhase.WRITE_TO_DISCOVERY_THEN_FAIL
    _, tctx = await run_round(plugin, tctx)
    transition, tctx = await run_round(plugin, tctx)
    info = transition.info
    assert info.phase is Phase.PERMANENT_FAILURE
    assert info.err is not None
    assert info.err.code == ""
    # One entry per failed sub-task (their messages name their pods), in message order.
    entries = [line for line in info.err.message.split("\n") if line.startswith(("[0]:", "[1]:", "[2]:"))]
    assert [e.split(":", 1)[0] for e in entries] == ["[0]", "[1]", "[2]"]
    assert entries[0].startswith("[0]: code:Error message:Pod failed.")
    assert info.err.message.endswith(" kind:USER\n")
    assert read_error_doc(tctx).error.message == info.err.message
    assert read_error_doc(tctx).error.kind == errors_pb2.ContainerError.NON_RECOVERABLE


async def test_at_min_successes_the_map_task_succeeds_with_none_for_the_failed_elements(
    tmp_path: Path,
) -> None:
    kube = FakeKube()
    plugin = make_plugin(kube)
    template = array_template(custom={"minSuccessRatio": 0.5})
    tctx = await rounds_until_checking(plugin, task_context(tmp_path, template, xs=[1, 2, 3, 4]))
    _, tctx = await run_round(plugin, tctx)
    finish(kube, tctx, 0, value=1)
    kube.set_phase(f"{PARENT}-1", "Failed", exit_code=1)
    finish(kube, tctx, 2, value=9)
    kube.set_phase(f"{PARENT}-3", "Failed", exit_code=1)
    _, tctx = await run_round(plugin, tctx)
    assert state_of(tctx).phase is ArrayPhase.WRITE_TO_DISCOVERY
    _, tctx = await drive(plugin, tctx, 2)
    outputs = literals_pb2.LiteralMap.FromString(
        (Path(tctx.output_writer.output_prefix) / "outputs.pb").read_bytes()
    )
    assert literal_map_to_plain(outputs) == {"o0": [1, None, 9, None]}


async def test_success_waits_until_every_sub_task_has_finished(tmp_path: Path) -> None:
    kube = FakeKube()
    plugin = make_plugin(kube)
    template = array_template(custom={"minSuccessRatio": 0.5})
    tctx = await rounds_until_checking(plugin, task_context(tmp_path, template, xs=[1, 2]))
    _, tctx = await run_round(plugin, tctx)
    finish(kube, tctx, 0)
    kube.set_phase(f"{PARENT}-1", "Running")
    _, tctx = await run_round(plugin, tctx)
    assert state_of(tctx).phase is ArrayPhase.CHECKING_SUB_TASK_EXECUTIONS


async def test_a_map_task_without_outputs_succeeds_with_nothing_to_assemble(tmp_path: Path) -> None:
    kube = FakeKube()
    plugin = make_plugin(kube)
    state = ArrayState(
        phase=ArrayPhase.ASSEMBLE_FINAL_OUTPUT,
        phase_version=7,
        array_size=1,
        original_array_size=1,
        min_success=1,
        details=(Phase.SUCCESS,),
        retry_attempts=(0,),
        system_failures=(0,),
    )
    tctx = with_state(task_context(tmp_path, array_template(outputs=False), xs=[1]), state)
    transition = await plugin.handle(tctx)
    assert transition.info.phase is Phase.SUCCESS
    assert ArrayState.from_json(tctx.plugin_state.written[2]).reason == "Task has no outputs"
    assert not (Path(tctx.output_writer.output_prefix) / "outputs.pb").exists()


async def test_a_failed_map_task_without_outputs_still_reports_its_sub_tasks_errors(tmp_path: Path) -> None:
    # Deviation: Flyte reports ARRAY_JOB_GENERIC_FAILURE "Task has no outputs".
    kube = FakeKube()
    plugin = make_plugin(kube)
    state = ArrayState(
        phase=ArrayPhase.ASSEMBLE_FINAL_ERROR,
        phase_version=7,
        array_size=2,
        original_array_size=2,
        min_success=2,
        details=(Phase.SUCCESS, Phase.PERMANENT_FAILURE),
        retry_attempts=(0, 0),
        system_failures=(0, 0),
    )
    tctx = with_state(task_context(tmp_path, array_template(outputs=False), xs=[1, 2]), state)
    error_doc(tctx, 1, recoverable=False, message="ZeroDivisionError", code="USER:ZeroDivisionError")
    transition = await plugin.handle(tctx)
    assert transition.info.phase is Phase.PERMANENT_FAILURE
    assert transition.info.err is not None
    assert (
        transition.info.err.message
        == "[1]: code:USER:ZeroDivisionError message:ZeroDivisionError kind:USER\n"
    )


async def test_a_failed_sub_task_without_an_error_document_is_summarised_as_job_failed(
    tmp_path: Path,
) -> None:
    plugin = make_plugin(FakeKube())
    state = ArrayState(
        phase=ArrayPhase.ASSEMBLE_FINAL_ERROR,
        phase_version=1,
        array_size=3,
        original_array_size=3,
        min_success=3,
        details=(Phase.PERMANENT_FAILURE, Phase.SUCCESS, Phase.RETRYABLE_FAILURE),
    )
    tctx = with_state(task_context(tmp_path, xs=[1, 2, 3]), state)
    transition = await plugin.handle(tctx)
    assert transition.info.err is not None
    assert transition.info.err.message == "[0][2]: Job Failed.\n"


async def test_an_output_assembly_that_fails_is_retried_then_fails_the_map_task_retryably(
    tmp_path: Path,
) -> None:
    plugin = make_plugin(FakeKube(), config={"OutputAssembler": {"maxRetries": 1}})
    state = ArrayState(
        phase=ArrayPhase.ASSEMBLE_FINAL_OUTPUT,
        phase_version=3,
        array_size=1,
        original_array_size=1,
        min_success=1,
        details=(Phase.SUCCESS,),
        retry_attempts=(0,),
        system_failures=(0,),
    )
    tctx = with_state(task_context(tmp_path, xs=[1]), state)
    bad = Path(tctx.output_writer.output_prefix) / "0" / "outputs.pb"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"\xff not a literal map")
    transition, tctx = await run_round(plugin, tctx)
    assert transition.info.phase is Phase.RUNNING
    assert (state_of(tctx).phase, state_of(tctx).assembly_failures) == (ArrayPhase.ASSEMBLE_FINAL_OUTPUT, 1)
    transition, tctx = await run_round(plugin, tctx)
    info = transition.info
    assert (info.phase, info.version) == (Phase.RETRYABLE_FAILURE, 0)
    assert info.err is not None and info.err.kind is ErrorKind.SYSTEM
    assert "is not a flyteidl LiteralMap" in info.err.message
    assert state_of(tctx).reason == "Failed to assemble outputs/errors."


# -- creating pods (through the rounds) ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "phase", "code"),
    [
        (
            KubeApiError(403, "Forbidden", 'pods "x" is forbidden: exceeded quota: q'),
            Phase.WAITING_FOR_RESOURCES,
            None,
        ),
        (KubeApiError(403, "Forbidden", "not allowed"), Phase.PERMANENT_FAILURE, "RuntimeFailure"),
        (KubeApiError(400, "BadRequest", "bad"), Phase.PERMANENT_FAILURE, "BadTaskFormat"),
        (KubeApiError(422, "Invalid", "invalid"), Phase.PERMANENT_FAILURE, "BadTaskFormat"),
        (KubeApiError(413, "RequestEntityTooLarge", "too large"), Phase.PERMANENT_FAILURE, "EntityTooLarge"),
    ],
)
async def test_create_errors_are_sub_task_phases(
    tmp_path: Path, error: KubeApiError, phase: Phase, code: str | None
) -> None:
    kube = FakeKube()
    plugin = make_plugin(kube)
    tctx = await rounds_until_checking(plugin, task_context(tmp_path, xs=[1]))  # one attempt
    kube.fail("create", error)
    _, tctx = await run_round(plugin, tctx)
    assert state_of(tctx).details == (phase,)
    if code is not None:
        assert read_error_doc(tctx, 0).error.code == code
    if phase is Phase.WAITING_FOR_RESOURCES:
        # The array never reports waiting: it keeps checking, and launches again next round.
        assert state_of(tctx).phase is ArrayPhase.CHECKING_SUB_TASK_EXECUTIONS
        _, tctx = await run_round(plugin, tctx)
        assert state_of(tctx).details == (Phase.QUEUED,)


async def test_an_unclassified_create_error_fails_the_round_and_gives_the_token_back(tmp_path: Path) -> None:
    # Deviation: Flyte drops this error and relaunches silently every round.
    kube = FakeKube()
    plugin = make_plugin(kube, config={"resourceConfig": {"primaryLabel": "pods", "limit": 5}})
    manager = FakeResourceManager({"pods": 5})
    tctx = await rounds_until_checking(plugin, task_context(tmp_path, xs=[1, 2]))
    tctx.resource_manager = manager
    kube.fail("create", KubeApiError(500, "InternalError", "etcd is down"), name=f"{PARENT}-1")
    with pytest.raises(PluginError) as raised:
        await plugin.handle(tctx)
    assert raised.value.code == "InternalError"
    assert "failed to create resource" in str(raised.value)
    assert manager.tokens["pods"] == {f"{PARENT}-0"}  # 1's token went back
    # The executor runs the round again (the state was not written): 0 exists, 1 is created now.
    _, tctx = await run_round(plugin, tctx)
    assert state_of(tctx).details == (Phase.QUEUED, Phase.QUEUED)
    assert kube.created == [f"{PARENT}-0", f"{PARENT}-1"]


async def test_a_round_replayed_after_a_restart_creates_no_pod_twice(tmp_path: Path) -> None:
    kube = FakeKube()
    plugin = make_plugin(kube)
    tctx = await rounds_until_checking(plugin, task_context(tmp_path, xs=[1, 2, 3]))
    await plugin.handle(tctx)  # its state lost with the process
    _, tctx = await run_round(make_plugin(kube), tctx)
    assert kube.created == [f"{PARENT}-{i}" for i in range(3)]
    assert [v for v, _ in kube.calls].count("create") == 6  # each tried twice, created once
    assert state_of(tctx).details == (Phase.QUEUED,) * 3


async def test_a_pod_that_cannot_be_built_fails_its_sub_task_permanently(tmp_path: Path) -> None:
    # Deviation: Flyte panics here (propeller turns it into an endless system retry).
    kube = FakeKube()
    plugin = make_plugin(kube)
    template = array_template()
    del template["container"]
    template["k8sPod"] = {
        "podSpec": {
            "containers": [{"name": "a", "image": "img"}, {"name": "b", "image": "img"}],
        }
    }
    tctx = await rounds_until_checking(plugin, task_context(tmp_path, template, xs=[1]))
    _, tctx = await run_round(plugin, tctx)
    assert kube.created == []
    assert state_of(tctx).details == (Phase.PERMANENT_FAILURE,)
    written = read_error_doc(tctx, 0).error
    assert (written.code, written.kind) == (
        "FailedToBuildResource",
        errors_pb2.ContainerError.NON_RECOVERABLE,
    )
    assert written.message == (
        "could not build resource for task: [BadTaskSpecification] invalid TaskSpecification, "
        "config missing [primary_container_name] key in [map[]]"
    )


# -- allocation tokens ----------------------------------------------------------------------------


async def test_sub_tasks_wait_for_allocation_tokens_and_give_them_back_when_they_finish(
    tmp_path: Path,
) -> None:
    kube = FakeKube()
    plugin = make_plugin(kube, config={"resourceConfig": {"primaryLabel": "pods", "limit": 2}})
    manager = FakeResourceManager({"pods": 2})
    tctx = await rounds_until_checking(plugin, task_context(tmp_path, xs=[1, 2, 3]))
    tctx.resource_manager = manager
    transition, tctx = await run_round(plugin, tctx)
    assert kube.created == [f"{PARENT}-0", f"{PARENT}-1"]
    assert state_of(tctx).details == (Phase.QUEUED, Phase.QUEUED, Phase.WAITING_FOR_RESOURCES)
    assert transition.info.phase is Phase.RUNNING  # the array itself keeps checking
    assert manager.tokens["pods"] == {f"{PARENT}-0", f"{PARENT}-1"}
    finish(kube, tctx, 0)
    _, tctx = await run_round(plugin, tctx)  # 0 finishes first in the pass: its token goes to 2
    assert kube.created[-1] == f"{PARENT}-2"
    assert manager.tokens["pods"] == {f"{PARENT}-1", f"{PARENT}-2"}
    assert state_of(tctx).details == (Phase.SUCCESS, Phase.QUEUED, Phase.QUEUED)


async def test_without_a_resource_config_no_token_is_asked_for(tmp_path: Path) -> None:
    kube = FakeKube()
    plugin = make_plugin(kube)
    manager = FakeResourceManager({"pods": 0})
    tctx = await rounds_until_checking(plugin, task_context(tmp_path, xs=[1]))
    tctx.resource_manager = manager
    _, tctx = await run_round(plugin, tctx)
    assert (kube.created, manager.log) == ([f"{PARENT}-0"], [])


async def test_a_resource_config_without_a_resource_manager_cannot_decide(tmp_path: Path) -> None:
    plugin = make_plugin(FakeKube(), config={"resourceConfig": {"primaryLabel": "pods", "limit": 2}})
    tctx = await rounds_until_checking(plugin, task_context(tmp_path, xs=[1]))
    with pytest.raises(PluginError) as raised:
        await plugin.handle(tctx)
    assert raised.value.code == ErrorCode.RESOURCE_MANAGER_FAILURE


# -- abort and finalize -------------------------------------------------------------------------------------


async def test_abort_deletes_every_started_sub_task_pod_and_one_the_state_never_recorded(
    tmp_path: Path,
) -> None:
    kube = FakeKube()
    plugin = make_plugin(kube)
    tctx = await rounds_until_checking(plugin, task_context(tmp_path, xs=[1, 2, 3, 4]))
    _, tctx = await run_round(plugin, tctx)
    finish(kube, tctx, 0)
    kube.set_phase(f"{PARENT}-1", "Running")
    _, tctx = await run_round(plugin, tctx)
    # Index 3's pod was created in a round whose state was lost: the state says Undefined.
    state = state_of(tctx)
    details = (*state.details[:3], Phase.UNDEFINED)
    tctx = with_state(tctx, ArrayState(**{**_fields(state), "details": details}))
    await plugin.abort(tctx)
    assert sorted(kube.deleted) == [f"{PARENT}-1", f"{PARENT}-2", f"{PARENT}-3"]  # not the finished 0


async def test_abort_before_anything_was_launched_deletes_nothing(tmp_path: Path) -> None:
    kube = FakeKube()
    plugin = make_plugin(kube)
    await plugin.abort(task_context(tmp_path, xs=[1, 2]))
    assert kube.deleted == []


async def test_finalize_drops_the_array_finalizer_and_releases_the_tokens_of_unfinished_sub_tasks(
    tmp_path: Path,
) -> None:
    kube = FakeKube()
    plugin = make_plugin(
        kube, k8s={"inject-finalizer": True}, config={"resourceConfig": {"primaryLabel": "pods", "limit": 9}}
    )
    manager = FakeResourceManager({"pods": 9})
    tctx = await rounds_until_checking(plugin, task_context(tmp_path, xs=[1, 2]))
    tctx.resource_manager = manager
    _, tctx = await run_round(plugin, tctx)
    assert kube.pod(f"{PARENT}-0")["metadata"]["finalizers"] == [ARRAY_FINALIZER]
    finish(kube, tctx, 0)
    _, tctx = await run_round(plugin, tctx)
    # A finished sub-task is finalized at once: finalizer dropped, token released.
    assert kube.pod(f"{PARENT}-0")["metadata"]["finalizers"] == []
    assert manager.tokens["pods"] == {f"{PARENT}-1"}
    await plugin.abort(tctx)
    assert ("p-d", f"{PARENT}-1") in kube.pods  # held by its finalizer
    await plugin.finalize(tctx)
    assert ("p-d", f"{PARENT}-1") not in kube.pods
    assert manager.tokens["pods"] == set()  # Deviation: Flyte keeps this token


async def test_finalize_deletes_pods_when_delete_resource_on_finalize(tmp_path: Path) -> None:
    kube = FakeKube()
    plugin = make_plugin(kube, k8s={"delete-resource-on-finalize": True})
    tctx = await rounds_until_checking(plugin, task_context(tmp_path, xs=[1, 2]))
    _, tctx = await run_round(plugin, tctx)
    finish(kube, tctx, 0)
    _, tctx = await run_round(plugin, tctx)
    assert kube.deleted == [f"{PARENT}-0"]  # finalized as it finished
    await plugin.finalize(tctx)
    assert kube.deleted == [f"{PARENT}-0", f"{PARENT}-1"]


async def test_a_corrupted_state_cannot_be_read(tmp_path: Path) -> None:
    plugin = make_plugin(FakeKube())
    tctx = task_context(tmp_path, xs=[1])
    from taskplug.core import PluginStateHolder

    tctx.plugin_state = PluginStateHolder(0, {"phase": 99})
    with pytest.raises(PluginError) as raised:
        await plugin.handle(tctx)
    assert raised.value.code == ErrorCode.CORRUPTED_PLUGIN_STATE


def _fields(state: ArrayState) -> dict[str, Any]:
    return {name: getattr(state, name) for name in ArrayState.__dataclass_fields__}


async def test_a_pod_that_cannot_be_read_leaves_the_round_undecided(tmp_path: Path) -> None:
    kube = FakeKube()
    plugin = make_plugin(kube)
    tctx = await rounds_until_checking(plugin, task_context(tmp_path, xs=[1]))
    _, tctx = await run_round(plugin, tctx)
    kube.fail("get", KubeApiError(500, "InternalError", "etcd is down"))
    with pytest.raises(PluginError) as raised:
        await plugin.handle(tctx)
    assert raised.value.code == ErrorCode.SYSTEM_ERROR
    assert f"failed to get sub-task pod [p-d/{PARENT}-0]" in str(raised.value)


async def test_abort_tries_every_pod_and_reports_the_failures_together(tmp_path: Path) -> None:
    kube = FakeKube()
    plugin = make_plugin(kube, config={"maxErrorLength": 200})
    tctx = await rounds_until_checking(plugin, task_context(tmp_path, xs=[1, 2, 3]))
    _, tctx = await run_round(plugin, tctx)
    kube.fail("delete", KubeApiError(500, "InternalError", "etcd is down"), name=f"{PARENT}-0")
    kube.fail("delete", KubeApiError(500, "InternalError", "etcd is down"), name=f"{PARENT}-1")
    with pytest.raises(PluginError) as raised:
        await plugin.abort(tctx)
    assert kube.deleted == [f"{PARENT}-2"]  # the others were still tried
    assert raised.value.message == "[0-1]: etcd is down\n"
