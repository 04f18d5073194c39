"""Node repair's policies and v1.14's repair controller.

:mod:`.policy` matches a node's conditions against the provider's repair policies (used
by the disruption method ``Unhealthy``, Karpenter v1.15's default). :mod:`.repair` is
v1.14's ``node.health`` controller, Karpenter v1.15's ``legacyrepair``: ``register(deps)``
adds it only with the ``NodeRepair`` gate on and ``LEGACY_NODE_REPAIR=true``.
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
    """Add ``node.health`` to the manager if the NodeRepair feature gate is on and
    LEGACY_NODE_REPAIR is true (else repair is a disruption method)."""
    if not (deps.settings.feature_gates.node_repair and deps.settings.legacy_node_repair):
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
