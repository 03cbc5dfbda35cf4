"""The injected clock: a fake one moves only when told to, waking sleepers in deadline order."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from taskplug.core import Clock, FakeClock, SystemClock

START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def test_fake_clock_stands_still_until_advanced() -> None:
    clock = FakeClock(START)
    assert clock.now() == START
    assert clock.monotonic() == 0.0
    assert clock.now() == START


def test_fake_clock_has_a_fixed_default_start_in_utc() -> None:
    now = FakeClock().now()
    assert now.tzinfo is not None
    assert now == datetime(2026, 1, 1, tzinfo=UTC)


async def test_advance_moves_wall_and_monotonic_time_together() -> None:
    clock = FakeClock(START)
    await clock.advance(90)
    assert clock.now() == START + timedelta(seconds=90)
    assert clock.monotonic() == 90.0


def test_set_jumps_the_wall_clock_only() -> None:
    clock = FakeClock(START)
    later = START + timedelta(days=1)
    clock.set(later)
    assert clock.now() == later
    assert clock.monotonic() == 0.0


async def test_sleepers_wake_when_their_deadline_is_reached_in_deadline_order() -> None:
    clock = FakeClock(START)
    woke: list[tuple[str, datetime]] = []

    async def sleeper(name: str, seconds: float) -> None:
        await clock.sleep(seconds)
        woke.append((name, clock.now()))

    async with asyncio.TaskGroup() as tg:
        tg.create_task(sleeper("late", 10))
        tg.create_task(sleeper("early", 5))
        await asyncio.sleep(0)
        assert clock.sleepers == 2
        await clock.advance(4)
        assert woke == []
        await clock.advance(1)
        assert woke == [("early", START + timedelta(seconds=5))]
        await clock.advance(10)
    assert woke == [("early", START + timedelta(seconds=5)), ("late", START + timedelta(seconds=10))]
    assert clock.now() == START + timedelta(seconds=15)
    assert clock.sleepers == 0


async def test_a_zero_sleep_only_yields() -> None:
    clock = FakeClock(START)
    await clock.sleep(0)
    await clock.sleep(-1)
    assert clock.monotonic() == 0.0
    assert clock.sleepers == 0


async def test_a_cancelled_sleeper_is_not_counted() -> None:
    clock = FakeClock(START)
    task = asyncio.create_task(clock.sleep(5))
    await asyncio.sleep(0)
    assert clock.sleepers == 1
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert clock.sleepers == 0
    await clock.advance(10)  # waking a cancelled sleeper is harmless


def test_system_clock_reports_aware_utc_time() -> None:
    clock: Clock = SystemClock()
    now = clock.now()
    assert now.tzinfo is not None
    assert now.utcoffset() == timedelta(0)
    first = clock.monotonic()
    assert clock.monotonic() >= first


async def test_system_clock_sleep_of_a_negative_time_returns() -> None:
    await SystemClock().sleep(-5)
