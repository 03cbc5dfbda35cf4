"""Flyte 2 tasks end to end: ``examples/flyte2`` modules, written with the ``flyte`` SDK, run by ``taskplug run``
on the embedded cluster, whose process kubelet runs the SDK's ``a0`` from a virtualenv of its own
(``tests/support/flyte2_env.py``: ``flyte`` is not one of taskplug's dependencies). Their outputs are the ones
``flyte.run``'s local mode gives for the same inputs (``flyte2_local_run.py``, run in that virtualenv); a raised
error reaches the execution's error; ``retries=2`` is three attempts; a Dask task runs on the dask operator's
scheduler and workers; and a spec whose ``templateFile`` is the binary TaskTemplate the SDK writes runs too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from support.flyte2_env import flyte2_python_fixture  # noqa: F401

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "flyte2"
HELLO = EXAMPLES / "hello.py"
LOCAL_RUN = Path(__file__).with_name("flyte2_local_run.py")
TASKPLUG = str(Path(sys.executable).parent / "taskplug")
DEADLINE = 240.0


@pytest.fixture
def flyte2(flyte2_python: Path) -> Path:
    """The Python of the Flyte 2 virtualenv (its bin holds ``a0``)."""
    return flyte2_python


def _env(flyte2: Path) -> dict[str, str]:
    """PATH with the Flyte 2 virtualenv's bin first, as a user who activated it: taskplug finds its ``a0``."""
    return {**os.environ, "PATH": f"{flyte2.parent}:{os.environ.get('PATH', '')}", "COLUMNS": "200"}


