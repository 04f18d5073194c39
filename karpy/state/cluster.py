"""The in-memory cluster model: nodes joined to NodeClaims, pods per node, nominations."""

from __future__ import annotations

__all__ = ["Cluster"]


class Cluster:
    """The autoscaler's view of the cluster, fed by the manager's informers."""
