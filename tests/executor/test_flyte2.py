"""What a task written by Flyte 2's SDK gets from the platform beyond a flytekit task: the environment and
labels of Flyte 2's executor (``ACTION_NAME``, ``RUN_NAME``, ``_U_RUN_BASE``, ``_U_ORG_NAME``; ``run``,
``action``, ``attempt``), for its plain type ``python`` and for its plugin task types alike, and nothing of it
for Flyte 1's tasks."""

from __future__ import annotations

from typing import Any

import pytest
from flyteidl.core import tasks_pb2

from taskplug.core import StaticTaskExecutionContext
from taskplug.executor import parse_spec, task_context_for
from taskplug.executor._flyte2 import is_flyte2_task

ROOT = "/data/root"


def _template(task_type: str, runtime: dict[str, Any] | None) -> dict[str, Any]:
    template: dict[str, Any] = {
        "id": {"resourceType": "TASK", "project": "p", "domain": "d", "name": "env.t", "version": "v1"},
        "type": task_type,
        "container": {
            "image": "ghcr.io/flyteorg/flyte:py3.11-v2.12.1",
            "args": ["a0", "--inputs", "{{.input}}"],
        },
    }
    if runtime is not None:
        template["metadata"] = {"runtime": runtime}
    return template


FLYTE2_RUNTIME = {"type": "FLYTE_SDK", "version": "2.12.1", "flavor": "python"}
FLYTEKIT_RUNTIME = {"type": "FLYTE_SDK", "version": "1.16.31", "flavor": "python"}


@pytest.mark.parametrize(
    ("task_type", "runtime", "flyte2"),
    [
        pytest.param("python", FLYTE2_RUNTIME, True, id="flyte2-plain-task"),
        pytest.param("python", None, True, id="type-python-alone"),
        pytest.param("dask", FLYTE2_RUNTIME, True, id="flyte2-dask-task"),
        pytest.param("spark", {**FLYTE2_RUNTIME, "version": "v2.0.0b5"}, True, id="a-pre-release"),
        pytest.param("python-task", FLYTEKIT_RUNTIME, False, id="flytekit-task"),
        pytest.param("dask", FLYTEKIT_RUNTIME, False, id="flytekit-dask-task"),
        pytest.param("container", {"type": "OTHER", "version": "2.0"}, False, id="not-an-sdk"),
        pytest.param("container", None, False, id="hand-written"),
    ],
)
def test_a_task_is_flyte2s_by_its_runtime_metadata_or_its_type_python(
    task_type: str, runtime: dict[str, Any] | None, flyte2: bool
) -> None:
    from google.protobuf import json_format

    template = json_format.ParseDict(_template(task_type, runtime), tasks_pb2.TaskTemplate())
    assert is_flyte2_task(template) is flyte2


def _context(
    task_type: str, runtime: dict[str, Any] | None, *, attempt: int = 0, env: dict[str, str] | None = None
) -> StaticTaskExecutionContext:
    spec = parse_spec(
        {
            "template": _template(task_type, runtime),
            "execution": {
                "id": {"project": "p", "domain": "d", "name": "run1", "nodeId": "a0"},
                "environment": env or {},
                "labels": {"team": "ml"},
            },
        }
    )
    return task_context_for(spec.for_attempt(attempt), ROOT)


def test_a_flyte2_task_gets_the_environment_flyte2s_executor_gives_over_the_runs_own() -> None:
    tctx = _context("python", FLYTE2_RUNTIME, env={"ACTION_NAME": "mine", "MY_VAR": "kept"})
    assert dict(tctx.metadata.environment_variables) == {
        "ACTION_NAME": "a0",
        "RUN_NAME": "run1",
        "_U_RUN_BASE": f"{ROOT}/metadata/p/d/run1",
        "_U_ORG_NAME": "local",
        "MY_VAR": "kept",
    }
    # Its outputs go under the run's base, as a0 passes the base down to the tasks it would launch.
    assert tctx.output_writer.output_prefix.startswith(f"{ROOT}/metadata/p/d/run1/")


def test_a_flyte2_tasks_pod_labels_name_its_run_action_and_one_based_attempt() -> None:
    labels = dict(_context("dask", FLYTE2_RUNTIME, attempt=1).metadata.labels)
    assert {k: labels.get(k) for k in ("team", "run", "action", "attempt")} == {
        "team": "ml",
        "run": "run1",
        "action": "a0",
        "attempt": "2",
    }


def test_a_flytekit_task_gets_none_of_it() -> None:
    metadata = _context("python-task", FLYTEKIT_RUNTIME, env={"MY_VAR": "kept"}).metadata
    assert dict(metadata.environment_variables) == {"MY_VAR": "kept"}
    assert metadata.labels["team"] == "ml"
    assert not {"run", "action", "attempt"} & set(metadata.labels)
