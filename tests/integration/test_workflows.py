"""Whole flytekit workflows run with ``taskplug run -o json FILE.py WORKFLOW --input value`` on the embedded
cluster, held to flytekit's own answers: each workflow of ``examples/flytekit/pipelines.py`` and
``plugin_pipelines.py`` gives the outputs the same workflow gives when flytekit runs it in this process
(``pipelines.chain(a=2)``), its ``nodes`` report the phases Flyte gives them (cases not taken Skipped, the failed
node Failed with flytekit's error), and the exit code is a task's (0 success, 1 failed execution, 2 bad input).

Beside them: independent nodes run at the same time (their processes' recorded start and end times overlap);
bad input (a wrong-typed or missing input, an unknown workflow, a binding that does not type-check, a cycle)
exits 2 naming it and creates nothing; a SIGKILLed named run, run again, finishes without running a finished
node again or creating any pod twice; Ctrl-C aborts every running node and leaves no process behind.

The example runs are shared: one ``taskplug run`` per case, started together (a few at a time) for the cases
the session selected, and each test reads its own.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from support.waiting import wait_until
from taskplug.k8s import POD, ResourceType
from taskplug.localcluster import LocalCluster
from taskplug.localcluster._store import StoredEvent

from .conftest import PodLedger

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "flytekit"
PIPELINES = EXAMPLES / "pipelines.py"
PLUGIN_PIPELINES = EXAMPLES / "plugin_pipelines.py"
TASKPLUG = str(Path(sys.executable).parent / "taskplug")
DEADLINE = 240.0
"""A bound on one workflow run (a deadline on a loaded 2-core machine, not a timing)."""
AT_ONCE = 3
"""How many example runs go at the same time."""


@dataclass(frozen=True)
class Run:
    code: int
    stdout: str
    stderr: str
    cwd: Path

    @property
    def document(self) -> dict[str, Any]:
        assert self.stdout.strip(), f"exit {self.code}, no JSON on stdout; stderr:\n{self.stderr}"
        document: dict[str, Any] = json.loads(self.stdout)
        return document

    @property
    def nodes(self) -> dict[str, dict[str, Any]]:
        """Every reported node, nested ones included, by unique id."""
        found: dict[str, dict[str, Any]] = {}

        def walk(nodes: list[dict[str, Any]]) -> None:
            for node in nodes:
                found[node["id"]] = node
                walk(node.get("nodes") or [])

        walk(self.document.get("nodes") or [])
        return found

    def phases(self) -> dict[str, str]:
        return {node_id: node["phase"] for node_id, node in self.nodes.items()}


def run_taskplug(cwd: Path, *args: str | Path, timeout: float = DEADLINE) -> Run:
    cwd.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [TASKPLUG, "run", "--state-db", str(cwd / "state.db"), *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, "COLUMNS": "200"},
    )
    return Run(done.returncode, done.stdout, done.stderr, cwd)


@dataclass(frozen=True)
class Case:
    """One example workflow run: what to run and what Flyte (and flytekit's local run) says it gives."""

    file: Path
    workflow: str
    inputs: Mapping[str, Any]
    phases: Mapping[str, str]
    """Node unique id → phase, nested nodes included (the ones listed; others may be there too)."""
    code: int = 0
    expected: Any = None
    """The output ``o0`` when flytekit cannot run the workflow here (it needs Docker or a process group)."""
    error: str = ""
    """Words of the error flytekit raises locally, found in the failed node's and the workflow's error."""
    options: tuple[str, ...] = field(default=())
    """taskplug's own options."""

    def command(self) -> tuple[str, ...]:
        inputs = [item for name, value in self.inputs.items() for item in (f"--{name}", str(value))]
        return ("-o", "json", *self.options, str(self.file), self.workflow, *inputs)


CASES: dict[str, Case] = {
    "sequential": Case(
        PIPELINES, "chain", {"a": 2}, {"n0": "Succeeded", "n1": "Succeeded", "n2": "Succeeded"}
    ),
    "fan-out-fan-in": Case(
        PIPELINES, "fan_out", {"a": 3}, {"n0": "Succeeded", "n1": "Succeeded", "n2": "Succeeded"}
    ),
    "if-taken": Case(PIPELINES, "sign", {"n": -4}, {"n0": "Succeeded", "n0-0-n0-n0": "Succeeded"}),
    "else-taken": Case(PIPELINES, "sign", {"n": 5}, {"n0": "Succeeded", "n0-0-n0-n2": "Succeeded"}),
    "else-fail": Case(
        PIPELINES, "checked_half", {"n": -1}, {"n0": "Failed"}, code=1, error="n must not be negative"
    ),
    # The case reads slow_double (n0), which the branch (n2) does not wait for: the case waits for it.
    "branch-case-waits-for-its-inputs": Case(
        PIPELINES,
        "case_waits",
        {"a": 3},
        {"n0": "Succeeded", "n1": "Succeeded", "n2": "Succeeded", "n2-0-n2-n0": "Succeeded"},
    ),
    "nested-conditional-workflow-case": Case(PIPELINES, "quadrant", {"x": 1, "y": -1}, {"n0": "Succeeded"}),
    "nested-conditional": Case(PIPELINES, "quadrant", {"x": -1, "y": -1}, {"n0": "Succeeded"}),
    "sub-workflow": Case(
        PIPELINES,
        "outer",
        {"a": 2},
        {"n0": "Succeeded", "n0-0-n0": "Succeeded", "n0-0-n1": "Succeeded", "n0-0-n2": "Succeeded"}
        | {"n1": "Succeeded"},
    ),
    "launch-plan-node": Case(
        PIPELINES, "through_launch_plan", {"x": 3}, {"n0": "Succeeded", "n1": "Succeeded", "n2": "Succeeded"}
    ),
    "map-task": Case(
        PIPELINES, "squares_total", {"n": 4}, {"n0": "Succeeded", "n1": "Succeeded", "n2": "Succeeded"}
    ),
    # nested_dynamic(2) adds dynamic_sum(0) (dn0: it builds no node, so flytekit writes its outputs at once)
    # and dynamic_sum(1) (dn2, whose own add is dn2's dn0).
    "dynamic": Case(
        PIPELINES,
        "dynamic_workflow",
        {"n": 2},
        {f"n0-0-dn{i}": "Succeeded" for i in range(4)} | {"n0": "Succeeded", "n0-0-dn2-0-dn0": "Succeeded"},
    ),
    "dynamic-launch-plan": Case(
        PIPELINES,
        "dynamic_launches",
        {"n": 3},
        {"n0": "Succeeded"} | {f"n0-0-dn{i}": "Succeeded" for i in range(3)},
    ),
    "fail-after-executable-nodes": Case(
        PIPELINES,
        "keep_going",
        {"a": 5},
        {"n0": "Failed", "n1": "Succeeded", "n2": "Skipped"},
        code=1,
        error="integer division or modulo by zero",
    ),
    "failure-node": Case(
        PIPELINES,
        "with_cleanup",
        {"a": 0},
        {"n0": "Failed", "fn0": "Succeeded"},
        code=1,
        error="integer division or modulo by zero",
    ),
    "overrides": Case(PIPELINES, "overridden", {"a": 4}, {"n0": "Succeeded"}),
    "dataclass-attributes": Case(PIPELINES, "point_parts", {"a": 4}, {"n0": "Succeeded", "n1": "Succeeded"}),
    # flytekit runs a ContainerTask locally through Docker, and a PyTorch task's body needs the process group
    # the operator forms: their values are worked out here. triple(sum(triple(2), 1)) = 21; two replicas
    # all-reduce 1.5 * (1 + 2), plus 1.
    "container-task": Case(
        PLUGIN_PIPELINES,
        "container_in_the_middle",
        {"a": 2},
        {"n0": "Succeeded", "n1": "Succeeded", "n2": "Succeeded"},
        expected=21,
    ),
    "pytorch": Case(
        PLUGIN_PIPELINES,
        "distributed_then_add",
        {"scale": 1.5},
        {"n0": "Succeeded", "n1": "Succeeded"},
        expected=5.5,
        # The pytorch plugin is enabled as a deployment with the training operator enables it.
        options=("--config", str(EXAMPLES / "config.yaml")),
    ),
}


def _selected_cases(session: pytest.Session) -> list[str]:
    names = []
    for item in session.items:
        callspec = getattr(item, "callspec", None)
        name = callspec.params.get("case") if callspec is not None else None
        if isinstance(name, str) and name in CASES and name not in names:
            names.append(name)
    return names


@pytest.fixture(scope="module")
def runs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Future[Run]]]:
    """One ``taskplug run`` per case this session selected, started together, ``AT_ONCE`` at a time."""
    root = tmp_path_factory.mktemp("workflow-runs")
    with ThreadPoolExecutor(AT_ONCE) as pool:
        futures = {
            name: pool.submit(run_taskplug, root / name, *CASES[name].command())
            for name in _selected_cases(request.session)
        }
        yield futures


