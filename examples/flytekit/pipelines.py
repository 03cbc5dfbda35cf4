"""One flytekit workflow of each kind Flyte runs, to run whole with one command, as ``pyflyte run`` runs
them (the same call runs each in-process with flytekit: ``python -c 'import pipelines; print(pipelines.chain(a=2))'``):

taskplug run examples/flytekit/pipelines.py chain --a 2              # sequential: add → double → add
taskplug run examples/flytekit/pipelines.py fan_out --a 3            # double and square at once, then add
taskplug run examples/flytekit/pipelines.py sign --n -4              # if / elif / else
taskplug run examples/flytekit/pipelines.py checked_half --n -1      # else().fail(...): exit 1
taskplug run examples/flytekit/pipelines.py quadrant --x 1 --y -1    # a conditional inside a conditional
taskplug run examples/flytekit/pipelines.py case_waits --a 3         # a case reads a node still running
taskplug run examples/flytekit/pipelines.py outer --a 2              # chain as a sub-workflow
taskplug run examples/flytekit/pipelines.py through_launch_plan --x 3
taskplug run examples/flytekit/pipelines.py squares_total --n 4      # map_task between two tasks
taskplug run examples/flytekit/pipelines.py dynamic_workflow --n 3   # @dynamic nodes that are @dynamic
taskplug run --name g1 examples/flytekit/pipelines.py gated --a 2    # sleep, approve, wait_for_input; then
#   taskplug signal approve g1 approve-double; taskplug signal set g1 factor 3   (from another terminal)
taskplug run examples/flytekit/pipelines.py keep_going --a 5         # fails after the other nodes finish
taskplug run examples/flytekit/pipelines.py with_cleanup --a 0       # its failure node runs, then exit 1
taskplug run examples/flytekit/pipelines.py overridden --a 4         # with_overrides
taskplug run examples/flytekit/pipelines.py point_parts --a 4        # a dataclass's fields as inputs

``plugin_pipelines.py`` holds the workflows with a raw container and a PyTorch job.
"""

import time
from dataclasses import dataclass
from datetime import timedelta

from flytekit import (
    LaunchPlan,
    Resources,
    WorkflowFailurePolicy,
    approve,
    conditional,
    dynamic,
    map_task,
    sleep,
    task,
    wait_for_input,
    workflow,
)
from flytekit.types.error import FlyteError


@dataclass
class Point:
    x: int
    y: list[int]


@task
def add(a: int, b: int) -> int:
    return a + b


@task
def double(x: int) -> int:
    return 2 * x


@task
def square(x: int) -> int:
    return x * x


@task
def divide(a: int, b: int) -> int:
    return a // b  # ZeroDivisionError when b == 0


@task
def words(n: int) -> str:
    return "negative" if n < 0 else ("zero" if n == 0 else "positive")


@task
def label(text: str) -> str:
    return f"[{text}]"


@task
def halve(n: int) -> int:
    return n // 2


@task
def upto(n: int) -> list[int]:
    return list(range(1, n + 1))


@task
def total(xs: list[int]) -> int:
    return sum(xs)


@task
def mk_point(x: int) -> Point:
    return Point(x=x, y=[x, x + 1])


# Sequential: each node waits for the one before.
@workflow
def chain(a: int = 1) -> int:
    return add(a=double(x=add(a=a, b=1)), b=10)


# Fan-out / fan-in: double and square depend on the input alone, so they run at the same time.
@workflow
def fan_out(a: int = 3) -> int:
    return add(a=double(x=a), b=square(x=a))


# if / elif / else: the cases not taken are Skipped.
@workflow
def sign(n: int) -> str:
    return (
        conditional("sign")
        .if_(n < 0)
        .then(label(text="negative"))
        .elif_(n == 0)
        .then(label(text="zero"))
        .else_()
        .then(words(n=n))
    )


# else().fail(...): no case holds and the workflow fails with this message.
@workflow
def checked_half(n: int) -> int:
    return conditional("non_negative").if_(n >= 0).then(halve(n=n)).else_().fail("n must not be negative")


@workflow
def _quadrant_right(y: int) -> str:
    return conditional("right").if_(y >= 0).then(label(text="I")).else_().then(label(text="IV"))


