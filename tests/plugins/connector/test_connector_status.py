"""Status: the connector's phase (then its deprecated state) → PhaseInfo, log links, custom info, outputs."""

from __future__ import annotations

import pytest
from connector_helpers import container_template, int_literals, int_outputs, make_tctx
from flyteidl.admin import agent_pb2
from flyteidl.core import execution_pb2, tasks_pb2
from google.protobuf import struct_pb2

from taskplug.core import (
    ErrorCode,
    ErrorKind,
    FakeClock,
    LiteralMapOutputReader,
    Phase,
    PluginError,
    StaticOutputWriter,
    TaskLog,
)
from taskplug.plugins.connector import ConnectorConfig, ConnectorPlugin, FakeConnectorClient, ResourceWrapper
from taskplug.webapi import StatusContext

P = execution_pb2.TaskExecution.Phase
S = agent_pb2.State


def plugin(clock: FakeClock | None = None) -> ConnectorPlugin:
    return ConnectorPlugin(ConnectorConfig(), client=FakeConnectorClient(), clock=clock or FakeClock())


async def status(resource: ResourceWrapper, template: tasks_pb2.TaskTemplate | None = None):  # type: ignore[no-untyped-def]
    tctx = make_tctx(template or container_template())
    info = await plugin().status(StatusContext(tctx, {"meta": 1}, resource))
    return info, tctx


def wrap(**fields: object) -> ResourceWrapper:
    return ResourceWrapper.from_proto(agent_pb2.Resource(**fields))  # type: ignore[arg-type]


# Flyte's connector plugin_test.go TestPlugin: the PENDING, RUNNING, PERMANENT_FAILURE, RETRYABLE_FAILURE and
# TaskExecution_* Status cases, and the rest of the table.
@pytest.mark.parametrize(
    ("resource", "phase", "reason"),
    [
        (dict(state=S.PENDING, message="Waiting for cluster"), Phase.INITIALIZING, "Waiting for cluster"),
        (dict(state=S.RUNNING, message="m"), Phase.RUNNING, ""),
        (dict(phase=P.QUEUED, message="in line"), Phase.QUEUED, "in line"),
        (dict(phase=P.WAITING_FOR_RESOURCES, message="quota"), Phase.WAITING_FOR_RESOURCES, "quota"),
        (dict(phase=P.INITIALIZING, message="boot"), Phase.INITIALIZING, "boot"),
        (dict(phase=P.RUNNING, message="dropped"), Phase.RUNNING, ""),
        (dict(phase=P.RUNNING, state=S.PERMANENT_FAILURE), Phase.RUNNING, ""),
    ],
)
async def test_non_terminal_phases_and_states_map_with_their_reason(
    resource: dict[str, object], phase: Phase, reason: str
) -> None:
    info, _ = await status(wrap(**resource))
    assert (info.phase, info.reason, info.version, info.err) == (phase, reason, 0, None)


@pytest.mark.parametrize(
    ("resource", "phase", "code", "message"),
    [
        # The PERMANENT_FAILURE, RETRYABLE_FAILURE and TaskExecution_UNDEFINED Status cases: the state
        # table; a resource with neither phase nor state is retryable.
        (dict(state=S.PERMANENT_FAILURE, message="x"), Phase.PERMANENT_FAILURE, "TaskFailedWithError",
         "failed to run the job.\nx"),
        (dict(state=S.RETRYABLE_FAILURE, message="x"), Phase.RETRYABLE_FAILURE, "TaskFailedWithError",
         "failed to run the job.\nx"),
        (dict(), Phase.RETRYABLE_FAILURE, "TaskFailedWithError", "failed to run the job.\n"),
        # The TaskExecution_ABORTED, TaskExecution_FAILED and "FAILED Without Connector Error" Status cases.
        (dict(phase=P.ABORTED), Phase.PERMANENT_FAILURE, "TaskFailedWithError",
         "failed to run the job with aborted phase."),
        (dict(phase=P.FAILED, message="boom", agent_error=agent_pb2.AgentError(code="ERROR: 500")),
         Phase.PERMANENT_FAILURE, "ERROR: 500", "failed to run the job: boom"),
        (dict(phase=P.FAILED, message="boom"), Phase.PERMANENT_FAILURE, "TaskFailedWithError",
         "failed to run the job: boom"),
        (dict(phase=P.FAILED, message="boom", agent_error=agent_pb2.AgentError(code="")),
         Phase.PERMANENT_FAILURE, "TaskFailedWithError", "failed to run the job: boom"),
        (dict(phase=P.RETRYABLE_FAILED, message="flaky", agent_error=agent_pb2.AgentError(code="E42")),
         Phase.RETRYABLE_FAILURE, "E42", "failed to run the job: flaky"),
    ],
)  # fmt: skip
async def test_failures_carry_flytes_messages_and_the_connectors_code(
    resource: dict[str, object], phase: Phase, code: str, message: str
) -> None:
    info, _ = await status(wrap(**resource))
    assert info.phase is phase
    assert info.err is not None
    assert (info.err.code, info.err.message, info.err.kind) == (code, message, ErrorKind.USER)


