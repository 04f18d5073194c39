"""Clocks: the one place the runtime reads time, so tests can substitute a fake one.

Durations and deadlines use a monotonic clock (``monotonic()``), never wall time, so a
stepped system clock cannot expire a lease or stall a backoff. Wall time (``now()``) is
used only for timestamps written into objects (lease renewTime, event lastTimestamp).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Protocol

__all__ = ["Clock", "SystemClock", "TimerHandle"]


class TimerHandle(Protocol):
    """What ``Clock.call_later`` returns: something that can be cancelled."""

    def cancel(self) -> None:
        """Prevent the callback from running (no-op if it ran already)."""


class Clock(Protocol):
    """Time as the runtime sees it."""

    def monotonic(self) -> float:
        """Seconds on a monotonic clock, for durations and deadlines."""

    def now(self) -> datetime:
        """The current wall-clock time, timezone-aware UTC."""

    async def sleep(self, seconds: float) -> None:
        """Suspend the calling task for ``seconds``."""

    def call_later(self, delay: float, callback: Callable[[], None]) -> TimerHandle:
        """Run ``callback`` (synchronously, on the loop) after ``delay`` seconds."""


class SystemClock:
    """The real clock: ``time.monotonic`` and the running asyncio loop's timers."""

    # time.monotonic itself, not a wrapper: the work queue reads it three times per key.
    monotonic = staticmethod(time.monotonic)

    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))

    def call_later(self, delay: float, callback: Callable[[], None]) -> TimerHandle:
        return asyncio.get_running_loop().call_later(max(0.0, delay), callback)
