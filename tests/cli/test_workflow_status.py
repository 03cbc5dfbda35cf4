"""``taskplug status`` and ``taskplug logs`` on a workflow execution: from node records written here into a
real state DB (and pod log folders laid out as the embedded cluster keeps them), and after one real workflow
run on the embedded cluster in simulated mode, whose event lines are read from a pipe as a user would."""

from __future__ import annotations

import json
import re
import subprocess
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from taskplug.executor import Event, ExecutionRecord, SQLiteStateStore
from taskplug.k8s import fixed_length_unique_id

from .conftest import DEADLINE, TASKPLUG, assert_bad_input, invoke

KEY = "p/d/wfx/wf"
ERROR = {"kind": "USER", "code": "Error", "message": "Traceback (most recent call last):\nValueError: no\n"}


def _node(unique: str, phase: int, **fields: object) -> ExecutionRecord:
    fields.setdefault("workflow_state", {"phase": phase})
    return ExecutionRecord(key=f"p/d/wfx/{unique}", **fields)  # type: ignore[arg-type]


@pytest.fixture
def state_db(tmp_path: Path) -> Path:
    """A failed workflow: n0 succeeded; sub-workflow n1 failed as its node n1-0-n1 did (retried once); n2,
    a map node, has two elements; a task execution beside it."""
    path = tmp_path / "state.db"
    store = SQLiteStateStore(path)
    store.save(
        ExecutionRecord(
            key=KEY, workflow_state={"phase": 5}, terminal=True, outcome="PermanentFailure", error=ERROR
        )
    )
    store.save_nodes(
        KEY,
        [
            _node("n0", 5, task_phase=6, plugin_state={}),
            _node("n1", 6, error=ERROR),
            _node("n1-0-n0", 5, task_phase=6, plugin_state={}),
            _node("n1-0-n1", 6, task_phase=8, attempt=1, plugin_state={}, error=ERROR),
            _node("n1-0-end-node", 0),
            _node("n2", 2, task_phase=5, plugin_state={}, array={"phase": 1}),
            # Sub-workflow n3's sub-workflow n3-0-n10: its start node's id is hashed.
            _node("n3", 2),
            _node("n3-0-n10", 2),
            _node(fixed_length_unique_id("n3-0-n10-0-start-node", 20), 5),
            _node("n4", 5, workflow_state={"phase": 5, "child": "p/d/wfx-n4-0/wf"}),
        ],
    )
    from taskplug.executor import NodeRecord

    store.save_nodes(KEY, [NodeRecord(path="n2/0", node_phase=5), NodeRecord(path="n2/1", node_phase=2)])
    for node, name in (("n0", "square"), ("n1-0-n1", "boom")):  # node events name their node
        store.append_event(KEY, Event(0, "Queued", 0, "", None, kind="node", node=node, name=name))
    store.save(ExecutionRecord(key="p/d/solo/n0", task_phase=5))
    store.close()
    return path


def test_status_lists_the_executions_of_the_state_db(runner: CliRunner, state_db: Path) -> None:
    result = invoke(runner, "status", "--state-db", state_db)
    assert result.exit_code == 0, result.stderr
    rows = [line.split() for line in result.stdout.splitlines()[1:]]
    assert [(r[0], r[1], r[-1]) for r in rows] == [
        ("Running", "task", "p/d/solo/n0"),
        ("Failed", "workflow", KEY),
    ]
    listed = json.loads(invoke(runner, "status", "--state-db", state_db, "-o", "json").stdout)
    assert [(e["execution"], e["kind"], e["terminal"]) for e in listed["executions"]] == [
        ("p/d/solo/n0", "task", False),
        (KEY, "workflow", True),
    ]


