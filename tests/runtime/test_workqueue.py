"""WorkQueue: client-go's dirty/processing semantics, delays, rate limits and shutdown."""

from __future__ import annotations

import asyncio
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from karpy.runtime import WorkQueue
from karpy.runtime.errors import QueueShutDown
from karpy.runtime.ratelimit import ItemExponentialFailureRateLimiter
from karpy.runtime.testing import FakeClock


def _queue(clock: FakeClock | None = None) -> WorkQueue[str]:
    return WorkQueue(name="t", clock=clock or FakeClock())


async def test_a_key_added_twice_is_handed_out_once() -> None:
    q = _queue()
    q.add("a")
    q.add("a")
    q.add("b")
    assert len(q) == 2
    assert await q.get() == "a"
    assert await q.get() == "b"
    assert len(q) == 0


async def test_a_key_being_processed_is_not_handed_out_again_until_done() -> None:
    q = _queue()
    q.add("a")
    key = await q.get()
    q.add("a")  # re-added while processing: only marked dirty
    assert len(q) == 0
    waiter = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    assert not waiter.done()
    q.done(key)  # now it is queued again and handed to the waiting worker
    assert await asyncio.wait_for(waiter, 10) == "a"
    q.done("a")
    assert q.processing() == 0


async def test_done_without_readd_does_not_requeue() -> None:
    q = _queue()
    q.add("a")
    q.done(await q.get())
    assert len(q) == 0 and q.processing() == 0


async def test_no_two_workers_ever_hold_the_same_key() -> None:
    """Many workers, few keys, adds racing with processing: per-key work is serial."""
    q: WorkQueue[int] = WorkQueue(name="race")
    rng = random.Random(7)
    active: set[int] = set()
    overlaps = 0
    processed = 0
    last_add: dict[int, int] = {}
    last_start: dict[int, int] = {}
    tick = 0

    async def worker() -> None:
        nonlocal overlaps, processed, tick
        while True:
            try:
                key = await q.get()
            except QueueShutDown:
                return
            if key in active:
                overlaps += 1
            active.add(key)
            tick += 1
            last_start[key] = tick
            await asyncio.sleep(rng.random() / 1000)
            active.discard(key)
            processed += 1
            q.done(key)

    async def producer() -> None:
        nonlocal tick
        for _ in range(3000):
            key = rng.randrange(5)
            tick += 1
            last_add[key] = tick
            q.add(key)
            if rng.random() < 0.3:
                await asyncio.sleep(0)

    async with asyncio.TaskGroup() as tg:
        workers = [tg.create_task(worker(), name=f"w{i}") for i in range(8)]
        await producer()
        await q.shutdown_with_drain()
        await asyncio.wait(workers)
    assert overlaps == 0
    assert processed > 5  # the queue collapsed adds, but did work
    # No add was lost: every key's last processing began after its last add.
    for key, added in last_add.items():
        assert last_start[key] > added


async def test_add_after_waits_and_the_earliest_time_wins(clock: FakeClock) -> None:
    q = _queue(clock)
    q.add_after("a", 10)
    q.add_after("a", 5)  # earlier: replaces
    q.add_after("a", 20)  # later: ignored
    assert len(q) == 0 and q.pending_delayed() == 1
    clock.advance(4.9)
    assert len(q) == 0
    clock.advance(0.1)
    assert len(q) == 1
    clock.advance(100)
    assert len(q) == 1  # the cancelled 10 s and 20 s timers did not add it again
    assert await q.get() == "a"


async def test_add_after_zero_adds_now() -> None:
    q = _queue()
    q.add_after("a", 0)
    assert len(q) == 1


async def test_add_rate_limited_backs_off_exponentially_and_forget_resets(
    clock: FakeClock,
) -> None:
    q: WorkQueue[str] = WorkQueue(
        clock=clock, rate_limiter=ItemExponentialFailureRateLimiter(base_delay=1, max_delay=8)
    )
    waits = []
    for _ in range(5):
        q.add_rate_limited("a")
        start = clock.monotonic()
        while not len(q):
            clock.advance(0.5)
        waits.append(clock.monotonic() - start)
        q.done(await q.get())
    assert waits == [1, 2, 4, 8, 8]
    assert q.num_requeues("a") == 5
    q.forget("a")
    assert q.num_requeues("a") == 0


