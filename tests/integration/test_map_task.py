"""flytekit map tasks end to end: examples/map-task serialized by flytekit's own CLI (``pyflyte serialize``
and ``pyflyte package``) into a fresh folder, run by ``taskplug run`` on the embedded cluster, where the
process kubelet runs ``pyflyte-map-execute`` for every element; the gathered outputs are compared with what
flytekit computes when it runs the same workflow locally in Python."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from taskplug.executor import parse_spec

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "map-task"
VENV_BIN = Path(sys.executable).parent
TASKPLUG = str(VENV_BIN / "taskplug")
PYFLYTE = str(VENV_BIN / "pyflyte")
IMAGE = "localhost/taskplug-map:v1"
DEADLINE = 120.0


def _pyflyte(*args: str) -> None:
    subprocess.run(
        [PYFLYTE, "--pkgs", "squares", *args],
        cwd=EXAMPLE,
        check=True,
        capture_output=True,
        timeout=DEADLINE,
    )


@pytest.fixture(scope="module")
def serialized(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``pyflyte serialize workflows`` output: one file per task, workflow and launch plan."""
    out = tmp_path_factory.mktemp("serialized")
    _pyflyte("serialize", "--image", IMAGE, "--env", f"PYTHONPATH={EXAMPLE}", "workflows", "-f", str(out))
    return out


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ``pyflyte package`` archive of the same module."""
    out = tmp_path_factory.mktemp("package") / "flyte-package.tgz"
    _pyflyte("package", "--image", IMAGE, "--env", f"PYTHONPATH={EXAMPLE}", "-o", str(out), "--force")
    return out


def _workflow_file(folder: Path, name: str) -> Path:
    (found,) = folder.glob(f"*_{name}_2.pb")  # pyflyte names a WorkflowSpec <n>_<name>_2.pb
    return found


def _local(workflow: str, xs: list[int]) -> Any:
    """What flytekit gives for the workflow run locally in Python (a subprocess: a clean import)."""
    script = f"import json, squares; print(json.dumps(squares.{workflow}(xs={xs!r})))"
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=EXAMPLE, capture_output=True, text=True, timeout=DEADLINE
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def _local_raises(workflow: str, xs: list[int]) -> str:
    script = f"import squares; squares.{workflow}(xs={xs!r})"
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=EXAMPLE, capture_output=True, text=True, timeout=DEADLINE
    )
    assert done.returncode != 0
    return done.stderr


def _run(spec: dict[str, Any], tmp_path: Path) -> tuple[int, dict[str, Any]]:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    done = subprocess.run(
        [TASKPLUG, "run", str(path), "-o", "json", "--state-db", str(tmp_path / "state.db")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        env={"PATH": f"{VENV_BIN}:/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert done.stdout, done.stderr
    return done.returncode, json.loads(done.stdout)


def _execution(name: str) -> dict[str, Any]:
    return {"id": {"project": "flytesnacks", "domain": "development", "name": name}}


def test_the_serialized_workflow_becomes_an_array_node_spec(serialized: Path) -> None:
    spec = parse_spec(
        {
            "templateFile": str(_workflow_file(serialized, "squares.squares")),
            "node": "n0",  # the workflow's map node alone
            "execution": _execution("read"),
            "inputs": {"xs": [1, 2, 3]},
        }
    )
    assert spec.array is not None
    assert (spec.array.parallelism, spec.array.min_success_ratio, spec.array.min_successes) == (2, 0.5, None)
    assert spec.array.bound_inputs == ("offset",)
    assert spec.array.workflow == "squares.squares"
    template = spec.template
    assert template.type == "python-task"
    assert template.id.name.startswith("squares.map_square_") and template.id.name.endswith("-arraynode")
    assert list(template.container.args[:1]) == ["pyflyte-map-execute"]
    assert list(template.container.args[-8:]) == [
        "vars",
        "offset",
        "resolver",
        "flytekit.core.python_auto_container.default_task_resolver",
        "task-module",
        "squares",
        "task-name",
        "square",
    ]
    # The node's inputs: the workflow input as the list, the partial's value as a bound scalar.
    assert [lit.scalar.primitive.integer for lit in spec.inputs.literals["x"].collection.literals] == [
        1,
        2,
        3,
    ]
    assert spec.inputs.literals["offset"].scalar.primitive.integer == 1
    assert spec.metadata.task_execution_id.id.node_execution_id.node_id == "n0"


def test_a_map_with_a_bound_input_and_concurrency_equals_flytekits_local_run(
    serialized: Path, tmp_path: Path
) -> None:
    xs = [3, 1, 4, 1, 5, 9]
    code, document = _run(
        {
            "templateFile": str(_workflow_file(serialized, "squares.squares")),
            "node": "n0",  # the workflow's map node alone: its elements and events are the result's
            "execution": _execution("squares-e2e"),
            "inputs": {"xs": xs},
        },
        tmp_path,
    )
    assert code == 0, document
    assert document["phase"] == "Success"
    assert document["outputs"] == {"o0": _local("squares", xs)}
    assert [(e["index"], e["phase"], e["attempts"]) for e in document["elements"]] == [
        (i, "Succeeded", 1) for i in range(len(xs))
    ]
    assert [e["name"] for e in document["elements"]] == [f"squares-e2e-n0-0-n{i}-0" for i in range(len(xs))]
    # Events list the elements as Flyte's external resources: all of them first and last, by index.
    first, last = document["events"][0], document["events"][-1]
    assert (first["phase"], last["phase"]) == ("Queued", "Success")
    assert [(r["index"], r["phase"]) for r in first["externalResources"]] == [
        (i, "Undefined") for i in range(6)
    ]
    assert [(r["index"], r["phase"]) for r in last["externalResources"]] == [(i, "Success") for i in range(6)]
    assert last["externalResources"][5]["externalId"] == "squares-e2e-n0-0-n5-0"
    running = {r["index"] for e in document["events"][1:-1] for r in e["externalResources"]}
    assert running == set(range(6))
    # concurrency=2: never more than two elements between their first report and their end.
    current: dict[int, str] = {}
    most = 0
    for event in document["events"][1:-1]:
        for resource in event["externalResources"]:
            current[resource["index"]] = resource["phase"]
        most = max(most, sum(1 for phase in current.values() if phase not in ("Undefined", "Success")))
    assert most == 2
    # Each element wrote its own (element-typed) outputs.pb under <node>/0/<i>/0: pyflyte-map-execute ran.
    data = tmp_path / ".taskplug/data/metadata/flytesnacks/development/squares-e2e/n0"
    assert sorted(p.parent.parent.name for p in data.glob("0/*/0/outputs.pb")) == [
        str(i) for i in range(len(xs))
    ]


def test_a_package_archive_at_the_ratio_succeeds_with_none_where_elements_raised(
    package: Path, tmp_path: Path
) -> None:
    xs = [1, 2, 3, 4]  # 3 raises: 3 of 4 succeed, the ratio is 0.75
    code, document = _run(
        {
            "templateFile": str(package),
            "workflow": "squares.checked_squares",
            "execution": _execution("checked-ok"),
            "inputs": {"xs": xs},
        },
        tmp_path,
    )
    assert code == 0, document
    assert document["outputs"] == {"o0": _local("checked_squares", xs)} == {"o0": [1, 4, None, 16]}
    (node,) = document["nodes"]  # the whole workflow ran: its one node is the map
    assert (node["kind"], node["phase"]) == ("array", "Succeeded")
    failed = node["elements"][2]
    assert (failed["phase"], failed["attempts"]) == ("Failed", 1)
    assert failed["error"]["kind"] == "USER"
    assert "ValueError: 3 is a multiple of 3" in failed["error"]["message"]


def test_below_the_ratio_the_map_fails_with_the_elements_errors(package: Path, tmp_path: Path) -> None:
    xs = [3, 1, 6, 2]  # two of four raise: below 0.75
    code, document = _run(
        {
            "templateFile": str(package),
            "workflow": "squares.checked_squares",
            "execution": _execution("checked-bad"),
            "inputs": {"xs": xs},
        },
        tmp_path,
    )
    assert code == 1
    assert document["phase"] == "PermanentFailure"
    assert document["outputs"] is None
    message = document["error"]["message"]
    assert "[0]: " in message and "ValueError: 3 is a multiple of 3" in message
    assert "[2]: " in message and "ValueError: 6 is a multiple of 3" in message
    assert "ValueError" in _local_raises("checked_squares", xs)


def test_the_launch_plan_default_fills_a_missing_workflow_input(package: Path, tmp_path: Path) -> None:
    code, document = _run(
        {
            "templateFile": str(package),
            "workflow": "squares.checked_squares",
            "execution": _execution("dflt"),
        },
        tmp_path,
    )
    assert code == 0, document
    assert document["outputs"] == {"o0": [1, 4, 16, 25]}


def test_the_checked_in_example_specs_run_against_the_archive_the_readme_builds(
    package: Path, tmp_path: Path
) -> None:
    import shutil

    shutil.copy(package, tmp_path / "flyte-package.tgz")
    for name in ("squares.yaml", "checked.yaml"):
        shutil.copy(EXAMPLE / name, tmp_path / name)
    code, document = _run(yaml.safe_load((tmp_path / "squares.yaml").read_text()), tmp_path)
    assert (code, document["outputs"]) == (0, {"o0": [2, 5, 10, 17, 26]})
    code, document = _run(yaml.safe_load((tmp_path / "checked.yaml").read_text()), tmp_path)
    assert (code, document["phase"]) == (1, "PermanentFailure")
    elements = document["nodes"][0]["elements"]
    assert [e["phase"] for e in elements if e["phase"] == "Failed"] == ["Failed", "Failed"]


def test_the_hand_written_example_runs_and_the_live_view_shows_the_elements(tmp_path: Path) -> None:
    done = subprocess.run(
        [TASKPLUG, "run", str(EXAMPLE / "by-hand.yaml"), "--state-db", str(tmp_path / "state.db")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        env={"PATH": f"{VENV_BIN}:/usr/bin:/bin", "HOME": str(tmp_path), "COLUMNS": "120"},
    )
    assert done.returncode == 0, done.stderr
    assert "6/6 elements done" in done.stderr and "succeeded 6" in done.stderr
    assert "6 element(s): 6 Succeeded" in done.stdout
    assert json.loads(done.stdout.split("outputs:", 1)[1]) == {"o0": [11, 14, 19, 26, 35, 46]}


def test_the_live_view_names_a_failing_element_and_its_reason(tmp_path: Path) -> None:
    spec = yaml.safe_load((EXAMPLE / "by-hand.yaml").read_text())
    script = spec["template"]["container"]["args"][0]
    spec["template"]["container"]["args"][0] = script.replace(
        "out = Path", "assert {{.Inputs.x}} != 3, 'three is not allowed'\nout = Path"
    )
    spec["inputs"]["x"] = [1, 2, 3]
    path = tmp_path / "failing.yaml"
    path.write_text(yaml.safe_dump(spec))
    done = subprocess.run(
        [TASKPLUG, "run", str(path), "--state-db", str(tmp_path / "state.db")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        env={"PATH": f"{VENV_BIN}:/usr/bin:/bin", "HOME": str(tmp_path), "COLUMNS": "160"},
    )
    assert done.returncode == 1
    assert "element 2 failed:" in done.stderr
    assert "failed 1" in done.stderr
    assert "element 2 (1 attempt(s))" in done.stdout
