"""Workflows whose nodes are not plain Python tasks: a raw container (flytekit's ``ContainerTask``, its
inputs and outputs moved by co-pilot) and a PyTorch job (``flytekitplugins-kfpytorch``, a master and a
worker that all-reduce a tensor, from ``pytorch_allreduce.py``):

taskplug run examples/flytekit/plugin_pipelines.py container_in_the_middle --a 2
taskplug run examples/flytekit/plugin_pipelines.py distributed_then_add --scale 1.5

On the embedded cluster the container's image is only a label: its command runs on this machine.
"""

from flytekit import ContainerTask, kwtypes, task, workflow
from pytorch_allreduce import allreduce

sum_in_shell = ContainerTask(
    name="sum_in_shell",
    image="alpine:3.20",
    input_data_dir="/var/inputs",
    output_data_dir="/var/outputs",
    inputs=kwtypes(a=int, b=int),
    outputs=kwtypes(sum=int),
    command=["sh", "-c", "echo $(( $(cat /var/inputs/a) + $(cat /var/inputs/b) )) > /var/outputs/sum"],
)


@task
def triple(x: int) -> int:
    return 3 * x


@task
def plus(a: float, b: float) -> float:
    return a + b


# A Python task, the raw container fed by its output, and a Python task fed by the container's.
@workflow
def container_in_the_middle(a: int = 2) -> int:
    return triple(x=sum_in_shell(a=triple(x=a), b=1))


# A PyTorchJob node (two replicas) whose output feeds a Python task.
@workflow
def distributed_then_add(scale: float = 1.0) -> float:
    reduced = allreduce(scale=scale)
    return plus(a=reduced.total, b=1.0)
