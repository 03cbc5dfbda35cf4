"""flytekit map tasks for the taskplug example: each runs as an ArrayNode, one element per list item.

* ``squares``: ``x * x + offset`` over ``xs``, with ``offset`` bound through ``functools.partial``, at most
  two elements at once (``concurrency=2``), succeeding when half of them do (``min_success_ratio=0.5``).
* ``checked_squares``: ``x * x`` over ``xs``, where a multiple of 3 raises; the map succeeds when three
  quarters of the elements do, with ``None`` where one failed.
"""

import functools

from flytekit import map_task, task, workflow


@task
def square(x: int, offset: int) -> int:
    return x * x + offset


@task
def checked_square(x: int) -> int:
    if x % 3 == 0:
        raise ValueError(f"{x} is a multiple of 3")
    return x * x


@workflow
def squares(xs: list[int]) -> list[int | None]:
    return map_task(functools.partial(square, offset=1), concurrency=2, min_success_ratio=0.5)(x=xs)


@workflow
def checked_squares(xs: list[int] = [1, 2, 4, 5]) -> list[int | None]:  # noqa: B006 (a launch-plan default)
    return map_task(checked_square, min_success_ratio=0.75)(x=xs)
