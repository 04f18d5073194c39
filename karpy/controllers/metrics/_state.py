"""``metrics.cluster_state``: karpenter_cluster_state_node_count (machines the cluster
model knows: launched NodeClaims joined to their Nodes, and other Nodes) and
karpenter_cluster_state_synced (1 once the model can be trusted)."""

from __future__ import annotations

from typing import Final

from karpy.controllers.metrics._store import Gauge, GaugeStore, Sample
from karpy.runtime import Result
from karpy.state.cluster import Cluster

__all__ = ["GAUGES", "NODE_COUNT", "SYNCED", "ClusterStateMetrics"]

NODE_COUNT: Final = Gauge(
    "karpenter_cluster_state_node_count", "Current count of nodes in cluster state", ()
)
SYNCED: Final = Gauge(
    "karpenter_cluster_state_synced",
    "Returns 1 if cluster state is synced and 0 otherwise. Synced checks that nodeclaims "
    "and nodes that are stored in the APIServer have the same representation as "
    "Karpenter's cluster state",
    (),
)
GAUGES: Final = (NODE_COUNT, SYNCED)


class ClusterStateMetrics:
    """The ``metrics.cluster_state`` singleton reconciler."""

    name = "metrics.cluster_state"

    def __init__(self, *, cluster: Cluster, store: GaugeStore) -> None:
        self._cluster = cluster
        self._store = store

    async def reconcile(self) -> Result:
        """Export the node count and whether the model is synced."""
        self._store.update("cluster", [
            Sample(NODE_COUNT, {}, float(len(self._cluster.nodes()))),
            Sample(SYNCED, {}, 1.0 if self._cluster.synced else 0.0),
        ])
        return Result()
