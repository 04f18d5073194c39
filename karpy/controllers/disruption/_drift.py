"""Drift: replace nodes whose NodeClaim is ``Drifted`` (Karpenter's Drift method).

The condition is set by ``nodeclaim.disruption``. Candidates go oldest drift first,
empty ones before others; the first one within budget whose pods all fit somewhere
(existing capacity, or the replacements it needs) becomes the command. Drift is
eventual disruption: with a terminationGracePeriod on the NodeClaim, pods protected by
do-not-disrupt or PDBs do not block it (termination forces them at the deadline).

A NodeClaim annotated ``karpy.dev/drift-cost-checked: "true"`` (a provider drifted it
early, before it has to go: karpy-aws on a spot rebalance recommendation) is replaced
only when its replacements cost no more per hour than it does, as consolidation checks;
otherwise it is blocked with a DisruptionBlocked event naming both prices, and stays
until it drifts for good or is interrupted.
"""

from __future__ import annotations

from collections.abc import Sequence

from karpy.apis.annotations import ANNOTATION_DRIFT_COST_CHECKED
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
            dearer = _dearer(candidate, sum(p.price for p in simulation.new_nodeclaims))
            if dearer is not None:
                context.events.blocked(candidate.node, candidate.nodeclaim, dearer)
                continue
            return [Command(
                reason=self.reason, consolidation_type=self.consolidation_type,
                candidates=[candidate], replacements=list(simulation.new_nodeclaims),
                results=simulation.results,
            )]
        return []


def _dearer(candidate: Candidate, replacing: float) -> str | None:
    """Why a cost-checked drift replacement is refused (None: it is not dearer, or the
    NodeClaim is not cost-checked, or its own price is unknown)."""
    annotations = (candidate.nodeclaim.get("metadata") or {}).get("annotations") or {}
    if annotations.get(ANNOTATION_DRIFT_COST_CHECKED) != "true" or candidate.price <= 0:
        return None
    if replacing <= candidate.price:
        return None
    return (f"Replacement would cost more than the node (${replacing:.4f}/h > "
            f"${candidate.price:.4f}/h), and its drift is cost-checked")
