"""Each NodePool's instance types, fetched once per NodePool generation and filtered
through the offerings that recently ran out of capacity.

``CloudProvider.get_instance_types`` may be slow (a cloud API, a large catalogue), and
its answer depends only on the NodePool's spec (and its NodeClass), so it is cached per
NodePool uid and generation and refreshed after ``refresh`` seconds to pick up price
and availability changes. Offerings in :class:`UnavailableOfferings` are marked
unavailable on a copy, rebuilt only when that set changes.

A NodePool whose instance types have reserved offerings is asked again every round:
a reservation's free slots (``Offering.reservation_capacity``) change with every
launch and termination, and a stale count would plan NodeClaims into a full
reservation, or leave a freed slot unused for minutes. Providers keep such answers
cheap (kwok counts its own instances; AWS caches its reservations and counts its
launches in between, as Karpenter does).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace

from karpy.cloudprovider import CloudProvider, InstanceType, OfferingKey
from karpy.runtime import Clock
from karpy.state import NodePoolEntry, UnavailableOfferings

__all__ = ["InstanceTypeCache"]

log = logging.getLogger("controller")


@dataclass(slots=True)
class _Entry:
    key: tuple[str, int]
    fetched_at: float
    raw: Sequence[InstanceType]
    filtered: Sequence[InstanceType]
    unavailable_seq: int
    reserved: bool = False


class InstanceTypeCache:
    """Instance types per NodePool (see the module docstring)."""

    def __init__(
        self,
        cloud_provider: CloudProvider,
        unavailable: UnavailableOfferings,
        clock: Clock,
        *,
        refresh: float = 300.0,
    ) -> None:
        self._provider = cloud_provider
        self._unavailable = unavailable
        self._clock = clock
        self.refresh = refresh
        self._entries: dict[str, _Entry] = {}
        self.fetches = 0
        """How many times the provider was asked (for tests and metrics)."""

    async def get(self, nodepool: NodePoolEntry) -> Sequence[InstanceType]:
        """The instance types ``nodepool`` may launch, with offerings that recently
        failed marked unavailable. Raises what the provider raises."""
        if nodepool.model is None:
            return ()
        now = self._clock.monotonic()
        key = (nodepool.uid, nodepool.generation)
        entry = self._entries.get(nodepool.name)
        unavailable = self._unavailable.snapshot()
        seq = self._unavailable.seq
        if (
            entry is None
            or entry.key != key
            or entry.reserved
            or now - entry.fetched_at >= self.refresh
        ):
            raw = tuple(await self._provider.get_instance_types(nodepool.model))
            self.fetches += 1
            reserved = any(o.reserved for it in raw for o in it.offerings)
            entry = _Entry(key, now, raw, _filter(raw, unavailable), seq, reserved)
            self._entries[nodepool.name] = entry
        elif entry.unavailable_seq != seq:
            entry.filtered = _filter(entry.raw, unavailable)
            entry.unavailable_seq = seq
        return entry.filtered

    def forget(self, name: str) -> None:
        """Drop the cached types of NodePool ``name``."""
        self._entries.pop(name, None)


def _filter(
    instance_types: Sequence[InstanceType], unavailable: frozenset[OfferingKey]
) -> Sequence[InstanceType]:
    if not unavailable:
        return instance_types
    keys = {(k.instance_type, k.zone, k.capacity_type) for k in unavailable}
    out = []
    for it in instance_types:
        if not any((it.name, o.zone, o.capacity_type) in keys for o in it.offerings):
            out.append(it)
            continue
        offerings = tuple(
            replace(o, available=o.available and (it.name, o.zone, o.capacity_type) not in keys)
            for o in it.offerings
        )
        out.append(
            InstanceType(
                name=it.name, requirements=it.requirements, offerings=offerings,
                capacity=it.capacity, overhead=it.overhead,
            )
        )
    return tuple(out)
