"""What the controller's two steps share: their one-method shape, the NodeClaim's
conditions read against the injected clock, and the logger."""

from __future__ import annotations

import logging
from typing import Protocol

from karpy.apis import ConditionSet, NodeClaim, NodePool
from karpy.apis.v1.nodeclaim import NodeClaimCondition
from karpy.runtime import Clock

__all__ = ["Step", "conditions", "log"]

log = logging.getLogger("controller")


class Step(Protocol):
    """One condition; edits ``nodeclaim`` in memory, the controller writes it."""

    async def reconcile(self, nodepool: NodePool, nodeclaim: NodeClaim) -> float | None:
        """Bring the condition up to date; return when to look again (seconds), if ever.
        Raise to retry with backoff (after the controller wrote what the others did)."""
        ...


def conditions(nodeclaim: NodeClaim, clock: Clock) -> ConditionSet[NodeClaimCondition]:
    """The NodeClaim's conditions, timestamped by ``clock`` to the second (as stored)."""
    return nodeclaim.status_conditions(now=lambda: clock.now().replace(microsecond=0))
