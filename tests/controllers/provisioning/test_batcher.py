"""The batching window: opens on a trigger, closes when idle or at its maximum."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from karpy.controllers.provisioning import Batcher
from karpy.runtime.testing import FakeClock

STEP = 0.05


def make() -> tuple[Batcher, FakeClock]:
    clock = FakeClock()
    return Batcher(clock, idle=1.0, maximum=10.0), clock


async def run_window(
    batcher: Batcher,
    clock: FakeClock,
    *,
    wait: float = 1.0,
    triggers: Callable[[float], list[str]] = lambda _t: [],
    until: float = 30.0,
) -> tuple[bool, float]:
    """Run ``batcher.wait(wait)`` while the fake clock moves in small steps, calling
    ``triggers(now)`` at each step for keys to trigger; return (result, finish time)."""
    task = asyncio.ensure_future(batcher.wait(wait))
    await asyncio.sleep(0)
    while clock.monotonic() < until:
        if task.done():
            return task.result(), clock.monotonic()
        for key in triggers(clock.monotonic()):
            batcher.trigger(key)
        await clock.step(STEP)
    raise AssertionError("the window never closed")


async def test_no_trigger_means_no_batch() -> None:
    batcher, clock = make()
    result, finished = await run_window(batcher, clock, wait=1.0)
    assert result is False
    assert abs(finished - 1.0) <= 2 * STEP


async def test_window_closes_after_the_idle_time_without_new_pods() -> None:
    batcher, clock = make()
    arrivals = {0.2: "a", 1.0: "b", 1.8: "c"}

    def triggers(now: float) -> list[str]:
        return [key for at, key in arrivals.items() if abs(now - at) < STEP / 2]

    result, finished = await run_window(batcher, clock, wait=5.0, triggers=triggers)
    assert result is True
    # One second after the last pod, not one second after the first.
    assert 2.8 - STEP <= finished <= 2.8 + 3 * STEP


async def test_window_closes_at_its_maximum_however_many_pods_arrive() -> None:
    batcher, clock = make()
    batcher.trigger("first")
    counter = iter(range(10_000))

    def triggers(_now: float) -> list[str]:
        return [f"pod-{next(counter)}"]

    result, finished = await run_window(batcher, clock, triggers=triggers)
    assert result is True
    assert 10.0 - STEP <= finished <= 10.0 + 3 * STEP


async def test_the_same_pod_triggering_again_does_not_hold_the_window_open() -> None:
    batcher, clock = make()
    batcher.trigger("a")
    result, finished = await run_window(batcher, clock, triggers=lambda _t: ["a"])
    assert result is True
    assert finished <= 1.0 + 3 * STEP


async def test_triggers_during_a_round_start_the_next_window_at_once() -> None:
    batcher, clock = make()
    batcher.trigger("a")
    assert (await run_window(batcher, clock))[0] is True
    batcher.trigger("b")                         # arrives while provisioning runs
    started = clock.monotonic()
    result, finished = await run_window(batcher, clock, wait=5.0)
    assert result is True and finished - started <= 1.0 + 3 * STEP


async def test_rearm_replays_a_batch_that_could_not_be_handled() -> None:
    batcher, clock = make()
    batcher.rearm()
    result, finished = await run_window(batcher, clock, wait=5.0)
    assert result is True and finished <= 1.0 + 3 * STEP
