"""Node repair (``node.health``): replace nodes the cloud provider's repair policies call
unhealthy, behind the ``NodeRepair`` feature gate (``Settings.feature_gates.node_repair``).

``register(deps)`` adds the controller only when the gate is on, as Karpenter does;
:mod:`.repair` holds the controller and says what it does.
"""

from __future__ import annotations

from typing import Final

from karpy.controllers.deps import Deps
from karpy.controllers.indexes import index_provider_ids
from karpy.controllers.nodehealth.repair import (
    ALLOWED_UNHEALTHY_PERCENT,
    CONDITIONS_CHANGED,
    NodeHealth,
)
from karpy.runtime import kinds

__all__ = ["ALLOWED_UNHEALTHY_PERCENT", "NodeHealth", "register"]

_WORKERS: Final = 10


def register(deps: Deps) -> None:
    """Add ``node.health`` to the manager if the NodeRepair feature gate is on."""
    if not deps.settings.feature_gates.node_repair:
        return
    manager = deps.manager
    index_provider_ids(manager.cache)
    health = NodeHealth(
        client=deps.client,
        index=manager.cache,
        cloud_provider=deps.cloud_provider,
        recorder=deps.recorder,
        metrics=deps.metrics,
        clock=deps.clock,
    )
    # Nodes whose conditions changed.
    (manager.controller(health.name)
        .for_(kinds.NODE, predicate=CONDITIONS_CHANGED)
        .complete(health, workers=_WORKERS))
