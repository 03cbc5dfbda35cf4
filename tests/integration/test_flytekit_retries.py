"""flytekit tasks' retries and ``@dynamic``, run as a Flyte user runs them: serialized by flytekit into a
fresh folder, then ``taskplug run`` on the embedded cluster, whose process kubelet runs ``pyflyte-execute``.

``@task(retries=2)`` gives three attempts (no ``maxAttempts`` in the spec: the template's retry strategy),
then the execution fails for good with propeller's ``RetriesExhausted|<code>``. A ``@dynamic`` task's pod
writes ``futures.pb``; the run ends saying it is a dynamic workflow, not ``OutputsNotFound``."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.integration

TASKPLUG = str(Path(sys.executable).parent / "taskplug")
DEADLINE = 120.0

MODULE = textwrap.dedent(
    """
    from flytekit import dynamic, task
    from flytekit.exceptions.user import FlyteRecoverableException


    @task(retries=2)
    def flaky(x: int) -> int:
        if x > 0:
            raise FlyteRecoverableException(f"flaky failed on {x}")
        return x


    @task(retries=2)
    def broken(x: int) -> int:
        if x > 0:
            raise ValueError(f"broken on {x}")
        return x


    @task
    def square(x: int) -> int:
        return x * x


    @dynamic
    def fan_out(n: int) -> list[int]:
        return [square(x=i) for i in range(n)]
    """
)

SERIALIZE = textwrap.dedent(
    """
    import sys
    from collections import OrderedDict
    from pathlib import Path

    from flytekit.configuration import Image, ImageConfig, SerializationSettings
    from flytekit.tools.translator import get_serializable

    out = Path(sys.argv[1])
    sys.path.insert(0, str(out))
    import retry_tasks

    settings = SerializationSettings(
        image_config=ImageConfig(default_image=Image(name="default", fqn="localhost/taskplug-flytekit", tag="v1")),
        project="flytesnacks",
        domain="development",
        version="v1",
        env={"PYTHONPATH": str(out)},
    )
    for name in sys.argv[2:]:
        entity = getattr(retry_tasks, name)
        template = get_serializable(OrderedDict(), settings, entity).template.to_flyte_idl()
        (out / f"{name}.pb").write_bytes(template.SerializeToString())
    """
)

INPUTS = {"flaky": {"x": 7}, "broken": {"x": 3}, "fan_out": {"n": 3}}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("flytekit-retries")
    (out / "retry_tasks.py").write_text(MODULE)
    (out / "serialize.py").write_text(SERIALIZE)
    subprocess.run(
        [sys.executable, str(out / "serialize.py"), str(out), *INPUTS],
        check=True,
        capture_output=True,
        timeout=DEADLINE,
    )
    for name, inputs in INPUTS.items():
        spec = {
            "templateFile": f"{name}.pb",
            "execution": {
                "id": {
                    "project": "flytesnacks",
                    "domain": "development",
                    "name": f"{name.replace('_', '-')}-1",
                }
            },
            "inputs": inputs,
        }
        (out / f"{name}.yaml").write_text(yaml.safe_dump(spec))
    return out


def _taskplug_run(spec: Path, cwd: Path) -> tuple[int, dict[str, Any]]:
    done = subprocess.run(
        [TASKPLUG, "run", str(spec), "-o", "json", "--state-db", str(cwd / "state.db")],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )
    assert done.stdout, done.stderr
    return done.returncode, json.loads(done.stdout)


def test_the_templates_retry_strategy_is_read_from_flytekits_serialization(folder: Path) -> None:
    from flyteidl.core import tasks_pb2

    from taskplug.executor import load_spec

    template = tasks_pb2.TaskTemplate.FromString((folder / "flaky.pb").read_bytes())
    assert template.metadata.retries.retries == 2
    assert load_spec(folder / "flaky.yaml").metadata.max_attempts == 3


def test_a_recoverable_failure_with_retries_2_runs_3_attempts_then_fails_with_retries_exhausted(
    folder: Path, tmp_path: Path
) -> None:
    code, document = _taskplug_run(folder / "flaky.yaml", tmp_path)

    assert code == 1
    assert (document["phase"], document["attempts"]) == ("PermanentFailure", 3)
    error = document["error"]
    assert error["kind"] == "USER"
    assert error["code"].startswith("RetriesExhausted|USER:")
    assert error["message"].startswith("[3/3] currentAttempt done. Last Error: USER::")
    assert "flaky failed on 7" in error["message"]
    failures = [(e["attempt"], e["phase"]) for e in document["events"] if "Failure" in e["phase"]]
    assert failures == [
        (0, "RetryableFailure"),
        (1, "RetryableFailure"),
        (2, "RetryableFailure"),
        (2, "PermanentFailure"),
    ]
    assert document["events"][-1]["error"] == error


def test_a_plain_exception_is_non_recoverable_in_flytekit_so_retries_are_not_spent(
    folder: Path, tmp_path: Path
) -> None:
    # flytekit writes a plain exception as NON_RECOVERABLE: Flyte does not retry it, retries or not.
    code, document = _taskplug_run(folder / "broken.yaml", tmp_path)

    assert code == 1
    assert (document["phase"], document["attempts"]) == ("PermanentFailure", 1)
    assert not document["error"]["code"].startswith("RetriesExhausted")
    assert "ValueError: broken on 3" in document["error"]["message"]


def test_a_dynamic_task_ends_saying_it_is_a_dynamic_workflow_not_outputs_not_found(
    folder: Path, tmp_path: Path
) -> None:
    code, document = _taskplug_run(folder / "fan_out.yaml", tmp_path)

    assert code == 1
    assert (document["phase"], document["attempts"]) == ("PermanentFailure", 1)
    error = document["error"]
    assert error["code"] == "DynamicWorkflowNotSupported"
    message = error["message"]
    assert "dynamic workflow (flytekit @dynamic)" in message
    assert "3 node(s)" in message
    assert "retry_tasks.square" in message
    assert "futures.pb" in message
    assert "run it as a node of a workflow" in message
    assert document["events"][-1]["phase"] == "PermanentFailure"
    assert document["events"][-1]["error"]["code"] == "DynamicWorkflowNotSupported"
