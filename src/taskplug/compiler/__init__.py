"""flyteadmin's side of a workflow: reading what a Flyte user hands over, compiling it, launch-plan inputs.

:func:`read_bundle` reads a workflow written by ``pyflyte serialize`` or ``pyflyte package`` into a
:class:`WorkflowBundle` (the workflow, the launch plan that runs it, every task, sub-workflow and launch plan
they reach); :func:`hydrate` fills the project, domain and version flytekit leaves empty.
:func:`compile_workflow` turns the workflow into Flyte's ``CompiledWorkflowClosure`` or raises
:class:`CompileErrors` with Flyte's messages; the node settings say what propeller makes of a compiled node
(attempts, deadlines, interruptible, task overrides). :func:`expected_inputs` and :func:`execution_inputs`
compute a launch plan's inputs as Admin does, with its messages.

The compiler and the node settings load at once (an execution spec's task-node overrides use them); reading
bundles and launch plans, which need ``flyteidl.admin``'s types, on first use (PEP 562), so that commands that
read no workflow do not load them.
"""

from typing import TYPE_CHECKING

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
from taskplug.core import lazy_exports

if TYPE_CHECKING:
    from taskplug.compiler._bundle import (
        WorkflowBundle,
        choose_bundle,
        default_launch_plan,
        hydrate,
        id_key,
        make_bundle,
        read_bundle,
    )
    from taskplug.compiler._launch_plans import (
        execution_inputs,
        expected_inputs,
        launch_inputs,
        workflow_inputs_from_plain,
    )
    from taskplug.compiler._serialized import (
        MAX_ARCHIVE_MEMBERS,
        MAX_ENTITY_BYTES,
        MAX_WORKFLOW_BYTES,
        SerializedEntities,
        as_workflow_spec,
        is_archive,
        read_entities,
    )

__all__ = [
    "COMPILE_ERROR",
    "END_NODE_ID",
    "MAX_ARCHIVE_MEMBERS",
    "MAX_ENTITY_BYTES",
    "MAX_WORKFLOW_BYTES",
    "MAX_WORKFLOW_NODES",
    "START_NODE_ID",
    "CompileError",
    "CompileErrors",
    "LaunchPlanInterface",
    "Requirements",
    "SerializedEntities",
    "WorkflowBundle",
    "active_deadline",
    "are_types_castable",
    "as_workflow_spec",
    "choose_bundle",
    "compile_workflow",
    "default_launch_plan",
    "execution_deadline",
    "execution_inputs",
    "expected_inputs",
    "go_text",
    "hydrate",
    "id_key",
    "identifier_key",
    "interruptible",
    "is_archive",
    "launch_inputs",
    "literal_type_for_scalar",
    "literal_type_to_str",
    "make_bundle",
    "read_bundle",
    "read_entities",
    "requirements",
    "retry_strategy_min_attempts",
    "task_overrides",
    "workflow_inputs_from_plain",
]

__getattr__ = lazy_exports(
    __name__,
    {
        **dict.fromkeys(
            [
                "WorkflowBundle",
                "choose_bundle",
                "default_launch_plan",
                "hydrate",
                "id_key",
                "make_bundle",
                "read_bundle",
            ],
            "taskplug.compiler._bundle",
        ),
        **dict.fromkeys(
            ["execution_inputs", "expected_inputs", "launch_inputs", "workflow_inputs_from_plain"],
            "taskplug.compiler._launch_plans",
        ),
        **dict.fromkeys(
            [
                "MAX_ARCHIVE_MEMBERS",
                "MAX_ENTITY_BYTES",
                "MAX_WORKFLOW_BYTES",
                "SerializedEntities",
                "as_workflow_spec",
                "is_archive",
                "read_entities",
            ],
            "taskplug.compiler._serialized",
        ),
    },
)
