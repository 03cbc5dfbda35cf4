"""Calls to connector deployments over gRPC: one channel per endpoint, deadlines per operation.

Follows flyteplugins/go/tasks/plugins/webapi/connector/client.go. :class:`ConnectorClient` is the seam the
plugin talks through; :class:`GrpcConnectorClient` speaks flyteidl's ``AsyncAgentService``,
``SyncAgentService`` and ``AgentMetadataService`` with grpc.aio; ``FakeConnectorClient`` (``_fake.py``)
answers from memory for tests. Every failure leaves this module as a :class:`ConnectorRpcError`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal, Protocol

import grpc
import grpc.aio
from flyteidl.admin import agent_pb2
from flyteidl.service import agent_pb2_grpc

from taskplug.core import ErrorCode, PluginError
from taskplug.plugins.connector._config import Deployment

__all__ = [
    "ChannelFactory",
    "ConnectorClient",
    "ConnectorRpcError",
    "GrpcConnectorClient",
    "SyncStage",
    "dial",
    "go_status_name",
]

SyncStage = Literal["open", "send", "receive"]

# Go's codes.Code.String() names, which Flyte's error messages carry ("rpc error: code = NotFound desc = …").
_GO_NAMES = {grpc.StatusCode.CANCELLED: "Canceled"}


def go_status_name(code: grpc.StatusCode) -> str:
    if code in _GO_NAMES:
        return _GO_NAMES[code]
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


class ConnectorClient(Protocol):
    """The connector calls the plugin makes; ``deadline`` is seconds from now, None for none."""

    async def list_agents(
        self, deployment: Deployment, deadline: float | None
    ) -> agent_pb2.ListAgentsResponse: ...

    async def create_task(
        self, deployment: Deployment, request: agent_pb2.CreateTaskRequest, deadline: float | None
    ) -> agent_pb2.CreateTaskResponse: ...

    async def get_task(
        self, deployment: Deployment, request: agent_pb2.GetTaskRequest, deadline: float | None
    ) -> agent_pb2.GetTaskResponse: ...

    async def delete_task(
        self, deployment: Deployment, request: agent_pb2.DeleteTaskRequest, deadline: float | None
    ) -> agent_pb2.DeleteTaskResponse: ...

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


ChannelFactory = Callable[[Deployment], grpc.aio.Channel]


def dial(deployment: Deployment) -> grpc.aio.Channel:
    """Open a channel to ``deployment``: plaintext or TLS with the system roots, with its service config."""
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
    try:
        return await method(request, timeout=deadline)
    except grpc.aio.AioRpcError as e:
        raise ConnectorRpcError.from_grpc(e) from e


async def _final_status(call: grpc.aio.StreamStreamCall, *, stage: SyncStage) -> ConnectorRpcError:
    code = await call.code()
    details = await call.details()
    status = "Unknown" if code == grpc.StatusCode.OK else go_status_name(code)
    return ConnectorRpcError(status, details or "stream closed without a response", stage=stage)


class _Stubs:
    __slots__ = ("async_service", "channel", "metadata", "sync_service")

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self.channel = channel
        self.async_service = agent_pb2_grpc.AsyncAgentServiceStub(channel)
        self.sync_service = agent_pb2_grpc.SyncAgentServiceStub(channel)
        self.metadata = agent_pb2_grpc.AgentMetadataServiceStub(channel)


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
        stub = self._for(deployment).metadata
        response: agent_pb2.ListAgentsResponse = await _unary(
            stub.ListAgents, agent_pb2.ListAgentsRequest(), deadline
        )
        return response

    async def create_task(
        self, deployment: Deployment, request: agent_pb2.CreateTaskRequest, deadline: float | None
    ) -> agent_pb2.CreateTaskResponse:
        stub = self._for(deployment).async_service
        response: agent_pb2.CreateTaskResponse = await _unary(stub.CreateTask, request, deadline)
        return response

    async def get_task(
        self, deployment: Deployment, request: agent_pb2.GetTaskRequest, deadline: float | None
    ) -> agent_pb2.GetTaskResponse:
        stub = self._for(deployment).async_service
        response: agent_pb2.GetTaskResponse = await _unary(stub.GetTask, request, deadline)
        return response

    async def delete_task(
        self, deployment: Deployment, request: agent_pb2.DeleteTaskRequest, deadline: float | None
    ) -> agent_pb2.DeleteTaskResponse:
        stub = self._for(deployment).async_service
        response: agent_pb2.DeleteTaskResponse = await _unary(stub.DeleteTask, request, deadline)
        return response

    async def execute_task_sync(
        self,
        deployment: Deployment,
        header: agent_pb2.CreateRequestHeader,
        inputs: agent_pb2.ExecuteTaskSyncRequest,
        deadline: float | None,
    ) -> agent_pb2.ExecuteTaskSyncResponse:
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
