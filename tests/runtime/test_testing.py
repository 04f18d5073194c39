"""The in-process test aids behave as their docstrings say."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from karpy.runtime.testing import FakeClock


async def test_fake_clock_sleep_wakes_only_when_advanced(clock: FakeClock) -> None:
    start_wall = clock.now()
    sleeper = asyncio.create_task(clock.sleep(5))
    await asyncio.sleep(0)
    await clock.step(4.9)
    assert not sleeper.done()
    await clock.step(0.1)
    assert sleeper.done()
    assert clock.monotonic() == 5 and clock.now() - start_wall == timedelta(seconds=5)


async def test_fake_clock_fires_timers_in_order_and_skips_cancelled(clock: FakeClock) -> None:
    fired: list[str] = []
    clock.call_later(2, lambda: fired.append("b"))
    clock.call_later(1, lambda: fired.append("a"))
    clock.call_later(1.5, lambda: fired.append("x")).cancel()
    assert clock.next_deadline() == 1
    clock.advance(10)
    assert fired == ["a", "b"] and clock.pending_timers() == 0
