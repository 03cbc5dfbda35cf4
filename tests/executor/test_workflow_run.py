"""A workflow driven by the executor as propeller drives one: each task node through a scripted core plugin,
time moved by a FakeClock. Workflows are built as protobuf and compiled by ``taskplug.compiler``; the cases
are propeller's event sequences and policies (two nodes, both failure policies, abort, max parallelism,
resume from the store, a binding that cannot be resolved, branches, sub-workflows)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from flyteidl.core import (
    condition_pb2,
    identifier_pb2,
    interface_pb2,
    literals_pb2,
    tasks_pb2,
    types_pb2,
    workflow_pb2,
)

from taskplug.compiler import compile_workflow
from taskplug.core import (
    FakeClock,
    PhaseInfo,
    PluginEntry,
    PluginProperties,
    PluginResolver,
    TaskExecutionContext,
    Transition,
)
from taskplug.executor._executor import ExecutionResult, Executor, ExecutorSettings
from taskplug.executor._spec import ExecutionSpec, workflow_execution_spec
from taskplug.executor._store import MemoryStateStore, SQLiteStateStore, StateStore

INT = types_pb2.LiteralType(simple=types_pb2.INTEGER)


class Scripted:
    """Each task by name: ``add`` sums its int inputs plus one (Queued, Running, Success over three rounds),
    ``fail`` fails for good, ``hold`` stays Running until released. Records creates, aborts and finalizes
    by the node's unique id, and the most task nodes running at once."""

    def __init__(self) -> None:
        self.created: list[str] = []
        self.aborted: list[tuple[str, str]] = []
        self.finalized: list[str] = []
        self.running: set[str] = set()
        self.most_running = 0
        self.released = False
        self.handled: list[str] = []

    @property
    def id(self) -> str:
        return "scripted"

    def get_properties(self) -> PluginProperties:
        return PluginProperties()

    async def handle(self, tctx: TaskExecutionContext) -> Transition:
        meta = tctx.metadata
        node = meta.task_execution_id.id.node_execution_id.node_id
        self.handled.append(node)
        _, state = tctx.plugin_state_reader.get()
        step = (state or {}).get("step", 0)
        if state is None:
            self.created.append(node)
        tctx.plugin_state_writer.put(1, {"step": step + 1})
        task = tctx.task_reader.read().id.name
        if step == 0:
            return Transition.to(PhaseInfo.queued(None, 0, "submitted"))
        self.running.add(node)
        self.most_running = max(self.most_running, len(self.running))
        if (task == "hold" and not self.released) or step == 1:
            return Transition.to(PhaseInfo.running(0))
        self.running.discard(node)
        if task == "fail":
            return Transition.to(PhaseInfo.failure("BadThing", f"{node} failed"))
        inputs = tctx.input_reader.get()
        total = sum(lit.scalar.primitive.integer for lit in (inputs.literals.values() if inputs else []))
        out = literals_pb2.LiteralMap()
        out.literals["o0"].scalar.primitive.integer = total + 1
        path = Path(tctx.output_writer.output_prefix)
        path.mkdir(parents=True, exist_ok=True)
        (path / "outputs.pb").write_bytes(out.SerializeToString())
        return Transition.to(PhaseInfo.success())

    async def abort(self, tctx: TaskExecutionContext) -> None:
        node = tctx.metadata.task_execution_id.id.node_execution_id.node_id
        self.running.discard(node)
        self.aborted.append((node, tctx.metadata.task_execution_id.generated_name))

    async def finalize(self, tctx: TaskExecutionContext) -> None:
        self.finalized.append(tctx.metadata.task_execution_id.id.node_execution_id.node_id)


def task(name: str, inputs: Sequence[str] = ()) -> tasks_pb2.TaskTemplate:
    return tasks_pb2.TaskTemplate(
        id=identifier_pb2.Identifier(
            resource_type=identifier_pb2.TASK, project="p", domain="d", name=name, version="v1"
        ),
        type="scripted",
        interface=interface_pb2.TypedInterface(
            inputs=interface_pb2.VariableMap(variables={i: interface_pb2.Variable(type=INT) for i in inputs}),
            outputs=interface_pb2.VariableMap(variables={"o0": interface_pb2.Variable(type=INT)}),
        ),
    )


def promise(node: str, var: str = "o0") -> literals_pb2.BindingData:
    return literals_pb2.BindingData(promise=types_pb2.OutputReference(node_id=node, var=var))


