"""``metrics.nodepool``: karpenter_nodepools_usage and karpenter_nodepools_limit, per
NodePool and resource type (cpu in cores, memory and storage in bytes, counts as is)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from karpy.controllers.metrics._store import Gauge, GaugeStore, Sample, resource_type
from karpy.runtime import Client, Request, Result, errors
from karpy.scheduling import resources as res
from karpy.state.kinds import NODE_POOL

__all__ = ["NODEPOOL_LIMIT", "NODEPOOL_USAGE", "NodePoolMetrics", "quantity_value"]

NODEPOOL_LIMIT: Final = Gauge(
    "karpenter_nodepools_limit",
    "Limits specified on the nodepool that restrict the quantity of resources provisioned. "
    "Labeled by nodepool name and resource type.",
    ("resource_type", "nodepool"),
)
NODEPOOL_USAGE: Final = Gauge(
    "karpenter_nodepools_usage",
    "The amount of resources that have been provisioned for a nodepool. Labeled by "
    "nodepool name and resource type.",
    ("resource_type", "nodepool"),
)
GAUGES: Final = (NODEPOOL_LIMIT, NODEPOOL_USAGE)


def quantity_value(resource: str, value: str | int | float) -> float:
    """A quantity as Karpenter exports it: cpu in cores, everything else in base units."""
    canonical = res.to_canonical(resource, value)
    return canonical / 1000 if resource == res.CPU else float(canonical)


def _samples(gauge: Gauge, pool: str, resources: Mapping[str, Any]) -> list[Sample]:
    out = []
    for name, value in resources.items():
        try:
            amount = quantity_value(name, value)
        except ValueError:
            continue  # not a quantity: nothing sensible to export
        out.append(Sample(gauge, {"resource_type": resource_type(name), "nodepool": pool}, amount))
    return out


class NodePoolMetrics:
    """The ``metrics.nodepool`` reconciler."""

    name = "metrics.nodepool"

    def __init__(self, *, client: Client, store: GaugeStore) -> None:
        self._client = client
        self._store = store

    async def reconcile(self, request: Request) -> Result:
        """Export the NodePool's status.resources and spec.limits (or forget it)."""
        try:
            nodepool = await self._client.get(NODE_POOL, request.name)
        except errors.NotFound:
            self._store.delete(request.name)
            return Result()
        usage = (nodepool.get("status") or {}).get("resources") or {}
        limits = (nodepool.get("spec") or {}).get("limits") or {}
        self._store.update(request.name, [
            *_samples(NODEPOOL_USAGE, request.name, usage),
            *_samples(NODEPOOL_LIMIT, request.name, limits),
        ])
        return Result()
