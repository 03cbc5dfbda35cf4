"""flytekit's PyTorch and Dask tasks end to end: examples/flytekit's ``pytorch_allreduce.allreduce``
(``PyTorch(num_workers=1)``) and ``dask_squares.sum_of_squares`` (``Dask(workers=WorkerGroup(2))``) serialized
by flytekit (``make_template.py --distributed``) into a fresh folder, then run by ``taskplug run`` on the
embedded cluster. There the training operator and the dask operator create the replica pods, and the process
kubelet runs each one's command as a local process: ``pyflyte-execute`` in the PyTorch master and worker and
in the Dask job runner, ``dask scheduler`` / ``dask worker`` in the Dask cluster.

Which replica's outputs count. Every replica gets the same output prefix. flytekit's plain PyTorch task
writes whatever each replica returns there (the last writer wins, on Flyte as here); its ``Elastic`` task
returns rank 0's value and raises ``IgnoreOutputs`` on every other rank, which the example does too, so the
outputs are rank 0's. Errors: each replica's flytekit writes its own error document and exits 0, so the job
succeeds and the output reader decides. By default every replica writes ``error.pb`` (the last one written
is the task's error); with ``plugins.k8s.enable-distributed-error-aggregation`` the PyTorch plugin gives the
workers ``_F_DES=Earliest`` and ``_F_WN=<pod name>``, they write ``error-<uuid>.pb``, and Flyte's earliest
reader reports the error with the smallest timestamp (remote_file_output_reader.go), i.e. the cause.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pytest
import yaml

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "flytekit"
CONFIG = EXAMPLE / "config.yaml"
TASKPLUG = str(Path(sys.executable).parent / "taskplug")
# Real processes: two replicas importing torch and flytekit, or a Dask cluster and its runner.
DEADLINE = 240.0


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its parent package is missing
        return False


def _missing(*modules: str) -> list[str]:
    return [m for m in modules if not _installed(m)]


def _skip_unless_installed(*modules: str) -> None:
    missing = _missing(*modules)
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)} (scripts/setup installs them)")


def _needs_torch_distributed() -> None:
    _skip_unless_installed("torch")
    with warnings.catch_warnings():
        # torch without numpy says so on import; the replicas do not need numpy.
        warnings.simplefilter("ignore", UserWarning)
        import torch.distributed

    if not torch.distributed.is_available():
        pytest.skip("this torch build has no torch.distributed (gloo)")


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Serializing needs only the flytekit plugins; torch and dask are imported inside the task functions.
    _skip_unless_installed("flytekitplugins.kfpytorch", "flytekitplugins.dask", "kubernetes")
    out = tmp_path_factory.mktemp("flytekit-distributed")
    done = subprocess.run(
        [sys.executable, str(EXAMPLE / "make_template.py"), "--distributed", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )
    assert done.returncode == 0, done.stderr
    return out


def _template(path: Path) -> dict[str, Any]:
    from flyteidl.core import tasks_pb2
    from google.protobuf.json_format import MessageToDict

    template: dict[str, Any] = MessageToDict(tasks_pb2.TaskTemplate.FromString(path.read_bytes()))
    return template


def _spec_with_inputs(templates: Path, name: str, run: str, inputs: dict[str, Any]) -> Path:
    """A copy of ``{name}.yaml`` (beside its template) as execution ``run`` with other inputs."""
    document = yaml.safe_load((templates / f"{name}.yaml").read_text())
    document["execution"]["id"]["name"] = run
    document["inputs"] = inputs
    path = templates / f"{run}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def _taskplug_run(spec: Path, cwd: Path, config: Path = CONFIG) -> tuple[int, dict[str, Any]]:
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
            str(cwd / "state.db"),
        ],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )
    assert done.stdout, done.stderr
    document: dict[str, Any] = json.loads(done.stdout)
    return done.returncode, document


# -- serialization ------------------------------------------------------------------------------------------


def test_make_template_writes_flytekits_pytorch_task_a_master_and_a_worker_running_pyflyte_execute(
    templates: Path,
) -> None:
    template = _template(templates / "allreduce.pb")
    assert (template["type"], template["taskTypeVersion"]) == ("pytorch", 1)
    custom = template["custom"]
    assert (custom["masterReplicas"]["replicas"], custom["workerReplicas"]["replicas"]) == (1, 1)
    # PyTorch(increase_shared_mem=True), the default, makes it a pod template with a /dev/shm volume.
    (container,) = template["k8sPod"]["podSpec"]["containers"]
    assert container["args"][0] == "pyflyte-execute"
    assert container["args"][-4:] == ["task-module", "pytorch_allreduce", "task-name", "allreduce"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["PYTHONPATH"] == str(EXAMPLE)
    assert set(template["interface"]["outputs"]["variables"]) == {"total", "world_size", "rank"}


def test_make_template_writes_flytekits_dask_task_whose_runner_runs_pyflyte_execute(templates: Path) -> None:
    template = _template(templates / "squares.pb")
    assert template["type"] == "dask"
    assert template["custom"]["workers"]["numberOfWorkers"] == 2
    args = template["container"]["args"]
    assert args[0] == "pyflyte-execute"
    assert args[-4:] == ["task-module", "dask_squares", "task-name", "sum_of_squares"]


@pytest.mark.parametrize("name", ["allreduce", "squares"])
def test_the_checked_in_distributed_spec_is_the_one_make_template_writes(templates: Path, name: str) -> None:
    assert (EXAMPLE / f"{name}.yaml").read_text() == (templates / f"{name}.yaml").read_text()


# -- PyTorch ----------------------------------------------------------------------------------------------


def test_the_flytekit_pytorch_task_all_reduces_over_both_replicas_and_returns_rank_0s_outputs(
    templates: Path, tmp_path: Path
) -> None:
    _needs_torch_distributed()
    spec = _spec_with_inputs(templates, "allreduce", "allreduce-scaled", {"scale": 2.5})
    code, document = _taskplug_run(spec, tmp_path)
    assert code == 0, document
    assert (document["phase"], document["attempts"]) == ("Success", 1)
    # 2.5 * (1 + 2): both ranks contributed. Rank 1 raised IgnoreOutputs, so these are the master's.
    assert document["outputs"] == {"total": 7.5, "world_size": 2, "rank": 0}
    logs = {log["uri"] for event in document["events"] for log in event.get("logs") or []}
    # Each replica's link names its own log file, which the embedded cluster kept.
    for replica in ("master-0", "worker-0"):
        links = [uri for uri in logs if f"allreduce-scaled-n0-0-{replica}/" in uri]
        assert links, logs
        assert all(
            Path(unquote(urlparse(uri).path)).is_file() for uri in links if uri.startswith("file://")
        ), links


def test_a_user_error_raised_in_every_replica_fails_the_pytorch_task_without_retry(
    templates: Path, tmp_path: Path
) -> None:
    _needs_torch_distributed()
    spec = _spec_with_inputs(templates, "allreduce", "allreduce-negative", {"scale": -1.0})
    document = yaml.safe_load(spec.read_text())
    document["execution"]["maxAttempts"] = 2
    spec.write_text(yaml.safe_dump(document, sort_keys=False))
    code, result = _taskplug_run(spec, tmp_path)
    assert code == 1
    # The pods exit 0 (flytekit wrote error.pb), the job succeeds, and the error document decides.
    assert (result["phase"], result["attempts"]) == ("PermanentFailure", 1)
    assert result["error"]["kind"] == "USER"
    assert "ValueError: scale must not be negative, got -1.0" in result["error"]["message"]


@pytest.fixture(scope="module")
def helper_tasks(templates: Path) -> Path:
    """The folder where ``integration.flytekit_distributed_tasks`` wrote its tasks (beside the example's):
    ``one-rank-fails`` (rank 1, the worker, fails) and ``dask-listeners``."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, pathlib, integration.flytekit_distributed_tasks as t; t.write(pathlib.Path(sys.argv[1]))",
            str(templates),
        ],
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(EXAMPLE)])},
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )
    assert done.returncode == 0, done.stderr
    return templates


