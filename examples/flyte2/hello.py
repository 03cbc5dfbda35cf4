"""Flyte 2 tasks for taskplug: plain tasks (task type ``python``) as the ``flyte`` SDK writes them.

Run one as ``flyte run`` would, on the embedded cluster (the SDK found in taskplug's Python or as the ``a0``
on ``PATH``; see docs/flyte2.md):

    taskplug run examples/flyte2/hello.py add --a 2            # {"o0": 5}: b takes its default
    taskplug run -o json examples/flyte2/hello.py scale --p '{"x": 1.5, "y": -2}' --factor 3
    taskplug run examples/flyte2/hello.py flaky --message boom   # fails three times: retries=2
    taskplug render examples/flyte2/hello.py add --a 2         # the pod: the environment's resources and env
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass

import flyte
from flyte.io import File

env = flyte.TaskEnvironment(
    name="hello",
    resources=flyte.Resources(cpu="500m", memory="400Mi"),
    env_vars={"GREETING": "hello"},
)


@dataclass
class Point:
    x: float
    y: float


@env.task
def add(a: int, b: int = 3) -> int:
    """Adds two numbers; b defaults to 3."""
    return a + b


@env.task
def greet(name: str) -> str:
    """The environment's variable reaches the task in its pod (``flyte.run``'s local mode does not set it)."""
    return f"{os.environ.get('GREETING', 'hi')}, {name}"


@env.task
def scale(p: Point, factor: float = 2.0) -> Point:
    return Point(p.x * factor, p.y * factor)


@env.task
async def stats(xs: list[int], weights: dict[str, float]) -> tuple[int, list[int], dict[str, float]]:
    """A list and a dict in, a tuple of outputs (o0, o1, o2) out."""
    return sum(xs), sorted(xs), {k: v / 2 for k, v in weights.items()}


@env.task
async def word_count(f: File) -> int:
    async with f.open("rb") as fh:
        data = await fh.read()
    return len(bytes(data).split())


@env.task
async def shout(text: str) -> File:
    """Writes a file: its output is where the task put it."""
    f = File.new_remote()
    async with f.open("wb") as fh:
        await fh.write(text.upper().encode())
    return f


@env.task(cache="auto")
def lucky(seed: int) -> float:
    """Cached: a second run with the same seed is a cache hit, the same number."""
    return seed + random.random()


@env.task(retries=2)
def flaky(message: str) -> int:
    """Always fails: with retries=2 it runs three times, and the error says why."""
    raise ValueError(message)
