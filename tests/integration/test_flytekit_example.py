"""A flytekit task end to end: examples/flytekit serialized by flytekit into a fresh folder, then run by
``taskplug run`` on the embedded cluster, where the process kubelet runs ``pyflyte-execute`` from this
virtualenv. Nothing depends on a checked-in ``.pb`` being current."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "flytekit"
TASKPLUG = str(Path(sys.executable).parent / "taskplug")
DEADLINE = 60.0


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("flytekit")
    subprocess.run(
        [sys.executable, str(EXAMPLE / "make_template.py"), "--out", str(out)],
        check=True,
        capture_output=True,
        timeout=DEADLINE,
    )
    return out


def _taskplug_run(spec: Path, cwd: Path) -> tuple[int, dict[str, object]]:
    done = subprocess.run(
        [TASKPLUG, "run", str(spec), "-o", "json", "--state-db", str(cwd / "state.db")],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )
    assert done.stdout, done.stderr
    return done.returncode, json.loads(done.stdout)


def test_make_template_writes_a_flytekit_python_task_and_a_spec_pointing_at_it(templates: Path) -> None:
    from flyteidl.core import tasks_pb2

    template = tasks_pb2.TaskTemplate.FromString((templates / "add.pb").read_bytes())
    assert template.type == "python-task"
    assert list(template.container.args[:5]) == [
        "pyflyte-execute",
        "--inputs",
        "{{.input}}",
        "--output-prefix",
        "{{.outputPrefix}}",
    ]
    assert list(template.container.args[-4:]) == ["task-module", "arithmetic", "task-name", "add"]
    env = {e.key: e.value for e in template.container.env}
    assert env["PYTHONPATH"] == str(EXAMPLE)
    assert "templateFile: add.pb" in (templates / "add.yaml").read_text()


def test_the_flytekit_add_task_runs_to_success_with_its_output(templates: Path, tmp_path: Path) -> None:
    code, document = _taskplug_run(templates / "add.yaml", tmp_path)
    assert code == 0, document
    assert (document["phase"], document["attempts"], document["outputs"]) == ("Success", 1, {"o0": 5})


def test_a_flytekit_task_that_raises_fails_with_the_users_error_and_no_retry(
    templates: Path, tmp_path: Path
) -> None:
    # divide(1, 0) raises; flytekit writes error.pb (USER, NON_RECOVERABLE) and exits 0.
    code, document = _taskplug_run(templates / "divide.yaml", tmp_path)
    assert code == 1
    assert (document["phase"], document["attempts"]) == ("PermanentFailure", 1)
    error = document["error"]
    assert isinstance(error, dict)
    assert error["kind"] == "USER"
    assert error["code"].startswith("USER:")
    assert "ZeroDivisionError: cannot divide 1 by zero" in error["message"]


def test_the_checked_in_spec_is_the_one_make_template_writes(templates: Path) -> None:
    assert (EXAMPLE / "add.yaml").read_text() == (templates / "add.yaml").read_text()
