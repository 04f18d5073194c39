"""Single-node consolidation: remove one node, or replace it by something cheaper
(Karpenter's SingleNodeConsolidation) — or, beyond Karpenter, by several cheaper nodes
when its pods need more than one (split consolidation, see ``_whatif``).

Candidates go in savings order, interleaved across NodePools so that one large pool
cannot starve the others, NodePools the previous pass did not reach going first. The
pass stops at the first command found, or at its time bound.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from karpy.apis.v1.nodepool import DisruptionReason
from karpy.controllers.disruption._candidates import GRACEFUL, Candidate
from karpy.controllers.disruption._command import Command, Decision
from karpy.controllers.disruption._consolidation import (
    approved_message,
    balanced_verdict,
    consolidatable_reason,
    record_move,
)
from karpy.controllers.disruption._method import Context
from karpy.controllers.disruption._validation import ValidationFailure
from karpy.controllers.disruption._whatif import consolidate

__all__ = ["SingleNodeConsolidation", "interleave"]

log = logging.getLogger("controller")


def interleave(candidates: Sequence[Candidate], first: Sequence[str] = ()) -> list[Candidate]:
    """Round-robin over NodePools (each already in savings order); pools in ``first``
    lead each round."""
    by_pool: dict[str, list[Candidate]] = {}
    for c in candidates:
        by_pool.setdefault(c.nodepool, []).append(c)
    pools = [p for p in first if p in by_pool] + sorted(p for p in by_pool if p not in first)
    out: list[Candidate] = []
    for i in range(max((len(v) for v in by_pool.values()), default=0)):
        for pool in pools:
            if i < len(by_pool[pool]):
                out.append(by_pool[pool][i])
    return out


class SingleNodeConsolidation:
    """The ``Underutilized`` method, one node at a time."""

    reason: DisruptionReason = "Underutilized"
    disruption_class = GRACEFUL
    consolidation_type = "single"

    def __init__(self) -> None:
        self.unseen_pools: list[str] = []
        """NodePools the last pass timed out before reaching."""

    def should_disrupt(self, candidate: Candidate) -> bool | str:
        """Not empty, consolidatable, policy allows underutilized consolidation."""
        return consolidatable_reason(candidate, empty_only=False)

    async def compute(self, context: Context) -> Sequence[Command]:
        """The first candidate that consolidates, validated."""
        ordered = interleave(
            sorted(context.candidates, key=lambda c: (-c.savings_ratio, c.name)),
            self.unseen_pools,
        )
        deadline = context.clock.monotonic() + context.settings.single_node_consolidation_timeout
        unseen = list(dict.fromkeys(c.nodepool for c in ordered))
        gates = context.settings.feature_gates
        for i, candidate in enumerate(ordered):
            if context.clock.monotonic() > deadline:
                log.debug("abandoning single-node consolidation due to timeout",
                          extra={"candidates_evaluated": i})
                self.unseen_pools = unseen
                return []
            if candidate.nodepool in unseen:
                unseen.remove(candidate.nodepool)
            if context.budgets.left(candidate.nodepool) <= 0:
                continue
            outcome = consolidate(
                context.whatif, [candidate],
                spot_to_spot=gates.spot_to_spot_consolidation,
                split=context.settings.split_consolidation,
                consolidation_type=self.consolidation_type,
            )
            await asyncio.sleep(0)  # a pass is long; let the other controllers run
            if isinstance(outcome, str):
                context.events.unconsolidatable(candidate.node, candidate.nodeclaim, outcome)
                continue
            if outcome.decision is Decision.NOOP:
                continue
            verdict = balanced_verdict(outcome, context.all_candidates, context.pool_totals)
            record_move(context.metrics, outcome, verdict)
            if not verdict.approved:
                continue
            if (message := approved_message(verdict, candidate.nodepool)) is not None:
                context.events.approved(candidate.node, candidate.nodeclaim, message)
            context.events.candidate(candidate.node, candidate.nodeclaim, str(outcome),
                                     outcome.estimated_savings)
            validated = await context.validate(outcome, self)
            if isinstance(validated, ValidationFailure):
                context.events.rejected(candidate.node, candidate.nodeclaim, str(outcome),
                                        str(validated.kind))
                self.unseen_pools = []
                return []
            self.unseen_pools = []
            return [validated]
        self.unseen_pools = []
        return []
