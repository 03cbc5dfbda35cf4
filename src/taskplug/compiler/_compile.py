"""Compiling a workflow: what flyteadmin does to a ``WorkflowTemplate`` when it is registered.

Follows flytepropeller/pkg/compiler: ``workflow_compiler.go`` (``CompileWorkflow``, ``ValidateWorkflow``, the
edges and the reachability check), ``requirements.go`` (``GetRequirements``), ``validators/node.go``,
``interface.go``, ``branch.go``, ``condition.go``, ``bindings.go`` and ``vars.go``; the node limit is
flyteadmin's ``validation/workflow_validator.go ValidateCompiledWorkflow``.

The result is Flyte's ``CompiledWorkflowClosure``: the primary workflow with ``start-node`` and ``end-node``
added before the user's nodes, its ``connections`` (upstream and downstream id lists, sorted), the
sub-workflows (each one a node refers to compiled the same way) and the tasks the workflow needs. The
templates come back normalized as Flyte normalizes them: upstream ids sorted, branch children renamed
``<branch>-<child>``, a promise on a workflow input naming ``start-node``, empty interface maps filled in.
The compiler works on copies; what it is given is not changed.

Identifiers are compared whole (resource type, project, domain, name, version, org), as Flyte compares their
text: whoever loads the entities must give references and the entities they name the same identifiers.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from flyteidl.core import (
    compiler_pb2,
    condition_pb2,
    identifier_pb2,
    interface_pb2,
    literals_pb2,
    tasks_pb2,
    types_pb2,
    workflow_pb2,
)

from taskplug.compiler._errors import _Scope
from taskplug.compiler._typing import (
    are_types_castable,
    go_text,
    is_optional_type,
    literal_type_for_scalar,
    literal_type_to_str,
)
from taskplug.core import SpecError

__all__ = [
    "END_NODE_ID",
    "MAX_WORKFLOW_NODES",
    "START_NODE_ID",
    "LaunchPlanInterface",
    "Requirements",
    "compile_workflow",
    "identifier_key",
    "requirements",
]

START_NODE_ID: Final = "start-node"
END_NODE_ID: Final = "end-node"
MAX_WORKFLOW_NODES: Final = 100
"""flyteadmin's ``registration.maxWorkflowNodes``: most user nodes a workflow may have at its top level."""

_NONE_TYPE = types_pb2.SimpleType.NONE

IdentifierKey = tuple[int, str, str, str, str, str]


def identifier_key(identifier: identifier_pb2.Identifier) -> IdentifierKey:
    """What makes two identifiers the same reference: every field (Flyte compares their text)."""
    return (
        identifier.resource_type,
        identifier.project,
        identifier.domain,
        identifier.name,
        identifier.version,
        identifier.org,
    )


def _sort_key(identifier: identifier_pb2.Identifier) -> tuple[int, str, str, str, str, str]:
    # Flyte sorts by (resource type, project, domain, name, version); org only breaks what Go leaves random.
    return identifier_key(identifier)


@dataclass(frozen=True, slots=True)
class LaunchPlanInterface:
    """What the compiler needs of a launch plan a node calls: its id and flyteadmin's ``expected_inputs`` /
    ``expected_outputs`` (the launch plan closure's; None when Admin has none)."""

    id: identifier_pb2.Identifier
    expected_inputs: interface_pb2.ParameterMap | None
    expected_outputs: interface_pb2.VariableMap | None


@dataclass(frozen=True, slots=True)
class Requirements:
    """The tasks and launch plans a workflow needs (``GetRequirements``), each list sorted by resource type,
    project, domain, name and version."""

    task_ids: tuple[identifier_pb2.Identifier, ...]
    launch_plan_ids: tuple[identifier_pb2.Identifier, ...]


class _Direction(enum.Enum):
    """Which adjacency lists an edge goes into (``common.EdgeDirection``)."""

    UPSTREAM = enum.auto()
    DOWNSTREAM = enum.auto()
    BOTH = enum.auto()


# -- requirements (requirements.go) ---------------------------------------------------------------------------


class _Needs:
    def __init__(self) -> None:
        self.tasks: dict[IdentifierKey, identifier_pb2.Identifier] = {}
        self.launch_plans: dict[IdentifierKey, identifier_pb2.Identifier] = {}

    def sorted_tasks(self) -> list[identifier_pb2.Identifier]:
        return sorted(self.tasks.values(), key=_sort_key)

    def sorted_launch_plans(self) -> list[identifier_pb2.Identifier]:
        return sorted(self.launch_plans.values(), key=_sort_key)


def _workflow_needs(
    template: workflow_pb2.WorkflowTemplate,
    sub_workflows: Mapping[IdentifierKey, compiler_pb2.CompiledWorkflow],
    needs: _Needs,
    errs: _Scope,
    expanding: set[IdentifierKey],
) -> None:
    for node in template.nodes:
        _node_needs(node, sub_workflows, needs, errs, expanding)
    if template.HasField("failure_node"):
        _node_needs(template.failure_node, sub_workflows, needs, errs, expanding)


def _node_needs(
    node: workflow_pb2.Node,
    sub_workflows: Mapping[IdentifierKey, compiler_pb2.CompiledWorkflow],
    needs: _Needs,
    errs: _Scope,
    expanding: set[IdentifierKey],
) -> None:
    kind = node.WhichOneof("target")
    if kind == "task_node":
        if node.task_node.HasField("reference_id"):
            needs.tasks.setdefault(identifier_key(node.task_node.reference_id), node.task_node.reference_id)
    elif kind == "workflow_node":
        reference = node.workflow_node
        if reference.HasField("launchplan_ref"):
            needs.launch_plans.setdefault(identifier_key(reference.launchplan_ref), reference.launchplan_ref)
        elif reference.HasField("sub_workflow_ref"):
            key = identifier_key(reference.sub_workflow_ref)
            sub = sub_workflows.get(key)
            if sub is None:
                errs.collect(
                    "WorkflowReferenceNotFound",
                    node.id,
                    f"Referenced Workflow [{go_text(reference.sub_workflow_ref)}] not found.",
                )
            elif key not in expanding:
                # Deviation: a sub-workflow that (indirectly) calls itself is expanded once; Go recurses
                # until its stack runs out.
                expanding.add(key)
                _workflow_needs(sub.template, sub_workflows, needs, errs, expanding)
                expanding.discard(key)
    elif kind == "branch_node":
        if_else = node.branch_node.if_else
        if if_else.case.HasField("then_node"):
            _node_needs(if_else.case.then_node, sub_workflows, needs, errs, expanding)
        for other in if_else.other:
            if other.HasField("then_node"):
                _node_needs(other.then_node, sub_workflows, needs, errs, expanding)
        if if_else.HasField("else_node"):
            _node_needs(if_else.else_node, sub_workflows, needs, errs, expanding)
    elif kind == "array_node" and node.array_node.HasField("node"):
        _node_needs(node.array_node.node, sub_workflows, needs, errs, expanding)


