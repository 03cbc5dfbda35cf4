"""Test connectors loaded by the flytekit connector server (``--modules scripted_connectors``).

* ``scripted_job`` (async): each GetTask advances the job along ``custom.script`` (phase names of
  ``TaskExecution.Phase``, or ``RAISE`` to make ``get`` raise). SUCCEEDED carries ``{"o0": 42}`` unless
  ``custom.outputs`` is false. Create records what it received, delete leaves a marker file, both under
  ``$TASKPLUG_TEST_CONNECTOR_STATE``.

  ``custom.hold`` (a name): the job answers RUNNING, without moving along its script, until the file
  ``release/<hold>`` exists. ``custom.group`` (a name): while the job runs (from create until a terminal
  phase is answered, or delete), ``groups/<group>/running/<job_id>`` holds its hold name, and
  ``groups/<group>/max`` the most jobs of the group that ever ran at once. ``custom.fail_create``: create
  raises (the server answers INTERNAL).

  Logs: ``get_logs`` answers one body, lines ``<job_id> line <i>`` — which flytekit 1.16's server never sends:
  its GetTaskLogs, a server-streaming call, returns the answer instead of streaming it, and grpc drops it (the
  client sees an empty stream). Metrics (GetTaskMetrics): one result,
  ``{"metric": "polls", "data": {"job_id": …, "polls": n}}``.
* ``echo_sync`` (sync): answers with its inputs as outputs.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flyteidl.admin.agent_pb2 import (
    GetTaskLogsResponse,
    GetTaskLogsResponseBody,
    GetTaskMetricsResponse,
)
from flyteidl.core.execution_pb2 import TaskExecution
from flyteidl.core.execution_pb2 import TaskLog as TaskLogProto
from flytekit.extend.backend.base_connector import (
    AsyncConnectorBase,
    ConnectorRegistry,
    Resource,
    ResourceMeta,
    SyncConnectorBase,
)
from flytekit.models.literals import LiteralMap
from flytekit.models.task import TaskTemplate
from google.protobuf.struct_pb2 import Struct

STATE = Path(os.environ["TASKPLUG_TEST_CONNECTOR_STATE"])
TERMINAL = frozenset({"SUCCEEDED", "FAILED", "ABORTED", "RETRYABLE_FAILED"})
# The server runs sync connector methods on a thread pool: one lock keeps the running counts exact.
_GROUPS = threading.Lock()


def _started(group: str, job_id: str, hold: str) -> None:
    if not group:
        return
    folder = STATE / "groups" / group
    with _GROUPS:
        (folder / "running").mkdir(parents=True, exist_ok=True)
        (folder / "running" / job_id).write_text(hold)
        now = len(list((folder / "running").iterdir()))
        peak = folder / "max"
        if now > (int(peak.read_text()) if peak.exists() else 0):
            peak.write_text(str(now))


def _stopped(group: str, job_id: str) -> None:
    if group:
        with _GROUPS:
            (STATE / "groups" / group / "running" / job_id).unlink(missing_ok=True)


@dataclass
class ScriptedMeta(ResourceMeta):
    job_id: str
    script: list[str] = field(default_factory=list)
    outputs: bool = True
    hold: str = ""
    group: str = ""


class ScriptedConnector(AsyncConnectorBase):
    name = "Scripted Connector"

    def __init__(self) -> None:
        super().__init__(task_type_name="scripted_job", metadata_type=ScriptedMeta)

    def create(
        self,
        task_template: TaskTemplate,
        output_prefix: str,
        inputs: LiteralMap | None = None,
        task_execution_metadata: Any = None,
        **kwargs: Any,
    ) -> ScriptedMeta:
        custom = task_template.custom or {}
        if custom.get("fail_create"):
            raise RuntimeError("the scripted connector refuses this job")
        job_id = f"job-{uuid.uuid4().hex[:12]}"
        (STATE / job_id).write_text("0")
        received = {
            "output_prefix": output_prefix,
            "args": list(task_template.container.args) if task_template.container else None,
            "namespace": task_execution_metadata.namespace if task_execution_metadata else None,
            "labels": dict(task_execution_metadata.labels) if task_execution_metadata else None,
            "service_account": task_execution_metadata.k8s_service_account
            if task_execution_metadata
            else None,
        }
        (STATE / f"{job_id}.request.json").write_text(json.dumps(received))
        meta = ScriptedMeta(
            job_id=job_id,
            script=list(custom.get("script", ["RUNNING", "SUCCEEDED"])),
            outputs=bool(custom.get("outputs", True)),
            hold=str(custom.get("hold", "")),
            group=str(custom.get("group", "")),
        )
        _started(meta.group, job_id, meta.hold)
        return meta

    def get(self, resource_meta: ScriptedMeta, **kwargs: Any) -> Resource:
        if resource_meta.hold and not (STATE / "release" / resource_meta.hold).exists():
            return Resource(
                phase=TaskExecution.RUNNING, message=f"held until {resource_meta.hold} is released"
            )
        counter = STATE / resource_meta.job_id
        polls = int(counter.read_text()) + 1
        counter.write_text(str(polls))
        name = resource_meta.script[min(polls, len(resource_meta.script)) - 1]
        if name == "RAISE":
            raise RuntimeError(f"scripted failure at poll {polls}")
        succeeded = name == "SUCCEEDED"
        if name in TERMINAL:
            _stopped(resource_meta.group, resource_meta.job_id)
        return Resource(
            phase=TaskExecution.Phase.Value(name),
            message=f"poll {polls} -> {name}",
            log_links=[
                TaskLogProto(uri=f"http://127.0.0.1/logs/{resource_meta.job_id}", name="Scripted Log")
            ],
            outputs={"o0": 42} if succeeded and resource_meta.outputs else None,
            custom_info={"job_id": resource_meta.job_id, "poll": polls},
        )

    def delete(self, resource_meta: ScriptedMeta, **kwargs: Any) -> None:
        (STATE / f"{resource_meta.job_id}.deleted").touch()
        _stopped(resource_meta.group, resource_meta.job_id)

    def get_metrics(self, resource_meta: ScriptedMeta, **kwargs: Any) -> GetTaskMetricsResponse:
        from flyteidl.core.metrics_pb2 import ExecutionMetricResult

        data = Struct()
        data.update(
            {"job_id": resource_meta.job_id, "polls": int((STATE / resource_meta.job_id).read_text())}
        )
        return GetTaskMetricsResponse(results=[ExecutionMetricResult(metric="polls", data=data)])

    def get_logs(self, resource_meta: ScriptedMeta, **kwargs: Any) -> GetTaskLogsResponse:
        return GetTaskLogsResponse(
            body=GetTaskLogsResponseBody(results=[f"{resource_meta.job_id} line {i}" for i in range(3)])
        )


class EchoSyncConnector(SyncConnectorBase):
    name = "Echo Sync Connector"

    def __init__(self) -> None:
        super().__init__(task_type_name="echo_sync")

    def do(
        self, task_template: TaskTemplate, output_prefix: str, inputs: LiteralMap | None = None, **kwargs: Any
    ) -> Resource:
        return Resource(
            phase=TaskExecution.SUCCEEDED, outputs=inputs or LiteralMap(literals={}), message="echoed"
        )


ConnectorRegistry.register(ScriptedConnector())
ConnectorRegistry.register(EchoSyncConnector())
