"""A ``@dynamic`` task's workflow: what its ``futures.pb`` (a ``DynamicJobSpec``) compiles to.

Follows flytepropeller's dynamic node handler (pkg/controller/nodes/dynamic/dynamic_workflow.go
``buildDynamicWorkflowTemplate``, ``buildContextualDynamicWorkflow``): the workflow's nodes and outputs are the
spec's, its interface's outputs the task's, its id ``dynamic_<the node's unique id>``; every task the spec
brings gets the parent task's container ``config`` entries it lacks; it is compiled with flyteadmin's rules
(``CompileWorkflow``), and kept beside the task's outputs as ``futures_compiled.pb`` so a resumed execution runs
the same workflow. ``min_successes`` is not read, as in propeller.

A launch plan the dynamic workflow launches is looked up among those the execution read (propeller fetches
its interface from Admin): every launch plan of the file, folder or archive the workflow came from, and of the
module ``taskplug run module.py`` imported — what ``pyflyte register`` would have registered.

Deviation: propeller gives the dynamic workflow a random version; taskplug uses the parent task's version.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from flyteidl.core import compiler_pb2, dynamic_job_pb2, identifier_pb2, tasks_pb2, workflow_pb2
from google.protobuf.message import DecodeError

from taskplug.compiler import LaunchPlanInterface, compile_workflow
from taskplug.core import TaskplugError

__all__ = ["COMPILED_FUTURES_FILE", "compile_dynamic"]

COMPILED_FUTURES_FILE: Final = "futures_compiled.pb"


def compile_dynamic(
    futures: bytes,
    parent: tasks_pb2.TaskTemplate,
    unique_id: str,
    launch_plans: Iterable[LaunchPlanInterface] = (),
) -> compiler_pb2.CompiledWorkflowClosure:
    """The compiled dynamic workflow of node ``unique_id`` whose task ``parent`` wrote ``futures``, its
    launch-plan nodes checked against ``launch_plans``; a TaskplugError (the build failed:
    ``DynamicWorkflowBuildFailed``) when it does not decode or compile."""
    spec = dynamic_job_pb2.DynamicJobSpec()
    try:
        spec.ParseFromString(futures)
    except DecodeError as e:
        raise TaskplugError(
            f"futures.pb is not a DynamicJobSpec: {e}", code="DynamicWorkflowBuildFailed"
        ) from e
    template = workflow_pb2.WorkflowTemplate(
        id=identifier_pb2.Identifier(
            resource_type=identifier_pb2.WORKFLOW,
            project=parent.id.project,
            domain=parent.id.domain,
            name=f"dynamic_{unique_id}",
            version=parent.id.version,
        ),
        nodes=spec.nodes,
        outputs=spec.outputs,
    )
    if parent.HasField("interface"):
        template.interface.outputs.CopyFrom(parent.interface.outputs)
    tasks = []
    for task in spec.tasks:
        copy = tasks_pb2.TaskTemplate()
        copy.CopyFrom(task)
        if copy.HasField("container") and parent.HasField("container"):
            present = {pair.key for pair in copy.container.config}
            copy.container.config.extend(p for p in parent.container.config if p.key not in present)
        tasks.append(copy)
    return compile_workflow(
        template, sub_workflows=spec.subworkflows, tasks=tasks, launch_plans=launch_plans, max_nodes=0
    )
