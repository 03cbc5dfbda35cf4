"""The plugin-authoring path end to end: examples/custom-plugin, installed into the environment (scripts/setup
does it), is found through its entry point, enabled by its config, and runs on the embedded local cluster
through the real command line (`taskplug plugins`, `render`, `run`) with its simulated operator."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from taskplug.core import ENTRY_POINT_GROUP

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "custom-plugin"
SPEC = EXAMPLE / "example.yaml"
CONFIG = EXAMPLE / "config.yaml"


@pytest.fixture(scope="module", autouse=True)
def _example_installed() -> None:
    names = {ep.name for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}
    assert "batchjob" in names, (
        "examples/custom-plugin is not installed in this environment: run scripts/setup "
        "(or `pip install -e examples/custom-plugin`)"
    )


def taskplug(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "taskplug.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def plugins(cwd: Path, *config: str) -> dict[str, dict[str, Any]]:
    done = taskplug("plugins", "-o", "json", *config, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return {row["id"]: row for row in json.loads(done.stdout)}


def test_the_installed_plugin_is_listed_but_handles_nothing_until_enabled(tmp_path: Path) -> None:
    row = plugins(tmp_path)["batchjob"]
    assert row["enabled"] is False
    assert row["resource"] == "BatchJob.batch.example.com/v1alpha1"
    enabled = plugins(tmp_path, "--config", str(CONFIG))
    assert enabled["batchjob"]["enabled"] is True
    assert enabled["batchjob"]["handles"] == ["batchjob"]
    assert enabled["container"]["handles"] == ["container", "python", "python-task", "raw-container"]


def test_render_shows_the_batch_job_with_the_platform_configuration(tmp_path: Path) -> None:
    done = taskplug("render", str(SPEC), "--config", str(CONFIG), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    job = json.loads(done.stdout)
    assert (job["apiVersion"], job["kind"]) == ("batch.example.com/v1alpha1", "BatchJob")
    assert job["metadata"]["name"] == "shard-report-1-n0-0"
    assert job["metadata"]["labels"]["team"] == "data"  # plugins.k8s.default-labels
    assert job["spec"]["parallelism"] == 3  # the task's custom wins over plugins.batchjob
    container = job["spec"]["podTemplate"]["spec"]["containers"][0]
    assert container["image"] == "python:3.11-slim"
    assert container["resources"]["requests"] == {"cpu": "500m", "memory": "512Mi"}


def test_the_example_runs_to_success_on_the_local_cluster(tmp_path: Path) -> None:
    done = taskplug("run", str(SPEC), "--config", str(CONFIG), "-o", "json", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout)
    assert result["phase"] == "Success"
    assert result["attempts"] == 1
    assert result["error"] is None
    assert result["events"][0]["reason"] == "task submitted to K8s"


def test_a_simulated_failure_is_retried_and_reported_with_the_operators_message(tmp_path: Path) -> None:
    spec = yaml.safe_load(SPEC.read_text())
    spec["execution"]["annotations"] = {"batch.example.com/simulate-failure": "shard 2 crashed"}
    failing = tmp_path / "failing.yaml"
    failing.write_text(yaml.safe_dump(spec))
    done = taskplug("run", str(failing), "--config", str(CONFIG), "-o", "json", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    result = json.loads(done.stdout)
    # The budget is spent: Flyte fails the node with RetriesExhausted|<the last code>, the last error after "::".
    assert result["phase"] == "PermanentFailure"
    assert result["attempts"] == 2
    assert result["error"]["code"] == "RetriesExhausted|BatchJobFailed"
    assert result["error"]["message"].split("::", 1)[1] == "shard 2 crashed"
    assert result["error"]["kind"] == "USER"


def test_without_the_config_the_task_type_is_refused_as_bad_input(tmp_path: Path) -> None:
    done = taskplug("run", str(SPEC), "-o", "json", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "batchjob" in done.stdout + done.stderr
