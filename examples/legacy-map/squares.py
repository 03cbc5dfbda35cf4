"""A plain flytekit task for the legacy map-task example: ``square`` is mapped over a list by
``flytekit.core.legacy_map_task.map_task`` (see make_template.py)."""

from flytekit import task


@task
def square(x: int) -> int:
    return x * x