def test_status_of_a_workflow_shows_its_nodes_nested_and_the_failed_nodes_error(
    runner: CliRunner, state_db: Path
) -> None:
    result = invoke(runner, "status", "--state-db", state_db, "wfx")  # its name alone
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"{KEY}: workflow Failed"
    rows = [line for line in lines if re.match(r"\s*n\d", line)]
    assert rows[1].split()[:2] == ["n1", "Failed"]  # a sub-workflow: no attempt of its own
    # n0 and n1-0-n1 named by their node events (records hold no names)
    assert [r.split()[:4] for r in rows[:1] + rows[2:5]] == [
        ["n0", "square", "Succeeded", "0"],
        ["n1-0-n0", "Succeeded", "0"],
        ["n1-0-n1", "boom", "Failed", "1"],
        ["n2", "Running", "0", "1/2"],
    ]
    assert rows[2].startswith("  n1-0-n0") and rows[3].startswith("  n1-0-n1")
    assert "end-node" not in result.stdout
    # The hashed start node is not a node of its own; the launch plan node names its child execution.
    assert [r.split()[0] for r in rows[5:]] == ["n3", "n3-0-n10", "n4"]
    assert rows[6].startswith("  n3-0-n10") and "execution p/d/wfx-n4-0/wf" in rows[7]
    assert "1/2 element(s) succeeded" in rows[4]
    assert "node n1-0-n1 boom failed: ValueError: no" in result.stdout
    assert "node n1 failed" not in result.stdout

    document = json.loads(invoke(runner, "status", "--state-db", state_db, KEY, "-o", "json").stdout)
    assert (document["kind"], document["phase"], document["outcome"]) == (
        "workflow",
        "Failed",
        "PermanentFailure",
    )
    n1 = document["nodes"][1]
    assert [n["id"] for n in n1["nodes"]] == ["n1-0-n0", "n1-0-n1"]
    assert document["nodes"][0]["name"] == "square" and "name" not in n1
    assert n1["nodes"][1] == {
        "id": "n1-0-n1",
        "name": "boom",
        "phase": "Failed",
        "attempt": 1,
        "taskPhase": "PermanentFailure",
        "error": ERROR,
    }
    assert document["nodes"][2]["elements"] == {"Running": 1, "Succeeded": 1}


def test_status_of_an_unknown_execution_or_a_missing_state_db_exits_2_naming_it(
    runner: CliRunner, state_db: Path, tmp_path: Path
) -> None:
    assert_bad_input(invoke(runner, "status", "--state-db", state_db, "nope"), "KEY", "'nope'")
    missing = tmp_path / "missing.db"
    assert_bad_input(invoke(runner, "status", "--state-db", missing), "--state-db", str(missing))
    assert not missing.exists()


def _pod_log(root: Path, pod: str, text: str) -> None:
    folder = root / "cluster" / "20260101T000000-1" / f"p-d_{pod}_uid" / "logs"
    folder.mkdir(parents=True)
    (folder / "main.log").write_text(text)


def test_logs_prints_each_workflow_node_or_the_one_node_given_and_a_sub_workflows_nested_nodes(
    runner: CliRunner, state_db: Path
) -> None:
    root = state_db.parent
    for pod in (
        "wfx-n0-0",
        "wfx-n1-0-n0-0",
        "wfx-n1-0-n1-0",
        "wfx-n1-0-n1-1",
        "wfx-n2-0-0-0",
        "wfx-n2-0-1-0",
    ):
        _pod_log(root, pod, f"printed by {pod}\n")

    def logs(*args: str) -> str:
        result = invoke(runner, "logs", "--state-db", state_db, *args)
        assert result.exit_code == 0, result.stderr
        return result.stdout

    every = logs("wfx")
    headers = [line for line in every.splitlines() if line.startswith("==>")]
    assert [h.split(":")[0] for h in headers] == [
        "==> node n0, attempt 0",
        "==> node n1-0-n0, attempt 0",
        "==> node n1-0-n1, attempt 0",
        "==> node n1-0-n1, attempt 1",
        "==> node n2, attempt 0",
        "==> node n2, attempt 0",
    ]
    assert logs(KEY, "--node", "n1-0-n1", "--attempt", "1") == "printed by wfx-n1-0-n1-1\n"
    # The sub-workflow's logs are its nodes'; node n2's are its map elements', never another node's.
    assert "wfx-n1-0-n0-0" in logs("wfx", "--node", "n1") and "wfx-n0-0" not in logs("wfx", "--node", "n1")
    assert set(logs("wfx", "--node", "n2").split()) >= {"wfx-n2-0-0-0", "wfx-n2-0-1-0"}
    assert "wfx-n1" not in logs("wfx", "--node", "n2")

    result = invoke(runner, "logs", "--state-db", state_db, "wfx", "--node", "n7")
    assert_bad_input(result, "--node", "'n7'", "n1-0-n1")


