"""Test connectors loaded by the flytekit connector server (``--modules scripted_connectors``).

* ``scripted_job`` (async): each GetTask advances the job along ``custom.script`` (phase names of
  ``TaskExecution.Phase``, or ``RAISE`` to make ``get`` raise). SUCCEEDED carries ``{"o0": 42}`` unless
  ``custom.outputs`` is false. Create records what it received, delete leaves a marker file, both under
  ``$TASKPLUG_TEST_CONNECTOR_STATE``.
* ``echo_sync`` (sync): answers with its inputs as outputs.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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

STATE = Path(os.environ["TASKPLUG_TEST_CONNECTOR_STATE"])


@dataclass
class ScriptedMeta(ResourceMeta):
    job_id: str
    script: list[str] = field(default_factory=list)
    outputs: bool = True


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
        return ScriptedMeta(
            job_id=job_id,
            script=list(custom.get("script", ["RUNNING", "SUCCEEDED"])),
            outputs=bool(custom.get("outputs", True)),
        )

    def get(self, resource_meta: ScriptedMeta, **kwargs: Any) -> Resource:
        counter = STATE / resource_meta.job_id
        polls = int(counter.read_text()) + 1
        counter.write_text(str(polls))
        name = resource_meta.script[min(polls, len(resource_meta.script)) - 1]
        if name == "RAISE":
            raise RuntimeError(f"scripted failure at poll {polls}")
        succeeded = name == "SUCCEEDED"
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
