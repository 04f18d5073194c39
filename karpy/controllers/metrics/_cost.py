"""``metrics.cost``: what the cluster's machines cost per hour, every few seconds —
karpy_nodepool_cost_per_hour (per NodePool and capacity type) and
karpy_cluster_cost_per_hour (their sum).

Each launched machine the cluster model knows (a NodeClaim and/or its Node) is priced
at its offering's price (instance type, zone, capacity type) in the instance types the
provider gives its NodePool (:mod:`karpy.state.cost`). Machines being deleted still
count: they are paid for until they are gone. Machines karpy does not manage, and
machines whose offering the catalogue does not know, count for nothing. These are
karpy's own metrics (Karpenter has no cost gauge), with Karpenter's label names.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Final

from karpy.controllers.metrics._store import Gauge, GaugeStore, Sample
from karpy.runtime import Result
from karpy.state.cluster import Cluster
from karpy.state.cost import InstanceTypesOf, PriceBook, load_price_book, machine_offering
from karpy.state.statenode import StateNode

__all__ = ["CLUSTER_COST", "GAUGES", "NODEPOOL_COST", "CostMetrics", "cost_samples"]

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
GAUGES: Final = (NODEPOOL_COST, CLUSTER_COST)


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
    total = math.fsum(p for prices in by_pool.values() for p in prices)
    samples.append(Sample(CLUSTER_COST, {}, total))
    return samples


class CostMetrics:
    """The ``metrics.cost`` singleton reconciler."""

    name = "metrics.cost"

    def __init__(
        self, *, cluster: Cluster, store: GaugeStore, instance_types: InstanceTypesOf
    ) -> None:
        self._cluster = cluster
        self._store = store
        self._instance_types = instance_types

    async def reconcile(self) -> Result:
        """Price every machine and export the sums (the provider's errors propagate:
        the samples stay as they were until a round succeeds)."""
        book = await load_price_book(self._cluster.nodepools(), self._instance_types)
        self._store.replace_all({"cost": cost_samples(self._cluster.nodes(), book)})
        return Result()