def task_node(node_id: str, name: str, **bindings: literals_pb2.BindingData) -> workflow_pb2.Node:
    return workflow_pb2.Node(
        id=node_id,
        metadata=workflow_pb2.NodeMetadata(name=name),
        inputs=[literals_pb2.Binding(var=k, binding=v) for k, v in bindings.items()],
        task_node=workflow_pb2.TaskNode(reference_id=task(name, list(bindings)).id),
    )


def workflow(
    nodes: Sequence[workflow_pb2.Node],
    output: str | None,
    *,
    fail_after: bool = False,
    name: str = "wf",
) -> workflow_pb2.WorkflowTemplate:
    template = workflow_pb2.WorkflowTemplate(
        id=identifier_pb2.Identifier(
            resource_type=identifier_pb2.WORKFLOW, project="p", domain="d", name=name, version="v1"
        ),
        interface=interface_pb2.TypedInterface(
            inputs=interface_pb2.VariableMap(variables={"a": interface_pb2.Variable(type=INT)}),
            outputs=interface_pb2.VariableMap(
                variables={"o0": interface_pb2.Variable(type=INT)} if output else {}
            ),
        ),
        nodes=nodes,
    )
    if output:
        template.outputs.append(literals_pb2.Binding(var="o0", binding=promise(output)))
    if fail_after:
        template.metadata.on_failure = workflow_pb2.WorkflowMetadata.FAIL_AFTER_EXECUTABLE_NODES_COMPLETE
    return template


TASKS = [
    task("add", ["a"]),
    task("add", ["a", "b"]),
    task("fail", ["a"]),
    task("hold", ["a"]),
    task("hold", []),
    task("add", []),
]


def spec_of(
    template: workflow_pb2.WorkflowTemplate,
    *,
    a: int = 1,
    name: str = "e1",
    max_parallelism: int | None = None,
    sub_workflows: Sequence[workflow_pb2.WorkflowTemplate] = (),
) -> ExecutionSpec:
    closure = compile_workflow(
        template, sub_workflows=sub_workflows, tasks=_tasks_for(template, sub_workflows)
    )
    inputs = literals_pb2.LiteralMap()
    inputs.literals["a"].scalar.primitive.integer = a
    return workflow_execution_spec(
        closure,
        inputs,
        execution={"id": {"project": "p", "domain": "d", "name": name}},
        max_parallelism=max_parallelism,
    )


def _tasks_for(
    template: workflow_pb2.WorkflowTemplate, subs: Sequence[workflow_pb2.WorkflowTemplate]
) -> list[tasks_pb2.TaskTemplate]:
    """One template per task a node refers to, typed by the node's bindings."""
    found: dict[str, tasks_pb2.TaskTemplate] = {}
    stack = [n for t in [template, *subs] for n in t.nodes]
    while stack:
        node = stack.pop()
        if node.WhichOneof("target") == "task_node":
            name = node.task_node.reference_id.name
            found.setdefault(name, task(name, [b.var for b in node.inputs]))
        elif node.WhichOneof("target") == "branch_node":
            block = node.branch_node.if_else
            stack.extend([block.case.then_node, *[o.then_node for o in block.other]])
            if block.HasField("else_node"):
                stack.append(block.else_node)
    return list(found.values())


def executor(plugin: Scripted, tmp_path: Path, clock: FakeClock, store: StateStore | None = None) -> Executor:
    entry = PluginEntry("scripted", ("scripted",), lambda _: plugin)
    return Executor(
        resolver=PluginResolver([(entry, plugin)], {}),
        store=store or MemoryStateStore(),
        settings=ExecutorSettings(data_root=str(tmp_path / "data"), workers=4, resync_period=1.0),
        clock=clock,
    )


async def settle() -> None:
    for _ in range(50):
        await asyncio.sleep(0)


async def drive(clock: FakeClock, ex: Executor, key: str, *, steps: int = 200) -> ExecutionResult:
    waiter = asyncio.ensure_future(ex.wait(key))
    try:
        for _ in range(steps):
            await settle()
            if waiter.done():
                return waiter.result()
            await clock.advance(1.0)
        raise AssertionError(f"{key} did not end within {steps} fake seconds")
    finally:
        waiter.cancel()


async def run(plugin: Scripted, tmp_path: Path, spec: ExecutionSpec) -> ExecutionResult:
    clock = FakeClock()
    async with executor(plugin, tmp_path, clock) as ex:
        return await drive(clock, ex, await ex.submit(spec))