_IMPORT_LOCK = threading.Lock()


def local_output(case: Case) -> Any:
    """What flytekit's own local execution of the workflow returns (or the exception it raises)."""
    if case.expected is not None:
        return case.expected
    try:
        return getattr(local_module(case.file), case.workflow)(**case.inputs)
    except Exception as e:  # flytekit's error for a failing workflow: compared with the node's
        return e


def _as_json(value: Any) -> Any:
    """A flytekit output as ``-o json`` shows it (a dataclass as its fields)."""
    if hasattr(value, "__dataclass_fields__"):
        from dataclasses import asdict

        return asdict(value)
    return value


@pytest.mark.parametrize("case", list(CASES))
def test_a_workflow_gives_flytekits_outputs_and_node_phases(case: str, runs: dict[str, Future[Run]]) -> None:
    spec = CASES[case]
    expected = local_output(spec)
    run = runs[case].result(timeout=DEADLINE * len(CASES))
    document = run.document
    assert run.code == spec.code, run.stderr
    phases = run.phases()
    assert {node_id: phases.get(node_id) for node_id in spec.phases} == dict(spec.phases), phases
    if spec.code == 0:
        assert document["phase"] == "Success"
        assert document["outputs"] == {"o0": _as_json(expected)}
        return
    # flytekit raised: the failed node carries flytekit's message, and so does the workflow.
    assert isinstance(expected, Exception), expected
    assert spec.error in str(expected)
    failed = [node for node in run.nodes.values() if node["phase"] == "Failed"]
    assert failed and all(spec.error in node["error"]["message"] for node in failed), failed
    assert document["phase"] != "Success" and spec.error in document["error"]["message"]
    assert document["outputs"] is None


