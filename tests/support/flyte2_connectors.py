"""Test connectors for Flyte 2's connector server (the ``flyte`` SDK's ``c0``, ``--modules flyte2_connectors``).

Loaded in the Flyte 2 environment (``support.flyte2_env``), never by taskplug's tests themselves.

* ``scripted_job2`` (async): each GetTask advances the job along ``custom.script`` (names of
  ``TaskExecution.Phase``); SUCCEEDED carries ``{"o0": 42}`` unless ``custom.outputs`` is false;
  ``custom.fail_create`` makes create raise. ``custom.hold`` (a name): the job answers RUNNING, without
  moving along its script, until the file ``release/<hold>`` exists; while it runs, ``running/<job_id>``
  exists. Create records what it received (``<job_id>.request.json``: inputs, output prefix, and the
  connection's keyword arguments); every GetTask and DeleteTask appends its keyword arguments to
  ``<job_id>.calls.jsonl``; DeleteTask leaves ``<job_id>.deleted``. All under ``$TASKPLUG_TEST_CONNECTOR_STATE``.
* Logs: three pages (tokens ``""`` → ``p2`` → ``p3``), each two bodies of structured lines
  ``<job_id> page <n> line <i>`` then a header with the next page's token (none on the last page), as the
  SDK's own example connector pages them.
* Metrics: one result, ``{"metric": "polls", "data": {"job_id": …, "polls": n}}``.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flyte.connectors import AsyncConnector, ConnectorRegistry, Resource, ResourceMeta
from flyteidl2.connector.connector_pb2 import (
    GetTaskLogsResponse,
    GetTaskLogsResponseBody,
    GetTaskLogsResponseHeader,
    GetTaskMetricsResponse,
)
from flyteidl2.core.execution_pb2 import TaskExecution, TaskLog
from flyteidl2.core.metrics_pb2 import ExecutionMetricResult
from flyteidl2.logs.dataplane.payload_pb2 import LogLine
from google.protobuf import json_format
from google.protobuf.struct_pb2 import Struct

STATE = Path(os.environ["TASKPLUG_TEST_CONNECTOR_STATE"])
TERMINAL = frozenset({"SUCCEEDED", "FAILED", "ABORTED", "RETRYABLE_FAILED"})
PAGES = {"": ("p2", 1), "p2": ("p3", 2), "p3": ("", 3)}


@dataclass
class ScriptedMeta(ResourceMeta):
    job_id: str = ""
    script: list[str] = field(default_factory=list)
    outputs: bool = True
    hold: str = ""


def _record(job_id: str, call: str, kwargs: dict[str, Any]) -> None:
    with (STATE / f"{job_id}.calls.jsonl").open("a") as out:
        out.write(json.dumps({"call": call, "kwargs": {k: str(v) for k, v in kwargs.items()}}) + "\n")


class ScriptedConnector(AsyncConnector[ScriptedMeta]):
    name = "Scripted Flyte 2 Connector"
    task_type_name = "scripted_job2"
    metadata_type = ScriptedMeta

    async def create(
        self,
        task_template: Any,
        output_prefix: str,
        inputs: dict[str, Any] | None = None,
        task_execution_metadata: Any = None,
        **kwargs: Any,
    ) -> ScriptedMeta:
        custom = json_format.MessageToDict(task_template.custom) if task_template.HasField("custom") else {}
        if custom.get("fail_create"):
            raise RuntimeError("the scripted connector refuses this job")
        job_id = f"job-{uuid.uuid4().hex[:12]}"
        (STATE / job_id).write_text("0")
        received = {
            "inputs": {k: v for k, v in (inputs or {}).items()},
            "output_prefix": output_prefix,
            "namespace": task_execution_metadata.namespace if task_execution_metadata else None,
            "connection": {k: str(v) for k, v in kwargs.items()},
        }
        (STATE / f"{job_id}.request.json").write_text(json.dumps(received))
        meta = ScriptedMeta(
            job_id=job_id,
            script=[str(s) for s in custom.get("script", ["RUNNING", "SUCCEEDED"])],
            outputs=bool(custom.get("outputs", True)),
            hold=str(custom.get("hold", "")),
        )
        (STATE / "running").mkdir(exist_ok=True)
        (STATE / "running" / job_id).write_text(meta.hold)
        return meta

    async def get(self, resource_meta: ScriptedMeta, **kwargs: Any) -> Resource:
        _record(resource_meta.job_id, "get", kwargs)
        if resource_meta.hold and not (STATE / "release" / resource_meta.hold).exists():
            return Resource(
                phase=TaskExecution.RUNNING, message=f"held until {resource_meta.hold} is released"
            )
        counter = STATE / resource_meta.job_id
        polls = int(counter.read_text()) + 1
        counter.write_text(str(polls))
        name = resource_meta.script[min(polls, len(resource_meta.script)) - 1]
        if name in TERMINAL:
            (STATE / "running" / resource_meta.job_id).unlink(missing_ok=True)
        succeeded = name == "SUCCEEDED"
        return Resource(
            phase=TaskExecution.Phase.Value(name),
            message=f"poll {polls} -> {name}",
            log_links=[TaskLog(uri=f"http://127.0.0.1/logs/{resource_meta.job_id}", name="Scripted Log")],
            outputs={"o0": 42} if succeeded and resource_meta.outputs else None,
            custom_info={"job_id": resource_meta.job_id, "poll": polls},
        )

    async def delete(self, resource_meta: ScriptedMeta, **kwargs: Any) -> None:
        _record(resource_meta.job_id, "delete", kwargs)
        (STATE / f"{resource_meta.job_id}.deleted").touch()
        (STATE / "running" / resource_meta.job_id).unlink(missing_ok=True)

    async def get_metrics(self, resource_meta: ScriptedMeta, **kwargs: Any) -> GetTaskMetricsResponse:
        counter = STATE / resource_meta.job_id
        data = Struct()
        data.update({"job_id": resource_meta.job_id, "polls": int(counter.read_text())})
        return GetTaskMetricsResponse(results=[ExecutionMetricResult(metric="polls", data=data)])

    async def get_logs(  # type: ignore[override]
        self, resource_meta: ScriptedMeta, **kwargs: Any
    ) -> AsyncIterator[GetTaskLogsResponse]:
        next_token, page = PAGES[str(kwargs.get("token", ""))]
        for first in (0, 2):
            lines = [
                LogLine(message=f"{resource_meta.job_id} page {page} line {i}") for i in (first, first + 1)
            ]
            yield GetTaskLogsResponse(body=GetTaskLogsResponseBody(lines=lines))
        yield GetTaskLogsResponse(header=GetTaskLogsResponseHeader(token=next_token))


ConnectorRegistry.register(ScriptedConnector())
