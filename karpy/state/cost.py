"""What the machines in the cluster model cost: each machine's offering (its instance
type, zone and capacity type, read from its labels) priced from the provider's
catalogue.

A launched machine carries ``node.kubernetes.io/instance-type``,
``topology.kubernetes.io/zone`` and ``karpenter.sh/capacity-type`` (on its Node, or
on its NodeClaim before the Node registers); the price is that offering's price in the
instance types the provider gives the machine's NodePool. Machines karpy does not
manage, and machines whose instance type the catalogue does not know, have no price
(None), rather than a made-up one.

:class:`PriceBook` is a plain value built once per refresh (:func:`load_price_book`),
so pricing every machine of a large cluster is dictionary lookups; ``karpy top`` and
the ``karpy_nodepool_cost_per_hour`` gauge both price through it.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from karpy.apis.labels import LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE, LABEL_ZONE
from karpy.scheduling import InstanceType
from karpy.state.nodepool import NodePoolEntry
from karpy.state.statenode import StateNode

__all__ = ["MachineOffering", "PriceBook", "load_price_book", "machine_offering", "offering_price"]


def offering_price(
    instance_type: InstanceType, zone: str | None, capacity_type: str | None
) -> float | None:
    """What a machine of ``instance_type`` costs per hour in ``zone`` and ``capacity_type``:
    the cheapest such offering's price, available or not (the machine runs already).
    An empty or None zone or capacity type matches any. None when no offering matches or
    none has a price (NaN): the caller says what an unknown price means to it."""
    best: float | None = None
    for offering in instance_type.offerings:
        if zone and offering.zone != zone:
            continue
        if capacity_type and offering.capacity_type != capacity_type:
            continue
        if math.isnan(offering.price):
            continue
        if best is None or offering.price < best:
            best = offering.price
    return best


@dataclass(frozen=True, slots=True)
class MachineOffering:
    """Which offering a machine runs on ("" for what its labels do not say)."""

    nodepool: str
    instance_type: str
    zone: str
    capacity_type: str


def machine_offering(state: StateNode) -> MachineOffering:
    """The machine's NodePool and offering, from the labels pods see on it."""
    labels = state.labels
    return MachineOffering(
        nodepool=state.nodepool,
        instance_type=str(labels.get(LABEL_INSTANCE_TYPE, "")),
        zone=str(labels.get(LABEL_ZONE, "")),
        capacity_type=str(labels.get(LABEL_CAPACITY_TYPE, "")),
    )


@dataclass(frozen=True, slots=True)
class PriceBook:
    """Instance types by name, per NodePool: the catalogue prices are read from.

    A machine of a NodePool the book does not hold (the pool was deleted while its
    nodes drain) is priced from any pool offering its instance type: the catalogue is
    the provider's, pools only restrict it.
    """

    by_pool: Mapping[str, Mapping[str, InstanceType]] = field(default_factory=dict)

    @classmethod
    def from_instance_types(
        cls, by_pool: Mapping[str, Iterable[InstanceType]]
    ) -> PriceBook:
        """A book from each NodePool's instance types."""
        return cls({pool: {it.name: it for it in types} for pool, types in by_pool.items()})

    def price(self, offering: MachineOffering) -> float | None:
        """The hourly price of ``offering``; None when unknown (no instance type, or no
        offering in that zone and capacity type). An empty zone or capacity type
        matches any, taking the cheapest."""
        if not offering.nodepool or not offering.instance_type:
            return None
        instance_type = self._instance_type(offering.nodepool, offering.instance_type)
        if instance_type is None:
            return None
        return offering_price(instance_type, offering.zone, offering.capacity_type)

    def machine_price(self, state: StateNode) -> float | None:
        """The hourly price of a machine of the cluster model (None: unmanaged or
        unknown)."""
        if not state.managed:
            return None
        return self.price(machine_offering(state))

    def _instance_type(self, pool: str, name: str) -> InstanceType | None:
        types = self.by_pool.get(pool)
        if types is not None and name in types:
            return types[name]
        for other in self.by_pool.values():
            if name in other:
                return other[name]
        return None


InstanceTypesOf = Callable[[NodePoolEntry], Awaitable[Sequence[InstanceType]]]
"""How to get a NodePool's instance types (the provisioner's cache, or the provider)."""


async def load_price_book(
    nodepools: Iterable[NodePoolEntry], instance_types: InstanceTypesOf
) -> PriceBook:
    """A :class:`PriceBook` of ``nodepools`` (invalid pools are skipped); raises what
    ``instance_types`` raises."""
    by_pool: dict[str, Sequence[InstanceType]] = {}
    for pool in nodepools:
        if pool.model is None:
            continue
        by_pool[pool.name] = await instance_types(pool)
    return PriceBook.from_instance_types(by_pool)
