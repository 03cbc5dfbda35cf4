"""Calls to connector deployments over gRPC: one channel per endpoint, deadlines per operation.

Follows flyteplugins/go/tasks/plugins/webapi/connector/client.go (Flyte 1 on ``master``, Flyte 2 on ``main``).
:class:`ConnectorClient` is the seam the plugin talks through; :class:`GrpcConnectorClient` speaks, per
deployment, flyteidl's ``AsyncAgentService``, ``SyncAgentService`` and ``AgentMetadataService`` (``protocol:
flyteidl``, Flyte 1) or flyteidl2's ``AsyncConnectorService`` and ``ConnectorMetadataService`` (``protocol:
flyteidl2``, Flyte 2) with grpc.aio; ``FakeConnectorClient`` (``_fake.py``) answers from memory for tests.
Every failure leaves this module as a :class:`ConnectorRpcError`.

The plugin builds Flyte 1 messages for both protocols. Flyte 2's messages have the same field numbers and wire
types (a ``LiteralMap``'s map entries and flyteidl2's repeated ``NamedLiteral`` are the same bytes; the
``Connector`` of ``ListConnectors`` is an ``Agent`` without ``supported_task_types`` and ``is_sync``), plus a
``connection`` field on create, get and delete: a flyteidl2 call re-encodes the Flyte 1 request as its
flyteidl2 message (fields Flyte 2 dropped, the deprecated ``task_type``, cleared), adds the connection, and
reads the answer back the same way. Fields only one side knows travel as unknown fields, untouched.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, Protocol

from flyteidl.admin import agent_pb2
from flyteidl2.core import security_pb2

from taskplug.core import ErrorCode, PluginError
from taskplug.plugins.connector._config import FLYTEIDL2, Deployment

if TYPE_CHECKING:
    # gRPC and the services' stubs load when a channel is dialled: every `taskplug run` loads this plugin
    # (it is enabled by default), and most never call a connector.
    import grpc
    import grpc.aio

__all__ = [
    "ChannelFactory",
    "Connection",
    "ConnectorClient",
    "ConnectorRpcError",
    "GrpcConnectorClient",
    "SyncStage",
    "dial",
    "go_status_name",
]

SyncStage = Literal["open", "send", "receive"]

# Go's codes.Code.String() names, which Flyte's error messages carry ("rpc error: code = NotFound desc = …"),
# by the name of grpc.StatusCode.
_GO_NAMES = {"CANCELLED": "Canceled"}


def go_status_name(code: grpc.StatusCode) -> str:
    if code.name in _GO_NAMES:
        return _GO_NAMES[code.name]
    return "".join(part.capitalize() for part in code.name.split("_"))


class ConnectorRpcError(PluginError):
    """A call to a connector failed; ``status`` is the gRPC status in Go's spelling (``NotFound``)."""

    def __init__(self, status: str, details: str, *, stage: SyncStage = "open") -> None:
        super().__init__(ErrorCode.DOWNSTREAM_SYSTEM_ERROR, f"rpc error: code = {status} desc = {details}")
        self.status = status
        self.details = details
        self.stage: SyncStage = stage

    def __str__(self) -> str:
        return self.message

    @classmethod
    def from_grpc(cls, error: grpc.aio.AioRpcError, *, stage: SyncStage = "open") -> ConnectorRpcError:
        return cls(go_status_name(error.code()), error.details() or "", stage=stage)


@dataclass(frozen=True, slots=True)
class Connection:
    """Flyte 2's ``flyteidl2.core.Connection``: what a connector needs to reach the service it drives, sent
    with every create, get and delete of a ``flyteidl2`` deployment. ``secrets`` maps the connector's name for
    a credential to its value, ``configs`` to a plain setting; the connector receives both as keyword
    arguments. Flyte 1's protocol has no such field."""

    task_type: str = ""
    secrets: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    configs: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def to_proto(self) -> security_pb2.Connection:
        return security_pb2.Connection(
            task_type=self.task_type, secrets=dict(self.secrets), configs=dict(self.configs)
        )


