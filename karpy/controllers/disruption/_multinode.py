"""Multi-node consolidation: remove several nodes at once, replacing them by at most one
cheaper node (Karpenter's MultiNodeConsolidation).

Candidates are ordered by savings per unit of disruption; the method binary-searches
for the longest prefix (at most 100 nodes) that consolidates, within a time bound,
keeping the last prefix that worked. A replacement may not be of a type the
candidates already run at a lower price (that would only shuffle pods around).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from karpy.apis.v1.nodepool import DisruptionReason
from karpy.controllers.disruption._candidates import GRACEFUL, Candidate
from karpy.controllers.disruption._command import Command
from karpy.controllers.disruption._consolidation import balanced_approves, consolidatable_reason
from karpy.controllers.disruption._method import Context
from karpy.controllers.disruption._whatif import consolidate

__all__ = ["MAX_MULTI_NODE_CANDIDATES", "MultiNodeConsolidation"]

log = logging.getLogger("controller")

MAX_MULTI_NODE_CANDIDATES = 100


class MultiNodeConsolidation:
    """The ``Underutilized`` method over many nodes at once."""

    reason: DisruptionReason = "Underutilized"
    disruption_class = GRACEFUL
    consolidation_type = "multi"

    def should_disrupt(self, candidate: Candidate) -> bool | str:
        """Not empty, consolidatable, policy allows underutilized consolidation."""
        return consolidatable_reason(candidate, empty_only=False)

    async def compute(self, context: Context) -> Sequence[Command]:
        """At most one command: the largest prefix of candidates that consolidates."""
        ordered = sorted(context.candidates, key=lambda c: (-c.savings_ratio, c.name))
        usable = [c for c in ordered if context.budgets.take(c.nodepool)]
        command = await self._first_n(context, usable)
        if command is None:
            return []
        for c in command.candidates:
            context.events.candidate(c.node, c.nodeclaim, command.for_node(c),
                                     command.estimated_savings)
        validated = await context.validate(command, self)
        if isinstance(validated, str):
            for c in command.candidates:
                context.events.rejected(c.node, c.nodeclaim, command.for_node(c), validated)
            return []
        return [validated]

    async def _first_n(self, context: Context, candidates: list[Candidate]) -> Command | None:
        if len(candidates) < 2:
            return None
        low, high = 1, min(len(candidates), MAX_MULTI_NODE_CANDIDATES)
        if len(candidates) <= high:
            high = len(candidates) - 1
        deadline = context.clock.monotonic() + context.settings.multi_node_consolidation_timeout
        best: Command | None = None
        while low <= high:
            if context.clock.monotonic() > deadline:
                log.debug("stopping multi-node consolidation after timeout, returning last "
                          "valid command", extra={"last_batch_size": (low + high) // 2})
                break
            mid = (low + high) // 2
            prefix = candidates[: mid + 1]
            outcome = consolidate(
                context.whatif, prefix, spot_to_spot=context.settings.feature_gates.
                spot_to_spot_consolidation, split=False, consolidation_type=self.consolidation_type,
                exclude_own_types=True,
            )
            valid = isinstance(outcome, Command) and balanced_approves(
                outcome, context.all_candidates
            )
            if valid:
                assert isinstance(outcome, Command)
                best = outcome
                low = mid + 1
            else:
                high = mid - 1
            await asyncio.sleep(0)  # a pass is long; let the other controllers run
        return best