@pytest.mark.parametrize(
    ("case", "untaken"),
    [("if-taken", ("n0-0-n0-n1", "n0-0-n0-n2")), ("else-taken", ("n0-0-n0-n0", "n0-0-n0-n1"))],
)
def test_the_cases_a_branch_did_not_take_are_skipped(
    case: str, untaken: tuple[str, ...], runs: dict[str, Future[Run]]
) -> None:
    phases = runs[case].result(timeout=DEADLINE * len(CASES)).phases()
    assert {node_id: phases.get(node_id) for node_id in untaken} == dict.fromkeys(untaken, "Skipped"), phases


@pytest.mark.parametrize("case", ["overrides"])
def test_a_node_override_names_the_node(case: str, runs: dict[str, Future[Run]]) -> None:
    run = runs[case].result(timeout=DEADLINE * len(CASES))
    (node,) = run.document["nodes"]
    assert (node["id"], node["name"], node["attempts"]) == ("n0", "twice", 1)


@pytest.mark.parametrize("case", ["dynamic-launch-plan"])
def test_each_launch_plan_a_dynamic_task_launches_is_a_child_execution_of_its_own(
    case: str, runs: dict[str, Future[Run]]
) -> None:
    run = runs[case].result(timeout=DEADLINE * len(CASES))
    children = [run.nodes[f"n0-0-dn{i}"] for i in range(3)]
    assert [node["kind"] for node in children] == ["launchplan"] * 3
    executions = {node["execution"] for node in children}
    assert len(executions) == 3 and run.document["execution"] not in executions, executions
    # Each child is recorded on its own: `taskplug status` finds it by its key.
    for key in executions:
        status = subprocess.run(
            [TASKPLUG, "status", "--state-db", str(run.cwd / "state.db"), "-o", "json", key],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["phase"] == "Succeeded"


@pytest.mark.parametrize("case", ["failure-node"])
def test_the_failure_node_runs_after_the_failure_and_the_workflow_fails_with_the_first_error(
    case: str, runs: dict[str, Future[Run]]
) -> None:
    run = runs[case].result(timeout=DEADLINE * len(CASES))
    document = run.document
    ordered = [
        (event.get("node"), event["phase"])
        for event in document["events"]
        if event.get("kind") in ("node", "workflow")
    ]
    assert (
        ordered.index((None, "Failing"))
        < ordered.index(("fn0", "Succeeded"))
        < ordered.index((None, "Failed"))
    )
    assert document["error"]["code"] == document["nodes"][0]["error"]["code"]
    # It was given the error as flytekit gives it (err.failed_node_id is the failure node's own id).
    (log,) = run.cwd.rglob("*-fn0-0.log")
    assert "with_cleanup(a=0) failed at fn0:" in log.read_text() and "division" in log.read_text()


async def test_node_overrides_reach_the_pod(served: tuple[LocalCluster, Path], tmp_path: Path) -> None:
    cluster, kubeconfig = served
    created: list[dict[str, Any]] = []

    def record(rtype: ResourceType, event: StoredEvent) -> None:
        if rtype.plural == POD.plural and event.type == "ADDED":
            created.append(event.obj)

    cluster.store.observers.append(record)
    proc = await _start(
        tmp_path,
        *("-o", "json", "--name", "over-1", "--kubeconfig", kubeconfig, "--image", "localhost/examples:v1"),
        *("--env", f"PYTHONPATH={EXAMPLES}", PIPELINES, "overridden", "--a", "4"),
    )
    code, out, err = await _finish(proc)
    assert code == 0, err
    assert json.loads(out)["outputs"] == {"o0": 8}
    (pod,) = created
    (container,) = pod["spec"]["containers"]
    # with_overrides(requests=...) replaced the task's requests (the node's task overrides reach the plugin).
    assert container["resources"]["requests"] == {"cpu": "100m", "memory": "1Gi"}


# -- a module written for the tests below: its tasks keep a journal -----------------------------------------

JOURNAL_MODULE = textwrap.dedent(
    """
    import os
    import time
    from pathlib import Path

    from flytekit import task, workflow


    def note(journal: str, line: str) -> None:
        with open(journal, "a") as f:
            f.write(line + "\\n")


    def wait_for(path: Path, within: float) -> None:
        deadline = time.monotonic() + within
        while not path.exists() and time.monotonic() < deadline:
            time.sleep(0.05)


    @task
    def meet(journal: str, who: str, other: str) -> str:
        # Notes when it starts, waits (a bounded while) until the other has started too, notes when it ends.
        note(journal, f"start {who} {time.time()} {os.getpid()}")
        Path(journal).with_name(f"started-{who}").touch()
        wait_for(Path(journal).with_name(f"started-{other}"), 60.0)
        note(journal, f"end {who} {time.time()}")
        return who


    @task
    def both(a: str, b: str) -> str:
        return a + "+" + b


    @workflow
    def side_by_side(journal: str) -> str:
        return both(a=meet(journal=journal, who="left", other="right"), b=meet(journal=journal, who="right", other="left"))


    @task
    def step(journal: str, label: str, x: int, go: str = "") -> int:
        note(journal, f"run {label} {os.getpid()}")
        if go:
            wait_for(Path(go), 120.0)
        return x + 1


    @workflow
    def two_steps(journal: str, go: str) -> int:
        return step(journal=journal, label="second", x=step(journal=journal, label="first", x=1), go=go)


    @task
    def hold(journal: str, label: str) -> int:
        note(journal, f"hold {label} {os.getpid()}")
        time.sleep(300)
        return 0


    @task
    def add_up(a: int, b: int) -> int:
        return a + b


    @workflow
    def hold_both(journal: str) -> int:
        return add_up(a=hold(journal=journal, label="a"), b=hold(journal=journal, label="b"))
    """
)


def _journal_module(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    module = folder / "journaled.py"
    module.write_text(JOURNAL_MODULE)
    return module


def _lines(journal: Path, word: str) -> list[list[str]]:
    if not journal.exists():
        return []
    return [line.split() for line in journal.read_text().splitlines() if line.startswith(word + " ")]


def test_independent_nodes_run_at_the_same_time(tmp_path: Path) -> None:
    module = _journal_module(tmp_path / "code")
    journal = tmp_path / "marks" / "journal"
    journal.parent.mkdir()
    run = run_taskplug(tmp_path, "-o", "json", module, "side_by_side", "--journal", journal)
    assert run.code == 0, run.stderr
    assert run.document["outputs"] == {"o0": "left+right"}
    starts = {who: float(at) for _, who, at, _pid in _lines(journal, "start")}
    ends = {who: float(at) for _, who, at in _lines(journal, "end")}
    assert set(starts) == set(ends) == {"left", "right"}
    # Two intervals overlap when each starts before the other ends.
    assert starts["left"] < ends["right"] and starts["right"] < ends["left"], (starts, ends)


# -- bad input: exit 2 naming it, nothing created ----------------------------------------------------------


def _assert_nothing_created(cwd: Path) -> None:
    """No pod ran (no container log, no task data) and the state DB holds no execution and no node."""
    assert sorted(cwd.rglob("*.log")) == [], "a pod ran"
    assert not (cwd / ".taskplug" / "data" / "metadata").exists() or not any(
        (cwd / ".taskplug" / "data" / "metadata").rglob("*.pb")
    ), "task data was written"
    db = cwd / "state.db"
    if db.exists():
        connection = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)
        try:
            tables = {
                row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")
            }
            for table in {"executions", "nodes"} & tables:
                assert connection.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 0, table
        finally:
            connection.close()


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        pytest.param(("chain", "--a", "abc"), ("--a", "abc"), id="wrong-typed-input"),
        pytest.param(("sign",), ("--n",), id="missing-input"),
        pytest.param(("no_such_workflow", "--a", "1"), ("no_such_workflow", "chain"), id="unknown-workflow"),
    ],
)
def test_bad_input_on_the_command_line_exits_2_naming_it_and_creates_nothing(
    tmp_path: Path, arguments: tuple[str, ...], words: tuple[str, ...]
) -> None:
    run = run_taskplug(tmp_path, "-o", "json", PIPELINES, *arguments)
    assert run.code == 2, (run.stdout, run.stderr)
    for word in words:
        assert word in run.stderr, run.stderr
    assert "Traceback" not in run.stderr
    _assert_nothing_created(tmp_path)


