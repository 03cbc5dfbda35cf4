"""A flytekit Spark task, run on the embedded cluster with Spark in local mode (needs pyspark and Java 17,
which scripts/setup installs):

taskplug run examples/flytekit/spark_sum.py spark_sum --n 1000

The embedded spark-operator creates the SparkApplication's driver pod; its spark-submit runs flytekit's
entrypoint in local mode, and the task's return value comes back as the run's output.
"""

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
    """The sum of 0..n-1, computed by Spark.

    :param n: how many numbers to add
    """
    sc = flytekit.current_context().spark_session.sparkContext
    return int(sc.parallelize(range(n), 4).sum())
