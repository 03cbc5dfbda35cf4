"""What ``taskplug run`` shows of a workflow, driven by events built here: the live view's tree of nodes (a
terminal simulated by a rich console of a given size), the event lines written to a pipe, and the outcome
printed at the end. The outline comes from a real flytekit workflow, serialized and compiled as ``taskplug
run FILE.py WF`` compiles it."""

from __future__ import annotations

import io
import textwrap
from pathlib import Path

import pytest
from rich.console import Console

from taskplug.cli._flytekit_module import serialize_workflow
from taskplug.cli._progress import EventLines, Progress
from taskplug.cli._run import _print_outcome
from taskplug.cli._workflow_view import NodeOutline, WorkflowNodes, workflow_outline
from taskplug.executor import Event, ExecutionResult, workflow_spec

MODULE = textwrap.dedent(
    """
    from flytekit import conditional, task, workflow


    @task
    def double(a: int) -> int:
        return 2 * a


    @task
    def boom(a: int) -> int:
        if a > 0:
            raise ValueError(f"a={a} is not acceptable")
        return a


    @workflow
    def inner(a: int) -> int:
        return boom(a=double(a=a))


    @workflow
    def wf(a: int = 1) -> int:
        b = double(a=a)
        c = inner(a=b)
        return conditional("big").if_(c > 5).then(double(a=c)).else_().then(boom(a=c))
    """
)

TRACEBACK = "Traceback (most recent call last):\n  File 'x.py', line 3\nValueError: a=4 is not acceptable\n"


@pytest.fixture(scope="module")
def outline(tmp_path_factory: pytest.TempPathFactory) -> tuple[NodeOutline, ...]:
    module = tmp_path_factory.mktemp("wfview") / "wfview_module.py"
    module.write_text(MODULE)
    found = workflow_outline(workflow_spec(serialize_workflow(module, "wf"), {}))
    assert found is not None
    return found


def _node(node: str, phase: str, error: str = "") -> Event:
    body = {"kind": "USER", "code": "Error", "message": error} if error else None
    return Event(0, phase, 0, error, None, error=body, kind="node", node=node)


def _task(node: str, phase: str, attempt: int = 0, reason: str = "") -> Event:
    return Event(attempt, phase, 0, reason, None, node=node)


def _workflow(phase: str, error: str = "") -> Event:
    body = {"kind": "USER", "code": "Error", "message": error} if error else None
    return Event(0, phase, 0, error, None, error=body, kind="workflow")


# n1 (inner) fails because its node n1-0-n1 (boom) failed; the branch n2 never runs.
FAILING_RUN = [
    _workflow("Running"),
    _node("start-node", "Succeeded"),
    _node("n0", "Queued"),
    _task("n0", "Queued", reason="task submitted to K8s"),
    _node("n0", "Running"),
    _task("n0", "Success"),
    _node("n0", "Succeeded"),
    _node("n1", "Queued"),
    _node("n1", "Running"),
    _node("n1-0-start-node", "Succeeded"),
    _node("n1-0-n0", "Queued"),
    _task("n1-0-n0", "Success"),
    _node("n1-0-n0", "Succeeded"),
    _node("n1-0-n1", "Queued"),
    _task("n1-0-n1", "RetryableFailure", 0, TRACEBACK),
    _task("n1-0-n1", "Running", 1),
    _node("n1-0-n1", "Failed", TRACEBACK),
    _node("n1", "Failed", TRACEBACK),
    _workflow("Failing", TRACEBACK),
    _workflow("Failed", TRACEBACK),
]


def test_the_outline_names_each_node_its_kind_and_the_nodes_under_sub_workflows_and_branches(
    outline: tuple[NodeOutline, ...],
) -> None:
    top = [(n.id, n.name, n.kind) for n in outline if n.kind != "hidden"]
    assert top[:2] == [("n0", "double", "task"), ("n1", "inner", "sub-workflow")]
    assert top[2][0] == "n2" and top[2][2] == "branch"
    assert [(n.id, n.name) for n in outline[1].children] == [
        ("n1-0-n0", "double"),
        ("n1-0-n1", "boom"),
        ("n1-0-start-node", "start-node"),
        ("n1-0-end-node", "end-node"),
    ]
    cases = outline[2].children
    assert [c.id for c in cases] == ["n2-0-n2-n0", "n2-0-n2-n1"] and all(c.case for c in cases)


def test_the_pipe_shows_one_line_per_node_and_workflow_event_naming_the_node_and_ends_with_the_failed_node(
    outline: tuple[NodeOutline, ...],
) -> None:
    stream = io.StringIO()
    lines = EventLines(stream, "k", outline=outline)
    for event in FAILING_RUN:
        lines.on_event("k", event)
    lines.on_event("other", _node("n0", "Failed", "not ours"))
    written = [line.split("s  ", 1)[1] for line in stream.getvalue().splitlines()]
    assert written[:5] == [
        "workflow: Running",
        "n0 double: Queued",
        "n0 double: attempt 0 Queued  task submitted to K8s",
        "n0 double: Running",
        "n0 double: attempt 0 Success",
    ]
    assert "n1-0-n1 boom: attempt 0 RetryableFailure  ValueError: a=4 is not acceptable" in written
    assert "n1-0-n1 boom: attempt 1 Running" in written
    assert "n1-0-n1 boom: Failed  ValueError: a=4 is not acceptable" in written
    # Start and end nodes say nothing; another execution's events are not this one's.
    assert not any("start-node" in line or "not ours" in line for line in written)
    assert written[-1] == "workflow: Failed  node n1-0-n1 boom failed: ValueError: a=4 is not acceptable"


