"""Offerings that recently failed to launch for lack of capacity.

When a launch fails with :class:`~karpy.cloudprovider.InsufficientCapacityError`, the
lifecycle controller marks the offerings it names here; the provisioner treats them as
unavailable until the entry expires, so it plans the next NodeClaim on another offering.
Karpenter's AWS provider keeps the same cache inside the provider (3 minutes); karpy
keeps it in the core so every provider gets the behaviour without writing it.
"""

from __future__ import annotations

from collections.abc import Iterable

from karpy.cloudprovider import OfferingKey
from karpy.runtime import Clock, SystemClock

__all__ = ["DEFAULT_TTL", "UnavailableOfferings"]

DEFAULT_TTL = 180.0
"""Seconds an offering stays unavailable after an insufficient-capacity error."""


class UnavailableOfferings:
    """A TTL set of :class:`OfferingKey`, read on the provisioning hot path.

    ``seq`` increases on every change so callers can cache derived data (such as the
    filtered instance-type list) and rebuild it only when the set changed.
    """

    def __init__(self, *, clock: Clock | None = None, ttl: float = DEFAULT_TTL) -> None:
        self._clock = clock or SystemClock()
        self._ttl = ttl
        self._until: dict[OfferingKey, float] = {}
        self.seq = 0

    def mark(self, offerings: Iterable[OfferingKey], *, ttl: float | None = None) -> None:
        """Make ``offerings`` unavailable for ``ttl`` seconds (default: the cache's)."""
        until = self._clock.monotonic() + (self._ttl if ttl is None else ttl)
        for key in offerings:
            self._until[key] = until
        self.seq += 1

    def is_unavailable(self, instance_type: str, zone: str, capacity_type: str) -> bool:
        """Whether that offering failed recently and has not yet expired."""
        if not self._until:
            return False
        key = OfferingKey(instance_type, zone, capacity_type)
        until = self._until.get(key)
        if until is None:
            return False
        if until <= self._clock.monotonic():
            del self._until[key]
            self.seq += 1
            return False
        return True

    def snapshot(self) -> frozenset[OfferingKey]:
        """The offerings unavailable right now (expired entries are dropped)."""
        now = self._clock.monotonic()
        expired = [k for k, until in self._until.items() if until <= now]
        for key in expired:
            del self._until[key]
        if expired:
            self.seq += 1
        return frozenset(self._until)
