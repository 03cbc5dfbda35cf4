"""Flyte 2's connector protocol (``protocol: flyteidl2``): the connection read from the template and its
secrets resolved, the connection stored without the secrets' values, logs paged by token and metrics asked
for, on both protocols; then the plugin against a real ``c0`` server on 127.0.0.1: discovery through
ListConnectors, a whole job, and the errors a wrong protocol or an unreachable endpoint gives.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
import grpc.aio
import pytest
from connector_helpers import container_template, int_literals, int_outputs, make_tctx
from flyteidl.admin import agent_pb2
from flyteidl.core import execution_pb2, tasks_pb2
from flyteidl.service import agent_pb2_grpc
from google.protobuf import struct_pb2
from pydantic import ValidationError

from support.flyte2_connector_server import (  # noqa: F401
    Flyte2ConnectorServer,
    flyte2_connector_server_fixture,
)
from support.net import free_port
from taskplug.core import ErrorCode, FakeClock, Phase, PluginError
from taskplug.plugins.connector import (
    Connection,
    ConnectorConfig,
    ConnectorPlugin,
    ConnectorResourceMeta,
    EnvSecretManager,
    FakeConnectorClient,
    TaskCategory,
    connection_of,
)
from taskplug.webapi import DeleteContext, GetContext, StatusContext

P = execution_pb2.TaskExecution.Phase
V2 = "flyte2:80"
V1 = "flyte1:80"


def config() -> ConnectorConfig:
    return ConnectorConfig.model_validate(
        {
            "connectors": {
                "one": {"endpoint": V1, "insecure": True},
                "two": {"endpoint": V2, "insecure": True, "protocol": "flyteidl2"},
            }
        }
    )


def template(task_type: str, **custom: Any) -> tasks_pb2.TaskTemplate:
    t = container_template(task_type)
    if custom:
        s = struct_pb2.Struct()
        s.update(custom)
        t.custom.CopyFrom(s)
    t.interface.CopyFrom(int_outputs("o0"))
    return t


async def started(client: FakeConnectorClient, environ: dict[str, str] | None = None) -> ConnectorPlugin:
    client.agents[V1] = [
        agent_pb2.Agent(name="a", supported_task_categories=[agent_pb2.TaskCategory(name="t1")])
    ]
    client.agents[V2] = [
        agent_pb2.Agent(name="b", supported_task_categories=[agent_pb2.TaskCategory(name="t2")])
    ]
    plugin = ConnectorPlugin(
        config(), client=client, clock=FakeClock(), secret_manager=EnvSecretManager(environ or {})
    )
    await plugin.start()
    return plugin


# -- the connection --------------------------------------------------------------------------------------


def test_the_connection_is_read_from_custom_and_its_other_keys_are_ignored() -> None:
    t = template("t2", secrets={"api_key": "key_name"}, configs={"region": "eu"}, taskType="bq", script=["x"])
    assert connection_of(t) == Connection(
        task_type="bq", secrets={"api_key": "key_name"}, configs={"region": "eu"}
    )
    assert connection_of(container_template("t2")) == Connection()


@pytest.mark.parametrize(
    ("custom", "fragment"),
    [
        ({"secrets": ["a"]}, "failed to unmarshal connection from task template custom"),
        ({"secrets": {"k": "../etc/passwd"}}, "is not a secret name"),
    ],
)
def test_a_malformed_connection_is_a_bad_task_specification(custom: dict[str, Any], fragment: str) -> None:
    with pytest.raises(PluginError) as e:
        connection_of(template("t2", **custom))
    assert e.value.code == ErrorCode.BAD_TASK_SPECIFICATION
    assert fragment in e.value.message


async def test_a_flyteidl2_job_gets_its_resolved_connection_on_every_call_and_keeps_only_names() -> None:
    client = FakeConnectorClient()
    client.answer(V2, "CreateTask", agent_pb2.CreateTaskResponse(resource_meta=b"job"))
    client.answer(V2, "GetTask", agent_pb2.GetTaskResponse(resource=agent_pb2.Resource(phase=P.RUNNING)))
    client.answer(V2, "DeleteTask", agent_pb2.DeleteTaskResponse())
    plugin = await started(client, {"FLYTE_SECRET_key_name": "the-value"})
    try:
        t = template("t2", secrets={"api_key": "key_name"}, configs={"region": "eu"})
        meta, _ = await plugin.create(make_tctx(t, int_literals(x=1)))
        stored = json.loads(json.dumps(meta))
        await plugin.get(GetContext(stored))
        await plugin.delete(DeleteContext(stored))
    finally:
        await plugin.stop()

    resolved = Connection(secrets={"api_key": "the-value"}, configs={"region": "eu"})
    assert [(c.operation, c.connection) for c in client.calls if c.operation != "ListAgents"] == [
        ("CreateTask", resolved),
        ("GetTask", resolved),
        ("DeleteTask", resolved),
    ]
    assert stored["connection"] == {
        "taskType": "",
        "secrets": {"api_key": "key_name"},
        "configs": {"region": "eu"},
    }
    assert "the-value" not in json.dumps(stored)


async def test_a_flyte1_job_sends_no_connection() -> None:
    client = FakeConnectorClient()
    client.answer(V1, "CreateTask", agent_pb2.CreateTaskResponse(resource_meta=b"job"))
    plugin = await started(client)
    try:
        meta, _ = await plugin.create(make_tctx(template("t1", secrets={"api_key": "key_name"})))
    finally:
        await plugin.stop()
    assert client.calls_to("CreateTask")[0].connection is None
    assert "connection" not in meta  # type: ignore[operator]


async def test_a_missing_secret_fails_create_naming_the_variable_to_set() -> None:
    client = FakeConnectorClient()
    plugin = await started(client)
    try:
        with pytest.raises(PluginError) as e:
            await plugin.create(make_tctx(template("t2", secrets={"api_key": "nope"})))
    finally:
        await plugin.stop()
    assert "Failed to get secret value" in e.value.message
    assert "FLYTE_SECRET_nope" in e.value.message
    assert client.calls_to("CreateTask") == []


# -- logs and metrics (both protocols) ----------------------------------------------------------------------


def page(token: str, *lines: str, structured: bool = True) -> list[agent_pb2.GetTaskLogsResponse]:
    body = (
        agent_pb2.GetTaskLogsResponseBody(structured_lines=[agent_pb2.LogLine(message=m) for m in lines])
        if structured
        else agent_pb2.GetTaskLogsResponseBody(results=list(lines))
    )
    return [
        agent_pb2.GetTaskLogsResponse(body=body),
        agent_pb2.GetTaskLogsResponse(header=agent_pb2.GetTaskLogsResponseHeader(token=token)),
    ]


@pytest.mark.parametrize(("endpoint", "task_type"), [(V1, "t1"), (V2, "t2")])
async def test_log_lines_come_page_after_page_until_a_page_gives_no_token(
    endpoint: str, task_type: str
) -> None:
    pages = {"": page("b", "1", "2", structured=False), "b": page("c", "3"), "c": page("", "4", "5")}
    client = FakeConnectorClient()
    client.answer(endpoint, "GetTaskLogs", lambda request: pages[request.token])
    plugin = await started(client)
    meta = ConnectorResourceMeta("/o", b"job", TaskCategory(task_type)).to_json()
    try:
        lines = [line async for line in plugin.task_log_lines(meta)]
    finally:
        await plugin.stop()
    assert lines == ["1", "2", "3", "4", "5"]
    requests = [c.request for c in client.calls_to("GetTaskLogs")]
    assert [r.token for r in requests] == ["", "b", "c"]
    assert {(r.task_category.name, r.resource_meta) for r in requests} == {(task_type, b"job")}


async def test_a_token_given_twice_ends_the_pages() -> None:
    client = FakeConnectorClient()
    client.answer(V2, "GetTaskLogs", lambda request: page("again", "line"))
    plugin = await started(client)
    meta = ConnectorResourceMeta("/o", b"job", TaskCategory("t2")).to_json()
    try:
        lines = [line async for line in plugin.task_log_lines(meta)]
    finally:
        await plugin.stop()
    assert lines == ["line", "line"]


async def test_metrics_ask_the_connector_with_the_queries_and_the_window() -> None:
    answer = agent_pb2.GetTaskMetricsResponse()
    client = FakeConnectorClient()
    client.answer(V2, "GetTaskMetrics", answer)
    plugin = await started(client)
    meta = ConnectorResourceMeta("/o", b"job", TaskCategory("t2")).to_json()
    start = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    try:
        got = await plugin.task_metrics(
            meta, ["cpu", "mem"], start=start, end=start + timedelta(hours=1), step=timedelta(seconds=30)
        )
    finally:
        await plugin.stop()
    assert got is answer
    (call,) = client.calls_to("GetTaskMetrics")
    assert list(call.request.queries) == ["cpu", "mem"]
    assert call.request.start_time.ToDatetime(tzinfo=UTC) == start
    assert call.request.step.ToTimedelta() == timedelta(seconds=30)


def test_protocol_accepts_the_two_protocols_and_names_the_key_otherwise() -> None:
    assert config().connectors["two"].protocol == "flyteidl2"
    assert config().connectors["one"].protocol == "flyteidl"
    with pytest.raises(ValidationError) as e:
        ConnectorConfig.model_validate({"connectors": {"x": {"endpoint": "a:1", "protocol": "flyteidl3"}}})
    assert "connectors.x.protocol" in str(e.value)


# -- against a real c0 --------------------------------------------------------------------------------------


@pytest.mark.integration
async def test_the_plugin_discovers_and_runs_a_job_on_a_real_flyte2_connector(
    flyte2_connector_server: Flyte2ConnectorServer,
) -> None:
    cfg = ConnectorConfig.model_validate(
        {
            "connectors": {
                "two": {
                    "endpoint": flyte2_connector_server.endpoint,
                    "insecure": True,
                    "protocol": "flyteidl2",
                }
            }
        }
    )
    secrets = EnvSecretManager({"FLYTE_SECRET_k": "v"})
    async with ConnectorPlugin(cfg, clock=FakeClock(), secret_manager=secrets) as plugin:
        assert plugin.handles_task_type("scripted_job2")
        t = template("scripted_job2", script=["SUCCEEDED"], secrets={"key": "k"})
        # The server reads the inputs by the template's interface.
        t.interface.inputs.CopyFrom(int_outputs("x").outputs)
        tctx = make_tctx(t, int_literals(x=5))
        meta, _ = await plugin.create(tctx)
        resource = await plugin.get(GetContext(meta))
        info = await plugin.status(StatusContext(tctx, meta, resource))
    assert info.phase is Phase.SUCCESS
    assert info.info is not None and [link.name for link in info.info.logs] == ["Scripted Log"]
    job = json.loads(ConnectorResourceMeta.from_json(meta).connector_resource_meta)["job_id"]
    assert flyte2_connector_server.request(job)["connection"] == {"key": "v"}
    assert flyte2_connector_server.request(job)["inputs"] == {"x": 5}


@pytest.mark.integration
async def test_a_flyte2_connector_called_as_flyte1_says_which_deployment_and_protocol(
    flyte2_connector_server: Flyte2ConnectorServer,
) -> None:
    cfg = ConnectorConfig.model_validate(
        {
            "connectors": {"two": {"endpoint": flyte2_connector_server.endpoint, "insecure": True}},
            "connectorForTaskTypes": {"scripted_job2": "two"},
        }
    )
    async with ConnectorPlugin(cfg, clock=FakeClock()) as plugin:
        with pytest.raises(PluginError) as e:
            await plugin.create(make_tctx(template("scripted_job2")))
    assert e.value.message == (
        "failed to create task from connector with rpc error: code = Unimplemented desc = Method not found! "
        f"(connector deployment [two] at [{flyte2_connector_server.endpoint}], protocol flyteidl: it does not "
        "serve this call of flyteidl's connector services; a Flyte 2 connector wants protocol: flyteidl2)"
    )


async def test_a_flyte1_connector_called_as_flyte2_says_which_deployment_and_protocol() -> None:
    class Flyte1(agent_pb2_grpc.AsyncAgentServiceServicer, agent_pb2_grpc.AgentMetadataServiceServicer):
        async def ListAgents(self, request: Any, context: Any) -> agent_pb2.ListAgentsResponse:
            return agent_pb2.ListAgentsResponse()

    server = grpc.aio.server()
    agent_pb2_grpc.add_AsyncAgentServiceServicer_to_server(Flyte1(), server)
    agent_pb2_grpc.add_AgentMetadataServiceServicer_to_server(Flyte1(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        endpoint = f"127.0.0.1:{port}"
        cfg = ConnectorConfig.model_validate(
            {
                "connectors": {"one": {"endpoint": endpoint, "insecure": True, "protocol": "flyteidl2"}},
                "connectorForTaskTypes": {"t": "one"},
            }
        )
        async with ConnectorPlugin(cfg, clock=FakeClock()) as plugin:
            with pytest.raises(PluginError) as e:
                await plugin.create(make_tctx(template("t")))
    finally:
        await server.stop(grace=None)
    assert e.value.message.endswith(
        f"(connector deployment [one] at [{endpoint}], protocol flyteidl2: it does not serve this call of "
        "flyteidl2's connector services; a Flyte 1 connector wants protocol: flyteidl)"
    )


async def test_an_unreachable_flyte2_deployment_says_which_deployment_and_protocol() -> None:
    endpoint = f"127.0.0.1:{free_port()}"
    cfg = ConnectorConfig.model_validate(
        {
            "connectors": {
                "gone": {
                    "endpoint": endpoint,
                    "insecure": True,
                    "protocol": "flyteidl2",
                    "defaultTimeout": "5s",
                }
            },
            "connectorForTaskTypes": {"t": "gone"},
        }
    )
    async with ConnectorPlugin(cfg, clock=FakeClock()) as plugin:
        with pytest.raises(PluginError) as e:
            await plugin.create(make_tctx(template("t")))
        with pytest.raises(PluginError) as logs:
            _ = [
                line
                async for line in plugin.task_log_lines(ConnectorResourceMeta("/o", b"j", TaskCategory("t")))
            ]
    where = f"(connector deployment [gone] at [{endpoint}], protocol flyteidl2: unreachable;"
    assert "code = Unavailable" in e.value.message and where in e.value.message
    assert logs.value.message.startswith(
        "failed to get task logs from connector with rpc error: code = Unavailable"
    )
    assert where in logs.value.message
