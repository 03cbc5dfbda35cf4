"""A Flyte 2 connector for the example: served by the ``flyte`` SDK's ``c0`` (``c0_loopback.py --modules
example_flyte2_connectors``), run by taskplug through a ``protocol: flyteidl2`` deployment.

``countdown`` (async): the job runs for ``custom.seconds`` and then succeeds with ``doubled = 2 * x``. It
needs a connection: the secret ``token`` (taskplug sends the value of ``FLYTE_SECRET_<name>``, the name the
task's ``custom.secrets.token`` gives) and the config ``greeting``; both arrive as keyword arguments. Its logs
come in two pages and its metrics say how long it ran.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from flyte.connectors import AsyncConnector, ConnectorRegistry, Resource, ResourceMeta
from flyteidl2.connector.connector_pb2 import (
    GetTaskLogsResponse,
    GetTaskLogsResponseBody,
    GetTaskLogsResponseHeader,
    GetTaskMetricsResponse,
)
from flyteidl2.core.execution_pb2 import TaskExecution
from flyteidl2.core.metrics_pb2 import ExecutionMetricResult
from flyteidl2.logs.dataplane.payload_pb2 import LogLine
from google.protobuf import json_format
from google.protobuf.struct_pb2 import Struct


@dataclass
class CountdownMeta(ResourceMeta):
    job_id: str = ""
    started: float = 0.0
    seconds: float = 3.0
    x: int = 0
    greeting: str = ""


class CountdownConnector(AsyncConnector[CountdownMeta]):
    name = "Countdown Connector"
    task_type_name = "countdown"
    metadata_type = CountdownMeta

    async def create(
        self,
        task_template: Any,
        output_prefix: str,
        inputs: dict[str, Any] | None = None,
        task_execution_metadata: Any = None,
        **kwargs: Any,
    ) -> CountdownMeta:
        if not kwargs.get("token"):
            raise ValueError("no token in the connection: set the secret the task names")
        custom = json_format.MessageToDict(task_template.custom) if task_template.HasField("custom") else {}
        return CountdownMeta(
            job_id=f"countdown-{uuid.uuid4().hex[:8]}",
            started=time.time(),
            seconds=float(custom.get("seconds", 3)),
            x=int((inputs or {}).get("x", 0)),
            greeting=str(kwargs.get("greeting", "")),
        )

    async def get(self, resource_meta: CountdownMeta, **kwargs: Any) -> Resource:
        left = resource_meta.seconds - (time.time() - resource_meta.started)
        if left > 0:
            return Resource(phase=TaskExecution.RUNNING, message=f"{left:.0f}s to go")
        return Resource(
            phase=TaskExecution.SUCCEEDED,
            message=f"{resource_meta.greeting}, done",
            outputs={"doubled": 2 * resource_meta.x},
        )

    async def delete(self, resource_meta: CountdownMeta, **kwargs: Any) -> None:
        pass  # nothing to stop: the countdown is only a clock reading

    async def get_metrics(self, resource_meta: CountdownMeta, **kwargs: Any) -> GetTaskMetricsResponse:
        data = Struct()
        data.update({"elapsed_seconds": round(time.time() - resource_meta.started, 1)})
        return GetTaskMetricsResponse(results=[ExecutionMetricResult(metric="elapsed", data=data)])

    async def get_logs(  # type: ignore[override]
        self, resource_meta: CountdownMeta, **kwargs: Any
    ) -> AsyncIterator[GetTaskLogsResponse]:
        token = str(kwargs.get("token", ""))
        text = (
            [f"{resource_meta.job_id}: counting down from {resource_meta.seconds:g}s"]
            if not token
            else [f"{resource_meta.job_id}: {2 * resource_meta.x} is ready"]
        )
        yield GetTaskLogsResponse(body=GetTaskLogsResponseBody(lines=[LogLine(message=t) for t in text]))
        yield GetTaskLogsResponse(header=GetTaskLogsResponseHeader(token="" if token else "page-2"))


ConnectorRegistry.register(CountdownConnector())