def _serialized(workflow: Any) -> list[Any]:
    """The workflow, its tasks and its default launch plan as ``pyflyte serialize`` writes them (admin
    ``WorkflowSpec``, ``TaskSpec``, ``LaunchPlan`` messages, in flytekit's order)."""
    from collections import OrderedDict

    from flytekit import FlyteContextManager, LaunchPlan
    from flytekit.configuration import Image, ImageConfig, SerializationSettings
    from flytekit.tools.translator import get_serializable

    settings = SerializationSettings(
        image_config=ImageConfig(
            default_image=Image(name="default", fqn="localhost/taskplug-flytekit", tag="v1")
        )
    )
    entities: OrderedDict[Any, Any] = OrderedDict()
    get_serializable(entities, settings, workflow)
    get_serializable(
        entities,
        settings,
        LaunchPlan.get_default_launch_plan(FlyteContextManager.current_context(), workflow),
    )
    return [model.to_flyte_idl() for model in entities.values()]


def _cycle(template: Any) -> str:
    """n0's ``b`` bound to n1's output: n0 → n1 → n0."""
    (n0,) = [node for node in template.nodes if node.id == "n0"]
    (binding,) = [b for b in n0.inputs if b.var == "b"]
    binding.binding.ClearField("scalar")
    binding.binding.promise.node_id = "n1"
    binding.binding.promise.var = "o0"
    n0.upstream_node_ids.append("n1")
    return "CycleDetected"


