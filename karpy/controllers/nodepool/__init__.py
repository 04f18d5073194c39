"""NodePool bookkeeping: the status and annotations Karpenter keeps on each NodePool.

* ``nodepool.counter`` — ``status.resources`` (the capacity of the pool's machines) and
  ``status.nodes``, from the cluster model;
* ``nodepool.readiness`` — ``NodeClassReady`` from the NodeClass its ``nodeClassRef``
  names (watched, so a NodeClass turning Ready shows at once);
* ``nodepool.validation`` — ``ValidationSucceeded`` (what the CRD schema cannot check);
  with NodeClassReady it makes ``Ready``, which the provisioner requires;
* ``nodepool.hash`` — the ``karpenter.sh/nodepool-hash`` annotation and its version;
* ``nodepool.registrationhealth`` — ``NodeRegistrationHealthy`` reset when the NodePool
  or its NodeClass changes (the NodeClaim lifecycle sets it True/False);
* ``clusterlimit.status`` — karpy's ClusterLimits: the pools each selects and what they
  use (only where the API server serves ClusterLimits).

NodePools whose nodeClassRef names another provider's NodeClass are left alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from karpy.controllers.deps import Deps
from karpy.controllers.indexes import (
    INDEX_NODECLASS_REF,
    INDEX_NODEPOOL,
    Index,
    index_nodeclass_ref,
    index_nodepool_label,
    nodeclass_ref_key,
)
from karpy.controllers.nodepool._clusterlimit import ClusterLimitStatus
from karpy.controllers.nodepool._counter import NodePoolCounter, status_resources
from karpy.controllers.nodepool._hash import NodePoolHash
from karpy.controllers.nodepool._objects import nodepool_of
from karpy.controllers.nodepool._readiness import NodePoolReadiness
from karpy.controllers.nodepool._validation import NodePoolValidation, validation_errors
from karpy.controllers.nodepool.registrationhealth import NodePoolRegistrationHealth
from karpy.runtime import GENERATION_CHANGED, Kind, Object, Predicate, Request, kinds
from karpy.state.kinds import CLUSTER_LIMIT, NODE_CLAIM, NODE_POOL

__all__ = [
    "ClusterLimitStatus",
    "NodePoolCounter",
    "NodePoolHash",
    "NodePoolReadiness",
    "NodePoolRegistrationHealth",
    "NodePoolValidation",
    "register",
    "status_resources",
    "validation_errors",
]


def _counted(obj: Mapping[str, Any]) -> tuple[Any, ...]:
    """What of a Node or NodeClaim the pool's sums depend on."""
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    return (
        (meta.get("labels") or {}).get("karpenter.sh/nodepool"),
        bool(meta.get("deletionTimestamp")),
        status.get("capacity"),
        status.get("providerID"),
        (obj.get("spec") or {}).get("providerID"),
        [(c.get("type"), c.get("status")) for c in status.get("conditions") or ()
         if c.get("type") in ("Launched", "Initialized")],
        (meta.get("labels") or {}).get("karpenter.sh/initialized"),
    )


#: Node/NodeClaim events that can change a pool's sums (not heartbeats or pod churn).
COUNTED_CHANGED = Predicate(update=lambda old, new: _counted(old) != _counted(new))


def _nodepools_using(index: Index, kind: Kind) -> Callable[[Object], Iterable[Request]]:
    """Maps a NodeClass of ``kind`` to the NodePools whose nodeClassRef names it."""

    def nodepools(node_class: Object) -> Iterable[Request]:
        ref = nodeclass_ref_key(kind.group, kind.kind, node_class["metadata"]["name"])
        return [Request("", np["metadata"]["name"])
                for np in index.by_index(NODE_POOL, INDEX_NODECLASS_REF, ref)]

    return nodepools


def _every_limit(deps: Deps) -> Callable[[Object], Iterable[Request]]:
    """Maps any event to every ClusterLimit (a cluster has a handful)."""
    def limits(_obj: Object) -> Iterable[Request]:
        return [Request("", e.name) for e in deps.cluster.cluster_limits.entries()]
    return limits


def register(deps: Deps) -> None:
    """Build the five NodePool controllers (and ``clusterlimit.status``, where
    ClusterLimits are watched) and add them to ``deps.manager``."""
    manager = deps.manager
    cache = manager.cache
    cache.informer(NODE_POOL, indexers={INDEX_NODECLASS_REF: index_nodeclass_ref})
    cache.informer(NODE_CLAIM, indexers={INDEX_NODEPOOL: index_nodepool_label})
    cache.informer(kinds.NODE)

    counter = NodePoolCounter(
        client=deps.client, cluster=deps.cluster, cloud_provider=deps.cloud_provider
    )
    (manager.controller(counter.name)
        .for_(NODE_POOL, predicate=GENERATION_CHANGED)
        .watches(NODE_CLAIM, nodepool_of, predicate=COUNTED_CHANGED)
        .watches(kinds.NODE, nodepool_of, predicate=COUNTED_CHANGED)
        .complete(counter, workers=4))

    readiness = NodePoolReadiness(
        client=deps.client, cloud_provider=deps.cloud_provider, clock=deps.clock
    )
    builder = manager.controller(readiness.name).for_(NODE_POOL, predicate=GENERATION_CHANGED)
    for node_class in deps.cloud_provider.supported_node_classes():
        builder = builder.watches(node_class, _nodepools_using(cache, node_class))
    builder.complete(readiness, workers=4)

    health = NodePoolRegistrationHealth(
        client=deps.client, cloud_provider=deps.cloud_provider, clock=deps.clock,
        health=deps.registration_health,
    )
    builder = manager.controller(health.name).for_(NODE_POOL, predicate=GENERATION_CHANGED)
    for node_class in deps.cloud_provider.supported_node_classes():
        builder = builder.watches(node_class, _nodepools_using(cache, node_class))
    builder.complete(health, workers=2)

    validation = NodePoolValidation(
        client=deps.client, cloud_provider=deps.cloud_provider, clock=deps.clock
    )
    (manager.controller(validation.name)
        .for_(NODE_POOL, predicate=GENERATION_CHANGED)
        .complete(validation, workers=2))

    hashing = NodePoolHash(client=deps.client, index=cache, cloud_provider=deps.cloud_provider)
    (manager.controller(hashing.name)
        .for_(NODE_POOL, predicate=GENERATION_CHANGED)
        .complete(hashing, workers=2))
    if deps.cluster.watches_cluster_limits:
        status = ClusterLimitStatus(client=deps.client, cluster=deps.cluster, clock=deps.clock)
        every = _every_limit(deps)
        (manager.controller(status.name)
            .for_(CLUSTER_LIMIT, predicate=GENERATION_CHANGED)
            .watches(NODE_POOL, every)
            .watches(NODE_CLAIM, every, predicate=COUNTED_CHANGED)
            .watches(kinds.NODE, every, predicate=COUNTED_CHANGED)
            .complete(status, workers=1))
