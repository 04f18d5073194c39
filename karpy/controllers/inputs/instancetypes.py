"""Each NodePool's instance types, fetched once per NodePool generation, with the
NodeOverlays in force applied and filtered through the offerings that recently ran out
of capacity.

``CloudProvider.get_instance_types`` may be slow (a cloud API, a large catalogue), and
its answer depends only on the NodePool's spec (and its NodeClass), so it is cached per
NodePool uid and generation and refreshed after ``refresh`` seconds to pick up price
and availability changes. Overlays (:class:`OverlayStore`, kept by the nodeoverlay
controller) and offerings in :class:`UnavailableOfferings` are applied to a copy, rebuilt
only when either changes.

A NodePool whose instance types have reserved offerings is asked again every round:
a reservation's free slots (``Offering.reservation_capacity``) change with every
launch and termination, and a stale count would plan NodeClaims into a full
reservation, or leave a freed slot unused for minutes. Providers keep such answers
cheap (kwok counts its own instances; karpy-aws keeps each reservation's count in
memory and rebuilds its catalogue only when a count changes).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace

from karpy.cloudprovider import CloudProvider, InstanceType, OfferingKey, UnavailableOfferings
from karpy.runtime import Clock
from karpy.scheduling.overlay import PoolTypes, apply_overlays
from karpy.state import NodePoolEntry, OverlayStore

__all__ = ["InstanceTypeCache"]

log = logging.getLogger("controller")


@dataclass(slots=True)
class _Entry:
    key: tuple[str, int]
    fetched_at: float
    raw: Sequence[InstanceType]
    filtered: Sequence[InstanceType]
    unavailable_seq: int
    overlays_seq: int
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
        overlays: OverlayStore | None = None,
    ) -> None:
        self._provider = cloud_provider
        self._unavailable = unavailable
        self._overlays = overlays or OverlayStore()
        self._clock = clock
        self.refresh = refresh
        self._entries: dict[str, _Entry] = {}
        self.fetches = 0
        """How many times the provider was asked (for tests and metrics)."""

    async def get(self, nodepool: NodePoolEntry) -> Sequence[InstanceType]:
        """The instance types ``nodepool`` may launch, with the NodeOverlays in force
        applied and offerings that recently failed marked unavailable. Raises what the
        provider raises, and :class:`UnevaluatedNodePoolError` while the overlays must
        be judged first."""
        if nodepool.model is None:
            return ()
        self._overlays.check(nodepool.name)
        return (await self._entry(nodepool)).filtered

    async def raw(self, nodepool: NodePoolEntry) -> Sequence[InstanceType]:
        """The provider's instance types for ``nodepool``, before NodeOverlays and
        unavailable offerings (what overlays are judged against)."""
        if nodepool.model is None:
            return ()
        return (await self._entry(nodepool)).raw

    async def _entry(self, nodepool: NodePoolEntry) -> _Entry:
        model = nodepool.model
        assert model is not None  # the callers return () for an invalid NodePool
        now = self._clock.monotonic()
        key = (nodepool.uid, nodepool.generation)
        entry = self._entries.get(nodepool.name)
        self._unavailable.expire()  # cheap: the snapshot is taken only to rebuild
        seq = self._unavailable.generation
        overlays_seq = self._overlays.seq
        if (
            entry is None
            or entry.key != key
            or entry.reserved
            or now - entry.fetched_at >= self.refresh
        ):
            raw = tuple(await self._provider.get_instance_types(model))
            self.fetches += 1
            reserved = any(o.reserved for it in raw for o in it.offerings)
            entry = _Entry(key, now, raw, (), seq, overlays_seq, reserved)
            entry.filtered = _filter(self._overlaid(nodepool, raw), self._unavailable.snapshot())
            self._entries[nodepool.name] = entry
        elif entry.unavailable_seq != seq or entry.overlays_seq != overlays_seq:
            entry.filtered = _filter(
                self._overlaid(nodepool, entry.raw), self._unavailable.snapshot()
            )
            entry.unavailable_seq = seq
            entry.overlays_seq = overlays_seq
        return entry

    def _overlaid(
        self, nodepool: NodePoolEntry, raw: Sequence[InstanceType]
    ) -> Sequence[InstanceType]:
        overlays = self._overlays.applied
        if not overlays or nodepool.model is None:
            return raw
        labels = nodepool.model.spec.template.metadata.labels
        return apply_overlays(overlays, PoolTypes(nodepool.name, labels, raw))

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
            replace(it, offerings=offerings)
        )
    return tuple(out)
