"""Repair: replace unhealthy nodes as a voluntary disruption method (Karpenter v1.15.0
``disruption/repair.go``; on with the ``NodeRepair`` gate unless ``LEGACY_NODE_REPAIR``).

A candidate is a node one of the provider's repair policies is eligible for
(:mod:`karpy.controllers.nodehealth.policy`). Unlike v1.14's ``node.health``, repair now:

- is paced by the NodePools' budgets for the reason ``Unhealthy`` (an uninitialized node
  needs no budget: it runs nothing to protect), and a node merely not Ready does not use
  that budget up;
- launches the replacement first, like drift: the what-if makes room for every pod on
  the node, blocked ones included, and the command waits for the replacements;
- goes highest score first (the policy's priority rank plus its age), then lowest
  disruption cost, then name; one command per pass;
- stops for a NodePool with more than 20 % of its nodes (rounded up) under a repair
  policy's condition, whatever its toleration (a ``NodeRepairBlocked`` warning);
- is not blocked by ``karpenter.sh/do-not-disrupt``, but ``karpenter.sh/do-not-repair:
  "true"`` blocks it (a ``DisruptionBlocked`` event once a policy is eligible); a node
  whose pods block eviction is repaired only with a drain bound — the policy's
  ``termination_grace_period`` (min with the NodeClaim's) or the NodeClaim's own;
- stamps that bound as the termination deadline just before deleting the NodeClaim.

Not yet as upstream: a ``RebootNode`` policy is carried out as a replacement (karpy has
no reboot controller yet); a static NodePool's node is left to its own controller
(upstream mirrors static drift); terminate-first (``TerminateFirstRepair``) is not
implemented (docs/operating.md). Policy regexes use Python's ``re``, not Go's RE2.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Sequence
from datetime import timedelta

from karpy.apis.annotations import ANNOTATION_DO_NOT_REPAIR
from karpy.apis.duration import parse_duration
from karpy.apis.v1.nodepool import DisruptionReason
from karpy.controllers.disruption._candidates import REPAIR, Candidate
from karpy.controllers.disruption._command import Command
from karpy.controllers.disruption._events import DisruptionEvents, sentence
from karpy.controllers.disruption._method import Context
from karpy.controllers.nodehealth.policy import RepairPolicyMatcher, RepairResult
from karpy.runtime import Clock
from karpy.state.statenode import StateNode

__all__ = ["UNHEALTHY_THRESHOLD_PERCENT", "Repair"]

log = logging.getLogger("controller")

UNHEALTHY_THRESHOLD_PERCENT = 20
"""Repair stops for a NodePool with more than this share of its nodes unhealthy."""


class Repair:
    """The ``Unhealthy`` method (see the module docstring)."""

    reason: DisruptionReason = "Unhealthy"
    disruption_class = REPAIR
    consolidation_type = ""

    def __init__(
        self,
        *,
        matcher: RepairPolicyMatcher,
        clock: Clock,
        events: DisruptionEvents,
        nodes: Callable[[], Iterable[StateNode]],
    ) -> None:
        self._matcher = matcher
        self._clock = clock
        self._events = events
        self._nodes = nodes
        self._results: dict[str, RepairResult] = {}

    def should_disrupt(self, candidate: Candidate) -> bool | str:
        """A repair policy is eligible for the node, do-not-repair does not veto it, and
        blocking pods (if any) have a drain bound."""
        if candidate.static or candidate.node is None:
            return False
        result = self._matcher.resolve(candidate.node, self._clock.now())
        if result is None:
            self._results.pop(candidate.name, None)
            return False
        self._results[candidate.name] = result
        if _annotations(candidate.node).get(ANNOTATION_DO_NOT_REPAIR) == "true" or (
            _annotations(candidate.nodeclaim).get(ANNOTATION_DO_NOT_REPAIR) == "true"
        ):
            self._events.blocked(
                candidate.node, candidate.nodeclaim,
                f'repair is blocked through the "{ANNOTATION_DO_NOT_REPAIR}" annotation',
            )  # fmt: skip
            return False
        if (
            candidate.pod_blockers
            and result.termination_grace_period is None
            and _nodeclaim_grace(candidate) is None
        ):
            self._events.blocked(
                candidate.node, candidate.nodeclaim,
                "repair requires a termination grace period to bypass blocking pods",
            )  # fmt: skip
            return False
        return True

    async def compute(self, context: Context) -> Sequence[Command]:
        """One command: the highest-scoring candidate the breaker, the budgets and the
        cluster allow, with its replacements."""
        now = self._clock.now()
        scored = [(self._results[c.name], c) for c in context.candidates if c.name in self._results]
        scored.sort(key=lambda rc: (-rc[0].score_at(now), rc[1].disruption_cost, rc[1].name))
        tripped = self.tripped_nodepools()
        for result, candidate in scored:
            if candidate.nodepool in tripped:
                self._events.repair_blocked(
                    candidate.node, candidate.nodeclaim, candidate.pool.entry.raw,
                    f"more than {UNHEALTHY_THRESHOLD_PERCENT}% of nodes in nodepool "
                    f'"{candidate.nodepool}" are unhealthy',
                )  # fmt: skip
                continue
            if candidate.state.initialized and context.budgets.left(candidate.nodepool) <= 0:
                continue
            simulation = context.whatif.simulate([candidate], consolidation=False)
            if not simulation.all_scheduled:
                context.events.blocked(
                    candidate.node, candidate.nodeclaim, sentence("; ".join(simulation.errors[:3]))
                )
                continue
            bound = drain_bound(result, _nodeclaim_grace(candidate))
            log.info("selected repair policy", extra={
                "Node": {"name": candidate.name}, **result.log_values()})  # fmt: skip
            return [Command(
                reason=self.reason, consolidation_type=self.consolidation_type,
                candidates=[candidate], replacements=list(simulation.new_nodeclaims),
                results=simulation.results,
                drain_bounds={} if bound is None else {candidate.state.nodeclaim_name: bound},
                repaired_conditions={candidate.state.nodeclaim_name: result.condition},
            )]  # fmt: skip
        return []

    def tripped_nodepools(self) -> set[str]:
        """NodePools with more than 20 % (rounded up) of their nodes under a repair
        policy's condition type and status, toleration or not."""
        total: dict[str, int] = {}
        unhealthy: dict[str, int] = {}
        for state in self._nodes():
            if state.node is None or not state.nodepool:
                continue
            total[state.nodepool] = total.get(state.nodepool, 0) + 1
            conditions = (state.node.get("status") or {}).get("conditions") or ()
            if any(self._matcher.matches(c) for c in conditions):
                unhealthy[state.nodepool] = unhealthy.get(state.nodepool, 0) + 1
        return {
            pool for pool, count in total.items()
            if unhealthy.get(pool, 0) > math.ceil(count * UNHEALTHY_THRESHOLD_PERCENT / 100)
        }  # fmt: skip


def drain_bound(result: RepairResult, nodeclaim_grace: timedelta | None) -> timedelta | None:
    """min(the policies' bound, the NodeClaim's terminationGracePeriod); None when the
    policies set none (the NodeClaim's own bound, if any, applies as for any deletion)."""
    if result.termination_grace_period is None:
        return None
    if nodeclaim_grace is not None and nodeclaim_grace < result.termination_grace_period:
        return nodeclaim_grace
    return result.termination_grace_period


def _nodeclaim_grace(candidate: Candidate) -> timedelta | None:
    text = ((candidate.nodeclaim or {}).get("spec") or {}).get("terminationGracePeriod")
    if not text:
        return None
    try:
        return parse_duration(str(text))
    except ValueError:
        return None


def _annotations(obj: object) -> dict[str, str]:
    if not isinstance(obj, dict):
        return {}
    return dict((obj.get("metadata") or {}).get("annotations") or {})