def test_without_an_outline_the_lines_name_nodes_by_id(outline: tuple[NodeOutline, ...]) -> None:
    stream = io.StringIO()
    lines = EventLines(stream, "k")
    for event in FAILING_RUN:
        lines.on_event("k", event)
    text = stream.getvalue()
    assert "  n0: Queued\n" in text and "  n1-0-n1: Failed  ValueError" in text
    assert text.splitlines()[-1].endswith(
        "workflow: Failed  node n1-0-n1 failed: ValueError: a=4 is not acceptable"
    )


def test_a_map_nodes_elements_are_counted_on_its_lines() -> None:
    stream = io.StringIO()
    lines = EventLines(stream, "k")
    resources: list[dict[str, object]] = [
        {"index": 0, "phase": "Success"},
        {"index": 1, "phase": "PermanentFailure", "reason": TRACEBACK},
    ]
    lines.on_event("k", Event(0, "Running", 1, "", None, external_resources=resources, node="n3"))
    text = stream.getvalue()
    assert "n3: 2/2 elements done  succeeded 1  failed 1" in text
    assert "n3: element 1 failed: ValueError: a=4 is not acceptable\n" in text


def _console(width: int = 140, height: int = 60) -> Console:
    return Console(width=width, height=height, markup=False, emoji=False, highlight=False, record=True)


def _shown(console: Console, progress: Progress) -> str:
    with console.capture() as captured:
        console.print(progress.render())
    return captured.get()


def test_the_live_view_nests_nodes_under_their_sub_workflow_and_shows_the_failed_nodes_error(
    outline: tuple[NodeOutline, ...],
) -> None:
    console = _console()
    progress = Progress(console, "k", outline=outline)
    for event in FAILING_RUN[:16]:
        progress.on_event("k", event)
    text = _shown(console, progress)
    rows = {line.split()[0]: line for line in text.splitlines() if line.strip()}
    assert text.splitlines()[0].startswith("workflow Running")
    assert rows["n0"].split()[1:4] == ["double", "task", "Succeeded"]
    assert rows["n1"].split()[1:4] == ["inner", "sub-workflow", "Running"]
    nested = [line for line in text.splitlines() if line.startswith("  n1-0-")]
    assert [line.split()[:2] for line in nested] == [["n1-0-n0", "double"], ["n1-0-n1", "boom"]]
    # The task's attempt and the reason it gave last are on its node's line.
    assert nested[1].split()[2:5] == ["task", "Queued", "1"] and "Running" in nested[1]
    # A branch's cases appear once taken; the branch itself waits.
    assert "n2-0-" not in text and rows["n2"].split()[2:4] == ["branch", "NotYetStarted"]

    for event in FAILING_RUN[16:]:
        progress.on_event("k", event)
    text = _shown(console, progress)
    assert text.splitlines()[0].startswith("workflow Failed")
    assert "node n1-0-n1 boom failed: ValueError: a=4 is not acceptable" in text
    assert "node n1 inner failed" not in text  # its failure is its child's


def test_a_hundred_nodes_on_a_small_screen_collapse_succeeded_ones_into_a_count() -> None:
    outline = tuple(NodeOutline(f"n{i}", f"t{i}", "task") for i in range(100))
    console = _console(height=30)
    progress = Progress(console, "k", outline=outline)
    progress.on_event("k", _workflow("Running"))
    for i in range(90):
        progress.on_event("k", _node(f"n{i}", "Succeeded"))
    for i in range(90, 95):
        progress.on_event("k", _node(f"n{i}", "Running"))
    progress.on_event("k", _node("n95", "Failed", "it broke"))
    text = _shown(console, progress)
    assert len(text.splitlines()) <= 30
    assert "90 node(s) succeeded or skipped not shown" in text
    assert "n95 t95" in text and "n90 t90" in text and "n99 t99" in text
    assert "n3 t3 " not in text
    assert (
        "96/100 node(s) done" not in text and "91/100 node(s) done: Failed 1, Running 5, Succeeded 90" in text
    )

    # On a tall screen every node has its line.
    tall = _console(height=200)
    progress.console = tall
    assert "n3 t3 " in _shown(tall, progress) and "not shown" not in _shown(tall, progress)


def test_nodes_the_outline_does_not_know_are_placed_under_the_node_their_id_begins_with() -> None:
    nodes = WorkflowNodes()
    for event in (_node("n4", "Running"), _node("n4-0-n0", "Running"), _node("n4-0-n0-0-n1", "Queued")):
        nodes.on_event(event)
    nodes.on_event(_node("n40", "Queued"))
    assert [(depth, view.id) for depth, view in nodes.walk()] == [
        (0, "n4"),
        (1, "n4-0-n0"),
        (2, "n4-0-n0-0-n1"),
        (0, "n40"),
    ]


