"""The plugin over real gRPC: scripted in-process servicers on 127.0.0.1 (Flyte's mock-gRPC cases)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import grpc
import grpc.aio
import pytest
from connector_helpers import container_template, int_literals, int_outputs, make_tctx
from flyteidl.admin import agent_pb2
from flyteidl.core import execution_pb2, tasks_pb2
from flyteidl.service import agent_pb2_grpc
from google.protobuf import json_format, struct_pb2

from support.net import free_port
from taskplug.core import FakeClock, LiteralMapOutputReader, Phase, PluginError
from taskplug.plugins.connector import (
    DEFAULT_SERVICE_CONFIG,
    ConnectorConfig,
    ConnectorPlugin,
    Deployment,
    GrpcConnectorClient,
    dial,
)
from taskplug.webapi import DeleteContext, GetContext, StatusContext

P = execution_pb2.TaskExecution.Phase


@dataclass
class ScriptedConnectorService(
    agent_pb2_grpc.AsyncAgentServiceServicer,
    agent_pb2_grpc.SyncAgentServiceServicer,
    agent_pb2_grpc.AgentMetadataServiceServicer,
):
    agents: list[agent_pb2.Agent] = field(default_factory=list)
    get_phase: int = P.SUCCEEDED
    sync_resource: agent_pb2.Resource = field(default_factory=agent_pb2.Resource)
    hang: asyncio.Event = field(default_factory=asyncio.Event)
    hang_create: bool = False
    received: list[Any] = field(default_factory=list)

    async def ListAgents(self, request: Any, context: Any) -> agent_pb2.ListAgentsResponse:
        return agent_pb2.ListAgentsResponse(agents=self.agents)

    async def CreateTask(
        self, request: agent_pb2.CreateTaskRequest, context: Any
    ) -> agent_pb2.CreateTaskResponse:
        self.received.append(request)
        if self.hang_create:
            await self.hang.wait()
        return agent_pb2.CreateTaskResponse(resource_meta=bytes([1, 2, 3, 4]))

    async def GetTask(self, request: agent_pb2.GetTaskRequest, context: Any) -> agent_pb2.GetTaskResponse:
        self.received.append(request)
        return agent_pb2.GetTaskResponse(resource=agent_pb2.Resource(phase=self.get_phase))

    async def DeleteTask(
        self, request: agent_pb2.DeleteTaskRequest, context: Any
    ) -> agent_pb2.DeleteTaskResponse:
        self.received.append(request)
        return agent_pb2.DeleteTaskResponse()

    async def GetTaskLogs(
        self, request: agent_pb2.GetTaskLogsRequest, context: Any
    ) -> AsyncIterator[agent_pb2.GetTaskLogsResponse]:
        # Two pages, each its header (the next page's token) then a body.
        self.received.append(request)
        next_token = {"": "2", "2": ""}[request.token]
        yield agent_pb2.GetTaskLogsResponse(header=agent_pb2.GetTaskLogsResponseHeader(token=next_token))
        page = "1" if request.token == "" else "2"
        yield agent_pb2.GetTaskLogsResponse(
            body=agent_pb2.GetTaskLogsResponseBody(results=[f"page {page} a", f"page {page} b"])
        )

    async def ExecuteTaskSync(
        self, request_iterator: AsyncIterator[agent_pb2.ExecuteTaskSyncRequest], context: Any
    ) -> AsyncIterator[agent_pb2.ExecuteTaskSyncResponse]:
        parts = [part async for part in request_iterator]
        self.received.append(parts)
        yield agent_pb2.ExecuteTaskSyncResponse(
            header=agent_pb2.ExecuteTaskSyncResponseHeader(resource=self.sync_resource)
        )


@dataclass
class Server:
    endpoint: str
    service: ScriptedConnectorService


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    service = ScriptedConnectorService()
    srv = grpc.aio.server()
    agent_pb2_grpc.add_AsyncAgentServiceServicer_to_server(service, srv)
    agent_pb2_grpc.add_SyncAgentServiceServicer_to_server(service, srv)
    agent_pb2_grpc.add_AgentMetadataServiceServicer_to_server(service, srv)
    port = srv.add_insecure_port("127.0.0.1:0")
    await srv.start()
    try:
        yield Server(f"127.0.0.1:{port}", service)
    finally:
        service.hang.set()
        await srv.stop(grace=None)


def config_for(endpoint: str, **default: object) -> ConnectorConfig:
    return ConnectorConfig.model_validate({"defaultConnector": {"endpoint": endpoint, **default}})


# Flyte's connector integration_test.go TestEndToEnd: "run an async task".
async def test_async_task_over_grpc_creates_with_rendered_args_and_succeeds_twice(server: Server) -> None:
    async with ConnectorPlugin(config_for(server.endpoint), clock=FakeClock()) as plugin:
        for _ in range(2):
            tctx = make_tctx(container_template())
            meta, resource = await plugin.create(tctx)
            assert resource is None
            observed = await plugin.get(GetContext(json.loads(json.dumps(meta))))
            assert (await plugin.status(StatusContext(tctx, meta, observed))).phase is Phase.SUCCESS
            await plugin.delete(DeleteContext(meta))
    create, get, delete = server.service.received[:3]
    assert list(create.template.container.args) == ["pyflyte-fast-execute", "--output-prefix", "/tmp/123"]
    assert get.resource_meta == bytes([1, 2, 3, 4])
    assert delete.resource_meta == bytes([1, 2, 3, 4])


# Flyte's connector integration_test.go TestEndToEnd: "run a sync task".
async def test_sync_task_over_grpc_streams_header_then_inputs_and_returns_outputs(server: Server) -> None:
    server.service.agents = [
        agent_pb2.Agent(
            name="OpenAI", is_sync=True, supported_task_categories=[agent_pb2.TaskCategory(name="openai")]
        )
    ]
    server.service.sync_resource = agent_pb2.Resource(phase=P.SUCCEEDED, outputs=int_literals(x=1))
    async with ConnectorPlugin(config_for(server.endpoint), clock=FakeClock()) as plugin:
        template = container_template("openai")
        template.interface.CopyFrom(int_outputs("x"))
        tctx = make_tctx(template, int_literals(y=5))
        meta, resource = await plugin.create(tctx)
        info = await plugin.status(StatusContext(tctx, meta, resource))
    assert info.phase is Phase.SUCCESS
    reader = tctx.output_writer.reader
    assert isinstance(reader, LiteralMapOutputReader)
    assert await reader.read() == int_literals(x=1)
    [parts] = server.service.received
    assert [p.WhichOneof("part") for p in parts] == ["header", "inputs"]
    assert parts[0].header.template.type == "openai"
    assert parts[1].inputs == int_literals(y=5)


# Flyte's connector integration_test.go TestEndToEnd: "run a k8s_pod task with rendered template args".
async def test_k8s_pod_task_over_grpc_sends_a_rendered_pod_spec(server: Server) -> None:
    spec = struct_pb2.Struct()
    spec.update({"containers": [{"name": "primary", "args": ["--out", "{{.outputPrefix}}", "{{.input}}"]}]})
    template = tasks_pb2.TaskTemplate(type="k8s_pod_task", k8s_pod=tasks_pb2.K8sPod(pod_spec=spec))
    async with ConnectorPlugin(config_for(server.endpoint), clock=FakeClock()) as plugin:
        tctx = make_tctx(template)
        meta, _ = await plugin.create(tctx)
        info = await plugin.status(StatusContext(tctx, meta, await plugin.get(GetContext(meta))))
    assert info.phase is Phase.SUCCESS
    sent = json_format.MessageToDict(server.service.received[0].template.k8s_pod.pod_spec)
    assert sent["containers"][0]["args"] == ["--out", "/tmp/123", "/in/inputs.pb"]


# Flyte's connector integration_test.go TestEndToEnd: "failed to create a job", over a real (refused)
# connection.
async def test_create_against_a_closed_port_fails_with_unavailable() -> None:
    async with ConnectorPlugin(config_for(f"127.0.0.1:{free_port()}"), clock=FakeClock()) as plugin:
        with pytest.raises(PluginError) as e:
            await plugin.create(make_tctx(container_template()))
        await plugin.delete(DeleteContext(None))
    assert e.value.message.startswith(
        "failed to create task from connector with rpc error: code = Unavailable"
    )


async def test_an_empty_default_endpoint_fails_create_with_a_clear_error() -> None:
    async with ConnectorPlugin(ConnectorConfig(), clock=FakeClock()) as plugin:
        with pytest.raises(PluginError, match="no connector endpoint configured"):
            await plugin.create(make_tctx(container_template()))


async def test_a_missed_deadline_is_a_deadline_exceeded_error(server: Server) -> None:
    server.service.hang_create = True
    cfg = config_for(server.endpoint, timeouts={"CreateTask": "1ms"})
    async with ConnectorPlugin(cfg, clock=FakeClock()) as plugin:
        with pytest.raises(PluginError, match="code = DeadlineExceeded"):
            await plugin.create(make_tctx(container_template()))


# Flyte's connector client_test.go TestInitializeClients.
async def test_one_channel_per_endpoint_and_all_closed_on_stop(server: Server) -> None:
    other = grpc.aio.server()
    agent_pb2_grpc.add_AgentMetadataServiceServicer_to_server(ScriptedConnectorService(), other)
    other_port = other.add_insecure_port("127.0.0.1:0")
    await other.start()
    try:
        client = GrpcConnectorClient()
        cfg = ConnectorConfig.model_validate(
            {
                "defaultConnector": {"endpoint": server.endpoint},
                "connectors": {
                    "x": {"endpoint": server.endpoint, "insecure": True},
                    "y": {"endpoint": f"127.0.0.1:{other_port}", "insecure": True},
                },
            }
        )
        plugin = ConnectorPlugin(cfg, client=client, clock=FakeClock())
        await plugin.start()
        assert sorted(client.endpoints) == sorted([server.endpoint, f"127.0.0.1:{other_port}"])
        await plugin.stop()
        assert client.endpoints == ()
    finally:
        await other.stop(grace=None)


async def test_discovery_skips_a_server_without_the_metadata_service() -> None:
    bare = grpc.aio.server()
    agent_pb2_grpc.add_AsyncAgentServiceServicer_to_server(ScriptedConnectorService(), bare)
    port = bare.add_insecure_port("127.0.0.1:0")
    await bare.start()
    try:
        async with ConnectorPlugin(config_for(f"127.0.0.1:{port}"), clock=FakeClock()) as plugin:
            assert plugin.task_types == {"task_type_3", "task_type_4"}
    finally:
        await bare.stop(grace=None)


@pytest.fixture
def captured_channels(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any, Any]]:
    calls: list[tuple[str, Any, Any]] = []

    def secure(target: str, credentials: Any, options: Any = None) -> str:
        calls.append(("secure", target, (credentials, options)))
        return "secure-channel"

    def insecure(target: str, options: Any = None) -> str:
        calls.append(("insecure", target, options))
        return "insecure-channel"

    monkeypatch.setattr(grpc.aio, "secure_channel", secure)
    monkeypatch.setattr(grpc.aio, "insecure_channel", insecure)
    return calls


def test_a_secure_deployment_dials_tls_with_the_system_roots_and_its_service_config(
    captured_channels: list[tuple[str, Any, Any]],
) -> None:
    dial(Deployment(endpoint="c:443", insecure=False, default_service_config=DEFAULT_SERVICE_CONFIG))
    [(kind, target, (credentials, options))] = captured_channels
    assert (kind, target) == ("secure", "c:443")
    assert isinstance(credentials, grpc.ChannelCredentials)
    assert options == [("grpc.service_config", DEFAULT_SERVICE_CONFIG)]


def test_an_insecure_deployment_without_service_config_dials_plaintext_without_options(
    captured_channels: list[tuple[str, Any, Any]],
) -> None:
    dial(Deployment(endpoint="c:80", insecure=True))
    assert captured_channels == [("insecure", "c:80", [])]


async def test_a_jobs_logs_stream_page_after_page_over_grpc(server: Server) -> None:
    meta = {"outputPrefix": "/o", "connectorResourceMeta": "AQID", "taskCategory": {"name": "t"}}
    async with ConnectorPlugin(config_for(server.endpoint), clock=FakeClock()) as plugin:
        lines = [line async for line in plugin.task_log_lines(meta)]
    assert lines == ["page 1 a", "page 1 b", "page 2 a", "page 2 b"]
    tokens = [r.token for r in server.service.received if isinstance(r, agent_pb2.GetTaskLogsRequest)]
    assert tokens == ["", "2"]
