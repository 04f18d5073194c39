"""Rate limiters for the work queue, with client-go's semantics.

A rate limiter answers "how long should this item wait before it is retried?"
(``when``), and is told when to stop tracking an item (``forget``). The controller
default combines two, taking the longer delay (client-go's
``DefaultTypedControllerRateLimiter``):

* per item, exponential: 5 ms, 10 ms, 20 ms ... capped at 1000 s, so one broken object
  backs off without slowing others;
* overall, a token bucket of 10 qps with a burst of 100, so a flood of failures cannot
  hammer the API server.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, Protocol, TypeVar

from ._clock import Clock, SystemClock

__all__ = [
    "BucketRateLimiter",
    "ItemExponentialFailureRateLimiter",
    "ItemFastSlowRateLimiter",
    "MaxOfRateLimiter",
    "RateLimiter",
    "default_controller_rate_limiter",
]

T = TypeVar("T", bound=Hashable)
T_contra = TypeVar("T_contra", bound=Hashable, contravariant=True)


class RateLimiter(Protocol[T_contra]):
    """Decides how long an item waits before it is re-added to a work queue."""

    def when(self, item: T_contra) -> float:
        """Record one more failure of ``item`` and return its delay in seconds."""

    def forget(self, item: T_contra) -> None:
        """Stop tracking ``item`` (it succeeded); its next failure starts from scratch."""

    def num_requeues(self, item: T_contra) -> int:
        """How many failures of ``item`` are being tracked."""


class ItemExponentialFailureRateLimiter(Generic[T]):
    """``base * 2**failures`` per item, capped at ``max_delay`` (client-go defaults)."""

    def __init__(self, *, base_delay: float = 0.005, max_delay: float = 1000.0) -> None:
        if base_delay <= 0 or max_delay < base_delay:
            raise ValueError("need 0 < base_delay <= max_delay")
        self._base = base_delay
        self._max = max_delay
        self._failures: dict[T, int] = {}

    def when(self, item: T) -> float:
        exp = self._failures.get(item, 0)
        self._failures[item] = exp + 1
        # 2**exp overflows float past ~1024; anything beyond 64 doublings is capped anyway.
        if exp > 64:
            return self._max
        return min(self._base * float(2**exp), self._max)

    def forget(self, item: T) -> None:
        self._failures.pop(item, None)

    def num_requeues(self, item: T) -> int:
        return self._failures.get(item, 0)


class ItemFastSlowRateLimiter(Generic[T]):
    """``fast_delay`` for the first ``max_fast_attempts`` failures, then ``slow_delay``."""

    def __init__(self, *, fast_delay: float, slow_delay: float, max_fast_attempts: int) -> None:
        self._fast = fast_delay
        self._slow = slow_delay
        self._max_fast = max_fast_attempts
        self._failures: dict[T, int] = {}

    def when(self, item: T) -> float:
        n = self._failures.get(item, 0) + 1
        self._failures[item] = n
        return self._fast if n <= self._max_fast else self._slow

    def forget(self, item: T) -> None:
        self._failures.pop(item, None)

    def num_requeues(self, item: T) -> int:
        return self._failures.get(item, 0)


class BucketRateLimiter(Generic[T]):
    """An overall token bucket (``qps`` refill, ``burst`` capacity) shared by all items.

    Like Go's ``rate.Limiter.Reserve``: each call takes a token now, possibly going into
    debt, and the delay is the time until that debt is repaid. It never forgets anything,
    so ``forget`` is a no-op and ``num_requeues`` is always 0.
    """

    def __init__(self, *, qps: float = 10.0, burst: int = 100, clock: Clock | None = None) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError("need qps > 0 and burst >= 1")
        self._qps = qps
        self._burst = float(burst)
        self._clock = clock or SystemClock()
        self._tokens = float(burst)
        self._last = self._clock.monotonic()

    def when(self, item: T) -> float:
        now = self._clock.monotonic()
        self._tokens = min(self._burst, self._tokens + (now - self._last) * self._qps)
        self._last = now
        self._tokens -= 1.0
        if self._tokens >= 0:
            return 0.0
        return -self._tokens / self._qps

    def forget(self, item: T) -> None:
        return None

    def num_requeues(self, item: T) -> int:
        return 0


class MaxOfRateLimiter(Generic[T]):
    """Asks every limiter and returns the longest delay; forgets in all of them."""

    def __init__(self, *limiters: RateLimiter[T]) -> None:
        if not limiters:
            raise ValueError("MaxOfRateLimiter needs at least one limiter")
        self._limiters = limiters

    def when(self, item: T) -> float:
        # Every limiter must see the failure (each tracks its own state), so no short-cut.
        return max([limiter.when(item) for limiter in self._limiters])

    def forget(self, item: T) -> None:
        for limiter in self._limiters:
            limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        return max(limiter.num_requeues(item) for limiter in self._limiters)


def default_controller_rate_limiter(clock: Clock | None = None) -> MaxOfRateLimiter[T]:
    """client-go's default: max(per-item 5 ms→1000 s exponential, 10 qps/100 burst bucket)."""
    return MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter(base_delay=0.005, max_delay=1000.0),
        BucketRateLimiter(qps=10.0, burst=100, clock=clock),
    )
