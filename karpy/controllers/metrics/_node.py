"""``metrics.node``: per-node gauges from the cluster model, every few seconds —
karpenter_nodes_allocatable, _system_overhead, _total_pod_requests, _total_pod_limits,
_total_daemon_requests, _total_daemon_limits, _current_lifetime_seconds and
karpenter_cluster_utilization_percent, labelled as Karpenter labels them (the node's
well-known labels in snake_case, node_name, phase, managed, resource_type).

A node's samples are kept between rounds and rebuilt only when its Node object, its
pods' summed requests or limits or its managed flag changed; only the lifetime sample is new each
round. Rebuilding all of them every 5 s (about twenty 30-label samples per node) cost a
tenth of karpy's CPU at a thousand nodes, in one synchronous stretch of the event loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from karpy.apis.labels import WELL_KNOWN_LABELS
from karpy.controllers.metrics._store import Gauge, GaugeStore, Sample, resource_type
from karpy.runtime import Clock, Object, Result, parse_time
from karpy.scheduling import resources as res
from karpy.state.cluster import Cluster
from karpy.state.statenode import StateNode

__all__ = ["GAUGES", "NODE_ALLOCATABLE", "NodeMetrics"]

# Karpenter names a well-known label's metric label after its last path segment.
_WELL_KNOWN: Final = {
    key: key.rsplit("/", 1)[-1].lower().replace("-", "_") for key in sorted(WELL_KNOWN_LABELS)
}
_NODE_LABELS: Final = (*sorted(set(_WELL_KNOWN.values())), "node_name", "phase", "managed")
_WITH_RESOURCE: Final = (*_NODE_LABELS, "resource_type")


def _gauge(name: str, help_: str, labels: tuple[str, ...] = _WITH_RESOURCE) -> Gauge:
    return Gauge(name, help_, labels)


NODE_ALLOCATABLE: Final = _gauge(
    "karpenter_nodes_allocatable",
    "Node allocatable are the resources allocatable by nodes.",
)
NODE_SYSTEM_OVERHEAD: Final = _gauge(
    "karpenter_nodes_system_overhead",
    "Node system daemon overhead are the resources reserved for system overhead, the "
    "difference between the node's capacity and allocatable values are reported by the "
    "status.",
)
NODE_POD_REQUESTS: Final = _gauge(
    "karpenter_nodes_total_pod_requests",
    "Node total pod requests are the resources requested by pods bound to nodes, including "
    "the DaemonSet pods.",
)
NODE_DAEMON_REQUESTS: Final = _gauge(
    "karpenter_nodes_total_daemon_requests",
    "Node total daemon requests are the resource requested by DaemonSet pods bound to nodes.",
)
NODE_POD_LIMITS: Final = _gauge(
    "karpenter_nodes_total_pod_limits",
    "Node total pod limits are the resources specified by pod limits, including the "
    "DaemonSet pods.",
)
NODE_DAEMON_LIMITS: Final = _gauge(
    "karpenter_nodes_total_daemon_limits",
    "Node total daemon limits are the resources specified by DaemonSet pod limits.",
)
NODE_LIFETIME: Final = _gauge(
    "karpenter_nodes_current_lifetime_seconds", "Node age in seconds", _NODE_LABELS
)
CLUSTER_UTILIZATION: Final = _gauge(
    "karpenter_cluster_utilization_percent",
    "Utilization of allocatable resources by pod requests", ("resource_type",),
)
GAUGES: Final = (
    NODE_ALLOCATABLE, NODE_SYSTEM_OVERHEAD, NODE_POD_REQUESTS, NODE_DAEMON_REQUESTS,
    NODE_POD_LIMITS, NODE_DAEMON_LIMITS, NODE_LIFETIME, CLUSTER_UTILIZATION,
)


def _value(resource: str, amount: int) -> float:
    return amount / 1000 if resource == res.CPU else float(amount)


def _labels(state: StateNode) -> dict[str, str]:
    node = state.node or {}
    labels = node.get("metadata", {}).get("labels") or {}
    out = {metric: labels.get(key, "") for key, metric in _WELL_KNOWN.items()}
    out["node_name"] = state.node_name
    out["phase"] = str((node.get("status") or {}).get("phase") or "")
    out["managed"] = "true" if state.managed else "false"
    return out


def _per_resource(gauge: Gauge, base: Mapping[str, str], amounts: Mapping[str, int]) -> list[
        Sample]:
    return [
        Sample(gauge, {**base, "resource_type": resource_type(name)}, _value(name, amount))
        for name, amount in amounts.items()
    ]


def _with_pod_count(requests: Mapping[str, int]) -> Mapping[str, int]:
    """Requests with the pod count always present, 0 for none: Karpenter's
    RequestsForPods sets ``pods`` even for no pod, and its capacity dashboard reads
    ``{resource_type="pods"}`` of nodes without DaemonSet pods."""
    if res.PODS in requests:
        return requests
    return {**requests, res.PODS: 0}


@dataclass(frozen=True, slots=True)
class _Built:
    """A node's samples as last built, and what they were built from."""

    node: Object
    managed: bool
    pod_requests: Mapping[str, int]
    daemon_requests: Mapping[str, int]
    pod_limits: Mapping[str, int]
    daemon_limits: Mapping[str, int]
    base: Mapping[str, str]
    created: datetime | None
    samples: tuple[Sample, ...]


