"""Building the task-execution context for a spec: the paths, the readers, the plugin state.

Shared by ``taskplug render`` / ``status`` (one context, nothing run) and the executor (one per round).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from taskplug.core import (
    PluginStateHolder,
    StaticInputReader,
    StaticOutputWriter,
    StaticTaskExecutionContext,
    StaticTaskReader,
)
from taskplug.executor._paths import ExecutionPaths
from taskplug.executor._spec import ExecutionSpec

__all__ = ["task_context_for"]


def task_context_for(
    spec: ExecutionSpec,
    data_root: str,
    *,
    state_version: int = 0,
    state: Mapping[str, Any] | None = None,
    resource_manager: Any = None,
) -> StaticTaskExecutionContext:
    paths = ExecutionPaths.for_attempt(data_root, spec.metadata)
    return StaticTaskExecutionContext(
        metadata=spec.metadata,
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
