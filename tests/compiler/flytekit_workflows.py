"""flytekit 1.16 workflows the compiler tests serialize in-process (each kind of node a workflow may hold)."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import timedelta

from flytekit import (
    LaunchPlan,
    Resources,
    approve,
    conditional,
    map_task,
    sleep,
    task,
    wait_for_input,
    workflow,
)
from flytekit.types.directory import FlyteDirectory
from flytekit.types.error import FlyteError
from flytekit.types.file import FlyteFile
from flytekit.types.structured import StructuredDataset


@task(retries=2, timeout=timedelta(minutes=3))
def add_one(a: int) -> int:
    return a + 1


@task
def double(a: int) -> int:
    return 2 * a


@task
def square(a: int) -> int:
    return a * a


@task
def total(a: int, b: int) -> int:
    return a + b


@task
def shout(s: str) -> str:
    return s.upper()


@workflow
def sequential(x: int) -> int:
    return double(a=add_one(a=x))


@workflow
def fan_out_in(x: int) -> int:
    first = add_one(a=x)
    return total(a=double(a=first), b=square(a=first))


@workflow
def branching(x: int) -> int:
    return (
        conditional("pick")
        .if_(x > 5)
        .then(double(a=x))
        .elif_(x == 3)
        .then(square(a=x))
        .else_()
        .fail("too small")
    )


@workflow
def nested_branching(x: int) -> int:
    first = add_one(a=x)
    return (
        conditional("outer")
        .if_(first > 5)
        .then(conditional("inner").if_(first > 10).then(double(a=first)).else_().then(square(a=first)))
        .else_()
        .then(add_one(a=first))
    )


@workflow
def inner(a: int) -> int:
    return double(a=add_one(a=a))


@workflow
def calls_sub_workflow(x: int) -> int:
    return square(a=inner(a=x))


@workflow
def pair(a: int, b: int = 5) -> int:
    return total(a=a, b=b)


pair_fixed = LaunchPlan.get_or_create(pair, name="pair_fixed", fixed_inputs={"a": 1})


@workflow
def calls_launch_plan(x: int) -> int:
    return double(a=pair_fixed(b=x))


@workflow
def maps(xs: list[int]) -> list[int]:
    return map_task(double)(a=xs)


@workflow
def gates(x: int) -> int:
    nap = sleep(timedelta(seconds=1))
    approved = approve(add_one(a=x), "approve-x", timeout=timedelta(hours=1))
    given = wait_for_input("extra", timeout=timedelta(minutes=5), expected_type=int)
    nap >> given
    return total(a=approved, b=given)


@dataclass
class Point:
    x: int
    y: list[int]


@task
def make_point(a: int) -> Point:
    return Point(x=a, y=[a, a + 1])


@workflow
def attribute_access(x: int) -> int:
    point = make_point(a=x)
    return total(a=point.x, b=point.y[1])


@task
def cleanup(x: int, err: FlyteError | None = None) -> None:
    print(x, err)


@workflow(on_failure=cleanup)
def with_failure_node(x: int) -> int:
    return double(a=x)


@workflow
def overridden(x: int) -> int:
    return double(a=x).with_overrides(
        name="twice",
        retries=4,
        timeout=timedelta(minutes=10),
        interruptible=True,
        requests=Resources(cpu="2", mem="1Gi"),
        limits=Resources(cpu="4", gpu="0"),
        container_image="ghcr.io/example/other:v2",
    )


@workflow
def aliased(x: int) -> None:
    double(a=x).with_overrides(aliases={"o0": "doubled"})


@workflow(interruptible=True)
def interruptible_by_default(x: int) -> int:
    return double(a=x).with_overrides(interruptible=False)


@workflow
def none_check(x: int | None = None) -> int:
    return conditional("is_none").if_(x.is_none()).then(double(a=1)).else_().then(square(a=2))


@workflow
def no_retries(x: int) -> int:
    return add_one(a=x).with_overrides(retries=0, timeout=None)


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


@task
def produce(
    n: int,
) -> tuple[FlyteFile, FlyteDirectory, StructuredDataset, Colour, dict[str, int], list[Point]]:
    return NotImplemented  # never run: the compiler reads the signature only


@task
def consume(
    f: FlyteFile,
    d: FlyteDirectory,
    sd: StructuredDataset,
    c: Colour,
    m: dict[str, int],
    points: list[Point],
    maybe: int | None = None,
    label: str = "x",
) -> str:
    return NotImplemented  # never run: the compiler reads the signature only


@workflow
def many_types(n: int, colour: Colour = Colour.RED) -> str:
    f, d, sd, _, m, points = produce(n=n)
    return consume(f=f, d=d, sd=sd, c=colour, m=m, points=points, maybe=n)