def test_without_error_aggregation_the_last_written_error_pb_is_the_tasks_error(
    helper_tasks: Path, tmp_path: Path
) -> None:
    # The worker raises and writes error.pb, then exits; only then does the master's all-reduce fail, and
    # the master's error.pb replaces the worker's: the task reports the symptom, as Flyte's default does.
    _needs_torch_distributed()
    code, result = _taskplug_run(helper_tasks / "one-rank-fails.yaml", tmp_path)
    assert code == 1
    assert (result["phase"], result["error"]["kind"]) == ("PermanentFailure", "USER")
    assert "dist.all_reduce(value)" in result["error"]["message"]
    assert "gives up" not in result["error"]["message"]


def test_with_distributed_error_aggregation_the_earliest_replica_error_is_the_tasks_error(
    helper_tasks: Path, tmp_path: Path
) -> None:
    _needs_torch_distributed()
    config = tmp_path / "config.yaml"
    document = yaml.safe_load(CONFIG.read_text())
    document.setdefault("plugins", {}).setdefault("k8s", {})["enable-distributed-error-aggregation"] = True
    config.write_text(yaml.safe_dump(document))
    code, result = _taskplug_run(helper_tasks / "one-rank-fails.yaml", tmp_path, config)
    assert code == 1
    assert (result["phase"], result["error"]["kind"]) == ("PermanentFailure", "USER")
    # The worker wrote error-<uuid>.pb first (the cause), the master error.pb later (the symptom).
    assert "ValueError: rank 1 gives up before the all-reduce" in result["error"]["message"]


# -- Dask -------------------------------------------------------------------------------------------------


def test_the_flytekit_dask_task_computes_on_the_workers_the_dask_operator_started(
    templates: Path, tmp_path: Path
) -> None:
    _skip_unless_installed("distributed")
    spec = _spec_with_inputs(templates, "squares", "squares-ten", {"n": 10})
    code, document = _taskplug_run(spec, tmp_path)
    assert code == 0, document
    assert (document["phase"], document["attempts"]) == ("Success", 1)
    outputs = document["outputs"]
    assert outputs["total"] == sum(i * i for i in range(10))
    # The names the operator gave its worker pods (DASK_WORKER_NAME): not a LocalCluster's workers.
    workers = outputs["workers"]
    assert 1 <= len(workers) <= 2
    assert all(re.fullmatch(r"squares-ten-n0-0-default-worker-[0-9a-f]{10}", w) for w in workers), workers


def test_every_process_of_the_dask_cluster_listens_on_loopback_only(
    helper_tasks: Path, tmp_path: Path
) -> None:
    _skip_unless_installed("distributed", "psutil")
    code, result = _taskplug_run(helper_tasks / "dask-listeners.yaml", tmp_path)
    assert code == 0, result
    # "<process>: <ip>" for each address the scheduler, the nanny and the worker listen on.
    listeners = result["outputs"]["o0"]
    for process in ("scheduler", "nanny", "worker"):
        assert any(entry.startswith(f"{process}") for entry in listeners), listeners
    assert all(entry.endswith(": 127.0.0.1") for entry in listeners), listeners
