"""Multi-node consolidation: remove several nodes at once, replacing them by at most one
cheaper node (Karpenter's MultiNodeConsolidation) — or, beyond Karpenter, by M < N
cheaper nodes (``Settings.multi_node_split_consolidation``, "N into M").

Candidates are ordered by savings per unit of disruption; the method binary-searches
for the longest prefix (at most 100 nodes) that consolidates, within a time bound,
keeping the last prefix that worked. A single replacement may not be of a type the
candidates already run at a lower price (that would only shuffle pods around).
Whether N nodes fit on fewer is not monotone in N (two nodes may need two new ones
where three need two), so when the search finds nothing and N into M is on, the
longest prefix is tried once more on its own.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from karpy.apis.v1.nodepool import DisruptionReason
from karpy.controllers.disruption._candidates import GRACEFUL, Candidate
from karpy.controllers.disruption._command import Command, Decision
from karpy.controllers.disruption._consolidation import (
    BalancedVerdict,
    approved_message,
    balanced_verdict,
    consolidatable_reason,
    record_move,
)
from karpy.controllers.disruption._method import Context
from karpy.controllers.disruption._validation import ValidationFailure
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
        rejected: list[tuple[Command, BalancedVerdict]] = []
        command = await self._first_n(context, usable, rejected)
        if command is None:
            if rejected:
                # once per pass, the last (smallest) prefix the Balanced policy refused,
                # not every step of the search (Karpenter's EmitMultiNodeEvents)
                record_move(context.metrics, *rejected[-1])
            return []
        if command.decision is not Decision.NOOP:
            verdict = balanced_verdict(command, context.all_candidates, context.pool_totals)
            record_move(context.metrics, command, verdict)
            pools = {c.nodepool: c.pool.entry.raw for c in command.candidates}
            for pool, raw in pools.items():
                if (message := approved_message(verdict, pool)) is not None:
                    context.events.nodepool_approved(raw, message)
        for c in command.candidates:
            context.events.candidate(c.node, c.nodeclaim, command.for_node(c),
                                     command.estimated_savings)
        validated = await context.validate(command, self)
        if isinstance(validated, ValidationFailure):
            for c in command.candidates:
                context.events.rejected(c.node, c.nodeclaim, command.for_node(c),
                                        str(validated.kind))
            return []
        return [validated]

    async def _first_n(
        self,
        context: Context,
        candidates: list[Candidate],
        rejected: list[tuple[Command, BalancedVerdict]],
    ) -> Command | None:
        if len(candidates) < 2:
            return None
        low, high = 1, min(len(candidates), MAX_MULTI_NODE_CANDIDATES)
        if len(candidates) <= high:
            high = len(candidates) - 1
        deadline = context.clock.monotonic() + context.settings.multi_node_consolidation_timeout
        best: Command | None = None
        longest = high
        while low <= high:
            if context.clock.monotonic() > deadline:
                log.debug("stopping multi-node consolidation after timeout, returning last "
                          "valid command", extra={"last_batch_size": (low + high) // 2})
                break
            mid = (low + high) // 2
            outcome = self._try(context, candidates[: mid + 1], rejected)
            if outcome is not None:
                best = outcome
                low = mid + 1
            else:
                high = mid - 1
            await asyncio.sleep(0)  # a pass is long; let the other controllers run
        if (
            best is None and longest > 1 and context.settings.multi_node_split_consolidation
            and context.clock.monotonic() <= deadline
        ):
            best = self._try(context, candidates[: longest + 1], rejected)
        return best

    def _try(
        self,
        context: Context,
        prefix: Sequence[Candidate],
        rejected: list[tuple[Command, BalancedVerdict]],
    ) -> Command | None:
        outcome = consolidate(
            context.whatif, prefix,
            spot_to_spot=context.settings.feature_gates.spot_to_spot_consolidation,
            split=context.settings.multi_node_split_consolidation,
            consolidation_type=self.consolidation_type, exclude_own_types=True,
        )
        if not isinstance(outcome, Command):
            return None
        verdict = balanced_verdict(outcome, context.all_candidates, context.pool_totals)
        if verdict.approved:
            return outcome
        if outcome.decision is not Decision.NOOP:
            rejected.append((outcome, verdict))
        return None