def _mistyped(template: Any) -> str:
    """n2's ``b`` (an int) bound to a string."""
    (n2,) = [node for node in template.nodes if node.id == "n2"]
    (binding,) = [b for b in n2.inputs if b.var == "b"]
    binding.binding.scalar.primitive.Clear()
    binding.binding.scalar.primitive.string_value = "ten"
    return "MismatchingTypes"


@pytest.mark.parametrize(
    ("change", "node"), [pytest.param(_cycle, "n0", id="cycle"), pytest.param(_mistyped, "n2", id="mistyped")]
)
def test_a_workflow_that_does_not_compile_exits_2_naming_the_node_and_creates_nothing(
    tmp_path: Path, change: Any, node: str
) -> None:
    from flyteidl.admin import task_pb2, workflow_pb2

    from taskplug.compiler import CompileErrors, compile_workflow

    chain = local_module(PIPELINES).chain
    folder = tmp_path / "serialized"
    folder.mkdir()
    code = ""
    workflow_file = folder
    tasks = []
    for index, message in enumerate(_serialized(chain)):
        if isinstance(message, workflow_pb2.WorkflowSpec):
            code = change(message.template)
            workflow_file = folder / f"{index:02d}_pipelines.chain_2.pb"
            template = message.template
            (workflow_file).write_bytes(message.SerializeToString())
            continue
        if isinstance(message, task_pb2.TaskSpec):
            tasks.append(message.template)
        (folder / f"{index:02d}_entity.pb").write_bytes(message.SerializeToString())
    # The compiler says it first, with Flyte's code, about that node.
    with pytest.raises(CompileErrors) as raised:
        compile_workflow(template, tasks=tasks)
    assert [(e.code, e.node_id) for e in raised.value.errors if e.code == code], raised.value.errors

    spec = tmp_path / "spec.yaml"
    spec.write_text(
        json.dumps(
            {
                "templateFile": str(workflow_file),
                "execution": {"id": {"project": "flytesnacks", "domain": "development", "name": "bad-1"}},
                "inputs": {"a": 2},
            }
        )
    )
    run = run_taskplug(tmp_path, spec, "-o", "json")
    assert run.code == 2, (run.stdout, run.stderr)
    assert code in run.stderr and node in run.stderr, run.stderr
    assert "Traceback" not in run.stderr
    _assert_nothing_created(tmp_path)


