"""StaticDrift: replace a static NodePool's drifted nodes one for one (Karpenter v1.8).

A static NodePool's node is not a home for pods the simulator could move elsewhere, so
Drift's what-if does not apply: each drifted node gets a replacement made from the
NodePool's template (:func:`karpy.controllers.static.static_plan`), and is removed once
that replacement is initialized. As many go at once as the NodePool's Drifted budget
allows and ``limits.nodes`` leaves room for the replacements; nothing is replaced while
the NodePool is still scaling down.
"""

from __future__ import annotations

from collections.abc import Sequence

from karpy.apis.conditions import condition_is_true
from karpy.apis.v1 import CONDITION_DRIFTED
from karpy.apis.v1.nodepool import DisruptionReason
from karpy.controllers.disruption._candidates import EVENTUAL, Candidate
from karpy.controllers.disruption._command import Command
from karpy.controllers.disruption._method import Context
from karpy.controllers.static import count_replicas, node_limit, static_plan
from karpy.state import Cluster

__all__ = ["StaticDrift"]


class StaticDrift:
    """The ``Drifted`` method for static NodePools."""

    reason: DisruptionReason = "Drifted"
    disruption_class = EVENTUAL
    consolidation_type = ""

    def __init__(self, cluster: Cluster) -> None:
        self._cluster = cluster

    def should_disrupt(self, candidate: Candidate) -> bool | str:
        """A static NodePool's NodeClaim that is Drifted."""
        if not candidate.static:
            return False
        return condition_is_true(candidate.nodeclaim, CONDITION_DRIFTED)

    async def compute(self, context: Context) -> Sequence[Command]:
        """A replace command per drifted node the budgets and the node limit allow."""
        by_pool: dict[str, list[Candidate]] = {}
        for candidate in sorted(
            context.candidates, key=lambda c: (c.condition_time(CONDITION_DRIFTED), c.name)
        ):
            by_pool.setdefault(candidate.nodepool, []).append(candidate)
        commands: list[Command] = []
        for pool, candidates in sorted(by_pool.items()):
            entry = candidates[0].pool.entry
            count = count_replicas(self._cluster, pool)
            if entry.replicas is None or count.total > entry.replicas:
                continue  # scale-down first, as Karpenter does
            room = node_limit(entry) - count.total
            for candidate in candidates[: max(room, 0)]:
                if not context.budgets.take(pool):
                    break
                commands.append(Command(
                    reason=self.reason, consolidation_type=self.consolidation_type,
                    candidates=[candidate], replacements=[static_plan(entry)],
                ))  # fmt: skip
        return commands
