"""A clock for tests against real peers: real time, run faster.

The executor's resync timer, the status cache's resync pass and the rate limiters all sleep through the
injected clock. With real servers (a connector, redis) a fake clock cannot be used — nothing would drive it
while the test waits for the server — but Flyte's smallest cache resync period (5 s) would make every
status change take seconds. ``FastClock(10)`` makes those 5 s half a second; nothing asserts on time.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

__all__ = ["FastClock"]


class FastClock:
    """A :class:`taskplug.core.Clock` whose seconds last ``1 / factor`` of a real second."""

    def __init__(self, factor: float = 10.0) -> None:
        self.factor = factor
        self._real_start = time.monotonic()
        self._wall_start = datetime.now(UTC)

    def _elapsed(self) -> float:
        return (time.monotonic() - self._real_start) * self.factor

    def now(self) -> datetime:
        return self._wall_start + timedelta(seconds=self._elapsed())

    def monotonic(self) -> float:
        return self._real_start + self._elapsed()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds) / self.factor)
