"""A flytekit PyTorch task for the taskplug example: every replica of the PyTorchJob joins one
``torch.distributed`` process group (gloo, CPU) and all-reduces a tensor.

``PyTorch(num_workers=1)`` makes flytekit serialize a ``pytorch`` task (a master and one worker, both
running this same function through ``pyflyte-execute``). The training operator gives each replica
``MASTER_ADDR``, ``MASTER_PORT``, ``WORLD_SIZE`` and ``RANK``; rank r contributes ``scale * (r + 1)``, so the
all-reduced sum is ``scale * (1 + 2 + ... + WORLD_SIZE)`` only when every rank joined.

Which replica's outputs count: every replica gets the same output prefix, and flytekit's plain
``PyTorchFunctionTask`` writes whatever each one returns to it (the last writer wins). flytekit's own
multi-node path (``Elastic``, ``PytorchElasticFunctionTask._execute``) returns rank 0's value and raises
``IgnoreOutputs`` everywhere else, so that only rank 0 writes ``outputs.pb``; this task does the same,
which is why its ``rank`` output is always 0.
"""

from __future__ import annotations

import datetime
import os
import socket
from typing import NamedTuple

from flytekit import task
from flytekit.core.base_task import IgnoreOutputs
from flytekitplugins.kfpytorch import PyTorch


class AllReduced(NamedTuple):
    total: float
    world_size: int
    rank: int


def join_process_group() -> tuple[int, int]:
    """Join the job's process group (gloo) from the operator's environment; this replica's rank and the
    world size. The rendezvous store listens on ``MASTER_ADDR`` alone (torch's own server would bind every
    interface), and ``GLOO_SOCKET_IFNAME=lo`` keeps gloo's connections on loopback."""
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    timeout = datetime.timedelta(seconds=60)
    if rank == 0:
        # The store takes the listening socket's descriptor over (detach: Python no longer closes it).
        listener = socket.create_server((addr, port), backlog=128).detach()
        store = dist.TCPStore(addr, port, world, True, timeout=timeout, master_listen_fd=listener)
    else:
        store = dist.TCPStore(addr, port, world, False, timeout=timeout)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world, timeout=timeout)
    return rank, world


@task(
    task_config=PyTorch(num_workers=1),
    # Gloo's own connections over loopback only; one thread per replica on a small machine.
    environment={"GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"},
)
def allreduce(scale: float) -> AllReduced:
    import torch
    import torch.distributed as dist

    if scale < 0:
        raise ValueError(f"scale must not be negative, got {scale}")
    rank, world = join_process_group()
    try:
        value = torch.tensor([scale * (rank + 1)])
        dist.all_reduce(value)
        total = float(value.item())
    finally:
        dist.destroy_process_group()
    print(f"rank {rank} of {world}: all-reduced sum {total}", flush=True)
    if rank != 0:
        # As flytekit's Elastic task does for every rank but 0: this replica's outputs are not uploaded.
        raise IgnoreOutputs(f"rank {rank}: the outputs are rank 0's")
    return AllReduced(total=total, world_size=world, rank=rank)
