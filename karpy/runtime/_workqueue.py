"""The work queue: client-go's dirty/processing semantics on asyncio.

Why this shape (the rules every controller relies on):

* A key queued many times before a worker takes it is processed **once** (the *dirty*
  set de-duplicates), so a burst of events for one object costs one reconcile.
* A key being processed is **never handed to a second worker**. If it is added again
  meanwhile, it is only marked dirty and re-queued when the first worker calls
  ``done`` — work is serial per object and parallel across objects, so a reconciler
  never races itself.
* Delayed adds (``add_after``) keep only the earliest pending time per key.
* ``add_rate_limited`` asks the rate limiter how long to wait (exponential per key plus
  an overall bucket); ``forget`` resets the key's backoff after a success.
* ``shutdown`` refuses new keys and wakes idle workers; keys already queued are still
  handed out, then ``get`` raises :class:`QueueShutDown`. ``shutdown_with_drain`` also
  waits for keys being processed to be ``done``.

Everything runs on one event loop, so no locks: every method except ``get`` and
``shutdown_with_drain`` is synchronous and safe to call from event handlers.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Hashable
from typing import Generic, Protocol, TypeVar

from ._clock import Clock, SystemClock, TimerHandle
from ._ratelimit import RateLimiter, default_controller_rate_limiter
from .errors import QueueShutDown

__all__ = ["QueueMetrics", "WorkQueue"]

T = TypeVar("T", bound=Hashable)


class QueueMetrics(Protocol):
    """Receives the queue's measurements (the runtime's Prometheus metrics implement it)."""

    def added(self) -> None:
        """A new key entered the queue (depth + 1, adds_total + 1)."""

    def taken(self, waited: float) -> None:
        """A worker took a key after it waited ``waited`` seconds (depth - 1)."""

    def finished(self, worked: float) -> None:
        """A worker called done after ``worked`` seconds of processing."""

    def retried(self) -> None:
        """A key was re-added through the rate limiter."""


class _NoMetrics:
    def added(self) -> None:
        return None

    def taken(self, waited: float) -> None:
        return None

    def finished(self, worked: float) -> None:
        return None

    def retried(self) -> None:
        return None


class WorkQueue(Generic[T]):
    """A de-duplicating, rate-limited, delaying queue of hashable keys.

    ``name`` labels its metrics. ``rate_limiter`` defaults to client-go's controller
    default (5 ms→1000 s per key, 10 qps / 100 burst overall).
    """

    def __init__(
        self,
        *,
        name: str = "",
        rate_limiter: RateLimiter[T] | None = None,
        clock: Clock | None = None,
        metrics: QueueMetrics | None = None,
    ) -> None:
        self.name = name
        self._clock = clock or SystemClock()
        self._limiter: RateLimiter[T] = rate_limiter or default_controller_rate_limiter(self._clock)
        self._metrics: QueueMetrics = metrics or _NoMetrics()
        self._queue: deque[T] = deque()
        self._dirty: set[T] = set()
        self._processing: dict[T, float] = {}  # key -> monotonic start time
        self._queued_at: dict[T, float] = {}
        self._waiting: dict[T, tuple[float, TimerHandle]] = {}
        self._getters: deque[asyncio.Future[None]] = deque()
        self._idle: asyncio.Event | None = None
        self._shutting_down = False

    # -- adding ------------------------------------------------------------------------

    def add(self, item: T) -> None:
        """Queue ``item`` unless it is queued already; if it is being processed, queue it
        again only after ``done``. Ignored after shutdown."""
        if self._shutting_down or item in self._dirty:
            return
        self._dirty.add(item)
        self._queued_at[item] = self._clock.monotonic()
        self._metrics.added()
        if item in self._processing:
            return
        self._queue.append(item)
        if self._getters:
            self._wake_one()

    def add_after(self, item: T, delay: float) -> None:
        """Queue ``item`` after ``delay`` seconds; an earlier pending time for it wins."""
        if self._shutting_down:
            return
        if delay <= 0:
            self.add(item)
            return
        ready_at = self._clock.monotonic() + delay
        pending = self._waiting.get(item)
        if pending is not None:
            if pending[0] <= ready_at:
                return
            pending[1].cancel()
        handle = self._clock.call_later(delay, lambda: self._fire(item))
        self._waiting[item] = (ready_at, handle)

    def add_rate_limited(self, item: T) -> None:
        """Queue ``item`` after the rate limiter's delay (one more failure recorded)."""
        if self._shutting_down:
            return
        self._metrics.retried()
        self.add_after(item, self._limiter.when(item))

    def forget(self, item: T) -> None:
        """Reset ``item``'s backoff (it succeeded). Does not remove it from the queue."""
        self._limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        """How many rate-limited retries of ``item`` are being tracked."""
        return self._limiter.num_requeues(item)

    def _fire(self, item: T) -> None:
        self._waiting.pop(item, None)
        self.add(item)

    # -- taking ------------------------------------------------------------------------

    async def get(self) -> T:
        """Wait for a key and mark it processing. Call ``done(key)`` when finished.

        Raises :class:`QueueShutDown` once the queue is shut down and empty.
        """
        while not self._queue:
            if self._shutting_down:
                raise QueueShutDown(f"work queue {self.name!r} is shut down")
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._getters.append(fut)
            try:
                await fut
            except asyncio.CancelledError:
                # A wake-up meant for us must not be lost: pass it on.
                if fut.done() and not fut.cancelled() and self._queue:
                    self._wake_one()
                raise
        item = self._queue.popleft()
        now = self._clock.monotonic()
        self._processing[item] = now
        self._dirty.discard(item)
        queued = self._queued_at.pop(item, now)
        self._metrics.taken(now - queued)
        if self._idle is not None:
            self._idle.clear()
        return item

    def done(self, item: T) -> None:
        """Mark ``item`` finished; if it was added meanwhile, it is queued again now."""
        started = self._processing.pop(item, None)
        if started is None:
            return
        self._metrics.finished(self._clock.monotonic() - started)
        if item in self._dirty:
            self._queue.append(item)
            self._wake_one()
        if not self._processing and self._idle is not None:
            self._idle.set()

    def _wake_one(self) -> None:
        while self._getters:
            fut = self._getters.popleft()
            if not fut.done():
                fut.set_result(None)
                return

    # -- state -------------------------------------------------------------------------

    def __len__(self) -> int:
        """Keys waiting for a worker (not those being processed or delayed)."""
        return len(self._queue)

    @property
    def shutting_down(self) -> bool:
        """True once ``shutdown`` was called."""
        return self._shutting_down

    def processing(self) -> int:
        """Number of keys handed out and not yet ``done``."""
        return len(self._processing)

    def pending_delayed(self) -> int:
        """Number of keys waiting for an ``add_after`` delay to pass."""
        return len(self._waiting)

    def unfinished_work_seconds(self) -> float:
        """Sum of how long each in-flight key has been processed (a stuck-worker signal)."""
        now = self._clock.monotonic()
        return sum(now - start for start in self._processing.values())

    def longest_running_processor_seconds(self) -> float:
        """How long the oldest in-flight key has been processed."""
        if not self._processing:
            return 0.0
        return self._clock.monotonic() - min(self._processing.values())

    # -- stopping ----------------------------------------------------------------------

    def shutdown(self) -> None:
        """Refuse new keys, drop delayed ones and wake idle workers.

        Keys already queued are still handed out; ``get`` then raises QueueShutDown.
        """
        if self._shutting_down:
            return
        self._shutting_down = True
        for _, handle in self._waiting.values():
            handle.cancel()
        self._waiting.clear()
        while self._getters:
            fut = self._getters.popleft()
            if not fut.done():
                fut.set_result(None)

    async def shutdown_with_drain(self) -> None:
        """``shutdown``, then wait until every key handed out has been ``done``.

        Bound it with ``asyncio.timeout`` if workers may hang.
        """
        self.shutdown()
        if not self._processing:
            return
        if self._idle is None:
            self._idle = asyncio.Event()
        await self._idle.wait()
