"""NodeClaim controllers: the lifecycle (launch, registration, initialization, liveness),
garbage collection of machines without NodeClaims and NodeClaims without machines,
``nodeclaim.podevents`` (``status.lastPodEventTime``, from which consolidateAfter counts),
``nodeclaim.disruption`` (the Drifted and Consolidatable conditions) and
``nodeclaim.expiration`` (NodeClaims past their ``expireAfter`` are deleted) and
``nodeclaim.consistency`` (FailedConsistencyCheck when a Node is smaller than expected).

``register(deps)`` adds them to ``deps.manager``; ``conditionevents`` holds the helper
that records Karpenter's "Status condition transitioned" Events.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final

from karpy.controllers.deps import Deps
from karpy.controllers.indexes import (
    INDEX_NODECLASS_REF,
    INDEX_NODEPOOL,
    index_nodeclass_ref,
    index_nodepool_label,
    index_provider_ids,
    nodeclass_ref_key,
)
from karpy.controllers.nodeclaim.consistency import Consistency
from karpy.controllers.nodeclaim.disruptionconditions import DisruptionConditions
from karpy.controllers.nodeclaim.disruptionconditions.controller import NODEPOOL_CHANGED
from karpy.controllers.nodeclaim.expiration import Expiration
from karpy.controllers.nodeclaim.garbagecollection import GarbageCollector
from karpy.controllers.nodeclaim.lifecycle import LifecycleController
from karpy.controllers.nodeclaim.lifecycle.controller import WORKERS as _LIFECYCLE_WORKERS
from karpy.controllers.nodeclaim.podevents import POD_EVENTS, PodEvents
from karpy.runtime import Cache, Object, Request, kinds
from karpy.runtime.ratelimit import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
)
from karpy.state.kinds import NODE_CLAIM, NODE_POOL

__all__ = [
    "Consistency",
    "DisruptionConditions",
    "Expiration",
    "GarbageCollector",
    "LifecycleController",
    "PodEvents",
    "register",
]


_PODEVENTS_WORKERS: Final = 10
_DISRUPTION_WORKERS: Final = 10
_EXPIRATION_WORKERS: Final = 10
_CONSISTENCY_WORKERS: Final = 2


def register(deps: Deps) -> None:
    """Build the NodeClaim controllers and add them, with their watches, to the manager."""
    manager = deps.manager
    cache = manager.cache
    index_provider_ids(cache)

    lifecycle = LifecycleController(
        client=deps.client,
        index=cache,
        cloud_provider=deps.cloud_provider,
        recorder=deps.recorder,
        unavailable_offerings=deps.unavailable_offerings,
        settings=deps.settings,
        metrics=deps.metrics,
        clock=deps.clock,
        registration_health=deps.registration_health,
        # Karpenter waits for requested DRA drivers only with IGNORE_DRA_REQUESTS off.
        dra_drivers_on=(None if deps.settings.ignore_dra_requests
                        else deps.cluster.devices.drivers_on),
    )
    limiter: MaxOfRateLimiter[Request] = MaxOfRateLimiter(
        # Karpenter's: 1 s doubling to 1 min per NodeClaim, and an overall bucket.
        ItemExponentialFailureRateLimiter(base_delay=1.0, max_delay=60.0),
        BucketRateLimiter(qps=10.0, burst=100, clock=manager.clock),
    )
    (manager.controller(lifecycle.name)
        .for_(NODE_CLAIM)
        .watches(kinds.NODE, lifecycle.nodeclaims_for_node)
        .complete(lifecycle, workers=_LIFECYCLE_WORKERS, rate_limiter=limiter))

    collector = GarbageCollector(
        client=deps.client,
        index=cache,
        cloud_provider=deps.cloud_provider,
        settings=deps.settings,
        metrics=deps.metrics,
        clock=deps.clock,
    )
    manager.singleton(collector.name, collector, period=deps.settings.garbage_collection_period)

    podevents = PodEvents(
        client=deps.client,
        index=cache,
        cloud_provider=deps.cloud_provider,
        clock=deps.clock,
    )
    (manager.controller(podevents.name)
        .for_(kinds.POD, predicate=POD_EVENTS)
        .complete(podevents, workers=_PODEVENTS_WORKERS))

    disruption = DisruptionConditions(
        client=deps.client,
        cloud_provider=deps.cloud_provider,
        recorder=deps.recorder,
        clock=deps.clock,
    )
    cache.informer(NODE_CLAIM, indexers={
        INDEX_NODEPOOL: index_nodepool_label, INDEX_NODECLASS_REF: index_nodeclass_ref,
    })
    # Woken by their NodeClaims, their NodePool's spec and annotations, their NodeClass.
    builder = (
        manager.controller(disruption.name)
        .for_(NODE_CLAIM)
        .watches(NODE_POOL, _nodeclaims_by(cache, INDEX_NODEPOOL, _name),
                 predicate=NODEPOOL_CHANGED)
    )
    for node_class in deps.cloud_provider.supported_node_classes():
        builder = builder.watches(
            node_class, _nodeclaims_by(cache, INDEX_NODECLASS_REF,
                                       _ref_of(node_class.group, node_class.kind))
        )
    builder.complete(disruption, workers=_DISRUPTION_WORKERS)

    expiration = Expiration(
        client=deps.client,
        cloud_provider=deps.cloud_provider,
        metrics=deps.metrics,
        clock=deps.clock,
    )
    (manager.controller(expiration.name)
        .for_(NODE_CLAIM)
        .complete(expiration, workers=_EXPIRATION_WORKERS))

    consistency = Consistency(
        client=deps.client,
        cloud_provider=deps.cloud_provider,
        recorder=deps.recorder,
        clock=deps.clock,
    )
    (manager.controller(consistency.name)
        .for_(NODE_CLAIM)
        .complete(consistency, workers=_CONSISTENCY_WORKERS))


def _name(obj: Object) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _ref_of(group: str, kind: str) -> Callable[[Object], str]:
    """The nodeClassRef index value naming a NodeClass object of this kind."""
    return lambda obj: nodeclass_ref_key(group, kind, _name(obj))


def _nodeclaims_by(
    cache: Cache, index: str, value: Callable[[Object], str]
) -> Callable[[Object], Iterable[Request]]:
    def nodeclaims(obj: Object) -> Iterable[Request]:
        return [Request("", nc["metadata"]["name"])
                for nc in cache.by_index(NODE_CLAIM, index, value(obj))]

    return nodeclaims
