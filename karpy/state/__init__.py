"""The in-memory cluster model fed by informers: nodes joined to NodeClaims, pods bound
per node, in-flight capacity and nominations.

:class:`Cluster` is the model; :class:`StateNode` one machine in it (a Node and/or its
NodeClaim); :mod:`karpy.state.pods` the pod predicates the autoscaler sorts pods by;
:mod:`karpy.state.kinds` the NodePool/NodeClaim kinds; :class:`OverlayStore` the
NodeOverlays in force; :class:`VolumeIndex` the claims,
volumes and StorageClasses that restrict where pods can run (:class:`VolumeError` when
they cannot be resolved); :mod:`karpy.state.cost` what the machines cost (their
offerings priced from the provider's catalogue); :class:`PodSchedulingTimes` when each
pending pod was first seen, decided and found a place.
"""

from karpy.state.cluster import Cluster, ReleaseHandler
from karpy.state.kinds import NODE_CLAIM, NODE_POOL
from karpy.state.nodepool import NodePoolEntry
from karpy.state.overlays import OverlayStore, UnevaluatedNodePoolError
from karpy.state.pod_scheduling import PodSchedulingTimes
from karpy.state.statenode import NodePods, StateNode
from karpy.state.volumes import VolumeError, VolumeIndex

__all__ = [
    "NODE_CLAIM",
    "NODE_POOL",
    "Cluster",
    "NodePods",
    "NodePoolEntry",
    "OverlayStore",
    "PodSchedulingTimes",
    "ReleaseHandler",
    "StateNode",
    "UnevaluatedNodePoolError",
    "VolumeError",
    "VolumeIndex",
]
