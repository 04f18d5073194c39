"""NodeClaim controllers: the lifecycle (launch, registration, initialization, liveness)
and garbage collection of machines without NodeClaims and NodeClaims without machines.

``register(deps)`` adds both to ``deps.manager``; ``conditionevents`` holds the helper
that records Karpenter's "Status condition transitioned" Events.
"""

from __future__ import annotations

from karpy.controllers.deps import Deps
from karpy.controllers.nodeclaim.garbagecollection import GarbageCollector
from karpy.controllers.nodeclaim.lifecycle import LifecycleController

__all__ = ["GarbageCollector", "LifecycleController", "register"]


def register(deps: Deps) -> None:
    """Build the lifecycle and garbage-collection controllers and add them to the manager."""
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
    ).register(manager)
    GarbageCollector(
        client=deps.client,
        index=manager.cache,
        cloud_provider=deps.cloud_provider,
        settings=deps.settings,
        metrics=deps.metrics,
        clock=deps.clock,
    ).register(manager)
