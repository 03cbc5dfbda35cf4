"""Shared fixtures of the web-API tests: a task-leak check and a fake clock."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from typing import Protocol

import pytest

from taskplug.core import FakeClock


@pytest.fixture(autouse=True)
async def no_task_left_running() -> AsyncIterator[None]:
    """Every test must stop what it started: no asyncio task may outlive it."""
    yield
    for _ in range(3):
        await asyncio.sleep(0)
    current = asyncio.current_task()
    leftover = [t for t in asyncio.all_tasks() if t is not current and not t.done()]
    for task in leftover:
        task.cancel()
    assert not leftover, f"tasks left running: {[t.get_name() for t in leftover]}"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


async def advance_in_steps(clock: FakeClock, seconds: float, *, step: float = 0.005) -> None:
    """Advance in small steps so chains of sleeps (resync, then the 5 ms queue delay) all fire."""
    steps = max(1, round(seconds / step))
    for _ in range(steps):
        await clock.advance(seconds / steps)


class Advance(Protocol):
    def __call__(self, clock: FakeClock, seconds: float, *, step: float = ...) -> Awaitable[None]: ...


@pytest.fixture
def advance() -> Advance:
    """``await advance(clock, seconds)``: move a fake clock forward in 5 ms steps."""
    return advance_in_steps
