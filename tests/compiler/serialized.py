"""Serializing a flytekit entity in-process and handing it to the compiler, as ``taskplug run`` will: the
workflow's spec, every task it reaches, its sub-workflows and the interfaces of the launch plans it calls
(flyteadmin's ``expected_inputs``: the launch plan's defaults, and each workflow input neither fixed nor
defaulted as required)."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from flyteidl.admin import launch_plan_pb2, task_pb2, workflow_pb2
from flyteidl.core import compiler_pb2, interface_pb2, tasks_pb2
from flyteidl.core import workflow_pb2 as core_workflow_pb2

from taskplug.compiler import LaunchPlanInterface, compile_workflow, identifier_key


@dataclass
class Serialized:
    spec: workflow_pb2.WorkflowSpec
    tasks: list[tasks_pb2.TaskTemplate]
    workflows: dict[tuple[Any, ...], core_workflow_pb2.WorkflowTemplate]
    launch_plans: list[launch_plan_pb2.LaunchPlan]

    @property
    def template(self) -> core_workflow_pb2.WorkflowTemplate:
        return self.spec.template

    def launch_plan_interfaces(self) -> list[LaunchPlanInterface]:
        found = []
        for plan in self.launch_plans:
            workflow = self.workflows[identifier_key(plan.spec.workflow_id)]
            expected = interface_pb2.ParameterMap()
            for name, variable in workflow.interface.inputs.variables.items():
                if name in plan.spec.default_inputs.parameters:
                    expected.parameters[name].CopyFrom(plan.spec.default_inputs.parameters[name])
                elif name not in plan.spec.fixed_inputs.literals:
                    expected.parameters[name].var.CopyFrom(variable)
                    expected.parameters[name].required = True
            found.append(LaunchPlanInterface(plan.id, expected, workflow.interface.outputs))
        return found

    def compile(self, **kwargs: Any) -> compiler_pb2.CompiledWorkflowClosure:
        return compile_workflow(
            self.template,
            sub_workflows=self.spec.sub_workflows,
            tasks=self.tasks,
            launch_plans=self.launch_plan_interfaces(),
            **kwargs,
        )


def serialize(entity: Any) -> Serialized:
    from flytekit.configuration import Image, ImageConfig, SerializationSettings
    from flytekit.tools.translator import get_serializable

    settings = SerializationSettings(
        image_config=ImageConfig(
            default_image=Image(name="default", fqn="ghcr.io/example/flytekit", tag="v1")
        )
    )
    entities: OrderedDict[Any, Any] = OrderedDict()
    spec = get_serializable(entities, settings, entity).to_flyte_idl()
    tasks, workflows, plans = [], {}, []
    for model in entities.values():
        message = model.to_flyte_idl() if hasattr(model, "to_flyte_idl") else None
        if isinstance(message, task_pb2.TaskSpec):
            tasks.append(message.template)
        elif isinstance(message, workflow_pb2.WorkflowSpec):
            workflows[identifier_key(message.template.id)] = message.template
        elif isinstance(message, launch_plan_pb2.LaunchPlan):
            plans.append(message)
    return Serialized(spec, tasks, workflows, plans)
