"""The provider's own cache of offerings EC2 just refused (insufficient capacity).

Karpenter AWS keeps one (pkg/cache/unavailableofferings.go) next to the core's: the
provider learns of ICE first, per override of a CreateFleet call, and marks the exact
offerings so that ``get_instance_types`` reports them ``available=False`` until the
TTL (3 minutes, as Karpenter's) runs out. A spot interruption marks the spot offering
too. A whole capacity type can be marked (spot, when the spot service-linked role is
missing), and so can a subnet out of free addresses (``InsufficientFreeAddressesInSubnet``):
the launch then uses another subnet of the zone instead of giving up on the zone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeVar

from karpy.cloudprovider import OfferingKey
from karpy.runtime import Clock, SystemClock

__all__ = ["UNAVAILABLE_OFFERINGS_TTL", "UnavailableOfferings"]

_K = TypeVar("_K", OfferingKey, str)

UNAVAILABLE_OFFERINGS_TTL = 180.0
"""Seconds an offering stays unavailable after EC2 refused it (Karpenter's 3 min)."""


@dataclass
class UnavailableOfferings:
    """Offering keys (and capacity types) marked unavailable, each until a deadline."""

    ttl: float = UNAVAILABLE_OFFERINGS_TTL
    clock: Clock = field(default_factory=SystemClock)
    _until: dict[OfferingKey, float] = field(default_factory=dict)
    _capacity_types: dict[str, float] = field(default_factory=dict)
    _subnets: dict[str, float] = field(default_factory=dict)
    #: bumped on every change, so the catalogue knows its cached offerings are stale
    generation: int = 0

    def mark(self, key: OfferingKey, *, reason: str = "") -> None:
        """Mark ``key`` unavailable for ``ttl`` seconds."""
        self._until[key] = self.clock.monotonic() + self.ttl
        self.generation += 1

    def mark_capacity_type(self, capacity_type: str) -> None:
        """Mark every offering of ``capacity_type`` unavailable for ``ttl`` seconds."""
        self._capacity_types[capacity_type] = self.clock.monotonic() + self.ttl
        self.generation += 1

    def mark_subnet(self, subnet_id: str, *, reason: str = "") -> None:
        """Mark ``subnet_id`` unavailable (out of addresses) for ``ttl`` seconds."""
        self._subnets[subnet_id] = self.clock.monotonic() + self.ttl
        self.generation += 1

    def is_subnet_unavailable(self, subnet_id: str) -> bool:
        """Whether ``subnet_id`` is marked and not yet expired."""
        return self._live(self._subnets, subnet_id)

    def is_unavailable(self, key: OfferingKey) -> bool:
        """Whether ``key`` (or its capacity type) is marked and not yet expired."""
        return self._live(self._until, key) or self._live(self._capacity_types, key.capacity_type)

    def _live(self, table: dict[_K, float], key: _K) -> bool:
        deadline = table.get(key)
        if deadline is None:
            return False
        if deadline > self.clock.monotonic():
            return True
        del table[key]
        self.generation += 1
        return False

    def marked(self) -> list[OfferingKey]:
        """The offering keys marked right now (expiring what is due, subnets too)."""
        for subnet in list(self._subnets):
            self._live(self._subnets, subnet)
        return sorted(k for k in list(self._until) if self.is_unavailable(k))
