"""A flytekit Spark task end to end: ``@task(task_config=Spark(...))`` computing with
``flytekit.current_context().spark_session`` and returning an int, serialized by flytekit (as
``examples/flytekit/make_template.py`` does) into a fresh folder, then run by ``taskplug run`` on the embedded
cluster. There the Spark operator creates the driver pod, whose ``spark-submit`` runs flytekit's
``entrypoint.py pyflyte-execute …`` in Spark local mode; the task's output comes back as the run's output.

Needs pyspark, flytekitplugins-spark and Java 17 (``scripts/setup`` installs them); skipped without them."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest


def _missing() -> str | None:
    for module, package in (("pyspark", "pyspark"), ("flytekitplugins.spark", "flytekitplugins-spark")):
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:  # its parent package is missing
            found = False
        if not found:
            return f"{package} is not installed (scripts/setup installs it)"
    if shutil.which("java") is None:
        return "no java on PATH (scripts/setup installs openjdk-17-jre-headless)"
    return None


pytestmark = [pytest.mark.integration, pytest.mark.skipif(_missing() is not None, reason=str(_missing()))]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "flytekit"
TASKPLUG = str(Path(sys.executable).parent / "taskplug")
# Serializing imports flytekit and pyspark; the run starts a JVM, flytekit and a SparkContext.
DEADLINE = 300.0
N = 1000

TASK_MODULE = """
import flytekit
from flytekit import task
from flytekitplugins.spark import Spark


@task(
    task_config=Spark(
        spark_conf={
            "spark.driver.memory": "1g",
            "spark.executor.instances": "1",
            "spark.executor.cores": "2",
        }
    )
)
def spark_sum(n: int) -> int:
    sc = flytekit.current_context().spark_session.sparkContext
    return int(sc.parallelize(range(n), 4).sum())
"""

# make_template.write_task with the task module's folder on the container's PYTHONPATH.
SERIALIZE = """
import dataclasses, sys
from pathlib import Path
out = Path(sys.argv[1])
sys.path[:0] = [sys.argv[2], str(out)]
import make_template, spark_tasks
settings = dataclasses.replace(make_template.settings(), env={"PYTHONPATH": str(out)})
make_template.write_task(
    out, "spark-sum", spark_tasks.spark_sum, inputs={"n": int(sys.argv[3])}, max_attempts=1, serialization=settings
)
"""


@pytest.fixture(scope="module")
def spec(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("flytekit-spark")
    (out / "spark_tasks.py").write_text(TASK_MODULE)
    done = subprocess.run(
        [sys.executable, "-c", SERIALIZE, str(out), str(EXAMPLE), str(N)],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )
    assert done.returncode == 0, done.stderr
    return out / "spark-sum.yaml"


def test_flytekit_serializes_the_spark_task_to_run_flytekits_entrypoint(spec: Path) -> None:
    from flyteidl.core import tasks_pb2
    from google.protobuf import json_format

    template = tasks_pb2.TaskTemplate.FromString((spec.parent / "spark-sum.pb").read_bytes())
    assert template.type == "spark"
    custom = json_format.MessageToDict(template.custom)
    # A path in flytekit's image, which the operator maps to the entrypoint.py installed here.
    assert custom["mainApplicationFile"].startswith("local:///")
    assert custom["mainApplicationFile"].endswith("/entrypoint.py")
    assert custom["sparkConf"]["spark.executor.cores"] == "2"
    assert list(template.container.args[:1]) == ["pyflyte-execute"]


def test_taskplug_run_runs_the_spark_task_and_prints_its_value(spec: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [TASKPLUG, "run", str(spec), "-o", "json", "--state-db", str(tmp_path / "state.db")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )
    assert done.stdout, done.stderr
    document = json.loads(done.stdout)
    assert done.returncode == 0, document
    assert (document["phase"], document["attempts"]) == ("Success", 1)
    assert document["outputs"] == {"o0": sum(range(N))}
