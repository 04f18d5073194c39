"""The in-process test aids behave as their docstrings say."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from karpy.runtime.testing import FakeClock, eventually


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


async def test_eventually_returns_the_first_truthy_result_once_other_tasks_progress() -> None:
    box: list[int] = []

    async def producer() -> None:
        for i in range(3):
            await asyncio.sleep(0.001)
            box.append(i)

    task = asyncio.create_task(producer())
    assert await eventually(lambda: box[2:], what="the third item") == [2]
    await task


async def test_eventually_takes_async_and_asserting_checks_and_fails_naming_what() -> None:
    calls = 0

    async def ready() -> bool:
        nonlocal calls
        calls += 1
        assert calls >= 3, f"only {calls} calls"
        return True

    assert await eventually(ready) is True and calls == 3
    with pytest.raises(AssertionError, match=r"after 0\.05s: the flag.*never"):

        def never() -> bool:
            raise AssertionError("never")

        await eventually(never, within=0.05, what="the flag")
