"""``metrics.clusterlimit``: karpy_clusterlimits_usage and karpy_clusterlimits_limit, per
ClusterLimit and resource type, in the units of karpenter_nodepools_usage and
karpenter_nodepools_limit (cpu in cores, memory and storage in bytes, counts as is), so
one dashboard query shape reads both."""

from __future__ import annotations

from typing import Final

from karpy.controllers.metrics._nodepool import UsageMetrics
from karpy.controllers.metrics._store import Gauge, GaugeStore
from karpy.runtime import Client
from karpy.state.kinds import CLUSTER_LIMIT

__all__ = ["CLUSTERLIMIT_LIMIT", "CLUSTERLIMIT_USAGE", "GAUGES", "ClusterLimitMetrics"]

CLUSTERLIMIT_LIMIT: Final = Gauge(
    "karpy_clusterlimits_limit",
    "Limits a ClusterLimit puts on the NodePools it selects, together. Labeled by "
    "clusterlimit name and resource type.",
    ("resource_type", "clusterlimit"),
)
CLUSTERLIMIT_USAGE: Final = Gauge(
    "karpy_clusterlimits_usage",
    "The amount of resources the NodePools a ClusterLimit selects have provisioned "
    "together. Labeled by clusterlimit name and resource type.",
    ("resource_type", "clusterlimit"),
)
GAUGES: Final = (CLUSTERLIMIT_LIMIT, CLUSTERLIMIT_USAGE)


class ClusterLimitMetrics(UsageMetrics):
    """The ``metrics.clusterlimit`` reconciler."""

    name = "metrics.clusterlimit"

    def __init__(self, *, client: Client, store: GaugeStore) -> None:
        super().__init__(client=client, store=store, kind=CLUSTER_LIMIT, label="clusterlimit",
                         usage=CLUSTERLIMIT_USAGE, limit=CLUSTERLIMIT_LIMIT)
