"""Termination: how karpy gives a node back — Karpenter's node.termination,
nodeclaim termination and eviction queue.

Deleting a managed Node or NodeClaim (both held by the ``karpenter.sh/termination``
finalizer) takes the machine down without losing anything a user created:

* ``nodeclaim.termination`` keeps the finalizer on every managed NodeClaim, and on
  deletion annotates the terminationGracePeriod's end, deletes the Node, waits for it,
  deletes the instance and lets the NodeClaim go;
* ``node.termination`` deletes the Node's NodeClaim too, taints the Node
  ``karpenter.sh/disrupted:NoSchedule``, drains it, waits for volumes to detach, deletes
  the instance, and lets the Node go;
* ``eviction-queue`` evicts the pods a drain hands it through the Eviction API
  (PodDisruptionBudgets respected; a refused eviction is retried after
  ``Settings.eviction_retry``), or deletes them when the grace period forces it.

These controllers and NodeClaim garbage collection (``nodeclaim.garbagecollection``,
for instances no NodeClaim carries) are the only callers of ``CloudProvider.delete``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final

from karpy.controllers.deps import Deps
from karpy.controllers.indexes import Index, index_provider_ids
from karpy.controllers.surge import SurgeBeforeEvict
from karpy.controllers.termination._eviction import EvictionQueue
from karpy.controllers.termination._node import NodeTermination
from karpy.controllers.termination._nodeclaim import NodeClaimTermination
from karpy.controllers.termination._objects import (
    INDEX_NODE_NAME,
    INDEX_VA_NODE_NAME,
    index_by_node_name,
    index_va_node_name,
    nodeclaims_for_node,
    nodes_for_nodeclaim,
)
from karpy.controllers.termination._terminator import DrainError, Terminator
from karpy.runtime import Controller, Object, Predicate, Request, kinds, predicate_from
from karpy.runtime.ratelimit import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
)
from karpy.state import NodePoolEntry
from karpy.state.kinds import NODE_CLAIM

__all__ = [
    "DrainError",
    "EvictionQueue",
    "NodeClaimTermination",
    "NodeTermination",
    "Terminator",
    "register",
]

_NODE_WORKERS: Final = 10
_NODECLAIM_WORKERS: Final = 10
_EVICTION_WORKERS: Final = 20


def _deleting(obj: Object) -> bool:
    return bool(obj["metadata"].get("deletionTimestamp"))


def _nodes_of(index: Index) -> Callable[[Object], Iterable[Request]]:
    def nodes(nodeclaim: Object) -> Iterable[Request]:
        return [Request("", n["metadata"]["name"]) for n in nodes_for_nodeclaim(index, nodeclaim)]

    return nodes


def _nodeclaims_of(index: Index) -> Callable[[Object], Iterable[Request]]:
    def nodeclaims(node: Object) -> Iterable[Request]:
        return [Request("", c["metadata"]["name"]) for c in nodeclaims_for_node(index, node)]

    return nodeclaims


def _raw(entry: NodePoolEntry | None) -> Object | None:
    return None if entry is None else entry.raw


def register(deps: Deps) -> None:
    """Build node.termination, nodeclaim.termination and the eviction queue; add them
    (and the cache indexes they read through) to ``deps.manager``."""
    manager = deps.manager
    cache = manager.cache
    cache.informer(kinds.POD, indexers={INDEX_NODE_NAME: index_by_node_name})
    index_provider_ids(cache)
    cache.informer(kinds.VOLUME_ATTACHMENT, indexers={INDEX_VA_NODE_NAME: index_va_node_name})

    queue = EvictionQueue(
        client=deps.client, index=cache, recorder=deps.recorder, clock=deps.clock,
        metrics=deps.metrics, retry=deps.settings.eviction_retry,
        surge=SurgeBeforeEvict(client=deps.client, recorder=deps.recorder,
                               nodepools=lambda name: _raw(deps.cluster.nodepool(name))),
    )
    eviction: Controller[Request] = Controller(
        queue.name, queue, workers=_EVICTION_WORKERS, clock=manager.clock,
        metrics=manager.metrics,
        rate_limiter=MaxOfRateLimiter(
            ItemExponentialFailureRateLimiter(base_delay=0.1, max_delay=10.0),
            BucketRateLimiter(qps=100.0, burst=1000, clock=manager.clock),
        ),
    )
    # The controller replaces its queue when restarted, so look it up on every add.
    queue.enqueue = lambda request: eviction.queue.add(request)
    manager.add(eviction)

    terminator = Terminator(client=deps.client, index=cache, queue=queue, clock=deps.clock)
    node = NodeTermination(
        client=deps.client, index=cache, cloud_provider=deps.cloud_provider,
        terminator=terminator, recorder=deps.recorder, clock=deps.clock, metrics=deps.metrics,
    )
    (manager.controller(node.name)
        .for_(kinds.NODE, predicate=predicate_from(_deleting))
        .watches(NODE_CLAIM, _nodes_of(cache), predicate=predicate_from(_deleting))
        .complete(node, workers=_NODE_WORKERS))

    nodeclaim = NodeClaimTermination(
        client=deps.client, index=cache, cloud_provider=deps.cloud_provider,
        recorder=deps.recorder, clock=deps.clock, metrics=deps.metrics,
    )
    node_gone = Predicate(create=lambda _o: False, update=lambda _a, _b: False)
    (manager.controller(nodeclaim.name)
        .for_(NODE_CLAIM)
        .watches(kinds.NODE, _nodeclaims_of(cache), predicate=node_gone)
        .complete(nodeclaim, workers=_NODECLAIM_WORKERS))
