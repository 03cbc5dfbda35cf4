"""Building the task-execution context for a spec: the paths, the readers, the plugin state.

Shared by ``taskplug render`` / ``status`` (one context, nothing run) and the executor (one per round).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from taskplug.core import (
    PluginStateHolder,
    StaticInputReader,
    StaticOutputWriter,
    StaticTaskExecutionContext,
    StaticTaskReader,
)
from taskplug.executor._flyte2 import flyte2_environment, flyte2_labels, is_flyte2_task
from taskplug.executor._paths import ExecutionPaths
from taskplug.executor._spec import ExecutionSpec
from taskplug.k8s import fixed_length_unique_id

__all__ = ["task_context_for"]


def task_context_for(
    spec: ExecutionSpec,
    data_root: str,
    *,
    state_version: int = 0,
    state: Mapping[str, Any] | None = None,
    resource_manager: Any = None,
    generated_name_max_length: int | None = None,
) -> StaticTaskExecutionContext:
    """The context of one round of ``spec``'s current attempt.

    ``generated_name_max_length`` is the plugin's (Flyte's ``PluginProperties.GeneratedNameMaxLength``, e.g.
    47 for Ray, whose operator derives longer names from it): a longer generated name is replaced by its
    fixed-length unique id, as propeller's ``FixedLengthUniqueIDForParts`` does. A task written by Flyte 2's
    SDK gets the environment Flyte 2's executor gives it (:mod:`._flyte2`).
    """
    metadata = spec.metadata
    name = metadata.task_execution_id.generated_name
    if generated_name_max_length is not None and len(name) > generated_name_max_length:
        short = fixed_length_unique_id(name, generated_name_max_length)
        metadata = replace(
            metadata, task_execution_id=replace(metadata.task_execution_id, generated_name=short)
        )
    if is_flyte2_task(spec.template):
        # Flyte 2's executor gives every task the variables its SDK's entry point reads, and its labels.
        metadata = replace(
            metadata,
            environment_variables=flyte2_environment(data_root, metadata),
            labels=flyte2_labels(metadata),
        )
    paths = ExecutionPaths.for_attempt(data_root, metadata)
    return StaticTaskExecutionContext(
        metadata=metadata,
        task_reader=StaticTaskReader(spec.template, f"{paths.input_prefix}/task.pb"),
        input_reader=StaticInputReader(spec.inputs, paths.input_prefix),
        output_writer=StaticOutputWriter(
            output_prefix=paths.output_prefix,
            raw_output_prefix=paths.raw_output_prefix,
            checkpoint_prefix=paths.checkpoint_prefix,
            prev_checkpoint_prefix=paths.prev_checkpoint_prefix,
        ),
        plugin_state=PluginStateHolder(state_version, state),
        resource_manager=resource_manager,
    )
