"""Node repair (``node.health``): replace nodes the cloud provider's repair policies call
unhealthy, behind the ``NodeRepair`` feature gate (``Settings.feature_gates.node_repair``).

``register(deps)`` adds the controller only when the gate is on, as Karpenter does;
:mod:`.repair` holds the controller and says what it does.
"""

from __future__ import annotations

from karpy.controllers.deps import Deps
from karpy.controllers.nodehealth.repair import ALLOWED_UNHEALTHY_PERCENT, NodeHealth

__all__ = ["ALLOWED_UNHEALTHY_PERCENT", "NodeHealth", "register"]


def register(deps: Deps) -> None:
    """Add ``node.health`` to the manager if the NodeRepair feature gate is on."""
    if not deps.settings.feature_gates.node_repair:
        return
    NodeHealth(
        client=deps.client,
        index=deps.manager.cache,
        cloud_provider=deps.cloud_provider,
        recorder=deps.recorder,
        metrics=deps.metrics,
        clock=deps.clock,
    ).register(deps.manager)
