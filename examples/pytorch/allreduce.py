"""Join a torch.distributed process group (gloo, CPU) and all-reduce one tensor; rank 0 writes the sum as
the task's output ``total`` (and ``world_size``).

Every replica of the PyTorchJob runs this, with the environment the training operator gives it:
``MASTER_ADDR``, ``MASTER_PORT``, ``WORLD_SIZE``, ``RANK``. Rank r contributes r + 1, so the sum is
1 + 2 + ... + WORLD_SIZE, which only comes out when every rank joined. ``pytorch.yaml`` carries this script
inline (``python -c``) with the output prefix as its one argument:

    python -c "$(cat allreduce.py)" OUTPUT_PREFIX
"""

import datetime
import os
import socket
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from flyteidl.core import literals_pb2

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
# Gloo's own connections go over loopback only.
os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
timeout = datetime.timedelta(seconds=60)
if rank == 0:
    # The rendezvous store listens on MASTER_ADDR alone (torch's own server would bind every interface).
    listener = socket.create_server((addr, port), backlog=128)
    store = dist.TCPStore(addr, port, world, True, timeout=timeout, master_listen_fd=listener.fileno())
else:
    store = dist.TCPStore(addr, port, world, False, timeout=timeout)
dist.init_process_group("gloo", store=store, rank=rank, world_size=world, timeout=timeout)
value = torch.tensor([float(rank + 1)])
dist.all_reduce(value)
total = value.item()
print(f"rank {rank} of {world}: all-reduced sum {total}", flush=True)
dist.destroy_process_group()

if rank == 0:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    outputs = literals_pb2.LiteralMap()
    outputs.literals["total"].scalar.primitive.float_value = total
    outputs.literals["world_size"].scalar.primitive.integer = world
    (out / "outputs.pb").write_bytes(outputs.SerializeToString())