def local_module(path: Path) -> Any:
    with _IMPORT_LOCK:
        sys.path.insert(0, str(path.parent))
        try:
            return importlib.import_module(path.stem)
        finally:
            sys.path.remove(str(path.parent))


# -- a named run SIGKILLed and run again; Ctrl-C ----------------------------------------------------------


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[LocalCluster, Path]]:
    """A process-mode local cluster on 127.0.0.1 that outlives the killed run, and a kubeconfig for it."""
    async with LocalCluster(mode="process", kill_grace_seconds=1.0) as cluster:
        await cluster.serve_http()
        yield cluster, cluster.kubeconfig(tmp_path / "kubeconfig")


async def _start(cwd: Path, *args: str | Path) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        TASKPLUG,
        "run",
        *("--state-db", str(cwd / "state.db")),
        *map(str, args),
        cwd=cwd,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )


async def _finish(proc: asyncio.subprocess.Process, within: float = DEADLINE) -> tuple[int, str, str]:
    try:
        out, err = await asyncio.wait_for(proc.communicate(), within)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_a_killed_named_run_run_again_does_not_rerun_a_finished_node_or_create_a_pod_twice(
    served: tuple[LocalCluster, Path], tmp_path: Path
) -> None:
    cluster, kubeconfig = served
    ledger = PodLedger(cluster)
    module = _journal_module(tmp_path / "code")
    journal, go = tmp_path / "journal", tmp_path / "go"
    args = (
        *("-o", "json", "--name", "steps-1", "--kubeconfig", kubeconfig),
        *("--image", "localhost/journaled:v1", "--env", f"PYTHONPATH={module.parent}"),
        *(module, "two_steps", "--journal", journal, "--go", go),
    )
    first = await _start(tmp_path, *args)
    try:
        # n0 has finished and n1's task is running (waiting for the go file): kill the run there.
        await wait_until(lambda: len(_lines(journal, "run")) == 2, within=DEADLINE, what="both steps started")
        first.send_signal(signal.SIGKILL)
    finally:
        await _finish(first)
    second = await _start(tmp_path, *args)
    go.touch()
    code, out, err = await _finish(second)
    assert code == 0, err
    document = json.loads(out)
    assert document["outputs"] == {"o0": 3}
    assert [line[1] for line in _lines(journal, "run")] == ["first", "second"], journal.read_text()
    assert {node["id"]: node["phase"] for node in document["nodes"]} == {"n0": "Succeeded", "n1": "Succeeded"}
    assert sorted(ledger.added) == ["steps-1-n0-0", "steps-1-n1-0"] and ledger.created_twice() == {}


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