def node_events(result: ExecutionResult) -> list[tuple[str, str, str]]:
    """(kind, node, phase) of every workflow and node event, in order."""
    return [
        (e.get("kind", "task"), e.get("node") or "", e["phase"])
        for e in result.events
        if e.get("kind") in ("workflow", "node")
    ]


def by_id(result: ExecutionResult) -> dict[str, dict[str, Any]]:
    assert result.nodes is not None
    return {n["id"]: n for n in result.nodes}


# -- success -------------------------------------------------------------------------------------------------


async def test_two_nodes_in_a_chain_report_propellers_sequence_and_the_workflows_outputs(
    tmp_path: Path,
) -> None:
    wf = workflow([task_node("n0", "add", a=promise("", "a")), task_node("n1", "add", a=promise("n0"))], "n1")
    result = await run(Scripted(), tmp_path, spec_of(wf, a=1))
    assert result.phase == "Success"
    assert result.outputs == {"o0": 3}  # (1 + 1) + 1
    assert node_events(result) == [
        ("workflow", "", "Running"),
        ("node", "start-node", "Succeeded"),
        ("node", "n0", "Queued"),
        ("node", "n0", "Running"),
        ("node", "n0", "Succeeded"),
        ("node", "n1", "Queued"),
        ("node", "n1", "Running"),
        ("node", "n1", "Succeeded"),
        ("node", "end-node", "Queued"),
        ("node", "end-node", "Succeeded"),
        ("workflow", "", "Succeeding"),
        ("workflow", "", "Succeeded"),
    ]
    # A task event comes before its node's Running (the task handler records first).
    kinds = [(e.get("kind", "task"), e.get("node"), e["phase"]) for e in result.events]
    assert kinds.index(("task", "n0", "Queued")) < kinds.index(("node", "n0", "Running"))
    assert [n["phase"] for n in result.nodes or []] == ["Succeeded", "Succeeded"]


async def test_a_fan_out_joins_and_a_node_reads_two_upstream_outputs(tmp_path: Path) -> None:
    wf = workflow(
        [
            task_node("n0", "add", a=promise("", "a")),
            task_node("n1", "add", a=promise("", "a")),
            task_node("n2", "add2", a=promise("n0"), b=promise("n1")),
        ],
        "n2",
    )
    plugin = Scripted()
    result = await run(plugin, tmp_path, spec_of(wf, a=5))
    assert result.outputs == {"o0": 13}  # (5+1) + (5+1) + 1
    assert plugin.most_running >= 2  # the two independent nodes ran at once
    assert sorted(plugin.created) == ["n0", "n1", "n2"]


# -- failure policies ------------------------------------------------------------------------------------------


async def test_fail_immediately_aborts_a_running_sibling_and_never_starts_what_follows(
    tmp_path: Path,
) -> None:
    wf = workflow(
        [
            task_node("n0", "fail", a=promise("", "a")),
            task_node("n1", "hold", a=promise("", "a")),
            task_node("n2", "add", a=promise("n0")),
        ],
        None,
    )
    plugin = Scripted()
    result = await run(plugin, tmp_path, spec_of(wf))
    assert result.phase == "PermanentFailure"
    assert result.error is not None and result.error["code"] == "BadThing"  # the failed node's, unwrapped
    nodes = by_id(result)
    assert (nodes["n0"]["phase"], nodes["n1"]["phase"], nodes["n2"]["phase"]) == (
        "Failed",
        "Aborted",
        "NotYetStarted",
    )
    assert [n for n, _ in plugin.aborted if n == "n1"] == ["n1"]
    events = node_events(result)
    assert ("node", "n1", "Aborted") in events
    assert not any(node == "n2" for _, node, _ in events)  # below the failure: never visited
    # The workflow fails first, then aborts what runs, then ends (propeller's Failing round).
    assert events[-3:] == [("workflow", "", "Failing"), ("node", "n1", "Aborted"), ("workflow", "", "Failed")]
    aborted = next(e for e in result.events if e.get("node") == "n1" and e["phase"] == "Aborted")
    assert aborted["reason"] == "Some node execution failed, auto-abort."


