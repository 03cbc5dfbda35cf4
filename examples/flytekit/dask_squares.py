"""A flytekit Dask task for the taskplug example: the job runner computes on the Dask cluster the dask
operator started for it.

``Dask(workers=WorkerGroup(number_of_workers=2))`` makes flytekit serialize a ``dask`` task (a DaskJob:
a scheduler, two workers and the job runner, which runs this function through ``pyflyte-execute``).
flytekitplugins-dask has no connection code of its own: the operator puts ``DASK_SCHEDULER_ADDRESS`` in the
runner's environment, dask's configuration reads ``DASK_*`` variables as keys (``scheduler-address``), and
``distributed.Client()`` without an address connects to that key's value. Only the runner returns outputs:
the scheduler and the workers run ``dask scheduler`` / ``dask worker``, not this function.
"""

from __future__ import annotations

from typing import NamedTuple

from flytekit import Resources, task
from flytekitplugins.dask import Dask, WorkerGroup


class Squares(NamedTuple):
    total: int
    workers: list[str]


def square(x: int) -> tuple[int, str]:
    """Runs on a Dask worker: the square and the worker's name (the operator's ``DASK_WORKER_NAME``)."""
    from distributed import get_worker

    return x * x, str(get_worker().name)


@task(
    task_config=Dask(workers=WorkerGroup(number_of_workers=2)),
    requests=Resources(cpu="250m", mem="512Mi"),
    limits=Resources(cpu="1", mem="1Gi"),
)
def sum_of_squares(n: int) -> Squares:
    from distributed import Client

    # No address: distributed reads dask's `scheduler-address`, which DASK_SCHEDULER_ADDRESS sets.
    with Client(timeout="60s") as client:
        client.wait_for_workers(2, timeout=60)
        results = client.gather(client.map(square, range(n)))
    total = sum(value for value, _ in results)
    workers = sorted({worker for _, worker in results})
    print(f"sum of squares below {n}: {total}, computed by {workers}", flush=True)
    return Squares(total=total, workers=workers)