def test_a_node_the_outline_does_not_know_is_named_by_its_node_events() -> None:
    nodes = WorkflowNodes()
    named = Event(0, "Queued", 0, "", None, kind="node", node="n0-0-dn0", name="square")
    for event in (_node("n0", "Running"), named, _task("n0-0-dn0", "Running")):
        nodes.on_event(event)
    assert nodes.nodes["n0-0-dn0"].name == "square"
    assert nodes.nodes["n0"].name == ""  # no event named it


def test_the_outcome_of_a_failed_workflow_names_the_nodes_that_failed_and_their_errors(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    error = {"kind": "USER", "code": "Error", "message": TRACEBACK}
    nodes = [
        {"id": "n0", "name": "double", "phase": "Succeeded", "attempts": 1, "error": None},
        {
            "id": "n1",
            "name": "inner",
            "phase": "Failed",
            "attempts": 1,
            "error": error,
            "nodes": [
                {"id": "n1-0-n0", "name": "double", "phase": "Succeeded", "attempts": 1, "error": None},
                {"id": "n1-0-n1", "name": "boom", "phase": "Failed", "attempts": 2, "error": error},
            ],
        },
        {"id": "n2", "name": "n2", "phase": "NotYetStarted", "attempts": 0, "error": None},
    ]
    result = ExecutionResult(
        key="p/d/x/wf",
        phase="PermanentFailure",
        attempts=1,
        error=error,
        outputs=None,
        events=[],
        nodes=nodes,
    )
    _print_outcome(result)
    out = capsys.readouterr().out
    assert "5 node(s): 2 Failed, 1 NotYetStarted, 2 Succeeded" in out
    assert "  node n1-0-n1 boom failed (2 attempt(s)): ValueError: a=4 is not acceptable" in out
    assert "node n1 inner" not in out


def test_the_outline_is_none_for_a_task(tmp_path: Path) -> None:
    from taskplug.executor import load_spec

    from .conftest import HELLO

    assert workflow_outline(load_spec(HELLO)) is None


def test_a_resumed_runs_view_starts_from_the_stored_records(outline: tuple[NodeOutline, ...]) -> None:
    from taskplug.executor import ExecutionRecord

    console = _console()
    progress = Progress(console, "p/d/x/wf", outline=outline)
    done = ExecutionRecord(key="p/d/x/n0", workflow_state={"phase": 5}, task_phase=6, plugin_state={})
    progress.seed([done], workflow_state={"phase": 1})
    progress.on_event("p/d/x/wf", _node("n1", "Running"))
    text = _shown(console, progress)
    rows = {line.split()[0]: line for line in text.splitlines() if line.strip()}
    assert rows["workflow"].startswith("workflow Running")
    assert rows["n0"].split()[3:5] == ["Succeeded", "0"] and rows["n1"].split()[3] == "Running"


def test_a_servers_events_keep_their_kind_and_node() -> None:
    from taskplug.cli._remote_run import _event

    event = _event({"attempt": 0, "phase": "Running", "kind": "node", "node": "n1-0-n0", "reason": ""})
    assert (event.kind, event.node) == ("node", "n1-0-n0")
    assert (
        _event({"attempt": 1, "phase": "Queued"}).kind,
        _event({"attempt": 1, "phase": "Queued"}).node,
    ) == (
        "task",
        None,
    )


def test_a_deeply_nested_start_nodes_hashed_id_is_known_from_the_outline_and_not_shown() -> None:
    from taskplug.k8s import fixed_length_unique_id

    hashed = fixed_length_unique_id("n10-0-n0-0-start-node", 20)
    assert hashed.startswith("f")
    outline = (
        NodeOutline(
            "n10",
            "outer",
            "sub-workflow",
            (
                NodeOutline(
                    "n10-0-n0", "inner", "sub-workflow", (NodeOutline(hashed, "start-node", "hidden"),)
                ),
            ),
        ),
    )
    nodes = WorkflowNodes(outline)
    assert nodes.on_event(_node(hashed, "Succeeded")) is None
    assert [view.id for _, view in nodes.walk()] == ["n10", "n10-0-n0"]


def test_an_aborted_workflows_end_line_names_a_few_aborted_nodes_and_counts_the_rest() -> None:
    stream = io.StringIO()
    lines = EventLines(stream, "k")
    lines.on_event("k", _workflow("Running"))
    for i in range(5):
        lines.on_event("k", _node(f"n{i}", "Running"))
        lines.on_event("k", _node(f"n{i}", "Aborted", "Workflow aborted."))
    lines.on_event("k", _workflow("Aborted", "Workflow aborted."))
    end = stream.getvalue().splitlines()[-1].split("s  ", 1)[1]
    assert end == (
        "workflow: Aborted  node n0 aborted: Workflow aborted.; node n1 aborted: Workflow aborted.; "
        "node n2 aborted: Workflow aborted.; and 2 more node(s)"
    )