async def test_fail_after_executable_nodes_complete_lets_siblings_finish_and_skips_dependants(
    tmp_path: Path,
) -> None:
    wf = workflow(
        [
            task_node("n0", "fail", a=promise("", "a")),
            task_node("n1", "add", a=promise("", "a")),
            task_node("n2", "add", a=promise("n0")),
        ],
        None,
        fail_after=True,
    )
    result = await run(Scripted(), tmp_path, spec_of(wf))
    assert result.phase == "PermanentFailure"
    nodes = by_id(result)
    assert (nodes["n0"]["phase"], nodes["n1"]["phase"], nodes["n2"]["phase"]) == (
        "Failed",
        "Succeeded",
        "Skipped",
    )
    skipped = next(e for e in result.events if e.get("node") == "n2")
    assert skipped["reason"] == "Node Skipped as parent node was skipped"


async def test_an_unresolvable_binding_fails_the_node_with_propellers_text(tmp_path: Path) -> None:
    wf = workflow(
        [task_node("n0", "add", a=promise("", "a")), task_node("n1", "add", a=promise("n0", "o0"))], "n1"
    )
    spec = spec_of(wf)
    assert spec.workflow is not None
    # The compiled binding names an output the producer does not write (a broken closure).
    node = spec.workflow.closure.primary.template.nodes[3]
    assert node.id == "n1"
    node.inputs[0].binding.promise.var = "o9"
    result = await run(Scripted(), tmp_path, spec)
    assert result.error is not None
    assert result.error["code"] == "BindingResolutionFailure" and result.error["kind"] == "SYSTEM"
    assert result.error["message"].startswith("failed at Node[n1]. BindingResolutionError: Error binding Var")
    assert "Failed to find [n0].[o9]" in result.error["message"]


# -- abort, parallelism, resume ---------------------------------------------------------------------------------


async def test_an_abort_reaches_every_running_node_and_ends_the_workflow_aborted(tmp_path: Path) -> None:
    wf = workflow(
        [task_node("n0", "hold", a=promise("", "a")), task_node("n1", "hold", a=promise("", "a"))], None
    )
    plugin = Scripted()
    clock = FakeClock()
    async with executor(plugin, tmp_path, clock) as ex:
        key = await ex.submit(spec_of(wf))
        for _ in range(4):
            await settle()
            await clock.advance(1.0)
        assert sorted(plugin.running) == ["n0", "n1"]
        ex.abort(key)
        result = await drive(clock, ex, key)
    assert result.phase == "Aborted"
    assert sorted(n for n, _ in plugin.aborted) == ["n0", "n1"]
    assert {n["phase"] for n in result.nodes or []} == {"Aborted"}
    assert node_events(result)[-1] == ("workflow", "", "Aborted")
    task_aborts = [e for e in result.events if e.get("kind", "task") == "task" and e["phase"] == "Aborted"]
    assert {e["reason"] for e in task_aborts} == {"Workflow aborted."}


async def test_max_parallelism_bounds_the_task_nodes_running_at_once(tmp_path: Path) -> None:
    nodes = [task_node(f"n{i}", "add", a=promise("", "a")) for i in range(6)]
    plugin = Scripted()
    result = await run(plugin, tmp_path, spec_of(workflow(nodes, None), max_parallelism=2))
    assert result.phase == "Success"
    assert plugin.most_running == 2
    assert len(plugin.created) == 6


async def test_a_stopped_executor_resumes_without_starting_a_finished_node_again(tmp_path: Path) -> None:
    wf = workflow(
        [task_node("n0", "add", a=promise("", "a")), task_node("n1", "hold", a=promise("n0"))], "n1"
    )
    spec = spec_of(wf, name="resumed")
    plugin = Scripted()
    clock = FakeClock()
    db = tmp_path / "state.db"
    store = SQLiteStateStore(db)
    async with executor(plugin, tmp_path, clock, store) as ex:
        await ex.submit(spec)
        for _ in range(12):
            await settle()
            await clock.advance(1.0)
        assert "n1" in plugin.running  # n0 done, n1 running: stop here
    store.close()
    assert plugin.created == ["n0", "n1"]

    again = Scripted()
    again.released = True
    store = SQLiteStateStore(db)
    try:
        async with executor(again, tmp_path, clock, store) as ex:
            result = await drive(clock, ex, await ex.submit(spec))
    finally:
        store.close()
    assert result.phase == "Success"
    assert result.outputs == {"o0": 3}  # hold(a=n0's 2) + 1, carried on from its plugin state
    assert again.created == []  # neither node was created again
    assert by_id(result)["n0"]["attempts"] == 1


