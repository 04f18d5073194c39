"""``metrics.cost``: what the cluster's machines cost per hour, every few seconds —
karpenter_nodepools_cost_total (Karpenter's, per NodePool), karpy_nodepool_cost_per_hour
(per NodePool and capacity type) and karpy_cluster_cost_per_hour (their sum) — and
the catalogue the prices come from: karpenter_cloudprovider_instance_type_offering_
price_estimate / _offering_available per offering, karpenter_cloudprovider_instance_
type_cpu_cores / _memory_bytes per instance type.

Each launched machine the cluster model knows (a NodeClaim and/or its Node) is priced
at its offering's price (instance type, zone, capacity type) in the instance types the
provider gives its NodePool (:mod:`karpy.state.cost`). Machines being deleted still
count: they are paid for until they are gone. Machines karpy does not manage, and
machines whose offering the catalogue does not know, count for nothing; each such
machine adds one, once, to karpenter_nodepools_cost_tracker_errors_total (Karpenter
counts a NodeClaim it cannot price there). karpenter_nodepools_cost_total is
Karpenter's gauge (v1.9+); the two
karpy_* gauges are karpy's own, kept for the capacity-type split and the total.

Karpenter-AWS exports the catalogue gauges from its own metrics controller; here the
core exports them for every provider, from the same instance types the provisioner
sees (offerings marked unavailable after an insufficient-capacity error included): an
offering is available if any NodePool offers it available, as upstream.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Final

from karpy.controllers.metrics._store import Gauge, GaugeStore, Sample
from karpy.runtime import Result
from karpy.scheduling import InstanceType
from karpy.scheduling import resources as res
from karpy.state.cluster import Cluster
from karpy.state.cost import InstanceTypesOf, PriceBook, load_price_book, machine_offering
from karpy.state.statenode import StateNode

__all__ = [
    "CLUSTER_COST",
    "GAUGES",
    "NODEPOOL_COST",
    "NODEPOOL_COST_TOTAL",
    "CostMetrics",
    "catalogue_samples",
    "cost_samples",
]

NODEPOOL_COST: Final = Gauge(
    "karpy_nodepool_cost_per_hour",
    "Hourly price of the machines launched for a nodepool, from their offerings' prices "
    "in the cloud provider's catalogue. Labeled by nodepool and capacity type.",
    ("nodepool", "capacity_type"),
)
CLUSTER_COST: Final = Gauge(
    "karpy_cluster_cost_per_hour",
    "Hourly price of every machine karpy manages, from their offerings' prices in the "
    "cloud provider's catalogue.",
    (),
)
NODEPOOL_COST_TOTAL: Final = Gauge(
    "karpenter_nodepools_cost_total",
    "Total cost of the nodepool from Karpenter's perspective. Units are determined by the "
    "cloud provider. Not an authoritative source for billing. Includes modifications due "
    "to NodeOverlays",
    ("nodepool",),
)
_OFFERING: Final = ("instance_type", "capacity_type", "zone")
OFFERING_PRICE: Final = Gauge(
    "karpenter_cloudprovider_instance_type_offering_price_estimate",
    "Instance type offering estimated hourly price used when making informed decisions "
    "on node cost calculation, based on instance type, capacity type, and zone.",
    _OFFERING,
)
OFFERING_AVAILABLE: Final = Gauge(
    "karpenter_cloudprovider_instance_type_offering_available",
    "Instance type offering availability, based on instance type, capacity type, and zone",
    _OFFERING,
)
INSTANCE_TYPE_CPU: Final = Gauge(
    "karpenter_cloudprovider_instance_type_cpu_cores",
    "VCPUs cores for a given instance type.", ("instance_type",),
)
INSTANCE_TYPE_MEMORY: Final = Gauge(
    "karpenter_cloudprovider_instance_type_memory_bytes",
    "Memory, in bytes, for a given instance type.", ("instance_type",),
)
GAUGES: Final = (
    NODEPOOL_COST, CLUSTER_COST, NODEPOOL_COST_TOTAL, OFFERING_PRICE, OFFERING_AVAILABLE,
    INSTANCE_TYPE_CPU, INSTANCE_TYPE_MEMORY,
)


def cost_samples(machines: Iterable[StateNode], book: PriceBook) -> list[Sample]:
    """The gauges' samples for ``machines`` priced from ``book``; the total is always
    exported (0 with no priced machine), pools only while they have one."""
    by_pool: dict[tuple[str, str], list[float]] = {}
    for state in machines:
        price = book.machine_price(state)
        if price is None:
            continue
        offering = machine_offering(state)
        by_pool.setdefault((offering.nodepool, offering.capacity_type), []).append(price)
    samples = [
        Sample(NODEPOOL_COST, {"nodepool": pool, "capacity_type": capacity_type},
               math.fsum(prices))
        for (pool, capacity_type), prices in sorted(by_pool.items())
    ]
    per_pool: dict[str, list[float]] = {}
    for (pool, _), prices in by_pool.items():
        per_pool.setdefault(pool, []).extend(prices)
    samples += [
        Sample(NODEPOOL_COST_TOTAL, {"nodepool": pool}, math.fsum(prices))
        for pool, prices in sorted(per_pool.items())
    ]
    total = math.fsum(p for prices in by_pool.values() for p in prices)
    samples.append(Sample(CLUSTER_COST, {}, total))
    return samples


def catalogue_samples(by_pool: Mapping[str, Mapping[str, InstanceType]]) -> list[Sample]:
    """The catalogue gauges of every NodePool's instance types, merged across pools."""
    available: dict[tuple[str, str, str], bool] = {}
    price: dict[tuple[str, str, str], float] = {}
    shapes: dict[str, InstanceType] = {}
    for types in by_pool.values():
        for it in types.values():
            shapes.setdefault(it.name, it)
            for o in it.offerings:
                key = (it.name, o.capacity_type, o.zone)
                available[key] = available.get(key, False) or o.available
                if not math.isnan(o.price):
                    price[key] = o.price
    samples = []
    for key in sorted(available):
        labels = dict(zip(_OFFERING, key, strict=True))
        samples.append(Sample(OFFERING_AVAILABLE, labels, 1.0 if available[key] else 0.0))
        if key in price:
            samples.append(Sample(OFFERING_PRICE, labels, price[key]))
    for name, it in sorted(shapes.items()):
        if res.CPU in it.capacity:
            samples.append(Sample(INSTANCE_TYPE_CPU, {"instance_type": name},
                                  it.capacity[res.CPU] / 1000))
        if res.MEMORY in it.capacity:
            samples.append(Sample(INSTANCE_TYPE_MEMORY, {"instance_type": name},
                                  float(it.capacity[res.MEMORY])))
    return samples


