"""Compiling Flyte workflows as flyteadmin does at registration, and what a compiled node means for running it.

``compile_workflow`` turns a flytekit ``WorkflowTemplate`` (with the tasks, launch plans and sub-workflows it
refers to) into Flyte's ``CompiledWorkflowClosure`` or raises ``CompileErrors`` with Flyte's messages; the node
settings say what propeller makes of a compiled node (attempts, deadlines, interruptible, task overrides).
"""

from taskplug.compiler._compile import (
    END_NODE_ID,
    MAX_WORKFLOW_NODES,
    START_NODE_ID,
    LaunchPlanInterface,
    Requirements,
    compile_workflow,
    identifier_key,
    requirements,
)
from taskplug.compiler._errors import COMPILE_ERROR, CompileError, CompileErrors
from taskplug.compiler._node_settings import (
    active_deadline,
    execution_deadline,
    interruptible,
    retry_strategy_min_attempts,
    task_overrides,
)
from taskplug.compiler._typing import (
    are_types_castable,
    go_text,
    literal_type_for_scalar,
    literal_type_to_str,
)

__all__ = [
    "COMPILE_ERROR",
    "END_NODE_ID",
    "MAX_WORKFLOW_NODES",
    "START_NODE_ID",
    "CompileError",
    "CompileErrors",
    "LaunchPlanInterface",
    "Requirements",
    "active_deadline",
    "are_types_castable",
    "compile_workflow",
    "execution_deadline",
    "go_text",
    "identifier_key",
    "interruptible",
    "literal_type_for_scalar",
    "literal_type_to_str",
    "requirements",
    "retry_strategy_min_attempts",
    "task_overrides",
]
