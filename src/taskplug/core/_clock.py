"""The injected clock: production code asks it for the time and sleeps through it, tests advance it.

Flyte passes a clock into the back-off controller and the auto-refresh cache; taskplug passes one
everywhere time matters, so no test ever sleeps to see a time-based rule fire.
"""

from __future__ import annotations

import heapq
import itertools
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import asyncio

__all__ = ["Clock", "FakeClock", "SystemClock"]


class Clock(Protocol):
    """The clock every time-based rule reads and sleeps through (Flyte's ``k8s.io/utils/clock.Clock``, which
    Flyte passes into its back-off controller and its auto-refresh cache).

    The executor, the plugin manager, the informer, the back-off controller, the web-API status cache and
    the rate limits each take a clock as an argument and never call ``datetime.now`` or ``asyncio.sleep``
    themselves. :class:`SystemClock` is the production clock; tests pass a :class:`FakeClock` and
    ``await clock.advance(seconds)`` instead of sleeping. A plugin is handed the platform's clock in its
    setup (``K8sPluginSetup.clock``, ``SetupContext.clock``).
    """

    def now(self) -> datetime:
        """The current wall-clock time (timezone-aware, UTC)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back; for measuring intervals."""
        ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The real clock: UTC wall time, ``time.monotonic`` and ``asyncio.sleep`` (Flyte's ``clock.RealClock``).
    The default wherever a :class:`Clock` is optional."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        import asyncio  # here: every command imports core, few ever sleep (asyncio is ~25 ms to import)

        await asyncio.sleep(max(0.0, seconds))


class FakeClock:
    """A clock that only moves when told to; sleepers wake when :meth:`advance` passes their deadline."""

    def __init__(self, start: datetime | None = None) -> None:
        self._wall = start or datetime(2026, 1, 1, tzinfo=UTC)
        self._mono = 0.0
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def now(self) -> datetime:
        return self._wall

    def monotonic(self) -> float:
        return self._mono

    async def sleep(self, seconds: float) -> None:
        import asyncio  # here: every command imports core, few ever sleep (asyncio is ~25 ms to import)

        if seconds <= 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._mono + seconds, next(self._seq), future))
        await future

    def set(self, when: datetime) -> None:
        """Jump the wall clock (does not wake sleepers; use :meth:`advance` for that)."""
        self._wall = when

    async def advance(self, seconds: float) -> None:
        """Move time forward, waking every sleeper whose deadline is reached, in deadline order."""
        import asyncio  # here: every command imports core, few ever sleep (asyncio is ~25 ms to import)

        target = self._mono + seconds
        while self._sleepers and self._sleepers[0][0] <= target:
            deadline, _, future = heapq.heappop(self._sleepers)
            self._wall += timedelta(seconds=deadline - self._mono)
            self._mono = deadline
            if not future.done():
                future.set_result(None)
            # Let the woken task run before time moves on.
            for _ in range(5):
                await asyncio.sleep(0)
        self._wall += timedelta(seconds=target - self._mono)
        self._mono = target
        for _ in range(5):
            await asyncio.sleep(0)

    @property
    def sleepers(self) -> int:
        return sum(1 for _, _, f in self._sleepers if not f.done())