async def test_ctrl_c_aborts_every_running_node_and_leaves_no_process_behind(tmp_path: Path) -> None:
    module = _journal_module(tmp_path / "code")
    journal = tmp_path / "journal"
    proc = await _start(tmp_path, "-o", "json", module, "hold_both", "--journal", journal)
    try:
        await wait_until(
            lambda: len(_lines(journal, "hold")) == 2, within=DEADLINE, what="both tasks running"
        )
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
    finally:
        code, out, err = await _finish(proc)
    assert code == 1, err
    document = json.loads(out)
    assert document["phase"] == "Aborted", document["phase"]
    phases = {node["id"]: node["phase"] for node in document["nodes"]}
    assert (phases["n0"], phases["n1"]) == ("Aborted", "Aborted"), phases
    for _, _label, pid in _lines(journal, "hold"):
        await wait_until(lambda pid=int(pid): not _alive(pid), within=10.0, what=f"task process {pid} gone")


# -- gates --------------------------------------------------------------------------------------------------


async def test_gates_wait_for_an_approval_and_a_value_then_finish(tmp_path: Path) -> None:
    name = "gated-1"
    state = ("--state-db", str(tmp_path / "state.db"))
    proc = await _start(tmp_path, "-o", "json", "--name", name, PIPELINES, "gated", "--a", "2")

    async def signal_command(*words: str) -> subprocess.CompletedProcess[str]:
        return await asyncio.to_thread(
            subprocess.run,
            [TASKPLUG, "signal", *words, *state],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    try:
        deadline = time.monotonic() + DEADLINE
        while True:  # each signal exists once its gate has started waiting (before that: exit 2)
            listed = await signal_command("list", name, "-o", "json")
            if listed.returncode == 0 and {s["signal_id"] for s in json.loads(listed.stdout)} >= {
                "approve-double",
                "factor",
            }:
                break
            assert time.monotonic() < deadline, (listed.stdout, listed.stderr)
            await asyncio.sleep(0.2)
        approved = await signal_command("approve", name, "approve-double")
        assert approved.returncode == 0, approved.stderr
        given = await signal_command("set", name, "factor", "3")
        assert given.returncode == 0, given.stderr
    except BaseException:
        proc.kill()  # the run would wait on its gates for ever
        raise
    finally:
        code, out, err = await _finish(proc)
    assert code == 0, err
    document = json.loads(out)
    # flytekit's local run: the sleep is simulated, approve and wait_for_input ask on the terminal (2*2 + 3).
    assert document["outputs"] == {"o0": 7}
    assert all(node["phase"] == "Succeeded" for node in document["nodes"]), document["nodes"]
