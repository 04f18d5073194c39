"""The instance-type catalogue: what EC2 sells in the region, where, and at what price,
turned into karpy :class:`InstanceType` s per NodeClass.

EC2 is asked at most once per TTL (DescribeInstanceTypes, DescribeInstanceTypeOfferings
per zone: 5 minutes; spot prices: 5 minutes; on-demand prices: 12 hours, as Karpenter
AWS refreshes them). The built list is cached per NodeClass shape and invalidated when
prices change or an offering is marked unavailable, so the scheduler's hot path reads a
ready list.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from karpy.cloudprovider import InstanceType, OfferingKey, UnavailableOfferings
from karpy_aws._clients import AWSClients
from karpy_aws._instancetypes import NodeClassShape, build_instance_type
from karpy_aws._pricing import PricingProvider
from karpy_aws._reservations import CapacityReservations
from karpy_aws._settings import AWSSettings
from karpy_aws._staticdata import static_data

__all__ = ["Catalog", "CatalogTTLs"]

log = logging.getLogger("karpy.aws.instancetype")


@dataclass(frozen=True, slots=True)
class CatalogTTLs:
    """How long each kind of EC2 answer is reused, in seconds."""

    instance_types: float = 300.0
    spot_prices: float = 300.0
    on_demand_prices: float = 12 * 3600.0


class Catalog:
    """Describes instance types once per TTL and builds them per NodeClass shape."""

    def __init__(
        self,
        clients: AWSClients,
        settings: AWSSettings,
        pricing: PricingProvider,
        unavailable: UnavailableOfferings,
        *,
        ttls: CatalogTTLs = CatalogTTLs(),
        monotonic: Callable[[], float] = time.monotonic,
        reservations: CapacityReservations | None = None,
        reserved_capacity: bool = True,
    ) -> None:
        self._clients = clients
        #: Karpenter's ReservedCapacity gate: off, no reserved offering is built
        self.reserved_capacity = reserved_capacity
        self._settings = settings
        self.pricing = pricing
        self._unavailable = unavailable
        #: each capacity reservation's slots left (reserved offerings' capacity)
        self.reservations = reservations
        self._ttls = ttls
        self._now = monotonic
        self._lock = asyncio.Lock()
        self._infos: dict[str, Mapping[str, Any]] = {}
        self._zones: dict[str, frozenset[str]] = {}
        self._described_at = -1e18
        self._spot_at = -1e18
        self._on_demand_at = -1e18
        self._version = 0
        self._built: dict[NodeClassShape, tuple[tuple[int, int, int], list[InstanceType]]] = {}

    @property
    def infos(self) -> Mapping[str, Mapping[str, Any]]:
        """EC2's description of every instance type, by name (after a refresh)."""
        return self._infos

    async def refresh(self, *, force: bool = False) -> None:
        """Re-describe what is due (or everything with ``force``)."""
        async with self._lock:
            now = self._now()
            if force or now - self._described_at >= self._ttls.instance_types:
                await self._describe()
                self._described_at = now
                self._version += 1
            if force or now - self._on_demand_at >= self._ttls.on_demand_prices:
                self._on_demand_at = now
                if await self.pricing.refresh_on_demand():
                    self._version += 1
            if force or now - self._spot_at >= self._ttls.spot_prices:
                self._spot_at = now
                try:
                    if await self.pricing.refresh_spot():
                        self._version += 1
                except Exception as exc:  # prices go stale, launches go on
                    log.warning("spot pricing not updated: %s", exc)

    async def _describe(self) -> None:
        infos: dict[str, Mapping[str, Any]] = {}
        paginator = self._clients.ec2.get_paginator("describe_instance_types")
        async for page in paginator.paginate(
            Filters=[
                {"Name": "supported-virtualization-type", "Values": ["hvm"]},
                {"Name": "processor-info.supported-architecture", "Values": ["x86_64", "arm64"]},
            ]
        ):
            for info in page.get("InstanceTypes", []):
                infos[info["InstanceType"]] = info
        zones: dict[str, set[str]] = {}
        paginator = self._clients.ec2.get_paginator("describe_instance_type_offerings")
        async for page in paginator.paginate(LocationType="availability-zone"):
            for offering in page.get("InstanceTypeOfferings", []):
                zones.setdefault(offering["InstanceType"], set()).add(offering["Location"])
        self._infos = infos
        self._zones = {k: frozenset(v) for k, v in zones.items()}
        log.debug("discovered instance types", extra={"count": len(infos)})

    async def instance_types(self, shape: NodeClassShape) -> Sequence[InstanceType]:
        """Every instance type for ``shape``, with offerings marked unavailable where EC2
        does not offer them, no price is known, or the unavailable cache says so."""
        await self.refresh()
        if not self.reserved_capacity and shape.reservations:
            shape = dataclasses.replace(shape, reservations=())
        self._unavailable.expire()  # what is due bumps the generation
        reservations = self.reservations
        stamp = (
            self._version,
            self._unavailable.generation,
            reservations.generation if reservations is not None and shape.reservations else 0,
        )
        cached = self._built.get(shape)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        # snapshots, so the build can run off the event loop without racing the caches
        marked = self._unavailable.snapshot()
        slots = {
            s.id: reservations.available(s.id) if reservations is not None else 0
            for s in shape.reservations
        }
        built = await asyncio.to_thread(self._build, shape, marked, slots)
        self._built[shape] = (stamp, built)
        return built

    def _build(
        self,
        shape: NodeClassShape,
        marked: frozenset[OfferingKey],
        slots: Mapping[str, int] | None = None,
    ) -> list[InstanceType]:
        """Build every instance type (pure; ~1 ms each, so it runs in a worker thread
        rather than stalling the event loop for a second or more)."""
        data = static_data()
        built: list[InstanceType] = []
        for name, info in self._infos.items():
            if not shape.admits(info):
                continue
            limits = data.vpc_limits.get(name)
            it = build_instance_type(
                info,
                region=self._settings.region,
                offered_zones=self._zones.get(name, frozenset()),
                shape=shape,
                price=self.pricing.price,
                unavailable=marked.__contains__,
                reserved_enis=self._settings.reserved_enis,
                vm_memory_overhead_percent=self._settings.vm_memory_overhead_percent,
                branch_enis=limits[0] if limits else 0,
                bandwidth_mbps=data.network_bandwidth_mbps.get(name),
                reservation_capacity=lambda rid: (slots or {}).get(rid, 0),
            )
            if it is not None:
                built.append(it)
        built.sort(key=lambda it: it.name)
        return built