_TOO_DEEP: Final = "The workflow nests sub-workflows too deeply to be compiled."


def _collect_needs(
    template: workflow_pb2.WorkflowTemplate,
    sub_workflows: Mapping[IdentifierKey, compiler_pb2.CompiledWorkflow],
    needs: _Needs,
    errs: _Scope,
) -> None:
    try:
        _workflow_needs(template, sub_workflows, needs, errs, set())
    except RecursionError:
        errs.collect("WorkflowBuildError", "", _TOO_DEEP)


def _index_sub_workflows(
    sub_workflows: Sequence[compiler_pb2.CompiledWorkflow], errs: _Scope
) -> dict[IdentifierKey, compiler_pb2.CompiledWorkflow]:
    """``NewWorkflowIndex``: sub-workflows by id; the same id twice is a ``DuplicateId``."""
    index: dict[IdentifierKey, compiler_pb2.CompiledWorkflow] = {}
    for sub in sub_workflows:
        if not sub.template.HasField("id"):
            # Deviation: a sub-workflow without an id is a ``ValueRequired [Template.Id]``; Go gives up
            # without saying why (an error list with no error in it).
            errs.collect("ValueRequired", "workflow", "Value required [Template.Id].")
            continue
        key = identifier_key(sub.template.id)
        if key in index:
            errs.collect(
                "DuplicateId", go_text(sub.template.id), "Trying to insert two nodes with the same id."
            )
        else:
            index[key] = sub
    return index


def requirements(
    template: workflow_pb2.WorkflowTemplate,
    sub_workflows: Iterable[workflow_pb2.WorkflowTemplate] = (),
) -> Requirements:
    """The tasks and launch plans ``template`` needs, through its branches, map tasks, failure node and
    (recursively) the sub-workflows it calls (``GetRequirements``).

    Raises :class:`~taskplug.compiler.CompileErrors` when a sub-workflow it calls is not among
    ``sub_workflows`` (``WorkflowReferenceNotFound``) or two of them have one id (``DuplicateId``).
    """
    errs = _Scope()
    wrapped = [compiler_pb2.CompiledWorkflow(template=t) for t in sub_workflows]
    index = _index_sub_workflows(wrapped, errs)
    errs.raise_if_any()
    needs = _Needs()
    _collect_needs(template, index, needs, errs)
    errs.raise_if_any()
    return Requirements(tuple(needs.sorted_tasks()), tuple(needs.sorted_launch_plans()))


# -- the workflow builder (builders.go, workflow_compiler.go) -------------------------------------------------


class _Index:
    """Everything a compile may refer to, shared by the primary workflow and its sub-workflows."""

    def __init__(
        self,
        tasks: Mapping[IdentifierKey, tasks_pb2.TaskTemplate],
        launch_plans: Mapping[IdentifierKey, LaunchPlanInterface],
        sub_workflows: Mapping[IdentifierKey, compiler_pb2.CompiledWorkflow],
    ) -> None:
        self.tasks = tasks
        self.launch_plans = launch_plans
        self.sub_workflows = sub_workflows
        # Deviation: each sub-workflow is compiled once per compile. Go compiles one once per calling
        # workflow, so a sub-workflow called from two levels is compiled twice, the second time over its
        # already compiled template (renaming its branch children a second time, ``n1-n1-n0``).
        self.compiled_sub_workflows: set[IdentifierKey] = set()


class _Node:
    """A node being compiled (``nodeBuilder``): the node message (changed in place), its interface once
    known, and the builders of its branch children and map-task sub-node."""

    __slots__ = ("children", "interface", "message", "sub_workflow_done")

    def __init__(self, message: workflow_pb2.Node) -> None:
        self.message = message
        self.interface: interface_pb2.TypedInterface | None = None
        self.sub_workflow_done = False
        self.children: dict[object, _Node] = {}

    @property
    def id(self) -> str:
        return str(self.message.id)

    def child(self, slot: object, message: workflow_pb2.Node) -> _Node:
        found = self.children.get(slot)
        if found is None:
            found = self.children[slot] = _Node(message)
        return found


_VAR_NAME = re.compile(r"(\[(?P<index>\d+)\]\.)?(?P<var>\w+)", re.ASCII)
_MAX_INT64 = 2**63 - 1


def _parse_var_name(name: str) -> tuple[str, int | None] | None:
    """``typing.ParseVarName``: exactly one ``[<index>].<name>`` or ``<name>`` match, else None."""
    matches = list(_VAR_NAME.finditer(name))
    if len(matches) != 1:
        return None
    index_text = matches[0].group("index")
    index: int | None = None
    if index_text:
        index = int(index_text)
        if index > _MAX_INT64:  # strconv.Atoi's range error
            return None
    return matches[0].group("var"), index


def _go_type_name(kind: str | None, owner: str) -> str:
    """The Go type of a oneof value, as ``reflect.TypeOf(v).String()`` prints it (``*core.Scalar_Blob``)."""
    if kind is None:
        return "<nil>"
    return f"*core.{owner}_{''.join(part.title() for part in kind.split('_'))}"