# Flyte's connector plugin_test.go TestPlugin: "test UNDEFINED Status" (state 5) and "test UNDEFINED
# Phase" (state 8).
@pytest.mark.parametrize(
    ("resource", "message"),
    [
        (ResourceWrapper(state=5), "unknown execution state [5]."),
        (ResourceWrapper(state=8), "unknown execution state [8]."),
        (ResourceWrapper(phase=42), "unknown execution phase [42]."),
    ],
)
async def test_an_unknown_phase_or_state_is_a_system_error(resource: ResourceWrapper, message: str) -> None:
    with pytest.raises(PluginError) as e:
        await status(resource)
    assert e.value.code == ErrorCode.SYSTEM_ERROR
    assert e.value.message == message


# Flyte's connector plugin_test.go TestPlugin: "test RUNNING Status".
async def test_custom_info_and_log_links_become_task_info() -> None:
    custom = struct_pb2.Struct()
    custom.update({"job_id": "j1", "poll": 3, "nested": {"a": [1, "b"]}})
    link = execution_pb2.TaskLog(
        uri="http://logs/j1", name="Job", message_format=execution_pb2.TaskLog.JSON, ShowWhilePending=True
    )
    clock = FakeClock()
    info = await plugin(clock).status(
        StatusContext(
            make_tctx(container_template()), {}, wrap(state=S.RUNNING, custom_info=custom, log_links=[link])
        )
    )
    assert info.phase is Phase.RUNNING
    assert info.info is not None
    assert info.info.custom_info == {"job_id": "j1", "poll": 3.0, "nested": {"a": [1.0, "b"]}}
    assert info.info.logs == (
        TaskLog(uri="http://logs/j1", name="Job", message_format="JSON", show_while_pending=True),
    )
    assert info.info.occurred_at == clock.now()


async def test_no_custom_info_stays_none() -> None:
    info, _ = await status(wrap(phase=P.RUNNING))
    assert info.info is not None
    assert info.info.custom_info is None


# Outputs on success.
async def test_success_without_declared_outputs_writes_nothing() -> None:
    info, tctx = await status(wrap(phase=P.SUCCEEDED, outputs=int_literals(x=1)))
    assert info.phase is Phase.SUCCESS
    assert tctx.output_writer.was_put is False


@pytest.mark.parametrize("resource", [dict(phase=P.SUCCEEDED), dict(state=S.SUCCEEDED)])
async def test_success_with_outputs_in_the_resource_writes_them_from_memory(
    resource: dict[str, object],
) -> None:
    template = container_template()
    template.interface.CopyFrom(int_outputs("x"))
    info, tctx = await status(wrap(outputs=int_literals(x=1), **resource), template)
    assert info.phase is Phase.SUCCESS
    reader = tctx.output_writer.reader
    assert isinstance(reader, LiteralMapOutputReader)
    assert await reader.read() == int_literals(x=1)


async def test_success_without_outputs_in_the_resource_reads_outputs_pb_under_the_prefix() -> None:
    template = container_template()
    template.interface.CopyFrom(int_outputs("x"))
    info, tctx = await status(wrap(phase=P.SUCCEEDED), template)
    assert info.phase is Phase.SUCCESS
    assert tctx.output_writer.was_put is True
    assert tctx.output_writer.reader is None


async def test_an_output_write_failure_is_an_error() -> None:
    template = container_template()
    template.interface.CopyFrom(int_outputs("x"))
    tctx = make_tctx(template)

    class BrokenWriter(StaticOutputWriter):
        def put(self, reader: object) -> None:
            raise OSError("disk full")

    tctx.output_writer = BrokenWriter(output_prefix="/tmp/123")
    with pytest.raises(PluginError, match="failed to write output with err disk full"):
        await plugin().status(StatusContext(tctx, {}, wrap(phase=P.SUCCEEDED)))


async def test_status_of_something_that_is_not_a_connector_resource_is_an_error() -> None:
    with pytest.raises(PluginError, match="ResourceWrapper"):
        await plugin().status(StatusContext(make_tctx(container_template()), {}, "nope"))


@pytest.mark.parametrize(
    ("phase", "terminal"),
    [
        (P.SUCCEEDED, True),
        (P.FAILED, True),
        (P.ABORTED, True),
        (P.RETRYABLE_FAILED, True),
        (P.RUNNING, False),
        (P.QUEUED, False),
        (P.UNDEFINED, False),
    ],
)
def test_resource_terminality_for_the_status_cache(phase: int, terminal: bool) -> None:
    assert ResourceWrapper(phase=phase).is_terminal() is terminal


def test_only_the_phase_decides_terminality_not_the_deprecated_state() -> None:
    assert ResourceWrapper(state=S.SUCCEEDED).is_terminal() is False
