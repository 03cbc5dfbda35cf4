"""The live feed: which executions changed, for every open page of this web process, from one LISTEN.

One :class:`Feed` per web process holds one dedicated connection listening on ``taskplug_events`` (a
replica's commit batch inserted events), ``taskplug_work`` (something was submitted) and ``taskplug_abort``
(someone asked for an abort). A notification is only a wake-up: on it, or every ``poll_interval`` when none
comes (a lost notification, a reconnect), the feed reads what is new from the tables — events after the last
``seq`` it saw and executions after the last ``id`` — and tells each subscriber which execution ids changed.

A replica's write that inserts no event (the row made terminal after the object's cleanup, a claim moving
the owner) sends no notification: the executions the open pages show (their ``watch`` sets) are read back by
id at every scan, and one whose row changed is reported as well.

Identity values are handed out at insert and committed in any order, so a ``seq`` can become visible after
a larger one was read: a gap in what was read is remembered as a hole and read again until it fills or is
``hole_ttl`` old (a rolled-back insert leaves a hole forever). Subscribers never block the feed: each one
holds a set of pending ids (bounded: past ``max_pending`` it is told to refresh everything instead).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from typing import Any, Final

import psycopg
from psycopg_pool import AsyncConnectionPool

__all__ = ["EVERYTHING", "Feed", "Subscription"]

_log = logging.getLogger(__name__)

CHANNELS: Final = ("taskplug_events", "taskplug_work", "taskplug_abort")

EVERYTHING: Final = frozenset({-1})
"""What a subscriber that fell too far behind is told: refresh all you show."""


@dataclass(eq=False)
class Subscription:
    """One open page's view of the feed: the execution ids changed since it last looked."""

    max_pending: int
    watch: frozenset[int] = frozenset()
    """The executions the page shows: read back at every scan, so that a change without an event shows."""
    pending: set[int] = field(default_factory=set)
    overflowed: bool = False
    wake: asyncio.Event = field(default_factory=asyncio.Event)

    def add(self, ids: Iterable[int]) -> None:
        if not self.overflowed:
            self.pending.update(ids)
            if len(self.pending) > self.max_pending:
                self.overflowed, self.pending = True, set()
        self.wake.set()

    async def next(self, within: float) -> frozenset[int]:
        """The ids changed since the last call (:data:`EVERYTHING` after an overflow), waiting up to
        ``within`` seconds for one; empty when none changed."""
        with contextlib.suppress(TimeoutError):
            # asyncio.timeout, not wait_for: Python 3.11's wait_for can lose a cancellation that comes as the
            # event is set, and a page's stream ends by being cancelled.
            async with asyncio.timeout(within):
                await self.wake.wait()
        self.wake.clear()
        if self.overflowed:
            self.overflowed = False
            return EVERYTHING
        changed, self.pending = frozenset(self.pending), set()
        return changed


class _Holes:
    """Identity values not seen yet below the largest one seen, each with when it was first missed."""

    def __init__(self, ttl: float, limit: int = 10_000) -> None:
        self.ttl = ttl
        self.limit = limit
        self.since: dict[int, float] = {}

    def seen(self, last: int, found: list[int]) -> int:
        """Record what a read after ``last`` found (sorted); the new largest value seen."""
        now = time.monotonic()
        for value in found:
            self.since.pop(value, None)
        top = last
        for value in found:
            if value > top:
                for missing in range(top + 1, min(value, top + 1 + self.limit)):
                    self.since.setdefault(missing, now)
                top = value
        for value, when in list(self.since.items()):
            if now - when > self.ttl:
                del self.since[value]
        return top

    def open(self) -> list[int]:
        return sorted(self.since)[: self.limit]


