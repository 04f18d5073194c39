"""The provider's own memory of offerings Azure refused, so ``get_instance_types`` can show
them ``available=False`` until a TTL passes (Karpenter's Azure provider keeps the same
cache beside the core's).

TTLs follow upstream: one hour for allocation failures and spot SKUNotAvailable, 23 hours
for on-demand SKUNotAvailable, ten minutes for a quota that may free up soon.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Final

from karpy.cloudprovider import OfferingKey

__all__ = [
    "ALLOCATION_FAILURE_TTL",
    "LOW_QUOTA_TTL",
    "QUOTA_REACHED_TTL",
    "SKU_NOT_AVAILABLE_ON_DEMAND_TTL",
    "SKU_NOT_AVAILABLE_SPOT_TTL",
    "UnavailableOfferings",
]

ALLOCATION_FAILURE_TTL: Final = timedelta(hours=1)
SKU_NOT_AVAILABLE_SPOT_TTL: Final = timedelta(hours=1)
SKU_NOT_AVAILABLE_ON_DEMAND_TTL: Final = timedelta(hours=23)
QUOTA_REACHED_TTL: Final = timedelta(hours=1)
LOW_QUOTA_TTL: Final = timedelta(minutes=10)


class UnavailableOfferings:
    """Offerings (type/zone/capacity type) Azure refused, each until its own deadline.

    ``generation`` changes whenever an offering is added, so cached instance types can
    tell they are stale. ``monotonic`` is injectable for tests.
    """

    def __init__(self, *, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._monotonic = monotonic
        self._until: dict[OfferingKey, float] = {}
        self._reasons: dict[OfferingKey, str] = {}
        self._lock = threading.Lock()
        self.generation = 0

    def mark(self, keys: Iterable[OfferingKey], *, reason: str, ttl: timedelta) -> None:
        """Mark ``keys`` unavailable for ``ttl`` (extending a shorter deadline)."""
        deadline = self._monotonic() + ttl.total_seconds()
        with self._lock:
            for key in keys:
                if self._until.get(key, 0.0) < deadline:
                    self._until[key] = deadline
                    self._reasons[key] = reason
            self.generation += 1

    def is_unavailable(self, key: OfferingKey) -> bool:
        """True while ``key`` is marked."""
        deadline = self._until.get(key)
        if deadline is None:
            return False
        if deadline <= self._monotonic():
            with self._lock:
                if self._until.get(key) == deadline:
                    del self._until[key]
                    self._reasons.pop(key, None)
            return False
        return True

    def reason(self, key: OfferingKey) -> str | None:
        """Why ``key`` is marked, while it is."""
        return self._reasons.get(key) if self.is_unavailable(key) else None

    def __len__(self) -> int:
        now = self._monotonic()
        return sum(1 for d in list(self._until.values()) if d > now)
