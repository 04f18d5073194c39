"""Emptiness: delete nodes that hold no pods needing a home, once their NodePool's
consolidateAfter has passed (Karpenter's Emptiness method).

All empty candidates within budget go in one command, which is re-validated after the
validation delay: candidates that gained pods, were nominated, or no longer fit the
budget are dropped, the rest deleted.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from karpy.apis.v1.nodepool import DisruptionReason
from karpy.controllers.disruption._candidates import GRACEFUL, Candidate
from karpy.controllers.disruption._command import Command
from karpy.controllers.disruption._consolidation import consolidatable_reason
from karpy.controllers.disruption._method import Context
from karpy.controllers.disruption._validation import ValidationFailure

__all__ = ["Emptiness"]

log = logging.getLogger("controller")


class Emptiness:
    """The ``Empty`` method."""

    reason: DisruptionReason = "Empty"
    disruption_class = GRACEFUL
    consolidation_type = "empty"

    def should_disrupt(self, candidate: Candidate) -> bool | str:
        """Empty, consolidatable, consolidation enabled."""
        return consolidatable_reason(candidate, empty_only=True)

    async def compute(self, context: Context) -> Sequence[Command]:
        """One command deleting every empty candidate the budgets allow."""
        ordered = sorted(context.candidates, key=lambda c: (-c.savings_ratio, c.name))
        empty: list[Candidate] = []
        for c in ordered:
            # A node with no pods may still be what keeps a CapacityBuffer's headroom.
            if (c.empty and context.whatif.keeps_buffer_without([*empty, c])
                    and context.budgets.take(c.nodepool)):
                empty.append(c)
        if not empty:
            return []
        command = Command(reason=self.reason, consolidation_type=self.consolidation_type,
                          candidates=empty)
        validated = await context.validate(command, self)
        if isinstance(validated, ValidationFailure):
            log.debug(
                "abandoning empty node consolidation attempt due to pod churn, command is "
                "no longer valid", extra={**command.log_values(), "error": str(validated)},
            )
            return []
        return [validated]