class _Workflow:
    """One workflow being compiled (``workflowBuilder``)."""

    def __init__(self, index: _Index, compiled: compiler_pb2.CompiledWorkflow) -> None:
        self.index = index
        self.compiled = compiled
        self.template = compiled.template
        self.nodes: dict[str, _Node] = {}
        self.added: list[_Node] = []
        self.downstream: dict[str, set[str]] = {}
        self.upstream: dict[str, set[str]] = {}

    # -- ValidateWorkflow ---------------------------------------------------------------------------------

    def validate(self, errs: _Scope) -> bool:
        template = self.template
        if not template.nodes:
            workflow_id = go_text(template.id) if template.HasField("id") else "<nil>"
            errs.collect("NoNodesFound", workflow_id, f"Can't find any nodes in workflow [{workflow_id}].")
            return False
        if not _validate_interface(START_NODE_ID, template.interface, errs.scope()):
            return False

        user_nodes = [_copy_node(n) for n in template.nodes]
        failure = _copy_node(template.failure_node) if template.HasField("failure_node") else None

        start = _Node(workflow_pb2.Node(id=START_NODE_ID))
        start.interface = interface_pb2.TypedInterface(outputs=template.interface.inputs)
        self._add(start)
        end = _Node(workflow_pb2.Node(id=END_NODE_ID, inputs=template.outputs))
        end.interface = interface_pb2.TypedInterface(inputs=template.interface.outputs)
        self._add(end)

        top_level: set[str] = set()
        for message in user_nodes:
            top_level.add(message.id)
            node = _Node(message)
            # A second node with an id already taken is validated but left out (``AddNode``).
            self._add(node)
            self._validate_node(node, errs.scope())

        ordered = sorted(self.nodes)
        for node_id in ordered:
            if node_id != START_NODE_ID:
                self._add_edges(self.nodes[node_id], _Direction.BOTH, errs.scope())

        failure_node = _Node(failure) if failure is not None else None
        if failure_node is not None:
            self._validate_node(failure_node, errs.scope())
            self._add_edges(failure_node, _Direction.UPSTREAM, errs.scope())

        for node_id in ordered:
            if node_id in (START_NODE_ID, END_NODE_ID) or node_id not in top_level:
                continue
            # A node needing nothing starts from start-node; one nothing needs leads to end-node, so the
            # workflow ends only after every node.
            if node_id not in self.upstream:
                self._edge(START_NODE_ID, node_id)
            if node_id not in self.downstream:
                self._edge(node_id, END_NODE_ID)

        assert end.interface is not None
        if _validate_interface(END_NODE_ID, end.interface, errs.scope()):
            self._validate_bindings(
                end, end.message.inputs, end.interface.inputs, True, _Direction.BOTH, errs.scope()
            )

        self._validate_reachable(errs.scope())
        self._write_back(failure_node)
        return not errs.has_errors

    def _write_back(self, failure_node: _Node | None) -> None:
        template = self.template
        del template.nodes[:]
        template.nodes.extend(node.message for node in self.added)
        # The end-node's bindings are the workflow's outputs (Go shares them), normalized alike.
        del template.outputs[:]
        template.outputs.extend(self.nodes[END_NODE_ID].message.inputs)
        if failure_node is not None:
            template.failure_node.CopyFrom(failure_node.message)
        connections = self.compiled.connections
        connections.SetInParent()
        for source, targets in (
            (self.downstream, connections.downstream),
            (self.upstream, connections.upstream),
        ):
            targets.clear()
            for node_id, ids in source.items():
                targets[node_id].ids.extend(sorted(ids))

    def _add(self, node: _Node) -> None:
        if node.id in self.nodes:
            return
        self.nodes[node.id] = node
        self.added.append(node)

    # -- edges ----------------------------------------------------------------------------------------------

    def _add_upstream(self, provider: str, dependent: str) -> None:
        self.upstream.setdefault(dependent, set()).add(provider or START_NODE_ID)

    def _add_downstream(self, provider: str, dependent: str) -> None:
        self.downstream.setdefault(provider or START_NODE_ID, set()).add(dependent)

    def _edge(self, provider: str, dependent: str) -> None:
        self._add_downstream(provider, dependent)
        self._add_upstream(provider, dependent)

    def _add_edges(self, node: _Node, direction: _Direction, errs: _Scope) -> None:
        """``AddEdges``: the node's explicit upstream ids, then one edge per promise in its bindings. A node
        whose interface could not be computed gets none (its bindings are not checked either)."""
        if node.interface is None:
            return
        if direction is not _Direction.UPSTREAM:
            for upstream_id in node.message.upstream_node_ids:
                self._edge(upstream_id, node.id)
        self._validate_bindings(
            node, node.message.inputs, node.interface.inputs, True, direction, errs.scope()
        )

    def _validate_reachable(self, errs: _Scope) -> None:
        """``validateReachable``: a depth-first walk from start-node; a cycle met on the way is reported with
        its path, otherwise every node not reached (but end-node) is."""
        visited = {START_NODE_ID}
        path = [START_NODE_ID]
        on_path = {START_NODE_ID}
        stack = [iter(sorted(self.downstream.get(START_NODE_ID, ())))]
        while stack:
            following = next(stack[-1], None)
            if following is None:
                stack.pop()
                on_path.discard(path.pop())
                continue
            if following in on_path:
                cycle = ">".join([*path, following])
                errs.collect(
                    "CycleDetected",
                    START_NODE_ID,
                    f"A cycle has been detected while traversing the Workflow [{cycle}].",
                )
                return
            if following in visited:
                # Go walks it again; a node already walked without meeting a cycle cannot lead to one.
                continue
            visited.add(following)
            path.append(following)
            on_path.add(following)
            stack.append(iter(sorted(self.downstream.get(following, ()))))
        unreachable = sorted(set(self.nodes) - visited - {END_NODE_ID})
        if unreachable:
            errs.collect(
                "UnreachableNodes",
                START_NODE_ID,
                f"The Workflow contain unreachable nodes [{','.join(unreachable)}].",
            )

    # -- ValidateNode ---------------------------------------------------------------------------------------

    def _validate_node(self, node: _Node, errs: _Scope) -> bool:
        if node.id == "":
            errs.collect("ValueRequired", "<node>", "Value required [Id].")
        if node.id in (START_NODE_ID, END_NODE_ID):
            return True
        _, interface_ok = self._underlying_interface(node, errs.scope())
        if interface_ok:
            self._effective_outputs(node, errs.scope())
        if node.message.upstream_node_ids:
            upstream_ids = sorted(node.message.upstream_node_ids)
            del node.message.upstream_node_ids[:]
            node.message.upstream_node_ids.extend(upstream_ids)

        kind = node.message.WhichOneof("target")
        if kind == "branch_node":
            children, ok = self._validate_branch_node(node, errs.scope())
            if ok:
                # Branch children are not top-level nodes: they only record what they wait for.
                for child in children:
                    self._add_edges(child, _Direction.UPSTREAM, errs.scope())
        elif kind == "workflow_node" and node.message.workflow_node.HasField("sub_workflow_ref"):
            reference = node.message.workflow_node.sub_workflow_ref
            key = identifier_key(reference)
            if key not in self.index.compiled_sub_workflows:
                sub = self.index.sub_workflows.get(key)
                if sub is None:
                    errs.collect(
                        "WorkflowReferenceNotFound",
                        node.id,
                        f"Referenced Workflow [{go_text(reference)}] not found.",
                    )
                elif not node.sub_workflow_done:
                    self.index.compiled_sub_workflows.add(key)
                    node.sub_workflow_done = _Workflow(self.index, sub).validate(errs.scope())
        elif kind == "task_node" and node.message.task_node.HasField("reference_id"):
            reference = node.message.task_node.reference_id
            if identifier_key(reference) not in self.index.tasks:
                errs.collect(
                    "TaskReferenceNotFound", node.id, f"Referenced Task [{go_text(reference)}] not found."
                )
        return not errs.has_errors

    def _effective_outputs(
        self, node: _Node, errs: _Scope
    ) -> tuple[dict[str, interface_pb2.Variable] | None, bool]:
        """``validateEffectiveOutputParameters``: the node's outputs under their aliases."""
        aliases: dict[str, str] = {}
        for alias in node.message.output_aliases:
            if alias.var in aliases:
                errs.collect(
                    "DuplicateAlias",
                    node.id,
                    f"Duplicate alias [{alias.alias}] found. An output alias can only be used once in the Workflow.",
                )
            else:
                aliases[alias.var] = alias.alias
        outputs: dict[str, interface_pb2.Variable] | None = None
        if node.interface is not None:
            outputs = {}
            for name, variable in node.interface.outputs.variables.items():
                outputs[aliases.pop(name, name)] = variable
            for alias_name in aliases.values():
                errs.collect("ParameterNotBound", node.id, f"Parameter not bound [{alias_name}].")
        return outputs, not errs.has_errors

    # -- interfaces (validators/interface.go, branch.go) ----------------------------------------------------

    def _underlying_interface(
        self, node: _Node, errs: _Scope
    ) -> tuple[interface_pb2.TypedInterface | None, bool]:
        """``ValidateUnderlyingInterface``: the interface a node shows its bindings and its consumers."""
        if node.interface is not None:
            return node.interface, True
        message = node.message
        interface: interface_pb2.TypedInterface | None = None
        kind = message.WhichOneof("target")
        if kind == "task_node":
            interface = self._task_interface(node, errs)
        elif kind == "workflow_node":
            interface = self._workflow_node_interface(node, errs)
        elif kind == "branch_node":
            interface = self._branch_interface(node, errs.scope())
        elif kind == "gate_node":
            interface = self._gate_interface(node, errs)
        elif kind == "array_node":
            sub_node = node.child("array", message.array_node.node)
            found, ok = self._underlying_interface(sub_node, errs.scope())
            if ok:
                # flytekit already wraps the mapped inputs in lists: the sub-node's interface is the node's.
                interface = found
        else:
            errs.collect("ValueRequired", node.id, "Value required [Target].")
        if interface is not None:
            _validate_interface(node.id, interface, errs.scope())
        if not errs.has_errors:
            node.interface = interface
        return interface, not errs.has_errors

    def _task_interface(self, node: _Node, errs: _Scope) -> interface_pb2.TypedInterface | None:
        task_node = node.message.task_node
        if not task_node.HasField("reference_id"):
            errs.collect("ValueRequired", node.id, "Value required [TaskNode.ReferenceId].")
            return None
        task = self.index.tasks.get(identifier_key(task_node.reference_id))
        if task is None:
            errs.collect(
                "TaskReferenceNotFound",
                node.id,
                f"Referenced Task [{go_text(task_node.reference_id)}] not found.",
            )
            return None
        if task.HasField("interface"):
            # The task's own interface: normalizing it shows in the closure's copy of the task, as in Go.
            return task.interface
        return interface_pb2.TypedInterface(
            inputs=interface_pb2.VariableMap(), outputs=interface_pb2.VariableMap()
        )

    def _workflow_node_interface(self, node: _Node, errs: _Scope) -> interface_pb2.TypedInterface | None:
        reference = node.message.workflow_node
        launch_plan_id = reference.launchplan_ref if reference.HasField("launchplan_ref") else None
        own_id = self.template.id if self.template.HasField("id") else None
        if _optional_key(launch_plan_id) == _optional_key(own_id):
            # A launch plan of the workflow itself: its own interface.
            if not self.template.HasField("interface"):
                errs.collect("ValueRequired", node.id, "Value required [WorkflowNode.Interface].")
                return None
            return self.template.interface
        if launch_plan_id is not None:
            plan = self.index.launch_plans.get(identifier_key(launch_plan_id))
            if plan is None:
                errs.collect(
                    "WorkflowReferenceNotFound",
                    node.id,
                    f"Referenced Workflow [{go_text(launch_plan_id)}] not found.",
                )
                return None
            if plan.expected_inputs is None:
                errs.collect("ValueRequired", node.id, "Value required [WorkflowNode.ExpectedInputs].")
            if plan.expected_outputs is None:
                errs.collect("ValueRequired", node.id, "Value required [WorkflowNode.ExpectedOutputs].")
            # The inputs the node must or chooses to give: every required one, and the defaults it overrides.
            bound = {b.var for b in node.message.inputs}
            exposed = interface_pb2.VariableMap()
            if plan.expected_inputs is not None:
                for name, parameter in plan.expected_inputs.parameters.items():
                    if parameter.required or name in bound:
                        exposed.variables[name].CopyFrom(parameter.var)
            interface = interface_pb2.TypedInterface(inputs=exposed)
            if plan.expected_outputs is not None:
                interface.outputs.CopyFrom(plan.expected_outputs)
            return interface
        if reference.HasField("sub_workflow_ref"):
            sub = self.index.sub_workflows.get(identifier_key(reference.sub_workflow_ref))
            if sub is None:
                errs.collect(
                    "WorkflowReferenceNotFound",
                    node.id,
                    f"Referenced Workflow [{go_text(reference.sub_workflow_ref)}] not found.",
                )
                return None
            if not sub.HasField("template"):
                errs.collect("ValueRequired", node.id, "Value required [WorkflowNode.Template].")
                return None
            if not sub.template.HasField("interface"):
                errs.collect("ValueRequired", node.id, "Value required [WorkflowNode.Template.Interface].")
                return None
            return sub.template.interface
        errs.collect("WorkflowReferenceNotFound", node.id, "Referenced Workflow [<nil>/<nil>] not found.")
        return None

    def _gate_interface(self, node: _Node, errs: _Scope) -> interface_pb2.TypedInterface | None:
        gate = node.message.gate_node
        condition = gate.WhichOneof("condition")
        if condition == "approve":
            # Approval passes its inputs through: the outputs are the inputs, typed by their bindings.
            variables, _ = self._validate_bindings(
                node,
                node.message.inputs,
                interface_pb2.VariableMap(),
                False,
                _Direction.UPSTREAM,
                errs.scope(),
            )
            return interface_pb2.TypedInterface(inputs=variables, outputs=variables)
        if condition == "signal":
            signal = gate.signal
            if not signal.HasField("type"):
                errs.collect("ValueRequired", node.id, "Value required [GateNode.Signal.Type].")
                return None
            if not signal.output_variable_name:
                errs.collect("ValueRequired", node.id, "Value required [GateNode.Signal.OutputVariableName].")
                return None
            outputs = interface_pb2.VariableMap()
            outputs.variables[signal.output_variable_name].type.CopyFrom(signal.type)
            return interface_pb2.TypedInterface(inputs=interface_pb2.VariableMap(), outputs=outputs)
        if condition == "sleep":
            return interface_pb2.TypedInterface(
                inputs=interface_pb2.VariableMap(), outputs=interface_pb2.VariableMap()
            )
        errs.collect("NoConditionFound", node.id, f"Can't find any condition in gate node [{node.id}].")
        return None

    def _branch_interface(self, node: _Node, errs: _Scope) -> interface_pb2.TypedInterface | None:
        """``validateBranchInterface``: renames the children ``<branch>-<child>``; the outputs are those every
        child has, with identical types; the inputs are the branch node's own bindings."""
        branch = node.message.branch_node
        if not branch.HasField("if_else"):
            errs.collect("ValueRequired", node.id, "Value required [Branch.IfElse].")
            return None
        if_else = branch.if_else
        if not if_else.HasField("case"):
            errs.collect("ValueRequired", node.id, "Value required [Branch.IfElse.Case].")
            return None
        if not if_else.case.HasField("then_node"):
            errs.collect("ValueRequired", node.id, "Value required [Branch.IfElse.Case.ThenNode].")
            return None
        blocks: list[tuple[object, workflow_pb2.Node]] = [("case", if_else.case.then_node)]
        for i, other in enumerate(if_else.other):
            if not other.HasField("then_node"):
                errs.collect("ValueRequired", node.id, "Value required [IfElse.Case.ThenNode].")
                continue
            blocks.append((("other", i), other.then_node))
        if if_else.HasField("else_node"):
            blocks.append(("else", if_else.else_node))

        first: interface_pb2.VariableMap | None = None
        common: set[str] = set()
        for slot, message in blocks:
            child = node.child(slot, message)
            child.message.id = f"{node.id}-{child.id}"
            found, ok = self._underlying_interface(child, errs.scope())
            if not ok or found is None:
                continue
            outputs = found.outputs.variables
            if first is None:
                first = found.outputs
                common = set(outputs)
                continue
            common &= set(outputs)
            for name in sorted(common):
                if _same_type(child.id, name, first.variables[name], outputs[name].type, errs.scope()):
                    _same_type(child.id, name, outputs[name], first.variables[name].type, errs.scope())

        inputs, _ = self._validate_bindings(
            node, node.message.inputs, interface_pb2.VariableMap(), False, _Direction.UPSTREAM, errs.scope()
        )
        if errs.has_errors or first is None:
            return None
        result = interface_pb2.TypedInterface(inputs=inputs, outputs=interface_pb2.VariableMap())
        for name in common:
            result.outputs.variables[name].CopyFrom(first.variables[name])
        return result

    # -- branch nodes (validators/branch.go ValidateBranchNode, condition.go) -----------------------------

    def _validate_branch_node(self, node: _Node, errs: _Scope) -> tuple[list[_Node], bool]:
        if_else = node.message.branch_node.if_else
        cases: list[tuple[object, workflow_pb2.IfBlock]] = []
        if not if_else.HasField("case"):
            errs.collect(
                "BranchNodeHasNoCondition",
                node.id,
                "One of the branches on the node doesn't have a condition.",
            )
        else:
            cases.append(("case", if_else.case))
        cases.extend((("other", i), block) for i, block in enumerate(if_else.other))
        children: list[_Node] = []
        for slot, block in cases:
            condition = block.condition if block.HasField("condition") else None
            self._validate_expression(node, condition, errs.scope())
            if not block.HasField("then_node"):
                errs.collect("BranchNodeIdNotFound", node.id, "BranchNode not assigned")
            else:
                children.append(node.child(slot, block.then_node))
        if if_else.HasField("else_node"):
            children.append(node.child("else", if_else.else_node))
        elif not if_else.HasField("error"):
            errs.collect(
                "BranchNodeHasNoDefault",
                node.id,
                "Branch Node must have either the else case set or a default error.",
            )
        valid = [child for child in children if self._validate_node(child, errs.scope())]
        return valid, not errs.has_errors

    def _validate_expression(
        self, node: _Node, expression: condition_pb2.BooleanExpression | None, errs: _Scope
    ) -> None:
        if expression is None:
            errs.collect(
                "BranchNodeHasNoCondition",
                node.id,
                "One of the branches on the node doesn't have a condition.",
            )
            return
        kind = expression.WhichOneof("expr")
        if kind == "comparison":
            comparison = expression.comparison
            right, right_ok = self._operand(
                node,
                "RightValue",
                comparison.right_value if comparison.HasField("right_value") else None,
                errs.scope(),
            )
            left, left_ok = self._operand(
                node,
                "LeftValue",
                comparison.left_value if comparison.HasField("left_value") else None,
                errs.scope(),
            )
            if right_ok and left_ok and right is not None and left is not None and right != left:
                errs.collect(
                    "MismatchingTypes",
                    node.id,
                    f"Variable [RightValue] (type [{literal_type_to_str(right)}]) doesn't match expected type "
                    f"[{literal_type_to_str(left)}].",
                )
        elif kind == "conjunction":
            conjunction = expression.conjunction
            for side in ("left_expression", "right_expression"):
                sub = getattr(conjunction, side) if conjunction.HasField(side) else None
                self._validate_expression(node, sub, errs.scope())
        else:
            errs.collect("ValueRequired", node.id, "Value required [Expr].")

    def _operand(
        self, node: _Node, name: str, operand: condition_pb2.Operand | None, errs: _Scope
    ) -> tuple[types_pb2.LiteralType | None, bool]:
        """``validateOperand``: a primitive, or a variable the branch node binds. Anything else (a
        ``scalar`` operand, as flytekit writes for ``is_none()``) is a missing value."""
        if operand is None:
            errs.collect("ValueRequired", node.id, f"Value required [{name}].")
            return None, False
        kind = operand.WhichOneof("val")
        literal_type: types_pb2.LiteralType | None = None
        if kind == "primitive":
            literal_type = literal_type_for_scalar(literals_pb2.Scalar(primitive=operand.primitive))
        elif kind == "var" and operand.var:
            if node.interface is not None:
                parameter, ok = self._input_var(node, operand.var, errs.scope())
                if ok and parameter is not None:
                    literal_type = parameter.type
            else:
                errs.collect("ValueRequired", node.id, f"Value required [{operand.var}].")
        else:
            errs.collect("ValueRequired", node.id, f"Value required [{name}.Val].")
        return literal_type, not errs.has_errors

    def _input_var(self, node: _Node, name: str, errs: _Scope) -> tuple[interface_pb2.Variable | None, bool]:
        """``validateInputVar`` with types not required (as conditions are checked)."""
        if node.interface is None:
            return None, False
        variables = node.interface.inputs.variables
        if name in variables:
            return variables[name], True
        if any(b.var == name for b in node.message.inputs):
            return None, False
        errs.collect("VariableNameNotFound", node.id, f"Variable [{name}] not found on node [{node.id}].")
        return None, False

    # -- bindings (validators/bindings.go) ----------------------------------------------------------------

    def _validate_bindings(
        self,
        node: _Node,
        bindings: Iterable[literals_pb2.Binding],
        parameters: interface_pb2.VariableMap | None,
        check_types: bool,
        direction: _Direction,
        errs: _Scope,
    ) -> tuple[interface_pb2.VariableMap, bool]:
        """``ValidateBindings``: each binding names an input, once, with a value of a type it takes; each
        promise adds an edge; every input left unbound must be optional. Returns the bound variables, typed
        by their bindings."""
        resolved = interface_pb2.VariableMap()
        provided: set[str] = set()
        variables = parameters.variables if parameters is not None else None
        for binding in bindings:
            parameter = variables[binding.var] if variables is not None and binding.var in variables else None
            if parameter is None and check_types:
                errs.collect(
                    "VariableNameNotFound",
                    node.id,
                    f"Variable [{binding.var}] not found on node [{node.id}].",
                )
            elif not binding.HasField("binding"):
                errs.collect("ValueRequired", node.id, "Value required [Binding].")
            elif binding.var in provided:
                errs.collect(
                    "ParameterBoundMoreThanOnce", node.id, f"Input [{binding.var}] is bound more than once."
                )
            else:
                expected = (
                    parameter.type if parameter is not None else types_pb2.LiteralType(simple=_NONE_TYPE)
                )
                provided.add(binding.var)
                found, upstream_ids, ok = self._validate_binding(
                    node, binding.var, binding.binding, expected, errs.scope(), check_types
                )
                if ok:
                    for upstream_id in upstream_ids:
                        if direction is _Direction.BOTH:
                            self._edge(upstream_id, node.id)
                        elif direction is _Direction.DOWNSTREAM:
                            self._add_downstream(upstream_id, node.id)
                        else:
                            self._add_upstream(upstream_id, node.id)
                    variable = resolved.variables[binding.var]
                    if found is not None:
                        variable.type.CopyFrom(found)
        if variables is not None:
            for name in sorted(variables):
                if name not in provided and not is_optional_type(variables[name].type):
                    errs.collect("ParameterNotBound", node.id, f"Parameter not bound [{name}].")
        return resolved, not errs.has_errors

    def _validate_binding(
        self,
        node: _Node,
        parameter: str,
        data: literals_pb2.BindingData,
        expected: types_pb2.LiteralType,
        errs: _Scope,
        check_types: bool,
    ) -> tuple[types_pb2.LiteralType | None, list[str], bool]:
        """``validateBinding``: the type the binding gives, the nodes it reads from, and whether it is valid."""
        kind = data.WhichOneof("value")
        if kind not in ("scalar", "promise") and expected.WhichOneof("type") == "union_type":
            # A list or map bound to a union must fit exactly one variant.
            match: types_pb2.LiteralType | None = None
            result: tuple[types_pb2.LiteralType | None, list[str], bool] | None = None
            for variant in expected.union_type.variants:
                attempt = self._validate_binding(node, parameter, data, variant, _Scope(), check_types)
                if attempt[2]:
                    if result is not None:
                        errs.collect(
                            "AmbiguousBindingUnionValue",
                            node.id,
                            f"Input [{parameter}] on node [{node.id}] expects bindings of union type "
                            f"[{go_text(expected)}].  Received [{go_text(data)}] which is ambiguous as both "
                            f"variants [{go_text(match)}] and [{go_text(variant)}] match.",
                        )
                        return None, [], False
                    match, result = variant, attempt
            if result is not None:
                return result
            errs.collect(
                "IncompatibleBindingUnionValue",
                node.id,
                f"Input [{parameter}] on node [{node.id}] expects bindings of union type [{go_text(expected)}].  "
                f"Received [{go_text(data)}] which does not match any of the variants.",
            )
            return None, [], False

        if kind in ("collection", "map"):
            container = "collection_type" if kind == "collection" else "map_value_type"
            value = data.collection if kind == "collection" else data.map
            if expected.WhichOneof("type") == container:
                element = getattr(expected, container)
                items = (
                    list(data.collection.bindings)
                    if kind == "collection"
                    else [data.map.bindings[k] for k in sorted(data.map.bindings)]
                )
                upstream: list[str] = []
                element_type: types_pb2.LiteralType | None = None
                for item in items:
                    found, ids, ok = self._validate_binding(
                        node, parameter, item, element, errs.scope(), check_types
                    )
                    if ok:
                        upstream.extend(ids)
                        element_type = found
                resolved = types_pb2.LiteralType()
                getattr(resolved, container).SetInParent()
                if element_type is not None:
                    getattr(resolved, container).CopyFrom(element_type)
                return resolved, upstream, not errs.has_errors
            errs.collect(
                "MismatchingBindings",
                node.id,
                f"Input [{parameter}] on node [{node.id}] expects bindings of type [{go_text(expected)}].  "
                f"Received [{go_text(value)}]",
            )
            return None, [], False
        if kind == "promise":
            return self._validate_promise(node, parameter, data.promise, expected, errs, check_types)
        if kind == "scalar":
            return self._validate_scalar(node, parameter, data.scalar, expected, errs, check_types)
        errs.collect(
            "MismatchingBindings",
            node.id,
            f"Input [{parameter}] on node [{node.id}] expects bindings of type [{go_text(expected)}].  "
            f"Received [{_go_type_name(kind, 'BindingData') if kind else ''}]",
        )
        return None, [], False

    def _validate_promise(
        self,
        node: _Node,
        parameter: str,
        promise: types_pb2.OutputReference,
        expected: types_pb2.LiteralType,
        errs: _Scope,
        check_types: bool,
    ) -> tuple[types_pb2.LiteralType | None, list[str], bool]:
        producer = self._producer(promise.node_id, errs.scope())
        if producer is not None:
            parsed = _parse_var_name(promise.var)
            if parsed is None:
                errs.collect("SyntaxError", node.id, f"Failed to parse element [{promise.var}].")
                return None, [], False
            name, index = parsed
            # Messages name variables by the nodes' names (``metadata.name``) where they have metadata.
            input_var = (
                f"{node.message.metadata.name}.{parameter}"
                if node.message.HasField("metadata")
                else parameter
            )
            output_var = (
                f"{producer.message.metadata.name}.{promise.var}"
                if producer.message.HasField("metadata")
                else promise.var
            )
            output, found = self._output_var(producer, name, errs.scope())
            if found and output is not None:
                source = output.type
                if index is not None:
                    if source.WhichOneof("type") != "collection_type":
                        errs.collect(
                            "MismatchingTypes",
                            node.id,
                            _mismatching_variables(output_var, output.type, input_var, expected),
                        )
                    else:
                        source = source.collection_type
                for attribute in promise.attr_path:
                    step = source.WhichOneof("type")
                    if step == "collection_type":
                        source = source.collection_type
                    elif step == "map_value_type":
                        source = source.map_value_type
                    elif source.HasField("structure") and len(source.structure.dataclass_type) > 0:
                        field_name = attribute.string_value
                        fields = source.structure.dataclass_type
                        if field_name not in fields:
                            errs.collect(
                                "FieldNotFound",
                                node.id,
                                f"Variable [{promise.var}] (type [{go_text(source)}]) doesn't have field "
                                f"[{field_name}].",
                            )
                            return None, [], False
                        source = fields[field_name]
                if not check_types or are_types_castable(source, expected):
                    promise.node_id = producer.id
                    return output.type, [producer.id], True
                errs.collect(
                    "MismatchingTypes",
                    node.id,
                    _mismatching_variables(output_var, source, input_var, expected),
                )
                return None, [], False
        errs.collect("ParameterNotBound", node.id, f"Parameter not bound [{parameter}].")
        return None, [], False

    def _validate_scalar(
        self,
        node: _Node,
        parameter: str,
        scalar: literals_pb2.Scalar,
        expected: types_pb2.LiteralType,
        errs: _Scope,
        check_types: bool,
    ) -> tuple[types_pb2.LiteralType | None, list[str], bool]:
        literal_type = literal_type_for_scalar(scalar)
        if literal_type is None:
            errs.collect(
                "UnrecognizedValue",
                node.id,
                f"Unrecognized value [{_go_type_name(scalar.WhichOneof('value'), 'Scalar')}].",
            )
        # A type casts to itself: a literal of the declared type (the common case) needs no more checks.
        elif check_types and literal_type != expected and not are_types_castable(literal_type, expected):
            errs.collect(
                "MismatchingTypes",
                node.id,
                f"Variable [{parameter}] (type [{literal_type_to_str(literal_type)}]) doesn't match expected type "
                f"[{literal_type_to_str(expected)}].",
            )
        if expected.WhichOneof("type") == "enum_type":
            value = scalar.primitive.string_value if scalar.WhichOneof("value") == "primitive" else ""
            allowed = list(expected.enum_type.values)
            if value not in allowed:
                errs.collect(
                    "IllegalEnumValue",
                    node.id,
                    f"Input [{parameter}] on node [{node.id}] is an Enum and expects value to be one of "
                    f"[[{' '.join(allowed)}]].  Received [{value}]",
                )
        return literal_type, [], not errs.has_errors

    def _producer(self, node_id: str, errs: _Scope) -> _Node | None:
        """``validateNodeID``: the node a promise reads from; ``""`` is the workflow's inputs (start-node)."""
        if node_id == "":
            return self.nodes[START_NODE_ID]
        found = self.nodes.get(node_id)
        if found is None:
            errs.collect("NodeReferenceNotFound", node_id, f"Referenced node [{node_id}] not found.")
        return found

    def _output_var(self, node: _Node, name: str, errs: _Scope) -> tuple[interface_pb2.Variable | None, bool]:
        """``validateOutputVar``: an output of ``node`` under its alias, if it has one."""
        outputs, ok = self._effective_outputs(node, errs.scope())
        variable: interface_pb2.Variable | None = None
        if ok:
            variable = outputs.get(name) if outputs is not None else None
            if variable is None:
                errs.collect(
                    "VariableNameNotFound", node.id, f"Variable [{name}] not found on node [{node.id}]."
                )
        return variable, not errs.has_errors


