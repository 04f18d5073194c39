"""Drift: replace nodes whose NodeClaim is ``Drifted`` (Karpenter's Drift method).

The condition is set by ``nodeclaim.disruption``. Candidates go oldest drift first,
empty ones before others; the first one within budget whose pods all fit somewhere
(existing capacity, or the replacements it needs) becomes the command. Drift is
eventual disruption: with a terminationGracePeriod on the NodeClaim, pods protected by
do-not-disrupt or PDBs do not block it (termination forces them at the deadline).
"""

from __future__ import annotations

from collections.abc import Sequence

from karpy.apis.conditions import condition_is_true
from karpy.apis.v1 import CONDITION_DRIFTED
from karpy.apis.v1.nodepool import DisruptionReason
from karpy.controllers.disruption._candidates import EVENTUAL, Candidate
from karpy.controllers.disruption._command import Command
from karpy.controllers.disruption._events import sentence
from karpy.controllers.disruption._method import Context

__all__ = ["Drift"]


class Drift:
    """The ``Drifted`` method."""

    reason: DisruptionReason = "Drifted"
    disruption_class = EVENTUAL
    consolidation_type = ""

    def should_disrupt(self, candidate: Candidate) -> bool | str:
        """The NodeClaim is Drifted (a static NodePool's node is StaticDrift's)."""
        if candidate.static:
            return False
        return condition_is_true(candidate.nodeclaim, CONDITION_DRIFTED)

    async def compute(self, context: Context) -> Sequence[Command]:
        """Replace the longest-drifted candidate the budgets and the cluster allow."""
        ordered = sorted(
            context.candidates,
            # Karpenter puts candidates without reschedulable pods first (not IsEmpty).
            key=lambda c: (bool(c.pods), c.condition_time(CONDITION_DRIFTED), c.name),
        )
        for candidate in ordered:
            if context.budgets.left(candidate.nodepool) <= 0:
                continue
            simulation = context.whatif.simulate([candidate], consolidation=False)
            if not simulation.all_scheduled:
                context.events.blocked(candidate.node, candidate.nodeclaim,
                                       sentence("; ".join(simulation.errors[:3])))
                continue
            return [Command(
                reason=self.reason, consolidation_type=self.consolidation_type,
                candidates=[candidate], replacements=list(simulation.new_nodeclaims),
                results=simulation.results,
            )]
        return []
