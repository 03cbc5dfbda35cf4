"""flytekit tasks for ``test_flytekit_distributed.py``, serialized by the example's ``make_template`` machinery.

``one_rank_fails(failing_rank)`` (PyTorch): every replica joins the process group as the example's
``allreduce`` does; the chosen rank then raises a user error, and the others fail in the all-reduce because
their peer left. flytekit writes each replica's error document and exits 0, so every pod succeeds and the
PyTorchJob does too: what the task reports is up to the output reader (Flyte's error aggregation strategy).

``dask_listening_addresses()`` (Dask): the addresses the Dask cluster's processes (scheduler, nanny,
worker) listen on, read from inside each of them with psutil (a dependency of ``distributed``).

The replica processes import this module as ``integration.flytekit_distributed_tasks``, with ``tests`` and
``examples/flytekit`` on their ``PYTHONPATH`` (:func:`write` puts both in the template). Serialize with

    PYTHONPATH=tests:examples/flytekit python -c \
        'import sys, pathlib, integration.flytekit_distributed_tasks as t; t.write(pathlib.Path(sys.argv[1]))' OUT
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import make_template
from flytekit import task
from flytekitplugins.dask import Dask, WorkerGroup
from flytekitplugins.kfpytorch import PyTorch
from pytorch_allreduce import join_process_group

TESTS = Path(__file__).resolve().parents[1]
EXAMPLE = Path(make_template.__file__).resolve().parent
ONE_RANK_FAILS = "one-rank-fails"
DASK_LISTENERS = "dask-listeners"


@task(
    task_config=PyTorch(num_workers=1),
    environment={"GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"},
)
def one_rank_fails(failing_rank: int) -> float:
    import torch
    import torch.distributed as dist

    rank, _ = join_process_group()
    if rank == failing_rank:
        # The group is not destroyed: this replica's connections close when its process exits, after flytekit
        # wrote its error document, so the other replicas' errors come later than this one.
        raise ValueError(f"rank {rank} gives up before the all-reduce")
    value = torch.tensor([1.0])
    dist.all_reduce(value)
    dist.destroy_process_group()
    return float(value.item())


def _listening_ips() -> list[str]:
    import psutil

    connections = psutil.Process().net_connections(kind="inet")
    return sorted({c.laddr.ip for c in connections if c.status == psutil.CONN_LISTEN})


@task(task_config=Dask(workers=WorkerGroup(number_of_workers=1)))
def dask_listening_addresses() -> list[str]:
    from distributed import Client

    with Client(timeout="60s") as client:
        client.wait_for_workers(1, timeout=60)
        found = {"scheduler": client.run_on_scheduler(_listening_ips)}
        found.update({f"worker {w}": ips for w, ips in client.run(_listening_ips).items()})
        found.update({f"nanny {n}": ips for n, ips in client.run(_listening_ips, nanny=True).items()})
    return sorted(f"{process}: {ip}" for process, ips in found.items() for ip in ips)


def write(out: Path, *, failing_rank: int = 1) -> list[Path]:
    """``one-rank-fails`` and ``dask-listeners`` (``.pb`` + ``.yaml``) in ``out`` (``make_template.write_task``)."""
    settings = dataclasses.replace(
        make_template.settings(), env={"PYTHONPATH": os.pathsep.join([str(TESTS), str(EXAMPLE)])}
    )
    written = make_template.write_task(
        out,
        ONE_RANK_FAILS,
        one_rank_fails,
        inputs={"failing_rank": failing_rank},
        max_attempts=1,
        serialization=settings,
    )
    written += make_template.write_task(
        out, DASK_LISTENERS, dask_listening_addresses, inputs={}, max_attempts=1, serialization=settings
    )
    return written
