"""The batching window in front of the provisioner.

Pending pods arrive one by one, but deciding on capacity pod by pod would buy many
small nodes. :class:`Batcher` opens a window on the first trigger and keeps it open
while triggers keep coming, closing it after ``idle`` seconds without one or ``maximum``
seconds in all (Karpenter's BATCH_IDLE_DURATION and BATCH_MAX_DURATION). A key
triggered twice in one window counts once, so a pod re-announced by every status
update does not hold the window open.

``trigger`` is synchronous and never blocks: informer handlers call it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable

from karpy.runtime import Clock

__all__ = ["Batcher"]


class Batcher:
    """Turns a stream of triggers into windows (see the module docstring)."""

    def __init__(self, clock: Clock, *, idle: float, maximum: float) -> None:
        self._clock = clock
        self.idle = idle
        self.maximum = maximum
        self._seen: set[Hashable] = set()
        self._armed = False
        self._waiter: asyncio.Future[bool] | None = None

    def trigger(self, key: Hashable) -> None:
        """Open a window (or extend the open one) for ``key``."""
        if key in self._seen:
            return
        self._seen.add(key)
        self._armed = True
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(True)

    def rearm(self) -> None:
        """Make the next :meth:`wait` start a window at once (work is left over)."""
        self._armed = True
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(True)

    @property
    def armed(self) -> bool:
        """A trigger arrived that no window has consumed yet."""
        return self._armed

    async def wait(self, seconds: float) -> bool:
        """Wait up to ``seconds`` for a trigger; then hold the window open until it
        closes and return True. False if nothing triggered."""
        try:
            if not await self._next(seconds):
                return False
            deadline = self._clock.monotonic() + self.maximum
            while True:
                remaining = deadline - self._clock.monotonic()
                if remaining <= 0 or not await self._next(min(self.idle, remaining)):
                    return True
        finally:
            self._seen.clear()

    async def _next(self, seconds: float) -> bool:
        """Consume a trigger, waiting up to ``seconds`` for one."""
        if self._armed:
            self._armed = False
            return True
        waiter: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

        def expire() -> None:
            if not waiter.done():
                waiter.set_result(False)

        self._waiter = waiter
        timer = self._clock.call_later(seconds, expire)
        try:
            triggered = await waiter
        finally:
            timer.cancel()
            self._waiter = None
        if triggered:
            self._armed = False
        return triggered