def unpriced(machines: Iterable[StateNode], book: PriceBook) -> list[tuple[str, str]]:
    """(machine name, NodePool) of each managed machine the book cannot price."""
    return [
        (state.name, state.nodepool) for state in machines
        if state.managed and book.machine_price(state) is None
    ]


class CostMetrics:
    """The ``metrics.cost`` singleton reconciler."""

    name = "metrics.cost"

    def __init__(
        self,
        *,
        cluster: Cluster,
        store: GaugeStore,
        instance_types: InstanceTypesOf,
        on_unpriced: Callable[[str], None] | None = None,
    ) -> None:
        self._cluster = cluster
        self._store = store
        self._instance_types = instance_types
        self._on_unpriced = on_unpriced
        self._unpriced: set[str] = set()

    async def reconcile(self) -> Result:
        """Price every machine and export the sums and the catalogue (the provider's
        errors propagate: the samples stay as they were until a round succeeds)."""
        book = await load_price_book(self._cluster.nodepools(), self._instance_types)
        machines = self._cluster.nodes()
        self._store.replace_all({
            "cost": cost_samples(machines, book),
            "catalogue": catalogue_samples(book.by_pool),
        })
        # Counted once per machine, not once per round: the counter means "NodeClaims
        # that could not be priced", as Karpenter's does.
        missing = unpriced(machines, book)
        for name, pool in missing:
            if name not in self._unpriced and self._on_unpriced is not None:
                self._on_unpriced(pool)
        self._unpriced = {name for name, _ in missing}
        return Result()
