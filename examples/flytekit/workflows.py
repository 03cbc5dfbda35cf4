"""Typed flytekit tasks to run with one command, as ``pyflyte run`` runs them:

taskplug run examples/flytekit/workflows.py add --a 2 --b 3
taskplug run examples/flytekit/workflows.py add --help
taskplug run examples/flytekit/workflows.py total --xs '[1, 2, 3]'
taskplug run examples/flytekit/workflows.py scale --p '{"x": 1.5, "y": -2}' --factor 3
taskplug run examples/flytekit/workflows.py greet --name taskplug --excited
"""

from dataclasses import dataclass

from flytekit import task


@dataclass
class Point:
    x: float
    y: float


@task
def add(a: int, b: int = 1) -> int:
    """Add two integers.

    :param a: the first addend
    :param b: the second addend
    """
    return a + b


@task
def total(xs: list[int]) -> int:
    """The sum of a list of integers."""
    return sum(xs)


@task
def scale(p: Point, factor: float = 2.0) -> Point:
    """A point moved away from the origin by a factor."""
    return Point(x=p.x * factor, y=p.y * factor)


@task
def greet(name: str = "world", excited: bool = False) -> str:
    """A greeting."""
    return f"hello, {name}{'!' if excited else ''}"