# -- branches and sub-workflows ------------------------------------------------------------------------------


def branch(
    node_id: str, then: workflow_pb2.Node, otherwise: workflow_pb2.Node, threshold: int
) -> workflow_pb2.Node:
    condition = condition_pb2.BooleanExpression(
        comparison=condition_pb2.ComparisonExpression(
            operator=condition_pb2.ComparisonExpression.GT,
            left_value=condition_pb2.Operand(var="x"),
            right_value=condition_pb2.Operand(primitive=literals_pb2.Primitive(integer=threshold)),
        )
    )
    return workflow_pb2.Node(
        id=node_id,
        inputs=[literals_pb2.Binding(var="x", binding=promise("", "a"))],
        branch_node=workflow_pb2.BranchNode(
            if_else=workflow_pb2.IfElseBlock(
                case=workflow_pb2.IfBlock(condition=condition, then_node=then), else_node=otherwise
            )
        ),
    )


async def test_a_branch_runs_only_the_case_taken_and_outputs_its_result(tmp_path: Path) -> None:
    wf = workflow(
        [
            branch(
                "n0",
                task_node("n0", "add", a=promise("", "a")),
                task_node("n1", "fail", a=promise("", "a")),
                threshold=3,
            )
        ],
        "n0",
    )
    plugin = Scripted()
    result = await run(plugin, tmp_path, spec_of(wf, a=5))
    assert result.phase == "Success" and result.outputs == {"o0": 6}
    assert plugin.created == ["n0-0-n0-n0"]  # the then case, under the branch; the else never ran
    assert by_id(result)["n0"]["nodes"][0]["id"] == "n0-0-n0-n0"

    low = await run(Scripted(), tmp_path / "low", spec_of(wf, a=1, name="e2"))
    assert low.phase == "PermanentFailure" and low.error is not None and low.error["code"] == "BadThing"


async def test_a_sub_workflow_runs_its_nodes_under_the_node_and_hands_up_its_outputs(tmp_path: Path) -> None:
    sub = workflow([task_node("n0", "add", a=promise("", "a"))], "n0", name="sub")
    node = workflow_pb2.Node(
        id="n0",
        inputs=[literals_pb2.Binding(var="a", binding=promise("", "a"))],
        workflow_node=workflow_pb2.WorkflowNode(sub_workflow_ref=sub.id),
    )
    wf = workflow([node, task_node("n1", "add", a=promise("n0"))], "n1")
    plugin = Scripted()
    result = await run(plugin, tmp_path, spec_of(wf, a=1, sub_workflows=[sub]))
    assert result.phase == "Success" and result.outputs == {"o0": 3}
    assert plugin.created == ["n0-0-n0", "n1"]
    events = node_events(result)
    assert events.index(("node", "n0-0-start-node", "Succeeded")) < events.index(("node", "n0", "Running"))
    assert by_id(result)["n0"]["kind"] == "subworkflow"


async def test_an_event_about_one_nodes_object_gives_that_node_alone_a_round(tmp_path: Path) -> None:
    """A wide workflow must not give every running node a round for every event of one (propeller does;
    it is quadratic in a fan-out): an informer event names its object, and only its node is looked at; an
    event that names no object (the owner's) still looks at every node."""
    wf = workflow(
        [task_node("n0", "hold", a=promise("", "a")), task_node("n1", "hold", a=promise("", "a"))], None
    )
    plugin = Scripted()
    clock = FakeClock()
    async with executor(plugin, tmp_path, clock) as ex:
        key = await ex.submit(spec_of(wf, name="woken"))
        for _ in range(4):
            await settle()
            await clock.advance(1.0)
        await settle()
        assert sorted(plugin.running) == ["n0", "n1"]
        plugin.handled.clear()
        assert ex.enqueue_object("", "woken-n0-0")  # n0's pod changed (no time passes)
        await settle()
        assert plugin.handled == ["n0"]
        plugin.handled.clear()
        ex.enqueue_owner("p-d", "woken")  # some object of the execution changed
        await settle()
        assert sorted(plugin.handled) == ["n0", "n1"]
        plugin.handled.clear()
        await clock.advance(1.0)  # each asked for its resync: both are due
        await settle()
        assert sorted(plugin.handled) == ["n0", "n1"]
        ex.abort(key)
        await drive(clock, ex, key)