class ConnectorClient(Protocol):
    """The connector calls the plugin makes; ``deadline`` is seconds from now, None for none.
    ``connection`` reaches a ``flyteidl2`` deployment only (Flyte 1's messages have no field for it)."""

    async def list_agents(
        self, deployment: Deployment, deadline: float | None
    ) -> agent_pb2.ListAgentsResponse: ...

    async def create_task(
        self,
        deployment: Deployment,
        request: agent_pb2.CreateTaskRequest,
        deadline: float | None,
        *,
        connection: Connection | None = None,
    ) -> agent_pb2.CreateTaskResponse: ...

    async def get_task(
        self,
        deployment: Deployment,
        request: agent_pb2.GetTaskRequest,
        deadline: float | None,
        *,
        connection: Connection | None = None,
    ) -> agent_pb2.GetTaskResponse: ...

    async def delete_task(
        self,
        deployment: Deployment,
        request: agent_pb2.DeleteTaskRequest,
        deadline: float | None,
        *,
        connection: Connection | None = None,
    ) -> agent_pb2.DeleteTaskResponse: ...

    async def get_task_metrics(
        self, deployment: Deployment, request: agent_pb2.GetTaskMetricsRequest, deadline: float | None
    ) -> agent_pb2.GetTaskMetricsResponse: ...

    def get_task_logs(
        self, deployment: Deployment, request: agent_pb2.GetTaskLogsRequest, deadline: float | None
    ) -> AsyncIterator[agent_pb2.GetTaskLogsResponse]:
        """The messages of one GetTaskLogs call (a server stream), in the order the connector sent them."""
        ...

    async def execute_task_sync(
        self,
        deployment: Deployment,
        header: agent_pb2.CreateRequestHeader,
        inputs: agent_pb2.ExecuteTaskSyncRequest,
        deadline: float | None,
    ) -> agent_pb2.ExecuteTaskSyncResponse:
        """Send the header then the inputs, close the send side, and return the first response."""
        ...

    async def close(self) -> None: ...


ChannelFactory = Callable[[Deployment], "grpc.aio.Channel"]


def dial(deployment: Deployment) -> grpc.aio.Channel:
    """Open a channel to ``deployment``: plaintext or TLS with the system roots, with its service config."""
    import grpc.aio

    if not deployment.endpoint:
        # Deviation: Flyte dials the empty target and fails with a resolver error; say what is missing.
        raise ConnectorRpcError(
            "Unavailable", "no connector endpoint configured (set plugins.connector-service.defaultConnector)"
        )
    options: list[tuple[str, str | int]] = []
    if deployment.default_service_config:
        options.append(("grpc.service_config", deployment.default_service_config))
    if deployment.insecure:
        return grpc.aio.insecure_channel(deployment.endpoint, options=options)
    return grpc.aio.secure_channel(deployment.endpoint, grpc.ssl_channel_credentials(), options=options)


async def _unary(method: Callable[..., Awaitable[Any]], request: Any, deadline: float | None) -> Any:
    import grpc.aio

    try:
        return await method(request, timeout=deadline)
    except grpc.aio.AioRpcError as e:
        raise ConnectorRpcError.from_grpc(e) from e


async def _final_status(call: grpc.aio.StreamStreamCall, *, stage: SyncStage) -> ConnectorRpcError:
    import grpc

    code = await call.code()
    details = await call.details()
    status = "Unknown" if code == grpc.StatusCode.OK else go_status_name(code)
    return ConnectorRpcError(status, details or "stream closed without a response", stage=stage)


class _Stubs:
    __slots__ = ("async_service", "async_service2", "channel", "metadata", "metadata2", "sync_service")

    def __init__(self, channel: grpc.aio.Channel) -> None:
        from flyteidl.service import agent_pb2_grpc
        from flyteidl2.connector import service_pb2_grpc

        self.channel = channel
        self.async_service = agent_pb2_grpc.AsyncAgentServiceStub(channel)
        self.sync_service = agent_pb2_grpc.SyncAgentServiceStub(channel)
        self.metadata = agent_pb2_grpc.AgentMetadataServiceStub(channel)
        self.async_service2 = service_pb2_grpc.AsyncConnectorServiceStub(channel)
        self.metadata2 = service_pb2_grpc.ConnectorMetadataServiceStub(channel)


