"""Offerings that recently failed to launch, each unavailable until its deadline.

One cache serves the core and every provider. The core's lifecycle controller marks the
offerings an :class:`~karpy.cloudprovider.InsufficientCapacityError` names, so the
provisioner plans the next NodeClaim elsewhere (Karpenter keeps this inside its AWS
provider; karpy keeps one in the core so every provider gets it without writing it).
A provider keeps its own instance as well, as Karpenter's AWS and Azure providers do:
it learns of a refusal first (per override of a fleet call, per Azure error code) and
reports the offering ``available=False`` from ``get_instance_types`` until the TTL runs
out. Besides single offerings it can mark a whole capacity type (spot, when the cloud
refuses spot altogether) and a subnet out of free addresses (the launch then uses
another subnet of the zone instead of giving up on the zone).

``generation`` changes whenever the set does (a deadline moved, or :meth:`expire` dropped
an entry), so anything built from it (the filtered instance-type list) is rebuilt only
then: a reader calls :meth:`~UnavailableOfferings.expire` (a clock read and a compare,
unless an entry is due), compares ``generation``, and takes a
:meth:`~UnavailableOfferings.snapshot` only to rebuild. The cache is only touched from the
event loop; a build that runs in a worker thread reads a snapshot taken before, never the
cache itself.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable
from datetime import timedelta
from typing import TypeVar, overload

from karpy.cloudprovider._types import OfferingKey
from karpy.runtime import Clock, SystemClock

__all__ = ["DEFAULT_UNAVAILABLE_TTL", "UnavailableOfferings"]

DEFAULT_UNAVAILABLE_TTL = 180.0
"""Seconds an offering stays unavailable after a refusal (Karpenter's 3 minutes)."""

_K = TypeVar("_K", bound=Hashable)


def _seconds(ttl: float | timedelta) -> float:
    return ttl.total_seconds() if isinstance(ttl, timedelta) else float(ttl)


class UnavailableOfferings:
    """Offerings, capacity types and subnets marked unavailable, each until a deadline.

    ``ttl`` (seconds or a :class:`~datetime.timedelta`) is the default lifetime of a
    mark; each ``mark*`` call may give its own. Marking a key again keeps the later of
    the two deadlines. Time comes from ``clock`` (a :class:`~karpy.runtime.Clock`).
    """

    def __init__(
        self, *, clock: Clock | None = None, ttl: float | timedelta = DEFAULT_UNAVAILABLE_TTL
    ) -> None:
        self._clock: Clock = clock or SystemClock()
        self._ttl = _seconds(ttl)
        self._until: dict[OfferingKey, float] = {}
        self._reasons: dict[OfferingKey, str] = {}
        self._capacity_types: dict[str, float] = {}
        self._subnets: dict[str, float] = {}
        # the earliest deadline of any entry: expire() walks the tables only from then on
        self._next_expiry = math.inf
        #: bumped on every change, so caches built from the set know they are stale
        self.generation = 0

    def _deadline(self, ttl: float | timedelta | None) -> float:
        return self._clock.monotonic() + (self._ttl if ttl is None else _seconds(ttl))

    def _extend(self, table: dict[_K, float], key: _K, deadline: float) -> bool:
        """Set ``key``'s deadline unless a later one stands; whether it moved."""
        if table.get(key, -math.inf) >= deadline:
            return False
        table[key] = deadline
        self._next_expiry = min(self._next_expiry, deadline)
        return True

    def mark(
        self,
        offerings: OfferingKey | Iterable[OfferingKey],
        *,
        ttl: float | timedelta | None = None,
        reason: str = "",
    ) -> None:
        """Make ``offerings`` (one key or several) unavailable for ``ttl`` (default:
        the cache's), remembering ``reason`` (the cloud's error code) for each."""
        keys = [offerings] if isinstance(offerings, OfferingKey) else offerings
        deadline = self._deadline(ttl)
        changed = False
        for key in keys:
            if self._extend(self._until, key, deadline):
                self._reasons[key] = reason
                changed = True
        if changed:
            self.generation += 1

    def mark_capacity_type(
        self, capacity_type: str, *, ttl: float | timedelta | None = None
    ) -> None:
        """Make every offering of ``capacity_type`` unavailable for ``ttl``."""
        if self._extend(self._capacity_types, capacity_type, self._deadline(ttl)):
            self.generation += 1

    def mark_subnet(self, subnet_id: str, *, ttl: float | timedelta | None = None) -> None:
        """Make ``subnet_id`` (out of addresses) unavailable for ``ttl``."""
        if self._extend(self._subnets, subnet_id, self._deadline(ttl)):
            self.generation += 1

    def is_subnet_unavailable(self, subnet_id: str) -> bool:
        """Whether ``subnet_id`` is marked and not yet expired."""
        return self._live(self._subnets, subnet_id)

    @overload
    def is_unavailable(self, key: OfferingKey, /) -> bool: ...

    @overload
    def is_unavailable(self, instance_type: str, zone: str, capacity_type: str, /) -> bool: ...

    def is_unavailable(
        self, key: OfferingKey | str, zone: str = "", capacity_type: str = "", /
    ) -> bool:
        """Whether the offering (an :class:`OfferingKey`, or its three parts) or its
        capacity type is marked and not yet expired."""
        if not isinstance(key, OfferingKey):
            key = OfferingKey(key, zone, capacity_type)
        if self._capacity_types and self._live(self._capacity_types, key.capacity_type):
            return True
        return bool(self._until) and self._live(self._until, key)

    def reason(self, key: OfferingKey) -> str | None:
        """Why ``key`` is marked, while it is."""
        return self._reasons.get(key) if self._live(self._until, key) else None

    def expire(self) -> None:
        """Drop every entry whose deadline has passed (bumping ``generation`` if any):
        a clock read and a compare until the earliest deadline comes."""
        now = self._clock.monotonic()
        if now < self._next_expiry:
            return
        dropped = _drop_due(self._until, now) + _drop_due(self._capacity_types, now)
        dropped += _drop_due(self._subnets, now)
        for key in [k for k in self._reasons if k not in self._until]:
            del self._reasons[key]
        self._next_expiry = min(
            (d for t in (self._until, self._capacity_types, self._subnets) for d in t.values()),
            default=math.inf,
        )
        if dropped:
            self.generation += 1

    def snapshot(self) -> frozenset[OfferingKey]:
        """The offerings marked right now, one by one (expired entries are dropped;
        a marked capacity type is not expanded into offerings)."""
        self.expire()
        return frozenset(self._until)

    def marked(self) -> list[OfferingKey]:
        """:meth:`snapshot`, sorted (for logs and messages)."""
        return sorted(self.snapshot())

    def __len__(self) -> int:
        return len(self.snapshot())

    def _live(self, table: dict[_K, float], key: _K) -> bool:
        deadline = table.get(key)
        if deadline is None:
            return False
        if deadline > self._clock.monotonic():
            return True
        del table[key]
        if isinstance(key, OfferingKey):
            self._reasons.pop(key, None)
        self.generation += 1
        return False


def _drop_due(table: dict[_K, float], now: float) -> int:
    """Remove the entries of ``table`` whose deadline is not after ``now``; how many."""
    due = [key for key, deadline in table.items() if deadline <= now]
    for key in due:
        del table[key]
    return len(due)
