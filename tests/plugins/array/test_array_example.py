"""examples/legacy-map as a user runs it: ``taskplug run`` with the example's platform config (which enables
``k8s-array``), on the embedded cluster; the flytekit spec from a template serialized into a fresh folder."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "legacy-map"
TASKPLUG = str(Path(sys.executable).parent / "taskplug")
DEADLINE = 120.0


def _run(spec: Path, cwd: Path) -> tuple[int, dict[str, Any]]:
    done = subprocess.run(
        [
            TASKPLUG,
            "run",
            str(spec),
            "--config",
            str(EXAMPLE / "platform.yaml"),
            "-o",
            "json",
            "--state-db",
            str(cwd / "state.db"),
        ],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )
    assert done.stdout, done.stderr
    return done.returncode, json.loads(done.stdout)


def test_the_hand_written_map_task_tolerates_its_one_failing_element(tmp_path: Path) -> None:
    code, result = _run(EXAMPLE / "legacy-map.yaml", tmp_path)
    assert code == 0, result
    assert result["outputs"] == {"o0": [9, 1, 16, None, 25, 81, 4, 36]}


def test_the_flytekit_legacy_map_task_runs_from_its_serialized_template(tmp_path: Path) -> None:
    out = tmp_path / "templates"
    subprocess.run(
        [sys.executable, str(EXAMPLE / "make_template.py"), "--out", str(out)],
        check=True,
        capture_output=True,
        timeout=DEADLINE,
    )
    assert (out / "squares.yaml").read_text() == (EXAMPLE / "squares.yaml").read_text()
    code, result = _run(out / "squares.yaml", tmp_path)
    assert code == 0, result
    assert (result["phase"], result["outputs"]) == ("Success", {"o0": [9, 1, 16, 1, 25, 81, 4, 36]})