def _recode(message: Any, into: Callable[[], Any]) -> Any:
    """``message`` read as the other protocol's message of the same wire form (see the module docstring)."""
    out = into()
    out.MergeFromString(message.SerializeToString())
    return out


def _to_flyteidl2(request: Any, into: Callable[[], Any], connection: Connection | None) -> Any:
    out = _recode(request, into)
    if connection is not None:
        out.connection.CopyFrom(connection.to_proto())
    return out


def _for_flyteidl2(request: Any) -> Any:
    """A copy of a Flyte 1 request without ``task_type`` (field 1), which Flyte 2's messages no longer have."""
    copy = type(request)()
    copy.CopyFrom(request)
    copy.ClearField("task_type")
    return copy


class GrpcConnectorClient:
    """Connector calls over grpc.aio, one channel per endpoint, dialled on first use, closed by :meth:`close`.

    Deviation: Flyte's background discovery dials a fresh client set on every poll; here discovery and the
    task calls share the same channels, so a deployment costs one connection for the plugin's lifetime.
    """

    def __init__(self, channel_factory: ChannelFactory = dial) -> None:
        self._factory = channel_factory
        self._stubs: dict[str, _Stubs] = {}

    @property
    def endpoints(self) -> tuple[str, ...]:
        """Endpoints with an open channel."""
        return tuple(self._stubs)

    def _for(self, deployment: Deployment) -> _Stubs:
        stubs = self._stubs.get(deployment.endpoint)
        if stubs is None:
            try:
                channel = self._factory(deployment)
            except ConnectorRpcError:
                raise
            except Exception as e:
                raise ConnectorRpcError("Unavailable", f"cannot dial [{deployment.endpoint}]: {e}") from e
            stubs = self._stubs[deployment.endpoint] = _Stubs(channel)
        return stubs

    async def list_agents(
        self, deployment: Deployment, deadline: float | None
    ) -> agent_pb2.ListAgentsResponse:
        stubs = self._for(deployment)
        if deployment.protocol == FLYTEIDL2:
            from flyteidl2.connector import connector_pb2

            listed = await _unary(
                stubs.metadata2.ListConnectors, connector_pb2.ListConnectorsRequest(), deadline
            )
            return _recode(listed, agent_pb2.ListAgentsResponse)
        response: agent_pb2.ListAgentsResponse = await _unary(
            stubs.metadata.ListAgents, agent_pb2.ListAgentsRequest(), deadline
        )
        return response

    async def create_task(
        self,
        deployment: Deployment,
        request: agent_pb2.CreateTaskRequest,
        deadline: float | None,
        *,
        connection: Connection | None = None,
    ) -> agent_pb2.CreateTaskResponse:
        stubs = self._for(deployment)
        if deployment.protocol == FLYTEIDL2:
            from flyteidl2.connector import connector_pb2

            wire = _to_flyteidl2(request, connector_pb2.CreateTaskRequest, connection)
            return _recode(
                await _unary(stubs.async_service2.CreateTask, wire, deadline), agent_pb2.CreateTaskResponse
            )
        response: agent_pb2.CreateTaskResponse = await _unary(
            stubs.async_service.CreateTask, request, deadline
        )
        return response

    async def get_task(
        self,
        deployment: Deployment,
        request: agent_pb2.GetTaskRequest,
        deadline: float | None,
        *,
        connection: Connection | None = None,
    ) -> agent_pb2.GetTaskResponse:
        stubs = self._for(deployment)
        if deployment.protocol == FLYTEIDL2:
            from flyteidl2.connector import connector_pb2

            wire = _to_flyteidl2(_for_flyteidl2(request), connector_pb2.GetTaskRequest, connection)
            return _recode(
                await _unary(stubs.async_service2.GetTask, wire, deadline), agent_pb2.GetTaskResponse
            )
        response: agent_pb2.GetTaskResponse = await _unary(stubs.async_service.GetTask, request, deadline)
        return response

    async def delete_task(
        self,
        deployment: Deployment,
        request: agent_pb2.DeleteTaskRequest,
        deadline: float | None,
        *,
        connection: Connection | None = None,
    ) -> agent_pb2.DeleteTaskResponse:
        stubs = self._for(deployment)
        if deployment.protocol == FLYTEIDL2:
            from flyteidl2.connector import connector_pb2

            wire = _to_flyteidl2(_for_flyteidl2(request), connector_pb2.DeleteTaskRequest, connection)
            await _unary(stubs.async_service2.DeleteTask, wire, deadline)
            return agent_pb2.DeleteTaskResponse()
        response: agent_pb2.DeleteTaskResponse = await _unary(
            stubs.async_service.DeleteTask, request, deadline
        )
        return response

    async def get_task_metrics(
        self, deployment: Deployment, request: agent_pb2.GetTaskMetricsRequest, deadline: float | None
    ) -> agent_pb2.GetTaskMetricsResponse:
        stubs = self._for(deployment)
        if deployment.protocol == FLYTEIDL2:
            from flyteidl2.connector import connector_pb2

            wire = _to_flyteidl2(_for_flyteidl2(request), connector_pb2.GetTaskMetricsRequest, None)
            answer = await _unary(stubs.async_service2.GetTaskMetrics, wire, deadline)
            return _recode(answer, agent_pb2.GetTaskMetricsResponse)
        response: agent_pb2.GetTaskMetricsResponse = await _unary(
            stubs.async_service.GetTaskMetrics, request, deadline
        )
        return response

    async def get_task_logs(
        self, deployment: Deployment, request: agent_pb2.GetTaskLogsRequest, deadline: float | None
    ) -> AsyncIterator[agent_pb2.GetTaskLogsResponse]:
        import grpc.aio

        stubs = self._for(deployment)
        if deployment.protocol == FLYTEIDL2:
            from flyteidl2.connector import connector_pb2

            wire = _to_flyteidl2(_for_flyteidl2(request), connector_pb2.GetTaskLogsRequest, None)
            call = stubs.async_service2.GetTaskLogs(wire, timeout=deadline)
        else:
            call = stubs.async_service.GetTaskLogs(request, timeout=deadline)
        try:
            async for message in call:
                if isinstance(message, agent_pb2.GetTaskLogsResponse):
                    yield message
                else:
                    yield _recode(message, agent_pb2.GetTaskLogsResponse)
        except grpc.aio.AioRpcError as e:
            raise ConnectorRpcError.from_grpc(e) from e
        finally:
            if not call.done():
                call.cancel()

    async def execute_task_sync(
        self,
        deployment: Deployment,
        header: agent_pb2.CreateRequestHeader,
        inputs: agent_pb2.ExecuteTaskSyncRequest,
        deadline: float | None,
    ) -> agent_pb2.ExecuteTaskSyncResponse:
        if deployment.protocol == FLYTEIDL2:
            raise ConnectorRpcError(
                "Unimplemented", "Flyte 2's connector protocol (flyteidl2) has no synchronous service"
            )
        import grpc.aio

        stub = self._for(deployment).sync_service
        # The two messages go in as a request iterator: gRPC writes them and half-closes on its own, and
        # stops quietly when the server ends the call early (NOT_FOUND after reading the header). Writing
        # them by hand raced that ending: now and then the refused write surfaced as INTERNAL "Internal
        # error from Core" instead of the server's status.
        requests = [agent_pb2.ExecuteTaskSyncRequest(header=header), inputs]
        try:
            call = stub.ExecuteTaskSync(iter(requests), timeout=deadline)
        except grpc.aio.AioRpcError as e:
            raise ConnectorRpcError.from_grpc(e, stage="open") from e
        try:
            try:
                response = await call.read()
            except grpc.aio.AioRpcError as e:
                raise ConnectorRpcError.from_grpc(e, stage="receive") from e
            if response is grpc.aio.EOF:
                raise await _final_status(call, stage="receive")
            assert isinstance(response, agent_pb2.ExecuteTaskSyncResponse)
            return response
        finally:
            # Flyte reads exactly one message; anything the server still sends is dropped.
            if not call.done():
                call.cancel()

    async def close(self) -> None:
        stubs, self._stubs = self._stubs, {}
        for s in stubs.values():
            await s.channel.close()
