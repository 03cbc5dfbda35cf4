"""Spark really running on the embedded cluster: a SparkApplication the Spark plugin built from a template,
created on ``LocalCluster(mode="process")`` with the driver-pod operator, whose driver pod runs pyspark's
``spark-submit`` in local mode as a local process. The application's status follows the driver pod, and the
driver's output and exit code are the pod's.

Needs pyspark and Java 17 (``scripts/setup`` installs both); skipped without them."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from spark_helpers import build, spark_job, spark_template

from taskplug.k8s import POD
from taskplug.localcluster import LocalCluster
from taskplug.plugins.spark import SPARK_APPLICATION
from taskplug.plugins.spark._local_driver import SparkDriverOperator


def _missing() -> str | None:
    if importlib.util.find_spec("pyspark") is None:
        return "pyspark is not installed (scripts/setup installs it: pip install pyspark)"
    if not (Path(sys.executable).parent / "spark-submit").exists():
        return "pyspark's spark-submit is not beside this Python"
    if shutil.which("java") is None:
        return "no java on PATH (scripts/setup installs openjdk-17-jre-headless)"
    return None


pytestmark = pytest.mark.skipif(_missing() is not None, reason=str(_missing()))

# Starting a JVM, Python workers and a SparkContext on a loaded 2-core machine: a deadline, not a timing.
DEADLINE = 240.0
NAMESPACE = "default"

# A PySpark application: a sum on the local executors, then what the driver's processes listen on (the JVM
# is the parent of this Python; the Python workers are its children), as one JSON line.
SUM_APP = """
import json, sys
import psutil
from pyspark.sql import SparkSession

spark = SparkSession.builder.getOrCreate()
sc = spark.sparkContext
total = sc.parallelize(range(int(sys.argv[1])), 4).sum()
me = psutil.Process()
listening = set()
for proc in [me, me.parent(), *me.children(recursive=True)]:
    for conn in proc.net_connections(kind="inet"):
        if conn.status == psutil.CONN_LISTEN:
            listening.add(conn.laddr.ip)
print("RESULT " + json.dumps({"sum": total, "master": sc.master, "listening": sorted(listening)}))
"""

FAILING_APP = """
import sys
print("the input is not there", file=sys.stderr)
sys.exit(3)
"""


def application(tmp_path: Path, name: str, script: str, arguments: list[str]) -> dict[str, Any]:
    """A SparkApplication built by the Spark plugin from a ``spark`` template whose application file is
    ``script`` (a path on this host), with the metadata the plugin manager would add."""
    app_file = tmp_path / f"{name}.py"
    app_file.write_text(script)
    job = spark_job(
        main_application_file=f"local://{app_file}",
        executor_path="/opt/venv/bin/python3",  # the image's Python, as flytekit writes it
        conf={"spark.executor.instances": "2", "spark.executor.cores": "1", "spark.driver.memory": "1g"},
    )
    app = build(template=spark_template(job, args=arguments))
    app["metadata"] = {"name": name, "namespace": NAMESPACE}
    return app


def state_of(obj: dict[str, Any]) -> str:
    return str(((obj.get("status") or {}).get("applicationState") or {}).get("state") or "")


class StatesSeen:
    """Every applicationState.state the API server stored, in order."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.states: list[str] = []
        cluster.store.observers.append(self._observe)

    def _observe(self, rtype: Any, event: Any) -> None:
        if rtype.plural == SPARK_APPLICATION.plural:
            state = state_of(event.obj)
            if not self.states or self.states[-1] != state:
                self.states.append(state)


async def run(app: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], str, list[str]]:
    """Run ``app`` to a terminal state; the application, its driver pod, the driver's log, the states seen."""
    name = app["metadata"]["name"]
    async with LocalCluster(mode="process", bookmark_interval=0) as cluster:
        seen = StatesSeen(cluster)
        cluster.register_operator(SPARK_APPLICATION, SparkDriverOperator())
        await cluster.client().create(SPARK_APPLICATION, app)
        done = await cluster.wait_for(
            SPARK_APPLICATION,
            NAMESPACE,
            name,
            lambda o: state_of(o) in ("COMPLETED", "FAILED", "SUBMISSION_FAILED"),
            within=DEADLINE,
        )
        driver = await cluster.client().get(POD, NAMESPACE, f"{name}-driver")
        return done, driver, cluster.logs(NAMESPACE, f"{name}-driver"), seen.states


async def test_a_spark_application_computes_in_its_driver_pod_and_completes(tmp_path: Path) -> None:
    done, driver, log, states = await run(application(tmp_path, "sum", SUM_APP, ["100"]))
    assert state_of(done) == "COMPLETED", (done["status"], log[-3000:])
    assert states == ["", "SUBMITTED", "RUNNING", "SUCCEEDING", "COMPLETED"]
    assert driver["status"]["phase"] == "Succeeded"
    [result] = [json.loads(line[len("RESULT ") :]) for line in log.splitlines() if line.startswith("RESULT ")]
    assert result["sum"] == sum(range(100))
    # The executors the application asked for (2 × 1 core) are the local driver's threads.
    assert result["master"] == "local[2]"
    # The driver JVM (RPC, block manager, UI) and its Python listen on loopback only.
    assert result["listening"] and set(result["listening"]) <= {"127.0.0.1", "::ffff:127.0.0.1"}
    status = done["status"]
    assert status["sparkApplicationId"] == driver["metadata"]["labels"]["spark-app-selector"]
    assert status["driverInfo"]["podName"] == "sum-driver"
    assert f"Spark web UI at http://127.0.0.1:{status['driverInfo']['webUIPort']}" in log
    assert status["terminationTime"]
    # Spark's scratch space is in the pod's working directory.
    assert "/work/spark-local-dir/blockmgr-" in log


async def test_a_driver_that_fails_fails_the_application_with_its_exit_code(tmp_path: Path) -> None:
    done, driver, log, states = await run(application(tmp_path, "fails", FAILING_APP, []))
    assert done["status"]["applicationState"] == {
        "state": "FAILED",
        "errorMessage": "driver container failed with ExitCode: 3, Reason: Error",
    }, log[-3000:]
    assert states[-2:] == ["FAILING", "FAILED"]
    assert driver["status"]["phase"] == "Failed"
    assert "the input is not there" in log
