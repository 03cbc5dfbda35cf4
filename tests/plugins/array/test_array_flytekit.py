"""flytekit's legacy map task (``flytekit.core.legacy_map_task.map_task``), serialized by flytekit 1.16
(fixtures/make_legacy_map_fixture.py), rendered by the plugin, and run with
``taskplug run`` through ``templateFile:``: every sub-task pod runs ``pyflyte-map-execute`` as a local process
on the embedded cluster, and the outputs equal what the same map gives when flytekit runs it locally.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from array_helpers import PARENT, FakeKube, make_plugin, rounds_until_checking, run_round, state_of
from flyteidl.core import tasks_pb2
from google.protobuf import json_format

from taskplug.core import Phase
from taskplug.executor import parse_spec, task_context_for

FIXTURES = Path(__file__).resolve().parent / "fixtures"
TASKPLUG = str(Path(sys.executable).parent / "taskplug")
DEADLINE = 120.0
PLATFORM = {"tasks": {"task-plugins": {"enabled-plugins": ["container", "sidecar", "k8s-array"]}}}


def template(name: str) -> tasks_pb2.TaskTemplate:
    return tasks_pb2.TaskTemplate.FromString((FIXTURES / name).read_bytes())


def spec_document(fixture: str, xs: list[int], *, name: str = "legacy") -> dict[str, Any]:
    return {
        "templateFile": str(FIXTURES / fixture),
        "execution": {
            "id": {"project": "p", "domain": "d", "name": name, "nodeId": "n0"},
            # The fixture bakes in no PYTHONPATH: the pods import legacy_squares from here.
            "environment": {"PYTHONPATH": str(FIXTURES)},
        },
        "inputs": {"x": xs},
    }


def local_map(task_name: str, xs: list[int], **options: Any) -> list[Any]:
    """What the same legacy map gives when flytekit runs it locally, in this process."""
    sys.path.insert(0, str(FIXTURES))
    try:
        import legacy_squares
        from flytekit.core.legacy_map_task import map_task

        return list(map_task(getattr(legacy_squares, task_name), **options)(x=xs))
    finally:
        sys.path.remove(str(FIXTURES))


def test_flytekit_serializes_a_legacy_map_task_as_a_container_array_task() -> None:
    square = template("legacy_map_square.pb")
    assert (square.type, square.task_type_version) == ("container_array", 1)
    assert json_format.MessageToDict(square.custom) == {"minSuccessRatio": 1.0, "parallelism": "2"}
    args = list(square.container.args)
    assert args[0] == "pyflyte-map-execute"
    assert args[args.index("--resolver") + 1] == "flytekit.core.legacy_map_task.MapTaskResolver"
    assert args[-4:] == ["task-module", "legacy_squares", "task-name", "square"]
    invert = template("legacy_map_invert.pb")
    assert json_format.MessageToDict(invert.custom) == {"minSuccessRatio": 0.5}


async def test_the_flytekit_map_task_renders_one_pyflyte_map_execute_pod_per_element(tmp_path: Path) -> None:
    kube = FakeKube()
    plugin = make_plugin(kube)
    spec = parse_spec(spec_document("legacy_map_square.pb", [1, 2, 3], name="exec1"))
    tctx = task_context_for(spec, str(tmp_path / "data"))
    tctx = await rounds_until_checking(plugin, tctx)
    _, tctx = await run_round(plugin, tctx)
    # concurrency=2: the first two elements start.
    assert kube.created == [f"{PARENT}-0", f"{PARENT}-1"]
    assert state_of(tctx).details == (Phase.QUEUED, Phase.QUEUED, Phase.UNDEFINED)
    container = kube.pod(f"{PARENT}-1")["spec"]["containers"][0]
    args = container["args"]
    assert args[:5] == [
        "pyflyte-map-execute",
        "--inputs",
        tctx.input_reader.input_path,
        "--output-prefix",
        tctx.output_writer.output_prefix,
    ]
    assert args[args.index("--raw-output-data-prefix") + 1] == f"{tctx.output_writer.raw_output_prefix}/1/0"
    assert container["image"] == "localhost/taskplug-flytekit:v1"
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert (env["PYTHONPATH"], env["FLYTE_K8S_ARRAY_INDEX"]) == (str(FIXTURES), "1")
    assert env["BATCH_JOB_ARRAY_INDEX_VAR_NAME"] == "FLYTE_K8S_ARRAY_INDEX"


def _taskplug_run(tmp_path: Path, document: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    spec, config = tmp_path / "spec.yaml", tmp_path / "platform.yaml"
    spec.write_text(yaml.safe_dump(document))
    config.write_text(yaml.safe_dump(PLATFORM))
    done = subprocess.run(
        [
            TASKPLUG,
            "run",
            str(spec),
            "--config",
            str(config),
            "-o",
            "json",
            "--state-db",
            str(tmp_path / "state.db"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )
    assert done.stdout, done.stderr
    return done.returncode, json.loads(done.stdout)


@pytest.mark.integration
def test_taskplug_run_gives_the_legacy_maps_outputs_as_flytekit_does_locally(tmp_path: Path) -> None:
    xs = [3, 1, 4, 1, 5]
    code, result = _taskplug_run(tmp_path, spec_document("legacy_map_square.pb", xs))
    assert code == 0, result
    assert (result["phase"], result["attempts"]) == ("Success", 1)
    assert result["outputs"] == {"o0": local_map("square", xs, concurrency=2)} == {"o0": [9, 1, 16, 1, 25]}


@pytest.mark.integration
def test_a_raising_element_within_min_success_ratio_is_none_as_flytekit_gives_locally(tmp_path: Path) -> None:
    # invert(0) raises ZeroDivisionError: flytekit writes a non-recoverable error document and exits 0.
    xs = [1, 0, 4]
    code, result = _taskplug_run(tmp_path, spec_document("legacy_map_invert.pb", xs))
    assert code == 0, result
    assert (
        result["outputs"]
        == {"o0": local_map("invert", xs, min_success_ratio=0.5)}
        == {"o0": [1.0, None, 0.25]}
    )


@pytest.mark.integration
def test_a_raising_element_beyond_min_success_ratio_fails_with_the_users_error(tmp_path: Path) -> None:
    code, result = _taskplug_run(tmp_path, spec_document("legacy_map_invert.pb", [0, 0, 4]))
    assert code == 1
    assert result["phase"] == "PermanentFailure"
    message = result["error"]["message"]
    # Both elements raised the same error: one entry for the two indices.
    assert message.startswith("[0-1]: code:USER:")
    assert "ZeroDivisionError: division by zero" in message
    assert "[2]" not in message
    with pytest.raises(ZeroDivisionError):
        local_map("invert", [0, 0, 4], min_success_ratio=0.5)
