"""Waiting for something a real peer (a process, a server, the embedded cluster) does: the one ``wait_until``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

__all__ = ["wait_until"]


async def wait_until(predicate: Callable[[], bool], *, within: float = 20.0, what: str = "") -> None:
    """Poll ``predicate`` until it holds; fail after ``within`` real seconds (a deadline, not a timing)."""
    deadline = time.monotonic() + within
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {within}s: {what or predicate}")
        await asyncio.sleep(0.01)