def _mismatching_variables(
    output_var: str, source: types_pb2.LiteralType, input_var: str, expected: types_pb2.LiteralType
) -> str:
    return (
        f"The output variable '{output_var}' has type [{literal_type_to_str(source)}], but it's assigned to the "
        f"input variable '{input_var}' which has type type [{literal_type_to_str(expected)}]."
    )


def _same_type(
    node_id: str, name: str, variable: interface_pb2.Variable, expected: types_pb2.LiteralType, errs: _Scope
) -> bool:
    """``validateVarType``: the two types must be the same."""
    if variable.type != expected:
        errs.collect(
            "MismatchingTypes",
            node_id,
            f"Variable [{name}] (type [{literal_type_to_str(variable.type)}]) doesn't match expected type "
            f"[{literal_type_to_str(expected)}].",
        )
    return not errs.has_errors


def _validate_interface(node_id: str, interface: interface_pb2.TypedInterface, errs: _Scope) -> bool:
    """``ValidateInterface``: fills in empty input and output maps; every variable needs a name and a type."""
    for side in (interface.inputs, interface.outputs):
        if not side.variables:
            side.SetInParent()
            continue
        for name, variable in side.variables.items():
            if not name:
                errs.collect("ValueRequired", node_id, "Value required [paramName].")
            if not variable.HasField("type"):
                errs.collect("ValueRequired", node_id, "Value required [param.Type].")
    return not errs.has_errors


