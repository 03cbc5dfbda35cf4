"""``taskplug run workflows.py add --a 2 --b 3`` end to end, as a Flyte user runs ``pyflyte run``: the module
of ``examples/flytekit`` serialized by the installed flytekit, run on the embedded cluster (its process
kubelet runs ``pyflyte-execute`` from this virtualenv), and with ``--kubeconfig`` on a cluster reached over
HTTP with the image the user names."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from taskplug.k8s import POD, ResourceType
from taskplug.localcluster import LocalCluster
from taskplug.localcluster._store import StoredEvent

pytestmark = pytest.mark.integration

WORKFLOWS = Path(__file__).resolve().parents[2] / "examples" / "flytekit" / "workflows.py"
TASKPLUG = str(Path(sys.executable).parent / "taskplug")
DEADLINE = 120.0


def _run(tmp_path: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [TASKPLUG, "run", *map(str, args)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
        env={**os.environ, "COLUMNS": "200"},
    )


def test_a_task_with_its_inputs_as_options_runs_on_the_embedded_cluster(tmp_path: Path) -> None:
    state = ("--state-db", tmp_path / "state.db", "--cluster-mode", "process")
    done = _run(tmp_path, *state, "-o", "json", WORKFLOWS, "add", "--a", "2", "--b", "3")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert (document["phase"], document["attempts"], document["outputs"]) == ("Success", 1, {"o0": 5})

    # A list read as YAML, the live view's outcome on stdout; and run again: a fresh execution, run again.
    for _ in range(2):
        done = _run(tmp_path, *state, WORKFLOWS, "total", "--xs", "[1, 2, 3, 4]")
        assert done.returncode == 0, done.stderr
        assert "Success after 1 attempt(s)" in done.stdout
        assert '"o0": 10' in done.stdout
        assert "already finished" not in done.stderr
    executions = sorted(
        p.name for p in (tmp_path / ".taskplug/data/metadata/flytesnacks/development").iterdir()
    )
    assert len(executions) == 3


def test_a_dataclass_input_given_as_a_mapping_comes_back_as_its_fields(tmp_path: Path) -> None:
    done = _run(
        tmp_path,
        *("--state-db", tmp_path / "state.db", "-o", "json"),
        *(WORKFLOWS, "scale", "--p", '{"x": 1.5, "y": -2}', "--factor", "3"),
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["outputs"] == {"o0": {"x": 4.5, "y": -6.0}}


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[LocalCluster, Path]]:
    """A process-mode local cluster on 127.0.0.1 standing in for a real one, and a kubeconfig for it."""
    async with LocalCluster(mode="process", kill_grace_seconds=1.0) as cluster:
        await cluster.serve_http()
        yield cluster, cluster.kubeconfig(tmp_path / "kubeconfig")


async def test_with_kubeconfig_the_task_runs_on_that_cluster_in_the_image_named(
    served: tuple[LocalCluster, Path], tmp_path: Path
) -> None:
    cluster, kubeconfig = served
    created: list[dict[str, Any]] = []

    def record(rtype: ResourceType, event: StoredEvent) -> None:
        if rtype.plural == POD.plural and event.type == "ADDED":
            created.append(event.obj)

    cluster.store.observers.append(record)
    # That cluster's "image" is this machine: PYTHONPATH (an --env, as an image's working directory would)
    # lets its pyflyte-execute import the module.
    proc = await asyncio.create_subprocess_exec(
        TASKPLUG,
        "run",
        *("--kubeconfig", str(kubeconfig), "--state-db", str(tmp_path / "state.db"), "-o", "json"),
        *("--image", "ghcr.io/example/flyte-tasks:v7", "--project", "ml", "--name", "on-real-1"),
        *("--env", f"PYTHONPATH={WORKFLOWS.parent}"),
        *(str(WORKFLOWS), "greet", "--name", "cluster", "--excited"),
        cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), DEADLINE)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, err.decode()
    assert json.loads(out)["outputs"] == {"o0": "hello, cluster!"}
    (pod,) = created
    assert pod["metadata"]["name"] == "on-real-1-n0-0"
    assert pod["metadata"]["namespace"] == "ml-development"
    (container,) = pod["spec"]["containers"]
    assert container["image"] == "ghcr.io/example/flyte-tasks:v7"
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["PYTHONPATH"] == str(WORKFLOWS.parent)


def test_a_named_execution_run_again_with_other_inputs_is_refused_not_answered_with_the_old_result(
    tmp_path: Path,
) -> None:
    state = ("--state-db", tmp_path / "state.db", "--name", "add-once")
    first = _run(tmp_path, *state, "-o", "json", WORKFLOWS, "add", "--a", "5")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["outputs"] == {"o0": 6}

    # Other inputs under the same name: refused, saying which input differs and how to run it; no stale 6.
    other = _run(tmp_path, *state, "-o", "json", WORKFLOWS, "add", "--a", "6")
    assert other.returncode == 2, other.stderr
    assert other.stdout == ""
    assert "input(s) a differ" in other.stderr
    assert "--rerun" in other.stderr and "--name" in other.stderr
    assert "Traceback" not in other.stderr

    # Another task under the same name: refused, naming the task.
    task = _run(tmp_path, *state, WORKFLOWS, "greet")
    assert task.returncode == 2 and "the task (its template" in task.stderr, task.stderr

    # The same spec again: the stored outcome, as before.
    same = _run(tmp_path, *state, "-o", "json", WORKFLOWS, "add", "--a", "5")
    assert same.returncode == 0, same.stderr
    assert json.loads(same.stdout)["outputs"] == {"o0": 6}
    assert "already finished" in same.stderr

    # --rerun runs the new inputs under the name.
    rerun = _run(tmp_path, *state, "--rerun", "-o", "json", WORKFLOWS, "add", "--a", "6")
    assert rerun.returncode == 0, rerun.stderr
    assert json.loads(rerun.stdout)["outputs"] == {"o0": 7}


FRAMES = """
import pandas as pd
from flytekit import Secret, current_context, task


