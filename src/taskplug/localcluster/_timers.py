"""One task that fires callbacks at deadlines on the injected clock.

The cluster's time rules (watch ``timeoutSeconds``, bookmark ticks, simulated container durations) are
callbacks here rather than a sleeping task each, so 10,000 simulated pods cost 10,000 heap entries, not
10,000 tasks, and a test with a :class:`taskplug.core.FakeClock` makes them fire by advancing it.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
from collections.abc import Callable

from taskplug.core import Clock

__all__ = ["TimerHandle", "Timers"]

_log = logging.getLogger(__name__)


class TimerHandle:
    __slots__ = ("callback", "cancelled", "deadline")

    def __init__(self, deadline: float, callback: Callable[[], None]) -> None:
        self.deadline = deadline
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class Timers:
    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._heap: list[tuple[float, int, TimerHandle]] = []
        self._seq = itertools.count()
        self._wake: asyncio.Event | None = None

    def call_later(self, delay: float, callback: Callable[[], None]) -> TimerHandle:
        handle = TimerHandle(self._clock.monotonic() + max(0.0, delay), callback)
        earliest = self._heap[0][0] if self._heap else None
        heapq.heappush(self._heap, (handle.deadline, next(self._seq), handle))
        if self._wake is not None and (earliest is None or handle.deadline < earliest):
            self._wake.set()
        return handle

    async def run(self) -> None:
        """Fire due callbacks forever (until cancelled). A callback must not block."""
        self._wake = asyncio.Event()
        while True:
            now = self._clock.monotonic()
            while self._heap and self._heap[0][0] <= now:
                _, _, handle = heapq.heappop(self._heap)
                if not handle.cancelled:
                    try:
                        handle.callback()
                    except Exception:
                        # One broken callback must not stop every other time rule of the cluster.
                        _log.exception("local cluster timer callback failed")
            self._wake.clear()
            if not self._heap:
                await self._wake.wait()
                continue
            await self._sleep_or_wake(self._heap[0][0] - now)

    async def _sleep_or_wake(self, delay: float) -> None:
        assert self._wake is not None
        sleeper = asyncio.ensure_future(self._clock.sleep(delay))
        waker = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait({sleeper, waker}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (sleeper, waker):
                task.cancel()
            await asyncio.gather(sleeper, waker, return_exceptions=True)
