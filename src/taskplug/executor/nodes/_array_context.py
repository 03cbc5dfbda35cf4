"""An ArrayNode element's task-execution context, as propeller builds a sub-node's:
flytepropeller/pkg/controller/nodes/array/{handler.go buildArrayNodeContext,
node_execution_context.go, execution_context.go} and nodes/task/taskexec_context.go.

Shared by the executor (``_arrayrun.py``, one context per element and round) and ``taskplug render`` /
``status`` of a map (element 0), which must not load the data store.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from flyteidl.core import identifier_pb2

from taskplug.core import (
    PluginStateHolder,
    ResourceManager,
    StaticInputReader,
    StaticOutputWriter,
    StaticTaskExecutionContext,
    StaticTaskReader,
    TaskExecutionID,
    TaskExecutionMetadata,
)
from taskplug.executor._paths import normalize_root
from taskplug.executor._spec import ExecutionSpec
from taskplug.executor.nodes._array_rules import (
    DEFAULT_GENERATED_NAME_MAX_LENGTH,
    delisted_template,
    element_generated_name,
    element_inputs,
    element_unique_id,
    index_env,
)
from taskplug.k8s import sanitize_label_value

__all__ = ["ElementContext", "array_paths", "element_parts", "element_task_context"]


@dataclass(slots=True)
class ElementContext:
    """The parts of an element attempt's context that do not change between rounds."""

    attempt: int
    metadata: TaskExecutionMetadata
    task_reader: StaticTaskReader
    input_reader: StaticInputReader
    output_prefix: str
    raw_output_prefix: str
    prev_checkpoint_prefix: str

    def context(
        self, state_version: int, state: Any, resource_manager: ResourceManager | None
    ) -> StaticTaskExecutionContext:
        """The context of one round: these parts, the round's plugin state, a fresh output writer."""
        return StaticTaskExecutionContext(
            metadata=self.metadata,
            task_reader=self.task_reader,
            input_reader=self.input_reader,
            output_writer=StaticOutputWriter(
                output_prefix=self.output_prefix,
                raw_output_prefix=self.raw_output_prefix,
                checkpoint_prefix=f"{self.raw_output_prefix}/_flytecheckpoints",
                prev_checkpoint_prefix=self.prev_checkpoint_prefix,
            ),
            plugin_state=PluginStateHolder(state_version, state),
            resource_manager=resource_manager,
        )


def array_paths(spec: ExecutionSpec, data_root: str) -> tuple[str, str]:
    """the node's data dir (``inputs.pb``, element data dirs) and output dir (element outputs and the
    node's own ``outputs.pb``)."""
    tid = spec.metadata.task_execution_id.id
    execution = tid.node_execution_id.execution_id
    node_id = tid.node_execution_id.node_id or "n0"
    root = normalize_root(data_root)
    data_dir = f"{root}/metadata/{execution.project}/{execution.domain}/{execution.name}/{node_id}"
    return data_dir, f"{data_dir}/{tid.retry_attempt}"


def element_parts(
    spec: ExecutionSpec,
    data_root: str,
    index: int,
    *,
    attempt: int = 0,
    name_max_length: int | None = None,
    max_attempts: int = 1,
    element_template: Any = None,
) -> ElementContext:
    """Element ``index``'s context at ``attempt``, as propeller builds a sub-node's: its generated
    name and unique id, its labels and index variables, its slice of the inputs read from the node's one
    ``inputs.pb``, its output and raw-data prefixes, the template with de-listed outputs."""
    array = spec.array
    assert array is not None
    meta = spec.metadata
    tid_in = meta.task_execution_id.id
    execution_id = tid_in.node_execution_id.execution_id
    node_id = tid_in.node_execution_id.node_id or "n0"
    max_length = name_max_length or DEFAULT_GENERATED_NAME_MAX_LENGTH
    unique_id = element_unique_id(node_id, tid_in.retry_attempt, index)
    name = element_generated_name(execution_id.name, unique_id, attempt, max_length)
    tid = identifier_pb2.TaskExecutionIdentifier(
        node_execution_id=identifier_pb2.NodeExecutionIdentifier(
            node_id=f"n{index}", execution_id=execution_id
        ),
        retry_attempt=attempt,
    )
    if spec.template.HasField("id"):
        tid.task_id.CopyFrom(spec.template.id)
    labels = dict(meta.labels)
    labels["node-id"] = sanitize_label_value(f"n{index}")
    metadata = replace(
        meta,
        task_execution_id=TaskExecutionID(name, tid, unique_id),
        labels=labels,
        environment_variables=index_env(meta.environment_variables, index),
        max_attempts=max_attempts,
    )
    data_dir, output_dir = array_paths(spec, data_root)
    raw_root = f"{normalize_root(data_root)}/raw"
    prev = ""
    if attempt > 0:
        previous = element_generated_name(execution_id.name, unique_id, attempt - 1, max_length)
        prev = f"{raw_root}/{previous}/_flytecheckpoints"
    template = element_template if element_template is not None else delisted_template(spec.template)
    return ElementContext(
        attempt=attempt,
        metadata=metadata,
        task_reader=StaticTaskReader(template, f"{data_dir}/{index}/{attempt}/task.pb"),
        input_reader=StaticInputReader(element_inputs(spec.inputs, index, array.bound_inputs), data_dir),
        output_prefix=f"{output_dir}/{index}/{attempt}",
        raw_output_prefix=f"{raw_root}/{name}",
        prev_checkpoint_prefix=prev,
    )


def element_task_context(
    spec: ExecutionSpec, data_root: str, index: int = 0, *, generated_name_max_length: int | None = None
) -> StaticTaskExecutionContext:
    """The context element ``index``'s first attempt gets (``taskplug render`` of a map renders this)."""
    return element_parts(spec, data_root, index, name_max_length=generated_name_max_length).context(
        0, None, None
    )
