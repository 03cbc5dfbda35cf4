"""A workflow as a Flyte user hands it over, with everything it references: :class:`WorkflowBundle`.

What flytectl register and flyteadmin do before compiling (flytectl ``cmd/register/register_util.go``
hydrating identifiers; flyteadmin ``manager/impl/workflow_manager.go`` and ``launch_plan_manager.go`` looking
the referenced entities up): the bundle holds the workflow to run, the launch plan that runs it (its default
one unless another is chosen), and every task, sub-workflow and launch plan they can reach, indexed by
:func:`id_key`. :func:`read_bundle` reads one from ``pyflyte serialize`` / ``pyflyte package`` output
(``taskplug.cli`` builds one in-process from a flytekit module through :func:`make_bundle`); :func:`hydrate`
fills the empty project, domain and version flytekit leaves in every identifier, as flytectl does.

A bundle is refused, naming the entity, when what it would run cannot run on this machine: an ``@eager``
workflow (it launches its tasks through Flyte's Admin API while it runs) and a reference task, launch plan
or workflow that is not among the files (flytekit writes none for them: they live in a cluster's registry;
flyteadmin's compiler would fail with TaskReferenceNotFound / WorkflowReferenceNotFound).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import TypeVar

from flyteidl.admin import launch_plan_pb2
from flyteidl.core import identifier_pb2, interface_pb2, tasks_pb2
from flyteidl.core import workflow_pb2 as core_workflow_pb2
from google.protobuf.message import Message

from taskplug.compiler._serialized import (
    MAX_ENTITY_BYTES,
    SerializedEntities,
    as_launch_plan,
    as_workflow_spec,
    is_archive,
    read_entities,
)
from taskplug.core import SpecError

__all__ = [
    "WorkflowBundle",
    "choose_bundle",
    "default_launch_plan",
    "hydrate",
    "id_key",
    "make_bundle",
    "read_bundle",
]

_IDENTIFIER = identifier_pb2.Identifier.DESCRIPTOR.full_name
_M = TypeVar("_M", bound=Message)


@dataclass(frozen=True, slots=True)
class WorkflowBundle:
    """A workflow to run, the launch plan that runs it, and everything either references, by :func:`id_key`."""

    workflow: core_workflow_pb2.WorkflowTemplate
    """The workflow the launch plan runs."""
    sub_workflows: Mapping[str, core_workflow_pb2.WorkflowTemplate]
    """Every workflow template read (each ``WorkflowSpec``'s template and its ``sub_workflows``)."""
    tasks: Mapping[str, tasks_pb2.TaskTemplate]
    launch_plans: Mapping[str, launch_plan_pb2.LaunchPlan]
    """Every launch plan read, each workflow's default one included."""
    launch_plan: launch_plan_pb2.LaunchPlan
    """The one to run: the workflow's default launch plan unless another was chosen."""
    source: str
    """Where it was read from, for messages."""


def id_key(identifier: identifier_pb2.Identifier) -> str:
    """One spelling of an identifier for lookups: ``TASK:project:domain:name:version`` (flytekit's)."""
    kind = identifier_pb2.ResourceType.Name(identifier.resource_type)
    return f"{kind}:{identifier.project}:{identifier.domain}:{identifier.name}:{identifier.version}"


def read_bundle(
    path: Path, *, workflow: str | None, launch_plan: str | None = None, field: str = "SPEC"
) -> WorkflowBundle:
    """The bundle in ``path``: a ``pyflyte serialize`` file (``<i>_<wf>_2.pb``, or a launch plan's
    ``<i>_<lp>_3.pb``: then that workflow or launch plan is the one run unless ``workflow`` /
    ``launch_plan`` names another; the files beside it are read with it), a folder of them, or a ``pyflyte
    package`` archive. ``workflow`` names the workflow by its flytekit name (``module.wf``, or ``wf`` when one
    name ends so); ``launch_plan`` names a launch plan, whose workflow is then the one run. Errors are
    :class:`SpecError` at ``field`` (the file), ``"workflow"`` or ``"launchPlan"`` (the choice)."""
    return choose_bundle(path, read_entities(path, field=field), workflow=workflow, launch_plan=launch_plan)


def choose_bundle(
    path: Path, entities: SerializedEntities, *, workflow: str | None, launch_plan: str | None
) -> WorkflowBundle:
    """The bundle :func:`read_bundle` gives, of ``entities`` already read from ``path``: a caller that tries
    one name as a workflow's, then as a launch plan's, reads the files once."""
    if path.is_file() and not is_archive(path) and workflow is None and launch_plan is None:
        data = _head(path)
        if (spec := as_workflow_spec(data)) is not None:
            workflow = spec.template.id.name
        elif (plan := as_launch_plan(data)) is not None:
            launch_plan = plan.id.name
    return make_bundle(entities, workflow=workflow, launch_plan=launch_plan)


def make_bundle(
    entities: SerializedEntities, *, workflow: str | None, launch_plan: str | None
) -> WorkflowBundle:
    """The bundle of ``entities`` that runs the workflow or launch plan named (see :func:`read_bundle`);
    with neither named, the one workflow no other one runs."""
    source = entities.source
    templates: dict[str, core_workflow_pb2.WorkflowTemplate] = {}
    for spec in entities.workflows:
        for template in (spec.template, *spec.sub_workflows):
            templates.setdefault(id_key(template.id), template)
    tasks: dict[str, tasks_pb2.TaskTemplate] = {}
    for task in entities.tasks:
        tasks.setdefault(id_key(task.id), task)
    plans: dict[str, launch_plan_pb2.LaunchPlan] = {}
    for plan in entities.launch_plans:
        plans.setdefault(id_key(plan.id), plan)
    if not entities.workflows:
        raise SpecError("workflow", f"{source!r} holds no workflow written by pyflyte")

    if launch_plan is not None:
        chosen = _choose_launch_plan(plans, launch_plan, source)
        target = templates.get(id_key(chosen.spec.workflow_id))
        if target is None:
            raise SpecError(
                "launchPlan",
                f"launch plan {launch_plan!r} runs workflow {_describe(chosen.spec.workflow_id)}, which is not "
                f"in {source!r}: serialize the workflow with it (pyflyte serialize / package)",
            )
        if workflow is not None and not _names(target.id.name, workflow):
            raise SpecError(
                "launchPlan",
                f"launch plan {launch_plan!r} runs workflow {target.id.name!r}, not {workflow!r}",
            )
    else:
        top = [spec.template for spec in entities.workflows]
        target = _choose_workflow(top, templates, plans, workflow, source)
        chosen = _default_launch_plan_of(plans, target)
        if chosen is None:
            chosen = default_launch_plan(target)
            plans[id_key(chosen.id)] = chosen

    _check_runnable(target, templates, tasks, plans, source)
    return WorkflowBundle(
        workflow=target,
        sub_workflows=MappingProxyType(templates),
        tasks=MappingProxyType(tasks),
        launch_plans=MappingProxyType(plans),
        launch_plan=chosen,
        source=source,
    )


def default_launch_plan(workflow: core_workflow_pb2.WorkflowTemplate) -> launch_plan_pb2.LaunchPlan:
    """The launch plan flytekit's ``LaunchPlan.get_default_launch_plan`` writes for a workflow, for files
    that carry none: named as the workflow, every input required (the files hold no Python defaults)."""
    plan = launch_plan_pb2.LaunchPlan()
    plan.id.CopyFrom(workflow.id)
    plan.id.resource_type = identifier_pb2.LAUNCH_PLAN
    plan.spec.workflow_id.CopyFrom(workflow.id)
    for name, variable in workflow.interface.inputs.variables.items():
        plan.spec.default_inputs.parameters[name].CopyFrom(
            interface_pb2.Parameter(var=variable, required=True)
        )
    return plan


def hydrate(bundle: WorkflowBundle, *, project: str, domain: str, version: str) -> WorkflowBundle:
    """The bundle with the empty project, domain and version of every identifier in it filled, the same
    everywhere (entity ids, task-node references, launch-plan and sub-workflow references, each launch plan's
    workflow id), as flytectl register fills them; an identifier that names its own (a reference entity's)
    keeps it. The bundle given is not changed."""

    def filled(message: _M) -> _M:
        copy: _M = type(message)()
        copy.CopyFrom(message)
        _fill_identifiers(copy, project, domain, version)
        return copy

    templates = {}
    for template in bundle.sub_workflows.values():
        new = filled(template)
        templates[id_key(new.id)] = new
    tasks = {}
    for task in bundle.tasks.values():
        new_task = filled(task)
        tasks[id_key(new_task.id)] = new_task
    plans = {}
    for plan in bundle.launch_plans.values():
        new_plan = filled(plan)
        plans[id_key(new_plan.id)] = new_plan
    return replace(
        bundle,
        workflow=filled(bundle.workflow),
        sub_workflows=MappingProxyType(templates),
        tasks=MappingProxyType(tasks),
        launch_plans=MappingProxyType(plans),
        launch_plan=filled(bundle.launch_plan),
    )


# -- choosing --------------------------------------------------------------------------------------------------


def _head(path: Path) -> bytes:
    with path.open("rb") as f:
        return f.read(MAX_ENTITY_BYTES + 1)


def _names(full: str, given: str) -> bool:
    return full == given or full.endswith(f".{given}")


def _choose_workflow(
    top: list[core_workflow_pb2.WorkflowTemplate],
    templates: Mapping[str, core_workflow_pb2.WorkflowTemplate],
    plans: Mapping[str, launch_plan_pb2.LaunchPlan],
    name: str | None,
    source: str,
) -> core_workflow_pb2.WorkflowTemplate:
    everything = sorted({t.id.name for t in templates.values()})
    if name is not None:
        exact = [t for t in templates.values() if t.id.name == name]
        found = exact or [t for t in templates.values() if _names(t.id.name, name)]
        if len(found) == 1:
            return found[0]
        if found:
            several = sorted(t.id.name for t in found)
            raise SpecError(
                "workflow", f"{name!r} names several workflows in {source!r}: {several}; name one"
            )
        raise SpecError("workflow", f"{source!r} has no workflow {name!r} (it has {everything})")
    # The workflows no other workflow runs (as a sub-workflow or through a launch plan) are what a user runs.
    called: set[str] = set()
    for template in templates.values():
        for node in _walk_nodes(template):
            if node.WhichOneof("target") != "workflow_node":
                continue
            ref = node.workflow_node
            if ref.HasField("sub_workflow_ref"):
                called.add(id_key(ref.sub_workflow_ref))
            elif ref.HasField("launchplan_ref"):
                plan = plans.get(id_key(ref.launchplan_ref))
                if plan is not None:
                    called.add(id_key(plan.spec.workflow_id))
    candidates = [t for t in top if id_key(t.id) not in called] or top
    if len(candidates) == 1:
        return candidates[0]
    names = sorted(t.id.name for t in candidates)
    raise SpecError("workflow", f"{source!r} holds several workflows {names}: name the one to run")


def _choose_launch_plan(
    plans: Mapping[str, launch_plan_pb2.LaunchPlan], name: str, source: str
) -> launch_plan_pb2.LaunchPlan:
    found = [p for p in plans.values() if p.id.name == name]
    if not found:
        names = sorted({p.id.name for p in plans.values()})
        raise SpecError("launchPlan", f"{source!r} has no launch plan {name!r} (it has {names})")
    return found[0]


def _default_launch_plan_of(
    plans: Mapping[str, launch_plan_pb2.LaunchPlan], workflow: core_workflow_pb2.WorkflowTemplate
) -> launch_plan_pb2.LaunchPlan | None:
    wanted = id_key(workflow.id)
    for plan in plans.values():
        if plan.id.name == workflow.id.name and id_key(plan.spec.workflow_id) == wanted:
            return plan
    return None


# -- what cannot run here ---------------------------------------------------------------------------------------


def _walk_nodes(template: core_workflow_pb2.WorkflowTemplate) -> Iterator[core_workflow_pb2.Node]:
    """Every node of a workflow, nested ones (branch cases, an array node's sub-node) and the failure node
    included."""
    stack = list(template.nodes)
    if template.HasField("failure_node"):
        stack.append(template.failure_node)
    while stack:
        node = stack.pop(0)
        yield node
        kind = node.WhichOneof("target")
        if kind == "branch_node":
            if_else = node.branch_node.if_else
            stack.append(if_else.case.then_node)
            stack.extend(other.then_node for other in if_else.other)
            if if_else.HasField("else_node"):
                stack.append(if_else.else_node)
        elif kind == "array_node":
            stack.append(node.array_node.node)


def _describe(identifier: identifier_pb2.Identifier) -> str:
    text = repr(identifier.name)
    parts = [
        f"{label} {value!r}"
        for label, value in (
            ("project", identifier.project),
            ("domain", identifier.domain),
            ("version", identifier.version),
        )
        if value
    ]
    return f"{text} ({', '.join(parts)})" if parts else text


def _check_runnable(
    workflow: core_workflow_pb2.WorkflowTemplate,
    templates: Mapping[str, core_workflow_pb2.WorkflowTemplate],
    tasks: Mapping[str, tasks_pb2.TaskTemplate],
    plans: Mapping[str, launch_plan_pb2.LaunchPlan],
    source: str,
) -> None:
    """Refuse, naming the node and the entity, what the workflow (and every workflow it reaches) runs that
    cannot run here."""
    remote = "a reference entity lives in a Flyte cluster's registry, and taskplug runs only what it is given"
    seen: set[str] = set()
    pending = [workflow]
    while pending:
        current = pending.pop()
        if id_key(current.id) in seen:
            continue
        seen.add(id_key(current.id))
        where = f"workflow {current.id.name!r}"
        for node in _walk_nodes(current):
            kind = node.WhichOneof("target")
            if kind == "task_node" and node.task_node.HasField("reference_id"):
                task = tasks.get(id_key(node.task_node.reference_id))
                if task is None:
                    raise SpecError(
                        "workflow",
                        f"node {node.id!r} of {where} runs task {_describe(node.task_node.reference_id)}, "
                        f"which is not in {source!r}: {remote}",
                    )
                if task.metadata.is_eager:
                    raise SpecError(
                        "workflow",
                        f"node {node.id!r} of {where} runs task {task.id.name!r}, an @eager workflow: it "
                        "launches its tasks through Flyte's Admin API while it runs, which taskplug does not "
                        "have; make it a @workflow (or @dynamic)",
                    )
            elif kind == "workflow_node":
                ref = node.workflow_node
                if ref.HasField("sub_workflow_ref"):
                    sub = templates.get(id_key(ref.sub_workflow_ref))
                    if sub is None:
                        raise SpecError(
                            "workflow",
                            f"node {node.id!r} of {where} runs sub-workflow {_describe(ref.sub_workflow_ref)}, "
                            f"which is not in {source!r}: {remote}",
                        )
                    pending.append(sub)
                elif ref.HasField("launchplan_ref"):
                    plan = plans.get(id_key(ref.launchplan_ref))
                    if plan is None:
                        raise SpecError(
                            "workflow",
                            f"node {node.id!r} of {where} runs launch plan {_describe(ref.launchplan_ref)}, "
                            f"which is not in {source!r}: {remote}",
                        )
                    child = templates.get(id_key(plan.spec.workflow_id))
                    if child is None:
                        raise SpecError(
                            "workflow",
                            f"launch plan {plan.id.name!r} (node {node.id!r} of {where}) runs workflow "
                            f"{_describe(plan.spec.workflow_id)}, which is not in {source!r}: {remote}",
                        )
                    pending.append(child)


# -- hydration ---------------------------------------------------------------------------------------------------


def _fill_identifiers(message: Message, project: str, domain: str, version: str) -> None:
    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        if field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            if value_field.message_type is not None:
                for item in value.values():
                    _fill_identifiers(item, project, domain, version)
            continue
        items = value if field.is_repeated else [value]
        for item in items:
            if field.message_type.full_name == _IDENTIFIER:
                if not item.project:
                    item.project = project
                if not item.domain:
                    item.domain = domain
                if not item.version:
                    item.version = version
            else:
                _fill_identifiers(item, project, domain, version)
