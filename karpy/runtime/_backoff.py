"""Jittered exponential backoff for loops that reconnect (watches, lease renewals).

Jitter spreads reconnecting clients out in time, so a restarted API server is not met by
every informer of every replica in the same millisecond.
"""

from __future__ import annotations

import random

__all__ = ["Backoff"]


class Backoff:
    """``initial * factor**n`` seconds, capped at ``maximum``, each multiplied by a random
    factor in ``[1, 1 + jitter)``; ``reset()`` after a success starts over."""

    def __init__(
        self,
        *,
        initial: float = 0.8,
        maximum: float = 30.0,
        factor: float = 2.0,
        jitter: float = 1.0,
        rng: random.Random | None = None,
    ) -> None:
        if initial <= 0 or maximum < initial or factor < 1 or jitter < 0:
            raise ValueError("need 0 < initial <= maximum, factor >= 1, jitter >= 0")
        self._initial = initial
        self._maximum = maximum
        self._factor = factor
        self._jitter = jitter
        self._rng = rng or random.Random()
        self._current = initial

    def next(self) -> float:
        """The next delay in seconds; the one after it is ``factor`` times longer."""
        base = self._current
        self._current = min(self._maximum, self._current * self._factor)
        return base * (1.0 + self._jitter * self._rng.random())

    def reset(self) -> None:
        """Start over from ``initial`` (call after the guarded operation succeeded)."""
        self._current = self._initial
