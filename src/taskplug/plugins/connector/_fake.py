"""An in-memory :class:`ConnectorClient` for tests: scripted answers, recorded requests, no I/O."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from flyteidl.admin import agent_pb2

from taskplug.plugins.connector._client import Connection, ConnectorRpcError
from taskplug.plugins.connector._config import Deployment

__all__ = ["FakeConnectorClient", "RecordedCall"]

Answer = Any  # a response message, a ConnectorRpcError to raise, or a callable(request) -> either


@dataclass(frozen=True, slots=True)
class RecordedCall:
    operation: str
    endpoint: str
    request: Any
    deadline: float | None
    connection: Connection | None = None


@dataclass
class FakeConnectorClient:
    """Answers per endpoint and operation; ``agents[endpoint]`` is what ListAgents returns there (a
    ConnectorRpcError to fail it). Unscripted calls fail with ``Unavailable``, like an unreachable endpoint.
    """

    agents: dict[str, Sequence[agent_pb2.Agent] | ConnectorRpcError] = field(default_factory=dict)
    answers: dict[tuple[str, str], Answer] = field(default_factory=dict)
    calls: list[RecordedCall] = field(default_factory=list)
    closed: bool = False

    def answer(self, endpoint: str, operation: str, response: Answer) -> None:
        self.answers[(endpoint, operation)] = response

    def calls_to(self, operation: str) -> list[RecordedCall]:
        return [c for c in self.calls if c.operation == operation]

    def _reply(
        self,
        operation: str,
        deployment: Deployment,
        request: Any,
        deadline: float | None,
        connection: Connection | None = None,
    ) -> Any:
        self.calls.append(RecordedCall(operation, deployment.endpoint, request, deadline, connection))
        answer = self.answers.get((deployment.endpoint, operation))
        if answer is None:
            raise ConnectorRpcError(
                "Unavailable", f"no fake answer for {operation} at [{deployment.endpoint}]"
            )
        if callable(answer):
            answer = answer(request)
        if isinstance(answer, ConnectorRpcError):
            raise answer
        return answer

    async def list_agents(
        self, deployment: Deployment, deadline: float | None
    ) -> agent_pb2.ListAgentsResponse:
        self.calls.append(RecordedCall("ListAgents", deployment.endpoint, None, deadline))
        agents = self.agents.get(deployment.endpoint)
        if agents is None:
            raise ConnectorRpcError("Unavailable", f"nothing listens at [{deployment.endpoint}]")
        if isinstance(agents, ConnectorRpcError):
            raise agents
        return agent_pb2.ListAgentsResponse(agents=list(agents))

    async def create_task(
        self,
        deployment: Deployment,
        request: agent_pb2.CreateTaskRequest,
        deadline: float | None,
        *,
        connection: Connection | None = None,
    ) -> agent_pb2.CreateTaskResponse:
        response: agent_pb2.CreateTaskResponse = self._reply(
            "CreateTask", deployment, request, deadline, connection
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
        response: agent_pb2.GetTaskResponse = self._reply(
            "GetTask", deployment, request, deadline, connection
        )
        return response

    async def delete_task(
        self,
        deployment: Deployment,
        request: agent_pb2.DeleteTaskRequest,
        deadline: float | None,
        *,
        connection: Connection | None = None,
    ) -> agent_pb2.DeleteTaskResponse:
        response: agent_pb2.DeleteTaskResponse = self._reply(
            "DeleteTask", deployment, request, deadline, connection
        )
        return response

    async def get_task_metrics(
        self, deployment: Deployment, request: agent_pb2.GetTaskMetricsRequest, deadline: float | None
    ) -> agent_pb2.GetTaskMetricsResponse:
        response: agent_pb2.GetTaskMetricsResponse = self._reply(
            "GetTaskMetrics", deployment, request, deadline
        )
        return response

    async def get_task_logs(
        self, deployment: Deployment, request: agent_pb2.GetTaskLogsRequest, deadline: float | None
    ) -> AsyncIterator[agent_pb2.GetTaskLogsResponse]:
        """Answer: a list of responses (one call's stream) or a ConnectorRpcError, or a callable giving one."""
        for message in self._reply("GetTaskLogs", deployment, request, deadline):
            yield message

    async def execute_task_sync(
        self,
        deployment: Deployment,
        header: agent_pb2.CreateRequestHeader,
        inputs: agent_pb2.ExecuteTaskSyncRequest,
        deadline: float | None,
    ) -> agent_pb2.ExecuteTaskSyncResponse:
        response: agent_pb2.ExecuteTaskSyncResponse = self._reply(
            "ExecuteTaskSync", deployment, (header, inputs), deadline
        )
        return response

    async def close(self) -> None:
        self.closed = True
