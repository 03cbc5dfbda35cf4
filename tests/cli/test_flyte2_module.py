"""``taskplug run FILE.py TASK`` on a Flyte 2 module, without the SDK: which files are Flyte 2 modules, how the
Python that has ``flyte`` is found (taskplug's own, else the ``a0`` on ``PATH``), and the exit 2 naming the
package to install when none has it. The runs themselves are in ``tests/integration/test_flyte2_tasks.py``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from taskplug.cli._flyte2_module import FLYTE2_PACKAGE, find_flyte2_python, is_flyte2_module

from .conftest import EXAMPLES, assert_bad_input, invoke


@pytest.mark.parametrize(
    ("source", "flyte2"),
    [
        pytest.param("import flyte\n", True, id="import-flyte"),
        pytest.param("from flyte.io import File\n", True, id="from-flyte-io"),
        pytest.param("import flyte.errors as e\n", True, id="import-a-flyte-submodule"),
        pytest.param("from flytekit import task\n", False, id="flytekit"),
        pytest.param("import flyte\nimport flytekit\n", False, id="both-left-to-flytekit"),
        pytest.param("import flyteidl\nfrom flyteplugins.dask import Dask\n", False, id="neither"),
        pytest.param("from . import flyte\n", False, id="a-relative-module-of-that-name"),
        pytest.param("import flyte(\n", False, id="not-python"),
    ],
)
def test_a_module_is_flyte2_when_it_imports_flyte_and_not_flytekit(
    tmp_path: Path, source: str, flyte2: bool
) -> None:
    module = tmp_path / "tasks.py"
    module.write_text(source)
    assert is_flyte2_module(module) is flyte2


def test_the_examples_are_told_apart() -> None:
    assert is_flyte2_module(EXAMPLES / "flyte2" / "hello.py")
    assert is_flyte2_module(EXAMPLES / "flyte2" / "dask_squares.py")
    assert not is_flyte2_module(EXAMPLES / "flytekit" / "workflows.py")
    assert not is_flyte2_module(EXAMPLES / "flyte2" / "missing.py")


def _a0(folder: Path, shebang: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "a0"
    script.write_text(f"#!{shebang}\nimport sys\n")
    script.chmod(0o755)
    return script


def test_without_flyte_here_the_python_of_the_a0_on_path_is_used(tmp_path: Path) -> None:
    _a0(tmp_path / "venv" / "bin", sys.executable)
    found = find_flyte2_python(f"{tmp_path / 'empty'}:{tmp_path / 'venv' / 'bin'}")
    assert found is not None
    assert (found.python, found.bin_dir) == (Path(sys.executable), tmp_path / "venv" / "bin")


def test_an_a0_run_through_env_names_its_python_by_path_lookup(tmp_path: Path) -> None:
    _a0(tmp_path / "bin", "/usr/bin/env python3")
    found = find_flyte2_python(str(tmp_path / "bin"))
    assert found is not None
    assert found.python.name.startswith("python3")
    assert found.bin_dir == tmp_path / "bin"


def test_no_a0_on_path_or_one_without_a_python_is_no_flyte(tmp_path: Path) -> None:
    assert find_flyte2_python(str(tmp_path)) is None
    _a0(tmp_path / "bin", str(tmp_path / "no-such-python"))
    assert find_flyte2_python(str(tmp_path / "bin")) is None


def test_a_flyte2_module_without_the_sdk_exits_2_naming_the_package_to_install(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no a0 anywhere; this Python has no flyte
    result = invoke(
        runner, "run", "--state-db", tmp_path / "state.db", EXAMPLES / "flyte2" / "hello.py", "add"
    )
    assert_bad_input(result, "Flyte 2", f"pip install {FLYTE2_PACKAGE}", "hello.py")
    assert not (tmp_path / ".taskplug").exists()


def test_on_this_machine_the_primary_container_of_a_pod_template_task_gets_the_module_and_the_sdk(
    tmp_path: Path,
) -> None:
    from flyteidl.core import tasks_pb2
    from google.protobuf import json_format

    from taskplug.cli._flyte2_module import Flyte2Python, _on_host

    template = json_format.ParseDict(
        {
            "type": "python",
            "config": {"primary_container_name": "primary"},
            "k8sPod": {
                "podSpec": {
                    "containers": [
                        {
                            "name": "primary",
                            "image": "ghcr.io/flyteorg/flyte:py3.11-v2.12.1",
                            "args": ["a0"],
                            "env": [
                                {"name": "PATH", "value": "/opt/venv/bin"},
                                {"name": "KEEP", "value": "1"},
                            ],
                        },
                        {"name": "sidecar", "image": "busybox"},
                    ]
                }
            },
        },
        tasks_pb2.TaskTemplate(),
    )
    _on_host(template, tmp_path, Flyte2Python(Path("/venv/bin/python"), Path("/venv/bin")), "localhost/x:1")
    primary, sidecar = json_format.MessageToDict(template.k8s_pod.pod_spec)["containers"]
    assert primary["image"] == "localhost/x:1"
    assert primary["env"] == [
        {"name": "KEEP", "value": "1"},
        {"name": "PYTHONPATH", "value": str(tmp_path)},
        {"name": "PATH", "value": "/venv/bin:/usr/local/bin:/usr/bin:/bin"},
    ]
    assert sidecar == {"name": "sidecar", "image": "busybox"}