async def test_shutdown_hands_out_queued_keys_then_raises() -> None:
    q = _queue()
    q.add("a")
    q.shutdown()
    q.add("b")  # refused after shutdown
    assert await q.get() == "a"
    with pytest.raises(QueueShutDown):
        await q.get()


async def test_shutdown_wakes_idle_workers() -> None:
    q = _queue()
    waiter = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    q.shutdown()
    with pytest.raises(QueueShutDown):
        await asyncio.wait_for(waiter, 10)


async def test_shutdown_drops_delayed_keys(clock: FakeClock) -> None:
    q = _queue(clock)
    q.add_after("a", 1)
    q.shutdown()
    clock.advance(2)
    assert len(q) == 0
    assert clock.pending_timers() == 0


async def test_shutdown_with_drain_waits_for_keys_in_flight() -> None:
    q = _queue()
    q.add("a")
    key = await q.get()
    drain = asyncio.create_task(q.shutdown_with_drain())
    for _ in range(3):  # let the drain run until it blocks on the key in flight
        await asyncio.sleep(0)
    assert not drain.done()
    q.done(key)
    await asyncio.wait_for(drain, 10)
    assert q.shutting_down


async def test_a_cancelled_getter_does_not_swallow_a_wakeup() -> None:
    q = _queue()
    first = asyncio.create_task(q.get())
    second = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    q.add("a")  # wakes `first` ...
    first.cancel()  # ... which is cancelled before it runs
    assert await asyncio.wait_for(second, 10) == "a"


async def test_metrics_hooks_see_adds_takes_and_work(clock: FakeClock) -> None:
    seen: list[tuple[str, float]] = []

    class Recorder:
        def added(self) -> None:
            seen.append(("added", 0))

        def taken(self, waited: float) -> None:
            seen.append(("taken", waited))

        def finished(self, worked: float) -> None:
            seen.append(("finished", worked))

        def retried(self) -> None:
            seen.append(("retried", 0))

    q: WorkQueue[str] = WorkQueue(clock=clock, metrics=Recorder())
    q.add("a")
    clock.advance(2)
    key = await q.get()
    clock.advance(3)
    assert q.unfinished_work_seconds() == 3
    assert q.longest_running_processor_seconds() == 3
    q.done(key)
    q.add_rate_limited("a")
    assert seen == [("added", 0), ("taken", 2), ("finished", 3), ("retried", 0)]


_ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(0, 4)),
        st.tuples(st.just("get"), st.just(0)),
        st.tuples(st.just("done"), st.integers(0, 4)),
    ),
    max_size=80,
)


@settings(max_examples=200, deadline=None)
@given(_ops)
def test_queue_matches_the_client_go_model(ops: list[tuple[str, int]]) -> None:
    """Against a reference model: queued keys are unique, never in processing, and a
    key added during processing comes back exactly once after done."""

    async def scenario() -> None:
        q: WorkQueue[int] = WorkQueue()
        queue: list[int] = []
        dirty: set[int] = set()
        processing: set[int] = set()
        for op, key in ops:
            if op == "add":
                q.add(key)
                if key not in dirty:
                    dirty.add(key)
                    if key not in processing:
                        queue.append(key)
            elif op == "get":
                if not queue:
                    continue
                expected = queue.pop(0)
                got = await q.get()
                assert got == expected
                processing.add(expected)
                dirty.discard(expected)
            else:
                if key not in processing:
                    continue
                q.done(key)
                processing.discard(key)
                if key in dirty:
                    queue.append(key)
            assert len(q) == len(queue)
            assert len(set(queue)) == len(queue)
            assert not (set(queue) & processing)
            assert q.processing() == len(processing)

    asyncio.run(scenario())