def _copy_node(node: workflow_pb2.Node) -> workflow_pb2.Node:
    copy = workflow_pb2.Node()
    copy.CopyFrom(node)
    return copy


def _optional_key(identifier: identifier_pb2.Identifier | None) -> IdentifierKey | None:
    return identifier_key(identifier) if identifier is not None else None


# -- CompileWorkflow ------------------------------------------------------------------------------------------


def compile_workflow(
    template: workflow_pb2.WorkflowTemplate | None,
    *,
    sub_workflows: Iterable[workflow_pb2.WorkflowTemplate] = (),
    tasks: Iterable[tasks_pb2.TaskTemplate | compiler_pb2.CompiledTask] = (),
    launch_plans: Iterable[LaunchPlanInterface] = (),
    max_nodes: int = MAX_WORKFLOW_NODES,
) -> compiler_pb2.CompiledWorkflowClosure:
    """Compile ``template`` as flyteadmin does at registration (``CompileWorkflow``).

    ``sub_workflows`` are the templates of the sub-workflows it may call (flytekit's
    ``WorkflowSpec.sub_workflows``), ``tasks`` the task templates and ``launch_plans`` the interfaces of the
    launch plans its nodes refer to; :func:`requirements` says which are needed. The closure's ``tasks`` are
    the needed ones in that order; its ``sub_workflows`` are all those given, compiled when called.

    Raises :class:`~taskplug.compiler.CompileErrors` with every problem found, and
    :class:`~taskplug.core.SpecError` (flyteadmin's text) when the compiled workflow has more than
    ``max_nodes`` top-level nodes besides start-node and end-node (0 = no limit).
    """
    errs = _Scope()
    if template is None:
        errs.collect("ValueRequired", "root", "Value required [wf].")
        errs.raise_if_any()
        raise AssertionError("unreachable")
    primary = compiler_pb2.CompiledWorkflow()
    primary.template.CopyFrom(template)

    task_index: dict[IdentifierKey, tasks_pb2.TaskTemplate] = {}
    for given in tasks:
        task = given.template if isinstance(given, compiler_pb2.CompiledTask) else given
        if not task.HasField("id"):
            errs.collect("ValueRequired", "task", "Value required [Template.Id].")
            errs.raise_if_any()
        key = identifier_key(task.id)
        if key not in task_index:
            copy = tasks_pb2.TaskTemplate()
            copy.CopyFrom(task)
            task_index[key] = copy

    subs = [compiler_pb2.CompiledWorkflow(template=t) for t in sub_workflows]
    sub_index = _index_sub_workflows(subs, errs)
    errs.raise_if_any()
    plan_index = {identifier_key(plan.id): plan for plan in launch_plans}

    # Everything referenced, through the sub-workflows too, must be given before anything is checked.
    needs = _Needs()
    _collect_needs(primary.template, sub_index, needs, errs)
    for launch_plan_id in needs.sorted_launch_plans():
        if identifier_key(launch_plan_id) not in plan_index:
            errs.collect(
                "WorkflowReferenceNotFound",
                START_NODE_ID,
                f"Referenced Workflow [{go_text(launch_plan_id)}] not found.",
            )
    for task_id in needs.sorted_tasks():
        if identifier_key(task_id) not in task_index:
            errs.collect(
                "TaskReferenceNotFound", START_NODE_ID, f"Referenced Task [{go_text(task_id)}] not found."
            )
    errs.raise_if_any()

    index = _Index(task_index, plan_index, sub_index)
    try:
        _Workflow(index, primary).validate(errs.scope())
    except RecursionError:
        # Deviation: Go has no bound and would overflow its stack; a workflow nested this deep (hundreds of
        # sub-workflows within sub-workflows) is refused with an error instead of crashing the compiler.
        errs.collect("WorkflowBuildError", "", _TOO_DEEP)
    errs.raise_if_any()

    user_nodes = len(primary.template.nodes) - 2
    if max_nodes > 0 and user_nodes > max_nodes:
        raise SpecError(
            "",
            f"number of nodes in workflow [{go_text(primary.template.id)}] exceeds limit "
            f"({user_nodes} > {max_nodes})",
        )
    closure = compiler_pb2.CompiledWorkflowClosure(primary=primary, sub_workflows=subs)
    for task_id in needs.sorted_tasks():
        closure.tasks.add().template.CopyFrom(task_index[identifier_key(task_id)])
    return closure