@task
def slow_double(x: int) -> int:
    time.sleep(1)  # still running when the conditional below is decided
    return 2 * x


# The conditional waits only for square (its condition reads nothing else); the case it takes also reads
# slow_double, and waits for it.
@workflow
def case_waits(a: int = 3) -> int:
    slow = slow_double(x=a)
    quick = square(x=a)
    return conditional("big").if_(quick > 5).then(add(a=slow, b=quick)).else_().then(double(x=quick))


# A conditional whose case is a workflow holding another conditional.
@workflow
def quadrant(x: int, y: int) -> str:
    return (
        conditional("quadrant")
        .if_(x >= 0)
        .then(_quadrant_right(y=y))
        .else_()
        .then(conditional("left").if_(y >= 0).then(label(text="II")).else_().then(label(text="III")))
    )


# A sub-workflow: chain runs inside this workflow's execution as one node.
@workflow
def outer(a: int = 1) -> int:
    return double(x=chain(a=a))


@workflow
def shift(a: int, b: int = 5) -> int:
    return add(a=a, b=b)


# A launch plan with a fixed input (a) and a default one (b); called as a node it is a child execution.
shift_from_one = LaunchPlan.get_or_create(
    shift, name="shift_from_one", fixed_inputs={"a": 1}, default_inputs={"b": 7}
)


@workflow
def through_launch_plan(x: int = 3) -> int:
    return add(a=shift_from_one(b=x), b=shift_from_one())


# map_task fed by an upstream list, feeding a downstream task.
@workflow
def squares_total(n: int = 4) -> int:
    return total(xs=map_task(square)(x=upto(n=n)))


@dynamic
def dynamic_sum(n: int) -> int:
    """Adds 1..n with one add node per term, built when the task runs."""
    acc = 0
    for i in range(1, n + 1):
        acc = add(a=acc, b=i)
    return acc


@dynamic
def nested_dynamic(n: int) -> int:
    """A dynamic workflow whose nodes are dynamic workflows: sum over k < n of (1 + ... + k)."""
    acc = 0
    for k in range(n):
        acc = add(a=acc, b=dynamic_sum(n=k))
    return acc


@workflow
def dynamic_workflow(n: int = 3) -> int:
    return nested_dynamic(n=n)


@dynamic
def shifted_each(n: int) -> list[int]:
    """Launches the launch plan once per i < n, each a child execution: [1 + i for i < n]."""
    return [shift_from_one(b=i) for i in range(n)]


@workflow
def dynamic_launches(n: int = 3) -> list[int]:
    return shifted_each(n=n)


# Gates: a pause, an approval of a value, and a value typed in while the workflow runs.
@workflow
def gated(a: int = 2) -> int:
    x = double(x=a)
    pause = sleep(timedelta(seconds=1))
    checked = approve(x, "approve-double", timeout=timedelta(minutes=10))
    factor = wait_for_input("factor", timeout=timedelta(minutes=10), expected_type=int)
    pause >> checked
    return add(a=checked, b=factor)


# Keeps going after a failure: the independent square finishes, the failure's dependants are Skipped.
@workflow(failure_policy=WorkflowFailurePolicy.FAIL_AFTER_EXECUTABLE_NODES_COMPLETE)
def keep_going(a: int = 5) -> int:
    quotient = divide(a=a, b=0)
    square(x=a)
    return double(x=quotient)


@task
def report_failure(a: int, err: FlyteError | None = None) -> None:
    print(f"with_cleanup(a={a}) failed at {err.failed_node_id if err else '?'}: {err.message if err else ''}")


# A failure node: when a node fails, report_failure runs with the workflow's inputs and the error.
@workflow(on_failure=report_failure)
def with_cleanup(a: int = 0) -> int:
    return divide(a=10, b=a)


# Node overrides: its name, retries, a timeout and resource requests.
@workflow
def overridden(a: int = 4) -> int:
    return double(x=a).with_overrides(
        name="twice",
        retries=2,
        timeout=timedelta(minutes=5),
        requests=Resources(cpu="100m", mem="1Gi"),  # a Python task with flytekit needs a few hundred MiB
    )


# A dataclass output's fields bound one by one to the next node's inputs.
@workflow
def point_parts(a: int = 4) -> int:
    p = mk_point(x=a)
    return add(a=p.x, b=p.y[1])
