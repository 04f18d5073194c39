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

from karpy.controllers.deps import Deps
from karpy.controllers.nodeclaim.consistency import Consistency
from karpy.controllers.nodeclaim.disruptionconditions import DisruptionConditions
from karpy.controllers.nodeclaim.expiration import Expiration
from karpy.controllers.nodeclaim.garbagecollection import GarbageCollector
from karpy.controllers.nodeclaim.lifecycle import LifecycleController
from karpy.controllers.nodeclaim.podevents import PodEvents

__all__ = [
    "Consistency",
    "DisruptionConditions",
    "Expiration",
    "GarbageCollector",
    "LifecycleController",
    "PodEvents",
    "register",
]


def register(deps: Deps) -> None:
    """Build the NodeClaim controllers and add them to the manager."""
    manager = deps.manager
    LifecycleController(
        client=deps.client,
        index=manager.cache,
        cloud_provider=deps.cloud_provider,
        recorder=deps.recorder,
        unavailable_offerings=deps.unavailable_offerings,
        settings=deps.settings,
        metrics=deps.metrics,
        clock=deps.clock,
        registration_health=deps.registration_health,
    ).register(manager)
    GarbageCollector(
        client=deps.client,
        index=manager.cache,
        cloud_provider=deps.cloud_provider,
        settings=deps.settings,
        metrics=deps.metrics,
        clock=deps.clock,
    ).register(manager)
    PodEvents(
        client=deps.client,
        index=manager.cache,
        cloud_provider=deps.cloud_provider,
        clock=deps.clock,
    ).register(manager)
    DisruptionConditions(
        client=deps.client,
        cloud_provider=deps.cloud_provider,
        recorder=deps.recorder,
        clock=deps.clock,
    ).register(manager)
    Expiration(
        client=deps.client,
        cloud_provider=deps.cloud_provider,
        metrics=deps.metrics,
        clock=deps.clock,
    ).register(manager)
    Consistency(
        client=deps.client,
        cloud_provider=deps.cloud_provider,
        recorder=deps.recorder,
        clock=deps.clock,
    ).register(manager)
