"""Karpenter's state metrics: gauges that describe the cluster as it is now.

* ``metrics.nodepool`` — karpenter_nodepools_usage / karpenter_nodepools_limit;
* ``metrics.clusterlimit`` — karpy_clusterlimits_usage / karpy_clusterlimits_limit (karpy's
  own, where ClusterLimits are watched);
* ``metrics.node`` — karpenter_nodes_allocatable and the other per-node gauges,
  karpenter_cluster_utilization_percent;
* ``metrics.pod`` — karpenter_pods_state and karpenter_pods_startup_duration_seconds;
* ``metrics.cluster_state`` — karpenter_cluster_state_node_count / _synced;
* ``metrics.cost`` — karpy_nodepool_cost_per_hour / karpy_cluster_cost_per_hour (karpy's
  own: the machines' offerings priced from the provider's catalogue);
* ``operatorpkg.<kind>.status`` — the ``operator_*`` status-condition and termination
  metrics of NodeClaims, NodePools, Nodes and the provider's NodeClasses.

Counters and histograms of events (NodeClaims created, nodes terminated, ...) are
recorded where the events happen, through :class:`karpy.controllers.instruments.
KarpenterMetrics`. The gauges here live in one :class:`GaugeStore` on the manager's
Prometheus registry, so they appear on the same ``/metrics`` endpoint.
"""

from __future__ import annotations

from typing import Final

from karpy.apis.labels import LABEL_INITIALIZED, LABEL_NODEPOOL, nodeclass_label_key
from karpy.controllers.deps import Deps
from karpy.controllers.metrics import _clusterlimit, _cost, _node, _nodepool, _pod, _state
from karpy.controllers.metrics._clusterlimit import ClusterLimitMetrics
from karpy.controllers.metrics._cost import CostMetrics
from karpy.controllers.metrics._node import NodeMetrics
from karpy.controllers.metrics._nodepool import NodePoolMetrics
from karpy.controllers.metrics._pod import PodMetrics
from karpy.controllers.metrics._state import ClusterStateMetrics
from karpy.controllers.metrics._status import (
    DEFAULT_BUCKETS,
    EXPONENTIAL_BUCKETS,
    StatusFamilies,
    StatusGauges,
    StatusMetrics,
)
from karpy.controllers.metrics._store import Gauge, GaugeStore, Sample
from karpy.runtime import Kind, kinds
from karpy.state.kinds import CLUSTER_LIMIT, NODE_CLAIM, NODE_POOL

__all__ = [
    "GAUGES",
    "ClusterLimitMetrics",
    "ClusterStateMetrics",
    "CostMetrics",
    "Gauge",
    "GaugeStore",
    "NodeMetrics",
    "NodePoolMetrics",
    "PodMetrics",
    "Sample",
    "StatusMetrics",
    "register",
]

#: Every gauge this package exports.
GAUGES: Final = (
    *_nodepool.GAUGES, *_node.GAUGES, *_pod.GAUGES, *_state.GAUGES, *_cost.GAUGES,
    *_clusterlimit.GAUGES,
)
#: Seconds between rounds of the periodic metrics controllers (Karpenter's 5 s).
PERIOD: Final = 5.0


def register(deps: Deps) -> None:
    """Build the metrics controllers and register their gauges on the manager's
    Prometheus registry."""
    manager = deps.manager
    observe_state = not deps.settings.disable_cluster_state_observability
    nodepools = GaugeStore(_nodepool.GAUGES)
    nodes = GaugeStore(_node.GAUGES)
    pods = GaugeStore(_pod.GAUGES, clock=deps.clock)
    state = GaugeStore(_state.GAUGES)
    costs = GaugeStore(_cost.GAUGES)
    limits = GaugeStore(_clusterlimit.GAUGES)
    for store in (nodepools, nodes, pods, state, costs, limits):
        manager.metrics.registry.register(store)

    # Karpenter's DISABLE_CLUSTER_STATE_OBSERVABILITY leaves out these controllers (their
    # gauges stay declared, with no samples) and the operator_* status metrics.
    if observe_state:
        nodepool = NodePoolMetrics(client=deps.client, store=nodepools)
        manager.controller(nodepool.name).for_(NODE_POOL).complete(nodepool, workers=2)
        if deps.cluster.watches_cluster_limits:
            limit = ClusterLimitMetrics(client=deps.client, store=limits)
            manager.controller(limit.name).for_(CLUSTER_LIMIT).complete(limit, workers=1)

        pod = PodMetrics(client=deps.client, store=pods, metrics=deps.metrics,
                         scheduling=deps.cluster.pod_scheduling)
        manager.controller(pod.name).for_(kinds.POD).complete(pod, workers=4)

        node = NodeMetrics(cluster=deps.cluster, store=nodes, clock=deps.clock)
        manager.singleton(node.name, node, period=PERIOD)
    cluster_state = ClusterStateMetrics(cluster=deps.cluster, store=state, clock=deps.clock)
    manager.singleton(cluster_state.name, cluster_state, period=PERIOD)
    # Priced from the provisioner's own catalogue (the shared scheduling inputs): the
    # instance types are fetched and cached once.
    cost_errors = deps.metrics.cost_tracker_errors
    cost = CostMetrics(
        cluster=deps.cluster, store=costs, instance_types=deps.scheduling.instance_types.get,
        on_unpriced=lambda pool: cost_errors.add(1, {"nodepool": pool}),
    )
    manager.singleton(cost.name, cost, period=PERIOD)
    if observe_state:
        _register_status(deps)


def _register_status(deps: Deps) -> None:
    """The ``operator_*`` metrics, configured per kind as Karpenter's controllers.go
    configures operatorpkg's status controllers."""
    gauges = StatusGauges(deps.clock)
    deps.manager.metrics.registry.register(gauges)
    meter = deps.manager.meter("operatorpkg")
    node_classes = list(deps.cloud_provider.supported_node_classes())
    class_labels = [nodeclass_label_key(k.group, k.kind) for k in node_classes]
    configs: list[tuple[Kind, list[str], tuple[float, ...], bool]] = [
        (NODE_CLAIM, [*class_labels, LABEL_NODEPOOL], EXPONENTIAL_BUCKETS, True),
        (NODE_POOL, [], EXPONENTIAL_BUCKETS, True),
        (kinds.NODE, [*class_labels, LABEL_NODEPOOL, LABEL_INITIALIZED],
         EXPONENTIAL_BUCKETS, False),
        *((kind, [], DEFAULT_BUCKETS, True) for kind in node_classes),
    ]
    for kind, label_keys, buckets, deprecated in configs:
        families = StatusFamilies(
            kind=kind, meter=meter, gauges=gauges, label_keys=label_keys,
            buckets=buckets, deprecated=deprecated,
        )
        status = StatusMetrics(client=deps.client, clock=deps.clock, families=families)
        deps.manager.controller(status.name).for_(kind).complete(status, workers=2)