def _taskplug(flyte2: Path, cwd: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [TASKPLUG, *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
        env=_env(flyte2),
    )


def _run_json(flyte2: Path, cwd: Path, *args: str | Path) -> dict[str, Any]:
    done = _taskplug(
        flyte2, cwd, "run", "--state-db", cwd / "state.db", "--cluster-mode", "process", "-o", "json", *args
    )
    assert done.stdout, done.stderr
    document: dict[str, Any] = json.loads(done.stdout)
    return document


def _local(flyte2: Path, task: str, inputs: dict[str, Any], cwd: Path) -> dict[str, Any]:
    done = subprocess.run(
        [str(flyte2), str(LOCAL_RUN), str(HELLO), task, json.dumps(inputs)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    outputs: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return outputs


def _as_options(inputs: dict[str, Any]) -> list[str]:
    options = []
    for name, value in inputs.items():
        options += [f"--{name}", value if isinstance(value, str) else json.dumps(value)]
    return options


CASES = [
    pytest.param("add", {"a": 2}, id="an-input-left-to-its-default"),
    pytest.param("scale", {"p": {"x": 1.5, "y": -2}, "factor": 3}, id="a-dataclass"),
    pytest.param("stats", {"xs": [3, 1, 2], "weights": {"a": 1.0, "b": 3.0}}, id="a-list-a-dict-and-a-tuple"),
    pytest.param("word_count", {"f": "words.txt"}, id="a-file-input"),
    pytest.param("shout", {"text": "quiet"}, id="a-file-output"),
]


@pytest.mark.parametrize(("task", "inputs"), CASES)
def test_a_plain_flyte2_task_gives_the_outputs_flyte_runs_local_mode_gives(
    flyte2: Path, tmp_path: Path, task: str, inputs: dict[str, Any]
) -> None:
    (tmp_path / "words.txt").write_text("three small words\n")
    inputs = {k: str(tmp_path / v) if k == "f" else v for k, v in inputs.items()}
    expected = _local(flyte2, task, inputs, tmp_path)

    document = _run_json(flyte2, tmp_path, HELLO, task, *_as_options(inputs))
    assert (document["phase"], document["attempts"], document["error"]) == ("Success", 1, None)
    outputs = document["outputs"]
    if task == "shout":
        # A file is where the task put it: the same contents, in this run's data store.
        path = Path(outputs["o0"])
        assert path.is_relative_to(tmp_path / ".taskplug" / "data")
        outputs = {"o0": {"contents": path.read_text()}}
    assert outputs == expected


def test_the_task_environments_env_vars_reach_the_task_in_its_pod(flyte2: Path, tmp_path: Path) -> None:
    document = _run_json(flyte2, tmp_path, HELLO, "greet", "--name", "taskplug")
    assert (document["phase"], document["outputs"]) == ("Success", {"o0": "hello, taskplug"})


def test_a_cached_task_run_again_with_the_same_inputs_is_a_cache_hit(flyte2: Path, tmp_path: Path) -> None:
    first = _run_json(flyte2, tmp_path, HELLO, "lucky", "--seed", "7")
    again = _run_json(flyte2, tmp_path, HELLO, "lucky", "--seed", "7")
    assert first["phase"] == again["phase"] == "Success"
    assert again["outputs"] == first["outputs"]
    assert [e["reason"] for e in again["events"]] == ["cache hit"]


def test_a_raised_error_reaches_the_executions_error_after_three_attempts_with_retries_2(
    flyte2: Path, tmp_path: Path
) -> None:
    document = _run_json(flyte2, tmp_path, HELLO, "flaky", "--message", "no luck today")
    assert (document["phase"], document["attempts"]) == ("PermanentFailure", 3)
    error = document["error"]
    assert error["kind"] == "USER"
    assert error["code"].endswith("ValueError")
    assert "no luck today" in error["message"]
    # Each attempt its own pod, each written its error document into its own output folder.
    run = tmp_path / ".taskplug" / "data" / "metadata" / "flytesnacks" / "development"
    (execution,) = run.iterdir()
    assert sorted(p.name for p in (execution / "n0").iterdir() if p.is_dir()) == ["0", "1", "2"]
    assert all((execution / "n0" / str(attempt) / "error.pb").is_file() for attempt in range(3))
    # What a0 printed is kept, attempt by attempt.
    logs = _taskplug(
        flyte2, tmp_path, "logs", "--state-db", tmp_path / "state.db", execution.name, "--attempt", "2"
    )
    assert logs.returncode == 0, logs.stderr
    assert "ValueError: no luck today" in logs.stdout


def test_a_flyte2_dask_task_runs_on_the_scheduler_and_workers_the_dask_operator_started(
    flyte2: Path, tmp_path: Path
) -> None:
    document = _run_json(
        flyte2,
        tmp_path,
        "--config",
        EXAMPLES / "config.yaml",
        EXAMPLES / "dask_squares.py",
        "sum_of_squares",
        "--n",
        "10",
    )
    assert document["phase"] == "Success", document["error"]
    total, workers = document["outputs"]["o0"], document["outputs"]["o1"]
    assert total == sum(i * i for i in range(10))
    # The names the operator gave its worker pods (DASK_WORKER_NAME): not a LocalCluster's workers.
    assert len(workers) == 2
    assert all("-default-worker-" in name for name in workers)


def test_a_spec_whose_template_file_is_the_sdks_binary_task_template_runs(
    flyte2: Path, tmp_path: Path
) -> None:
    written = subprocess.run(
        [
            str(flyte2),
            str(EXAMPLES / "write_template.py"),
            "--local",
            str(HELLO),
            "add",
            str(tmp_path / "add.pb"),
        ],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
    )
    assert written.returncode == 0, written.stderr
    (tmp_path / "add.yaml").write_text((EXAMPLES / "add.yaml").read_text())
    document = _run_json(flyte2, tmp_path, tmp_path / "add.yaml")
    assert (document["phase"], document["outputs"]) == ("Success", {"o0": 5})
    assert document["execution"].startswith("flytesnacks/development/")


def test_render_shows_the_pod_with_the_task_environments_resources_and_env(
    flyte2: Path, tmp_path: Path
) -> None:
    done = _taskplug(flyte2, tmp_path, "render", HELLO, "add", "--a", "2")
    assert done.returncode == 0, done.stderr
    pod = json.loads(done.stdout)
    (container,) = pod["spec"]["containers"]
    assert container["args"][:3] == ["a0", "--inputs", container["args"][2]]
    assert container["args"][-4:] == ["mod", "hello", "instance", "add"]
    assert container["resources"]["requests"] == {"cpu": "500m", "memory": "400Mi"}
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["GREETING"] == "hello"
    assert env["ACTION_NAME"] == "n0"
    assert env["RUN_NAME"] == pod["metadata"]["labels"]["run"]
    assert env["_U_ORG_NAME"] == "local"
    assert env["_U_RUN_BASE"].endswith(f"/metadata/flytesnacks/development/{env['RUN_NAME']}")


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        pytest.param(["nope"], "TASK", id="an-unknown-task"),
        pytest.param(["add", "--a", "two"], "--a", id="a-wrong-typed-input"),
        pytest.param(["scale", "--p", "[1, 2]"], "--p", id="a-list-for-a-dataclass"),
    ],
)
def test_bad_input_exits_2_naming_it(flyte2: Path, tmp_path: Path, arguments: list[str], named: str) -> None:
    done = _taskplug(flyte2, tmp_path, "run", "--state-db", tmp_path / "state.db", HELLO, *arguments)
    assert done.returncode == 2, done.stderr
    assert f"error: {named}" in done.stderr
    assert not (tmp_path / ".taskplug" / "cluster").exists()  # nothing ran


def test_a_task_that_calls_a_task_fails_at_the_call_instead_of_waiting_for_a_backend(
    flyte2: Path, tmp_path: Path
) -> None:
    # Flyte 2 submits the callee to its backend services, which taskplug does not have (docs/flyte2.md).
    (tmp_path / "nested.py").write_text(
        "import flyte\n"
        "env = flyte.TaskEnvironment(name='nested')\n\n"
        "@env.task\nasync def inner(x: int) -> int:\n    return x + 1\n\n"
        "@env.task\nasync def outer(x: int) -> int:\n    return await inner(x)\n"
    )
    document = _run_json(flyte2, tmp_path, tmp_path / "nested.py", "outer", "--x", "1")
    assert (document["phase"], document["attempts"], document["outputs"]) == ("PermanentFailure", 1, None)
    assert document["error"]["kind"] == "USER"


def test_render_with_an_image_puts_nothing_of_this_machine_in_the_pod(flyte2: Path, tmp_path: Path) -> None:
    done = _taskplug(flyte2, tmp_path, "render", "--image", "ghcr.io/me/tasks:v1", HELLO, "add", "--a", "2")
    assert done.returncode == 0, done.stderr
    (container,) = json.loads(done.stdout)["spec"]["containers"]
    assert container["image"] == "ghcr.io/me/tasks:v1"
    env = {e["name"] for e in container["env"]}
    assert not {"PYTHONPATH", "PATH"} & env
    assert {"ACTION_NAME", "RUN_NAME", "_U_RUN_BASE", "_U_ORG_NAME"} <= env


@pytest.mark.parametrize(
    ("filename", "source", "said"),
    [
        pytest.param(
            "json.py", "import flyte\n", "rename the file", id="a-module-named-as-the-standard-librarys"
        ),
        pytest.param(
            "broken.py",
            "import flyte\nraise RuntimeError('at import')\n",
            "RuntimeError: at import",
            id="a-module-that-fails-to-import",
        ),
    ],
)
def test_a_module_the_sdk_cannot_import_exits_2_saying_why(
    flyte2: Path, tmp_path: Path, filename: str, source: str, said: str
) -> None:
    (tmp_path / filename).write_text(source)
    done = _taskplug(
        flyte2, tmp_path, "run", "--state-db", tmp_path / "state.db", tmp_path / filename, "task"
    )
    assert done.returncode == 2, done.stderr
    assert said in done.stderr
    assert "Traceback" not in done.stderr.split("error:")[-1]
