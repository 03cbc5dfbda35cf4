"""Reading an ArrayNode out of what flytekit writes: ``pyflyte serialize`` files or a ``pyflyte package``
archive.

``pyflyte --pkgs P serialize workflows -f DIR`` writes one file per entity: admin ``TaskSpec``s
(``0_<task>_1.pb``), the workflow's admin ``WorkflowSpec`` (``<n>_<wf>_2.pb``) and its ``LaunchPlan``
(``<n>_<wf>_3.pb``); ``pyflyte package`` puts the same files into a ``.tgz``. An execution spec whose
``templateFile`` is that workflow (or that archive) runs the workflow's ArrayNode: the map task's template
is found among the files beside it, the node's bindings are resolved against the workflow's inputs (the
spec's ``inputs``, completed with the launch plan's defaults), and the node's ``parallelism``,
``min_successes`` / ``min_success_ratio``, ``bound_inputs`` and sub-node metadata (retries, timeout,
interruptible, task-node overrides) describe the map. This is what FlyteAdmin's compiler and propeller's
``preExecute`` do for the node (flytepropeller/pkg/compiler, nodes/executor.go), for the one node. The
files are read, within bounds, by :func:`taskplug.compiler.read_entities`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from functools import cached_property
from pathlib import Path
from typing import Any, Final

from flyteidl.admin import launch_plan_pb2, workflow_pb2
from flyteidl.core import compiler_pb2, identifier_pb2, interface_pb2, literals_pb2, tasks_pb2
from flyteidl.core import workflow_pb2 as core_workflow_pb2

from taskplug.compiler import (
    START_NODE_ID,
    LaunchPlanInterface,
    SerializedEntities,
    WorkflowBundle,
    as_workflow_spec,
    compile_workflow,
    expected_inputs,
    hydrate,
    id_key,
    is_archive,
    launch_inputs,
    read_entities,
)
from taskplug.core import SpecError, literal_map_from_plain

__all__ = [
    "CompiledBundle",
    "LaunchPlanRun",
    "WorkflowArrayNode",
    "compile_bundle",
    "is_archive",
    "read_workflow_array_node",
]

_LOCAL_VERSION: Final = "local"
"""The version of every entity a bundle holds (pyflyte serialize leaves it empty; flytectl register fills it
with the registration's version)."""


@dataclass(frozen=True)
class WorkflowArrayNode:
    """The ArrayNode chosen in a serialized workflow, and everything needed to run it."""

    workflow: core_workflow_pb2.WorkflowTemplate
    node: core_workflow_pb2.Node
    task: tasks_pb2.TaskTemplate
    defaults: Mapping[str, literals_pb2.Literal]

    @property
    def array(self) -> core_workflow_pb2.ArrayNode:
        return self.node.array_node

    @property
    def sub_node(self) -> core_workflow_pb2.Node:
        return self.node.array_node.node

    def node_inputs(self, raw_inputs: Mapping[str, Any]) -> literals_pb2.LiteralMap:
        """The ArrayNode's inputs (``inputs.pb``, full lists): its bindings resolved against the workflow's
        inputs, which the spec gives as ``inputs`` (typed by the workflow's interface)."""
        interface = self.workflow.interface.inputs if self.workflow.HasField("interface") else None
        given = literal_map_from_plain(raw_inputs, interface, "inputs")
        workflow_inputs = dict(self.defaults)
        workflow_inputs.update(given.literals)
        out = literals_pb2.LiteralMap()
        for binding in self.node.inputs:
            out.literals[binding.var].CopyFrom(
                _resolve(binding.binding, workflow_inputs, f"inputs.{binding.var}", self.node.id)
            )
        return out


def read_workflow_array_node(
    path: Path, data: bytes | None, *, node_id: str | None, workflow_name: str | None
) -> WorkflowArrayNode | None:
    """The ArrayNode of the workflow at ``path`` (a ``WorkflowSpec`` file, whose bytes are ``data``, or a
    ``pyflyte package`` archive); None when ``path`` is neither (then it is a task template file)."""
    if data is None or is_archive(path):
        entities = read_entities(path)
        workflows = [w for w in entities.workflows if w.template.nodes]
        if not workflows:
            raise SpecError("templateFile", f"{str(path)!r} holds no workflow written by pyflyte")
        workflow = _choose_workflow(workflows, workflow_name, path)
    else:
        found = as_workflow_spec(data)
        if found is None or not found.template.nodes:
            return None
        workflow = found
        if workflow_name and workflow.template.id.name != workflow_name:
            raise SpecError(
                "workflow", f"{str(path)!r} is workflow {workflow.template.id.name!r}, not {workflow_name!r}"
            )
        entities = read_entities(path)
    template = workflow.template
    node = _choose_node(template, node_id)
    sub_node = node.array_node.node
    if sub_node.WhichOneof("target") != "task_node" or not sub_node.task_node.HasField("reference_id"):
        raise SpecError(
            "node",
            f"array node {node.id!r} maps a {sub_node.WhichOneof('target') or 'missing'} sub-node; "
            "taskplug runs array nodes over tasks only",
        )
    task = _find_task(entities, sub_node.task_node.reference_id, path)
    return WorkflowArrayNode(template, node, task, _launch_plan_defaults(entities, template.id))


def _array_nodes(template: core_workflow_pb2.WorkflowTemplate) -> list[core_workflow_pb2.Node]:
    return [n for n in template.nodes if n.WhichOneof("target") == "array_node"]


def _choose_workflow(
    workflows: list[workflow_pb2.WorkflowSpec], name: str | None, path: Path
) -> workflow_pb2.WorkflowSpec:
    if name:
        for workflow in workflows:
            if workflow.template.id.name == name:
                return workflow
        names = sorted(w.template.id.name for w in workflows)
        raise SpecError("workflow", f"{str(path)!r} has no workflow {name!r} (it has {names})")
    with_arrays = [w for w in workflows if _array_nodes(w.template)]
    if len(with_arrays) == 1:
        return with_arrays[0]
    if not with_arrays:
        raise SpecError("templateFile", f"no workflow in {str(path)!r} has an array node (a map_task)")
    names = sorted(w.template.id.name for w in with_arrays)
    raise SpecError("workflow", f"{str(path)!r} has several workflows with array nodes {names}: name one")


def _choose_node(template: core_workflow_pb2.WorkflowTemplate, node_id: str | None) -> core_workflow_pb2.Node:
    arrays = _array_nodes(template)
    if node_id:
        for node in template.nodes:
            if node.id == node_id:
                if node.WhichOneof("target") != "array_node":
                    raise SpecError("node", f"node {node_id!r} of {template.id.name!r} is not an array node")
                return node
        raise SpecError(
            "node",
            f"workflow {template.id.name!r} has no node {node_id!r} (array nodes: {[n.id for n in arrays]})",
        )
    if len(arrays) == 1:
        return arrays[0]
    if not arrays:
        raise SpecError("templateFile", f"workflow {template.id.name!r} has no array node (a map_task)")
    raise SpecError(
        "node",
        f"workflow {template.id.name!r} has {len(arrays)} array nodes {[n.id for n in arrays]}: name one",
    )


def _same_task(a: identifier_pb2.Identifier, b: identifier_pb2.Identifier) -> bool:
    return (a.name, a.version, a.project, a.domain) == (b.name, b.version, b.project, b.domain)


def _find_task(
    entities: SerializedEntities, reference: identifier_pb2.Identifier, path: Path
) -> tasks_pb2.TaskTemplate:
    for task in entities.tasks:
        if _same_task(task.id, reference):
            return task
    raise SpecError(
        "templateFile",
        f"the map task {reference.name!r} (version {reference.version!r}) is not among the files beside "
        f"{str(path)!r}: serialize the workflow's tasks with it (pyflyte serialize / package)",
    )


def _launch_plan_defaults(
    entities: SerializedEntities, workflow_id: identifier_pb2.Identifier
) -> dict[str, literals_pb2.Literal]:
    for plan in entities.launch_plans:
        if not _same_task(plan.spec.workflow_id, workflow_id):
            continue
        out = {}
        for name, parameter in plan.spec.default_inputs.parameters.items():
            if parameter.HasField("default"):
                out[name] = parameter.default
        return out
    return {}


# -- bindings --------------------------------------------------------------------------------------------


def _resolve(
    binding: literals_pb2.BindingData,
    workflow_inputs: Mapping[str, literals_pb2.Literal],
    path: str,
    node_id: str,
) -> literals_pb2.Literal:
    kind = binding.WhichOneof("value")
    if kind == "scalar":
        return literals_pb2.Literal(scalar=binding.scalar)
    if kind == "collection":
        return literals_pb2.Literal(
            collection=literals_pb2.LiteralCollection(
                literals=[
                    _resolve(item, workflow_inputs, f"{path}[{i}]", node_id)
                    for i, item in enumerate(binding.collection.bindings)
                ]
            )
        )
    if kind == "map":
        return literals_pb2.Literal(
            map=literals_pb2.LiteralMap(
                literals={
                    key: _resolve(item, workflow_inputs, f"{path}.{key}", node_id)
                    for key, item in binding.map.bindings.items()
                }
            )
        )
    if kind == "promise":
        promise = binding.promise
        if promise.node_id not in ("", START_NODE_ID):
            raise SpecError(
                path,
                f"node {node_id!r} takes this input from node {promise.node_id!r}'s output {promise.var!r}; "
                "taskplug runs one array node, whose inputs must be workflow inputs or constants",
            )
        if promise.attr_path:
            raise SpecError(path, "bindings to an attribute of a workflow input are not supported")
        literal = workflow_inputs.get(promise.var)
        if literal is None:
            raise SpecError(f"inputs.{promise.var}", "the workflow needs this input and none was given")
        return literal
    raise SpecError(path, f"a binding of kind {kind!r} is not supported")


# -- whole workflows -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LaunchPlanRun:
    """A launch plan a workflow's node may launch: the plan (``admin.LaunchPlan``: its default and fixed
    inputs), its expected inputs as flyteadmin computes them, the outputs of the workflow it runs, and that
    workflow compiled — when first asked for, since only a launch plan some node launches needs it (a
    ``@dynamic`` task may launch any launch plan read, as propeller fetches any registered one from Admin)."""

    launch_plan: launch_plan_pb2.LaunchPlan
    expected_inputs: interface_pb2.ParameterMap
    outputs: interface_pb2.VariableMap
    compile: Callable[[], compiler_pb2.CompiledWorkflowClosure] = dataclass_field(repr=False, compare=False)

    @cached_property
    def closure(self) -> compiler_pb2.CompiledWorkflowClosure:
        """The launched workflow compiled (its compile errors are
        :class:`~taskplug.compiler.CompileErrors`)."""
        return self.compile()

    @property
    def interface(self) -> LaunchPlanInterface:
        """What the compiler needs of the launch plan to check a node that launches it."""
        return LaunchPlanInterface(self.launch_plan.id, self.expected_inputs, self.outputs)


@dataclass(frozen=True)
class CompiledBundle:
    """A bundle as flyteadmin registers and launches it: the workflow compiled, the execution's inputs
    merged, and every launch plan its nodes launch compiled too."""

    closure: compiler_pb2.CompiledWorkflowClosure
    inputs: literals_pb2.LiteralMap
    launch_plans: Mapping[str, LaunchPlanRun]
    max_parallelism: int | None  # the launch plan's, when it sets one (flyteadmin's default otherwise)


def compile_bundle(
    bundle: WorkflowBundle,
    values: Mapping[str, Any],
    *,
    project: str,
    domain: str,
    partial_inputs: bool = False,
) -> CompiledBundle:
    """``bundle`` registered and launched with the plain input ``values``: every identifier hydrated with the
    execution's project and domain (``flytectl register``), the workflow compiled (its errors are
    :class:`~taskplug.compiler.CompileErrors`: ``taskplug run`` exits 2, nothing created), the inputs merged
    with the launch plan's defaults and fixed inputs (Admin's messages; ``partial_inputs``: a required input
    not given is left out, for ``taskplug render``)."""
    hydrated = hydrate(bundle, project=project, domain=domain, version=_LOCAL_VERSION)
    interfaces = _launch_plan_interfaces(hydrated)
    closure = compile_workflow(
        hydrated.workflow,
        sub_workflows=hydrated.sub_workflows.values(),
        tasks=hydrated.tasks.values(),
        launch_plans=interfaces.values(),
    )
    inputs = launch_inputs(hydrated, values, partial=partial_inputs)
    max_parallelism = hydrated.launch_plan.spec.max_parallelism or None
    return CompiledBundle(closure, inputs, _launched(hydrated, interfaces), max_parallelism)


def _launch_plan_interfaces(bundle: WorkflowBundle) -> dict[str, LaunchPlanInterface]:
    """What the compiler knows of each launch plan read (Admin's expected inputs and outputs), by id key; a
    launch plan of a workflow not read is left out (a node launching it is a compile error)."""
    out = {}
    for key, lp in bundle.launch_plans.items():
        launched = bundle.sub_workflows.get(id_key(lp.spec.workflow_id))
        if launched is not None:
            interface = launched.interface
            out[key] = LaunchPlanInterface(lp.id, expected_inputs(lp, interface), interface.outputs)
    return out


def _launched(
    bundle: WorkflowBundle, interfaces: Mapping[str, LaunchPlanInterface]
) -> dict[str, LaunchPlanRun]:
    """Every launch plan read whose workflow was read, ready for a launch-plan node to start it as a child
    execution. Those a node of any workflow read launches have their workflow compiled now (a compile error
    refuses the execution before anything runs, as registration would); the others (a ``@dynamic`` task may
    launch them) when first launched."""
    referenced: set[str] = set()
    for template in [bundle.workflow, *bundle.sub_workflows.values()]:
        stack = list(template.nodes)
        while stack:
            node = stack.pop()
            target = node.WhichOneof("target")
            if target == "workflow_node" and node.workflow_node.HasField("launchplan_ref"):
                referenced.add(id_key(node.workflow_node.launchplan_ref))
            elif target == "branch_node":
                block = node.branch_node.if_else
                stack.append(block.case.then_node)
                stack.extend(other.then_node for other in block.other)
                if block.HasField("else_node"):
                    stack.append(block.else_node)

    def compiler(
        launched: core_workflow_pb2.WorkflowTemplate,
    ) -> Callable[[], compiler_pb2.CompiledWorkflowClosure]:
        return lambda: compile_workflow(
            launched,
            sub_workflows=bundle.sub_workflows.values(),
            tasks=bundle.tasks.values(),
            launch_plans=interfaces.values(),
        )

    out = {}
    for key in sorted(interfaces):
        lp = bundle.launch_plans[key]
        launched = bundle.sub_workflows[id_key(lp.spec.workflow_id)]
        expected = interfaces[key].expected_inputs or interface_pb2.ParameterMap()
        run = LaunchPlanRun(lp, expected, launched.interface.outputs, compiler(launched))
        if key in referenced:
            run.closure  # noqa: B018 - compiled now: its errors refuse the execution before it starts
        out[key] = run
    return out
