"""A Flyte 2 Dask task (``flyteplugins-dask``): the dask operator starts a scheduler and two workers, then
the job runner (``a0``) computes on them.

    taskplug run --config examples/flyte2/config.yaml examples/flyte2/dask_squares.py sum_of_squares --n 10
"""

from __future__ import annotations

import flyte
from flyteplugins.dask import Dask, WorkerGroup

env = flyte.TaskEnvironment(
    name="dask_env",
    plugin_config=Dask(workers=WorkerGroup(number_of_workers=2)),
    resources=flyte.Resources(cpu="500m", memory="1Gi"),
)


def square(x: int) -> tuple[int, str]:
    """Runs on a Dask worker: the square and the worker's name (the operator's ``DASK_WORKER_NAME``)."""
    from distributed import get_worker

    return x * x, str(get_worker().name)


@env.task
async def sum_of_squares(n: int) -> tuple[int, list[str]]:
    from distributed import Client

    # No address: distributed reads dask's `scheduler-address`, which DASK_SCHEDULER_ADDRESS sets.
    with Client(timeout="60s") as client:
        client.wait_for_workers(2, timeout=60)
        results = client.gather(client.map(square, range(n)))
    total = sum(value for value, _ in results)
    workers = sorted({worker for _, worker in results})
    print(f"sum of squares below {n}: {total}, computed by {workers}", flush=True)
    return total, workers