MODULE = textwrap.dedent(
    """
    from flytekit import PodTemplate, task, workflow


    @task
    def hello(a: int) -> None:
        print(a)


    # The embedded cluster in simulated mode ends this task's pod with exit code 1.
    @task(pod_template=PodTemplate(annotations={"taskplug.io/simulate-exit-code": "1"}))
    def broken(a: int) -> None:
        print(a)


    @workflow
    def inner(a: int) -> None:
        hello(a=a)
        hello(a=a)


    @workflow
    def bad(a: int = 1) -> None:
        hello(a=a) >> broken(a=a)
        inner(a=a)
    """
)


def test_a_workflow_run_through_a_pipe_prints_its_node_events_and_status_shows_its_nodes(
    tmp_path: Path, runner: CliRunner
) -> None:
    module = tmp_path / "wfcli_demo.py"
    module.write_text(MODULE)
    state_db = tmp_path / "state.db"
    proc = subprocess.run(
        [
            *TASKPLUG,
            "run",
            "--cluster-mode",
            "simulated",
            "--state-db",
            str(state_db),
            "--name",
            "demo",
            module,
            "bad",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,  # 2>&1 | cat: one pipe, the event lines written once
        text=True,
        timeout=DEADLINE,
        check=False,
    )
    assert proc.returncode == 1, proc.stdout
    lines = [line.strip() for line in proc.stdout.splitlines()]
    said = [line.split("s  ", 1)[1] for line in lines if "s  " in line and line[0].isdigit()]
    # Node events name their node (by its name too once the run passes the outline), task events theirs.
    assert any(line.startswith("workflow: Running") for line in said), proc.stdout
    assert any(line.split(":")[0].split()[0] == "n2-0-n1" and line.endswith(": Succeeded") for line in said)
    assert any(
        line.split(":")[0].split()[0] == "n1" and ": attempt 0 PermanentFailure" in line for line in said
    )
    end = said[-1]
    assert end.startswith("workflow: Failed  node n1") and "failed: " in end and "exit code (1)" in end
    assert "start-node" not in proc.stdout and "end-node" not in proc.stdout
    # The outcome, with the failed node by name.
    assert "PermanentFailure after 1 attempt(s)" in proc.stdout
    assert "5 node(s): 1 Failed, 4 Succeeded" in proc.stdout
    assert "  node n1 broken failed (1 attempt(s)): " in proc.stdout

    status = invoke(runner, "status", "--state-db", state_db, "demo")
    assert status.exit_code == 0, status.stderr
    rows = [line for line in status.stdout.splitlines() if re.match(r"\s*n\d", line)]
    assert [r.split()[:3] for r in rows[:5]] == [  # each named by its node events
        ["n0", "hello", "Succeeded"],
        ["n1", "broken", "Failed"],
        ["n2", "inner", "Succeeded"],
        ["n2-0-n0", "hello", "Succeeded"],
        ["n2-0-n1", "hello", "Succeeded"],
    ]
    assert rows[3].startswith("  n2-0-n0")


def test_following_a_workflow_reads_the_nodes_it_is_given_each_round_past_what_was_shown(
    tmp_path: Path,
) -> None:
    from taskplug.cli._logs import _follow

    for pod in ("wfx-n0-0", "wfx-n1-0", "wfx-n1-0-n0-0"):
        _pod_log(tmp_path, pod, f"printed by {pod}\n")
    shown = tmp_path / "cluster" / "20260101T000000-1" / "p-d_wfx-n0-0_uid" / "logs" / "main.log"
    # No run holds the folder: one round, over the nodes the workflow has by then.
    asked = (["n0", "n1"], ["n0", "n1", "n1-0-n0"])  # the nodes to follow; every node the workflow has
    chunks = list(_follow({shown: shown.stat().st_size}, tmp_path / "cluster", "wfx", lambda: asked, None))
    assert chunks == ["printed by wfx-n1-0\n"]  # n1's own pod; n1-0-n0's is not n1's, and n0's was shown
