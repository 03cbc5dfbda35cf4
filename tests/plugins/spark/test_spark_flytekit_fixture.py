"""A flytekitplugins-spark task, serialized by flytekit (fixtures/make_spark_fixture.py), rendered as the
SparkApplication Flyte would create."""

from __future__ import annotations

from spark_helpers import DATA_ROOT, FIXTURES, NOW, NOW_MILLIS, platform, spark_config

from taskplug.executor import parse_spec, task_context_for
from taskplug.plugins.spark import build_spark_application

TASK_CONF = {
    "spark.driver.memory": "1000M",
    "spark.executor.memory": "1000M",
    "spark.executor.cores": "1",
    "spark.executor.instances": "2",
    "spark.driver.cores": "1",
}


def render() -> dict:  # type: ignore[type-arg]
    spec = parse_spec(
        {
            "templateFile": "spark_task.pb",
            "execution": {
                "id": {"project": "p", "domain": "d", "name": "exec1", "nodeId": "n0", "retryAttempt": 0},
                "namespace": "p-d",
                "maxAttempts": 2,
                "interruptible": True,
            },
            "inputs": {"partitions": 3},
        },
        base_dir=FIXTURES,
    )
    assert spec.template.type == "spark"
    tctx = task_context_for(spec, DATA_ROOT)
    pod = platform(
        **{
            "interruptible-tolerations": [{"key": "spot", "operator": "Exists"}],
            "interruptible-node-selector": {"spot": "true"},
        }
    )
    config = spark_config(spark_config_default={"spark.kubernetes.allocation.batch.size": "50"})
    return build_spark_application(tctx, platform=pod, config=config, now=NOW)


def test_flytekit_spark_task_renders_a_python_application_with_the_tasks_conf() -> None:
    spec = render()["spec"]
    assert spec["type"] == "Python"
    assert spec["mode"] == "cluster"
    assert spec["mainApplicationFile"] == "local:///opt/venv/bin/entrypoint.py"
    assert "mainClass" not in spec
    assert spec["image"] == "ghcr.io/org/spark-img:v1"
    assert spec["hadoopConf"] == {"fs.s3a.multipart.threshold": "536870912"}
    conf = spec["sparkConf"]
    for key, value in TASK_CONF.items():
        assert conf[key] == value
    assert conf["spark.pyspark.python"] == "/opt/venv/bin/python3"
    assert conf["spark.pyspark.driver.python"] == "/opt/venv/bin/python3"
    assert conf["spark.kubernetes.driver.limit.cores"] == "1"
    assert conf["spark.kubernetes.executor.limit.cores"] == "1"
    assert conf["spark.kubernetes.allocation.batch.size"] == "50"
    assert conf["spark.kubernetes.executor.podNamePrefix"] == "exec1-n0-0"
    assert conf["spark.kubernetes.driverEnv.FLYTE_START_TIME"] == NOW_MILLIS


def test_flytekit_spark_task_arguments_are_rendered() -> None:
    args = render()["spec"]["arguments"]
    assert args[:2] == ["pyflyte-execute", "--inputs"]
    assert args[2] == f"{DATA_ROOT}/metadata/p/d/exec1/n0/inputs.pb"
    assert args[args.index("--output-prefix") + 1] == f"{DATA_ROOT}/metadata/p/d/exec1/n0/0"
    assert not any("{{" in arg for arg in args)
    assert args[-4:] == ["task-module", "make_spark_fixture", "task-name", "hello_spark"]


def test_flytekit_spark_task_driver_and_executor_specs() -> None:
    spec = render()["spec"]
    driver, executor = spec["driver"], spec["executor"]
    assert (driver["cores"], driver["memory"]) == (1, "1000M")
    assert (executor["cores"], executor["instances"], executor["memory"]) == (1, 2, "1000M")
    for role in (driver, executor):
        assert role["image"] == "ghcr.io/org/spark-img:v1"
        assert role["serviceAccount"] == "spark"
        assert {"name": "FOO", "value": "bar"} in role["env"]
        assert role["env"][-1] == {"name": "FLYTE_MAX_ATTEMPTS", "value": "2"}
        assert role["labels"]["task-name"] == "make-spark-fixture-hello-spark"
    # The task is interruptible: the executors may go to spot nodes, the driver never does.
    assert executor["nodeSelector"] == {"spot": "true"}
    assert executor["tolerations"] == [{"key": "spot", "operator": "Exists"}]
    assert "nodeSelector" not in driver
    assert "tolerations" not in driver
    assert spec["restartPolicy"] == {"type": "OnFailure", "onSubmissionFailureRetries": 14}
