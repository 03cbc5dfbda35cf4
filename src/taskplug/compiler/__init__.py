"""flyteadmin's side of a workflow: reading what a Flyte user hands over, and launch-plan inputs.

:func:`read_bundle` reads a workflow written by ``pyflyte serialize`` or ``pyflyte package`` into a
:class:`WorkflowBundle` (the workflow, the launch plan that runs it, every task, sub-workflow and launch plan
they reach); :func:`hydrate` fills the project, domain and version flytekit leaves empty. :func:`expected_inputs`
and :func:`execution_inputs` compute a launch plan's inputs as Admin does, with its messages.
"""

from taskplug.compiler._bundle import (
    WorkflowBundle,
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
    "MAX_ARCHIVE_MEMBERS",
    "MAX_ENTITY_BYTES",
    "MAX_WORKFLOW_BYTES",
    "SerializedEntities",
    "WorkflowBundle",
    "as_workflow_spec",
    "default_launch_plan",
    "execution_inputs",
    "expected_inputs",
    "hydrate",
    "id_key",
    "is_archive",
    "launch_inputs",
    "make_bundle",
    "read_bundle",
    "read_entities",
    "workflow_inputs_from_plain",
]
