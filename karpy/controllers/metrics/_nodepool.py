"""``metrics.nodepool``: karpenter_nodepools_usage and karpenter_nodepools_limit, per
NodePool and resource type (cpu in cores, memory and storage in bytes, counts as is)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from karpy.controllers.metrics._store import Gauge, GaugeStore, Sample, resource_type
from karpy.runtime import Client, Kind, Request, Result, errors
from karpy.scheduling import resources as res
from karpy.state.kinds import NODE_POOL

__all__ = [
    "NODEPOOL_LIMIT",
    "NODEPOOL_USAGE",
    "NodePoolMetrics",
    "UsageMetrics",
    "quantity_value",
    "resource_samples",
]

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


def resource_samples(
    gauge: Gauge, labels: Mapping[str, str], resources: Mapping[str, Any]
) -> list[Sample]:
    """One sample of ``gauge`` per quantity in ``resources``, labelled ``labels`` and
    its resource type (values that are not quantities are left out)."""
    out = []
    for name, value in resources.items():
        try:
            amount = quantity_value(name, value)
        except ValueError:
            continue  # not a quantity: nothing sensible to export
        out.append(Sample(gauge, {"resource_type": resource_type(name), **labels}, amount))
    return out


class UsageMetrics:
    """A reconciler exporting an object's ``status.resources`` and ``spec.limits`` as a
    usage and a limit gauge, labelled by the object's name under ``label``."""

    def __init__(
        self, *, client: Client, store: GaugeStore, kind: Kind, label: str,
        usage: Gauge, limit: Gauge,
    ) -> None:
        self._client = client
        self._store = store
        self._kind = kind
        self._label = label
        self._usage = usage
        self._limit = limit

    async def reconcile(self, request: Request) -> Result:
        """Export the object's status.resources and spec.limits (or forget it)."""
        try:
            obj = await self._client.get(self._kind, request.name)
        except errors.NotFound:
            self._store.delete(request.name)
            return Result()
        labels = {self._label: request.name}
        usage = (obj.get("status") or {}).get("resources") or {}
        limits = (obj.get("spec") or {}).get("limits") or {}
        self._store.update(request.name, [
            *resource_samples(self._usage, labels, usage),
            *resource_samples(self._limit, labels, limits),
        ])
        return Result()


class NodePoolMetrics(UsageMetrics):
    """The ``metrics.nodepool`` reconciler."""

    name = "metrics.nodepool"

    def __init__(self, *, client: Client, store: GaugeStore) -> None:
        super().__init__(client=client, store=store, kind=NODE_POOL, label="nodepool",
                         usage=NODEPOOL_USAGE, limit=NODEPOOL_LIMIT)
