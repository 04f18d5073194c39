"""How many NodeClaims a static NodePool has, as the cluster model sees them.

The model learns of a NodeClaim the provisioner creates at once (not when the watch
delivers it), so a count taken right after a scale-up already includes what it made:
the controllers never create or delete twice for one change of ``spec.replicas``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from karpy.apis.labels import LABEL_NODEPOOL
from karpy.runtime import Object
from karpy.scheduling import resources as res
from karpy.state import Cluster, NodePoolEntry
from karpy.state.statenode import StateNode

__all__ = ["ReplicaCount", "count_replicas", "node_limit"]


@dataclass(frozen=True, slots=True)
class ReplicaCount:
    """A static NodePool's NodeClaims that are not being deleted."""

    unlaunched: list[Object] = field(default_factory=list)
    """NodeClaims without an instance yet (removed first on a scale-down)."""
    running: list[StateNode] = field(default_factory=list)
    """Launched machines no disruption decision has marked."""
    pending_disruption: int = 0
    """Machines marked by a disruption command (drift) whose replacement is on its way."""

    @property
    def active(self) -> int:
        """Karpenter's "running" NodeClaims: launched or not, not pending disruption."""
        return len(self.unlaunched) + len(self.running)

    @property
    def total(self) -> int:
        """Every NodeClaim not being deleted (what ``limits.nodes`` bounds)."""
        return self.active + self.pending_disruption


def count_replicas(cluster: Cluster, nodepool: str) -> ReplicaCount:
    """The NodeClaims of ``nodepool`` that are not being deleted."""
    unlaunched = [
        claim for claim in cluster.unlaunched_nodeclaims()
        if (claim["metadata"].get("labels") or {}).get(LABEL_NODEPOOL) == nodepool
        and not claim["metadata"].get("deletionTimestamp")
    ]  # fmt: skip
    running: list[StateNode] = []
    pending = 0
    for state in cluster.nodes():
        if state.nodeclaim is None or state.nodepool != nodepool or state.deleting:
            continue
        if state.marked:
            pending += 1
        else:
            running.append(state)
    return ReplicaCount(unlaunched, running, pending)


def node_limit(entry: NodePoolEntry) -> int:
    """``limits.nodes`` of the NodePool (the only limit a static NodePool may set)."""
    limits = (entry.raw.get("spec") or {}).get("limits") or {}
    if "nodes" not in limits:
        return sys.maxsize
    return res.parse_resource_list({"nodes": limits["nodes"]}).get("nodes", 0)