class Feed:
    """Changed execution ids for this process's subscribers (see the module docstring)."""

    def __init__(
        self,
        dsn: str,
        pool: AsyncConnectionPool[Any],
        *,
        poll_interval: float = 1.0,
        hole_ttl: float = 10.0,
        max_pending: int = 5_000,
    ) -> None:
        self.dsn = dsn
        self.pool = pool
        self.poll_interval = poll_interval
        self.max_pending = max_pending
        self._subscribers: set[Subscription] = set()
        self._last_seq = 0
        self._last_id = 0
        self._seq_holes = _Holes(hole_ttl)
        self._id_holes = _Holes(hole_ttl)
        self._aborts: set[str] = set()
        self._versions: dict[int, tuple[object, ...]] = {}

    @contextlib.asynccontextmanager
    async def subscribe(self) -> AsyncIterator[Subscription]:
        sub = Subscription(self.max_pending)
        self._subscribers.add(sub)
        try:
            yield sub
        finally:
            self._subscribers.discard(sub)

    def publish(self, ids: Iterable[int]) -> None:
        """Tell every subscriber these executions changed (this process changed them itself)."""
        ids = frozenset(ids)
        for sub in list(self._subscribers):
            sub.add(ids)

    async def start_position(self) -> None:
        """Start after what is in the tables now: a page renders the present, the feed tells what follows."""
        async with self.pool.connection() as conn:
            cur = await conn.execute(
                "SELECT (SELECT coalesce(max(seq), 0) FROM taskplug_events),"
                " (SELECT coalesce(max(id), 0) FROM taskplug_executions)"
            )
            row = await cur.fetchone()
        assert row is not None
        self._last_seq, self._last_id = int(row[0]), int(row[1])

    async def run(self) -> None:
        """Listen and poll until cancelled; a lost connection is reopened (polling meanwhile)."""
        await self.start_position()
        backoff = 0.5
        while True:
            try:
                await self._listen()
            except (psycopg.OperationalError, psycopg.InterfaceError) as e:
                _log.warning("live feed: the listening connection failed (%s); reconnecting", e)
                await self._scan_quietly()
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 10.0)

    async def _listen(self) -> None:
        async with await psycopg.AsyncConnection.connect(self.dsn, autocommit=True) as conn:
            for channel in CHANNELS:
                await conn.execute(f"LISTEN {channel}")
            await self.scan()  # whatever happened while no one listened
            while True:
                async for notify in conn.notifies(timeout=self.poll_interval, stop_after=1):
                    if notify.channel == "taskplug_abort" and notify.payload:
                        self._aborts.add(notify.payload)
                # Coalesce a burst: whatever else arrived in the meantime is read by the same scan.
                await self.scan()

    async def _scan_quietly(self) -> None:
        with contextlib.suppress(psycopg.Error):
            await self.scan()

    async def scan(self) -> frozenset[int]:
        """Read what is new since the last scan, tell the subscribers; the execution ids that changed."""
        changed: set[int] = set()
        aborts, self._aborts = list(self._aborts), set()
        async with self.pool.connection() as conn:
            cur = await conn.execute(
                "SELECT seq, execution_id FROM taskplug_events WHERE seq > %s OR seq = ANY(%s)"
                " ORDER BY seq LIMIT 5000",
                (self._last_seq, self._seq_holes.open()),
            )
            events = await cur.fetchall()
            self._last_seq = self._seq_holes.seen(self._last_seq, [int(r[0]) for r in events])
            changed.update(int(r[1]) for r in events)
            cur = await conn.execute(
                "SELECT id FROM taskplug_executions WHERE id > %s OR id = ANY(%s) ORDER BY id LIMIT 5000",
                (self._last_id, self._id_holes.open()),
            )
            ids = [int(r[0]) for r in await cur.fetchall()]
            self._last_id = self._id_holes.seen(self._last_id, ids)
            changed.update(ids)
            if aborts:
                cur = await conn.execute("SELECT id FROM taskplug_executions WHERE key = ANY(%s)", (aborts,))
                changed.update(int(r[0]) for r in await cur.fetchall())
            watched: set[int] = set()
            for sub in self._subscribers:
                watched |= sub.watch
            cur = await conn.execute(
                "SELECT id, updated_at, phase, terminal, owner_id, lease_epoch, abort_requested_at"
                " FROM taskplug_executions WHERE id = ANY(%s)",
                (sorted(watched),),
            )
            versions = {int(r[0]): tuple(r[1:]) for r in await cur.fetchall()}
        # An id seen for the first time counts as changed once: its page may have rendered it a moment ago.
        changed.update(i for i, v in versions.items() if self._versions.get(i) != v)
        self._versions = versions
        if changed:
            self.publish(changed)
        return frozenset(changed)
