"""Example connectors for ``pyflyte serve connector --modules example_connectors``.

* ``scripted_job`` (async): create returns a job id; each GetTask moves the job one step along
  ``custom.script`` (names of ``TaskExecution.Phase``: QUEUED, RUNNING, SUCCEEDED, FAILED, ...). SUCCEEDED
  answers the output ``o0 = 42``. DeleteTask (an abort) leaves ``<job_id>.deleted`` in the state folder.
* ``echo_sync`` (sync, ExecuteTaskSync): answers at once with its inputs as outputs.

Job progress lives in files under ``$EXAMPLE_CONNECTOR_STATE`` (default: a folder in the temp directory),
so a restarted server keeps its jobs.
"""

from __future__ import annotations

import os
import tempfile
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

STATE = Path(
    os.environ.get("EXAMPLE_CONNECTOR_STATE", Path(tempfile.gettempdir()) / "taskplug-example-connector")
)
STATE.mkdir(parents=True, exist_ok=True)


@dataclass
class ScriptedMeta(ResourceMeta):
    """What taskplug stores and sends back on every GetTask / DeleteTask (as JSON bytes)."""

    job_id: str
    script: list[str] = field(default_factory=list)


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
        job_id = f"job-{uuid.uuid4().hex[:12]}"
        (STATE / job_id).write_text("0")
        script = (task_template.custom or {}).get("script", ["RUNNING", "SUCCEEDED"])
        return ScriptedMeta(job_id=job_id, script=list(script))

    def get(self, resource_meta: ScriptedMeta, **kwargs: Any) -> Resource:
        counter = STATE / resource_meta.job_id
        polls = int(counter.read_text()) + 1
        counter.write_text(str(polls))
        name = resource_meta.script[min(polls, len(resource_meta.script)) - 1]
        return Resource(
            phase=TaskExecution.Phase.Value(name),
            message=f"poll {polls} -> {name}",
            log_links=[TaskLogProto(uri=f"http://127.0.0.1/logs/{resource_meta.job_id}", name="Job Log")],
            outputs={"o0": 42} if name == "SUCCEEDED" else None,
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