@task
def frame(n: int) -> pd.DataFrame:
    return pd.DataFrame({"x": list(range(n))})


@task
def total(df: pd.DataFrame) -> int:
    return int(df["x"].sum())


@task(secret_requests=[Secret(group="demo", key="token")])
def secret() -> str:
    return current_context().secrets.get("demo", "token")
"""


def test_a_dataframe_task_and_a_secret_run_as_the_readme_says(tmp_path: Path) -> None:
    module = tmp_path / "frames.py"
    module.write_text(FRAMES)
    state = ("--state-db", tmp_path / "state.db", "-o", "json")
    made = _run(tmp_path, *state, module, "frame", "--n", "4")
    assert made.returncode == 0, made.stderr
    dataset = json.loads(made.stdout)["outputs"]["o0"]
    assert dataset["format"] == "parquet"
    summed = _run(tmp_path, *state, module, "total", "--df", dataset["uri"])
    assert summed.returncode == 0, summed.stderr
    assert json.loads(summed.stdout)["outputs"] == {"o0": 6}

    # A secret, given locally as flytekit reads it: _FSEC_<GROUP>_<KEY>.
    told = _run(tmp_path, *state, "-e", "_FSEC_DEMO_TOKEN=abc", module, "secret")
    assert told.returncode == 0, told.stderr
    assert json.loads(told.stdout)["outputs"] == {"o0": "abc"}


PROCESS_PROBE = '''
import json, logging, os, sys

from flytekit import task


@task
def probe() -> str:
    """What the task's process is: forked from the command's warm interpreter, with the pod's environment."""
    handlers = logging.getLogger("flytekit").handlers
    return json.dumps({
        "forked": "taskplug.cli._run" in sys.modules,
        "cli_env": os.environ.get("TASKPLUG_TEST_CLI_ONLY"),
        "execution_id": os.environ.get("FLYTE_INTERNAL_EXECUTION_ID"),
        "cwd": os.getcwd(),
        "rich": [type(h).__name__ for h in handlers if "Rich" in type(h).__name__],
    })
'''


def test_the_task_runs_in_a_process_forked_from_the_commands_warm_interpreter_with_the_pods_environment(
    tmp_path: Path,
) -> None:
    module = tmp_path / "process_probe.py"
    module.write_text(PROCESS_PROBE)
    done = subprocess.run(
        [TASKPLUG, "run", "--state-db", str(tmp_path / "state.db"), "-o", "json", str(module), "probe"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
        env={**os.environ, "TASKPLUG_TEST_CLI_ONLY": "1"},
    )
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    seen = json.loads(document["outputs"]["o0"])
    assert seen["forked"] is True  # the command's modules are there: no new interpreter imported flytekit
    assert seen["cli_env"] is None  # the pod's environment alone
    assert seen["execution_id"] == document["execution"].split("/")[2]
    assert Path(seen["cwd"]).name == "work" and str(tmp_path / "cluster") in seen["cwd"]  # the pod's folder
    assert seen["rich"] == []  # flytekit's loggers made again for a pod, not the terminal's


FAILING_MODULE = """
import sys

print("the module's top-level code ran")
print("and wrote to stderr", file=sys.stderr)

from flytekit import task


@task
def double(x: int) -> int:
    return 2 * x


raise RuntimeError("broken at import")
"""


def test_a_module_that_cannot_be_loaded_is_reported_once_as_without_the_warm_interpreter(
    tmp_path: Path,
) -> None:
    # The zygote loads the module for the command: its output, the error and the exit code are the command's,
    # once each; --help and a usage error come out the same way.
    module = tmp_path / "failing.py"
    module.write_text(FAILING_MODULE)
    done = _run(tmp_path, "--state-db", tmp_path / "state.db", module, "double", "--x", "1")
    assert (done.returncode, done.stdout) == (
        2,
        "",
    )  # stdout is the run's own: what the module prints goes to stderr
    assert done.stderr.count("the module's top-level code ran") == 1
    assert done.stderr.count("and wrote to stderr") == 1
    assert done.stderr.count("error: cannot import") == 1
    assert "RuntimeError: broken at import" in done.stderr

    done = _run(tmp_path, "--state-db", tmp_path / "state.db", WORKFLOWS, "add", "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Usage: taskplug run ") and done.stdout.count("--a int") == 1

    done = _run(tmp_path, "--state-db", tmp_path / "state.db", WORKFLOWS, "add", "--a", "two")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "error: --a: expected an integer, got 'two'\n"
    assert not (tmp_path / "state.db").exists()  # refused before anything was written