def _build(state: StateNode, node: Object) -> _Built:
    status = node.get("status") or {}
    capacity = res.parse_resource_list(status.get("capacity"))
    allocatable = res.parse_resource_list(status.get("allocatable"))
    base = _labels(state)
    created = node["metadata"].get("creationTimestamp")
    return _Built(
        node=node,
        managed=state.managed,
        pod_requests=dict(state.pod_requests),
        daemon_requests=dict(state.daemonset_requests),
        pod_limits=dict(state.pod_limits),
        daemon_limits=dict(state.daemonset_limits),
        base=base,
        created=parse_time(created),
        samples=(
            *_per_resource(NODE_ALLOCATABLE, base, allocatable),
            *_per_resource(NODE_SYSTEM_OVERHEAD, base, res.subtract(capacity, allocatable)),
            *_per_resource(NODE_POD_REQUESTS, base, _with_pod_count(state.pod_requests)),
            *_per_resource(
                NODE_DAEMON_REQUESTS, base, _with_pod_count(state.daemonset_requests)
            ),
            # no pods:0 here: Karpenter's limits are a plain sum (no pod count)
            *_per_resource(NODE_POD_LIMITS, base, state.pod_limits),
            *_per_resource(NODE_DAEMON_LIMITS, base, state.daemonset_limits),
        ),
    )


def _current(built: _Built | None, state: StateNode, node: Object) -> bool:
    # Cached Node objects are immutable and replaced on every change, so identity
    # tells whether the Node changed.
    return (
        built is not None
        and built.node is node
        and built.managed == state.managed
        and built.pod_requests == state.pod_requests
        and built.daemon_requests == state.daemonset_requests
        and built.pod_limits == state.pod_limits
        and built.daemon_limits == state.daemonset_limits
    )


class NodeMetrics:
    """The ``metrics.node`` singleton reconciler."""

    name = "metrics.node"

    def __init__(self, *, cluster: Cluster, store: GaugeStore, clock: Clock) -> None:
        self._cluster = cluster
        self._store = store
        self._clock = clock
        self._built: dict[str, _Built] = {}

    async def reconcile(self) -> Result:
        """Recompute the samples of every node that changed, every node's lifetime and
        the cluster's utilization."""
        now = self._clock.now()
        samples: dict[str, list[Sample]] = {}
        built: dict[str, _Built] = {}
        allocatable_total: dict[str, int] = {}
        requested_total: dict[str, int] = {}
        for state in self._cluster.nodes():
            node = state.node
            if node is None:
                continue
            name = state.node_name
            entry = self._built.get(name)
            if entry is None or not _current(entry, state, node):
                entry = _build(state, node)
            built[name] = entry
            node_samples = list(entry.samples)
            if entry.created is not None:
                age = (now - entry.created).total_seconds()
                node_samples.append(Sample(NODE_LIFETIME, entry.base, age))
            samples[name] = node_samples
            _accumulate(allocatable_total, state.allocatable)
            _accumulate(requested_total, state.pod_requests)
        self._built = built
        samples["clusterUtilization"] = [
            Sample(CLUSTER_UTILIZATION, {"resource_type": resource_type(name)},
                   100.0 * requested_total.get(name, 0) / amount)
            for name, amount in sorted(allocatable_total.items()) if amount
        ]
        self._store.replace_all(samples)
        return Result()


def _accumulate(total: dict[str, int], amounts: Mapping[str, int]) -> None:
    for name, amount in amounts.items():
        total[name] = total.get(name, 0) + amount
