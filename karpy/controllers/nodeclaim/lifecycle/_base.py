"""What the lifecycle's sub-reconcilers share: the outcome they report to the parent,
their one-method shape, and the NodeClaim's conditions read against the injected clock."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Protocol

from karpy.apis import ConditionSet, NodeClaim
from karpy.apis.v1.nodeclaim import NodeClaimCondition
from karpy.runtime import Clock

__all__ = ["Outcome", "SubReconciler", "conditions", "log"]

log = logging.getLogger("controller")
"""Karpenter's lifecycle lines carry ``"logger": "controller"``."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one sub-reconciler asks of the parent."""

    requeue_after: float | None = None
    """Reconcile again within this many seconds (a deadline or a poll)."""
    requeue: bool = False
    """Reconcile again soon through the rate limiter (an optimistic-lock conflict)."""
    deleted: bool = False
    """The NodeClaim was deleted: stop, and write nothing back."""


class SubReconciler(Protocol):
    """One step of the lifecycle; edits ``nodeclaim`` in memory, the parent writes it."""

    async def reconcile(self, nodeclaim: NodeClaim) -> Outcome:
        """Advance this step; raise to retry the whole reconcile with backoff."""
        ...


def conditions(nodeclaim: NodeClaim, clock: Clock) -> ConditionSet[NodeClaimCondition]:
    """The NodeClaim's conditions, timestamped by ``clock`` to the second (as stored)."""
    return nodeclaim.status_conditions(now=lambda: clock.now().replace(microsecond=0))
