"""A flytekit ``ContainerTask`` (a raw container with co-pilot) run as a Flyte user runs it: serialized by
flytekit into a fresh folder, then ``taskplug run`` on the embedded cluster. The process kubelet runs co-pilot's
downloader and uploader with taskplug's flyte-copilot, and ``sh -c`` reads ``/var/inputs/a`` and writes
``/var/outputs/sum`` in the pod's shared volumes."""

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
    from flytekit import ContainerTask, kwtypes

    add = ContainerTask(
        name="add",
        image="alpine:3.20",
        input_data_dir="/var/inputs",
        output_data_dir="/var/outputs",
        inputs=kwtypes(a=int, b=int),
        outputs=kwtypes(sum=int),
        command=["sh", "-c", "echo $(( $(cat /var/inputs/a) + $(cat /var/inputs/b) )) > /var/outputs/sum"],
    )

    broken = ContainerTask(
        name="broken",
        image="alpine:3.20",
        input_data_dir="/var/inputs",
        output_data_dir="/var/outputs",
        inputs=kwtypes(a=int),
        outputs=kwtypes(sum=int),
        command=["sh", "-c", "echo \\"cannot add $(cat /var/inputs/a)\\" >&2; exit 3"],
    )
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
    import container_tasks

    settings = SerializationSettings(
        image_config=ImageConfig(default_image=Image(name="default", fqn="localhost/taskplug-flytekit", tag="v1")),
        project="flytesnacks",
        domain="development",
        version="v1",
    )
    for name in sys.argv[2:]:
        entity = getattr(container_tasks, name)
        template = get_serializable(OrderedDict(), settings, entity).template.to_flyte_idl()
        (out / f"{name}.pb").write_bytes(template.SerializeToString())
    """
)

INPUTS = {"add": {"a": 2, "b": 40}, "broken": {"a": 7}}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("flytekit-container-task")
    (out / "container_tasks.py").write_text(MODULE)
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
            "execution": {"id": {"project": "flytesnacks", "domain": "development", "name": f"{name}-1"}},
            "inputs": inputs,
        }
        (out / f"{name}.yaml").write_text(yaml.safe_dump(spec))
    return out


def _taskplug_run(spec: Path, cwd: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [TASKPLUG, "run", str(spec), "--state-db", str(cwd / "state.db"), *options],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )


def test_a_container_task_runs_end_to_end_and_prints_its_output(folder: Path, tmp_path: Path) -> None:
    from flyteidl.core import tasks_pb2

    template = tasks_pb2.TaskTemplate.FromString((folder / "add.pb").read_bytes())
    assert (template.type, template.container.data_config.enabled) == ("raw-container", True)

    done = _taskplug_run(folder / "add.yaml", tmp_path)

    assert done.returncode == 0, done.stderr
    assert "Success after 1 attempt(s)" in done.stdout
    assert '"sum": 42' in done.stdout
    outputs = next(
        tmp_path.glob(".taskplug/data/metadata/flytesnacks/development/add-1/n0/0/outputs.pb"), None
    )
    assert outputs is not None, sorted(str(p) for p in tmp_path.rglob("*.pb"))


def test_a_failing_container_task_fails_with_the_containers_exit_code_and_message(
    folder: Path, tmp_path: Path
) -> None:
    done = _taskplug_run(folder / "broken.yaml", tmp_path, "-o", "json")

    assert done.returncode == 1, done.stderr
    document: dict[str, Any] = json.loads(done.stdout)
    assert (document["phase"], document["attempts"]) == ("PermanentFailure", 1)
    message = document["error"]["message"]
    assert "terminated with exit code (3)" in message
    assert "cannot add 7" in message
    assert document["outputs"] is None
