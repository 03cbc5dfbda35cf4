"""Two flytekit tasks for the taskplug example: ``add`` succeeds, ``divide`` raises on a zero divisor."""

from flytekit import task


@task
def add(a: int, b: int) -> int:
    return a + b


@task
def divide(a: int, b: int) -> float:
    if b == 0:
        raise ZeroDivisionError(f"cannot divide {a} by zero")
    return a / b
