"""Disruption budgets: how many more of each NodePool's nodes may be disrupted now.

For one disruption reason, a NodePool allows the fewest disruptions any of its active
budgets allows for that reason (``NodePool.allowed_disruptions``: a percentage of its
nodes rounded up, a cron window in UTC, the reasons it lists), and nodes already going
away or not Ready use that allowance up: what is left is ``allowed - disrupting``,
never below zero (Karpenter's BuildDisruptionBudgetMapping).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from karpy.apis.conditions import condition_is_true
from karpy.apis.v1 import CONDITION_INSTANCE_TERMINATING
from karpy.apis.v1.nodepool import UNLIMITED, DisruptionReason
from karpy.state import NodePoolEntry
from karpy.state.statenode import StateNode

__all__ = ["BudgetCount", "Budgets", "count_nodes", "disruption_budgets"]


@dataclass(slots=True)
class BudgetCount:
    """A NodePool's nodes as budgets count them."""

    nodes: int = 0
    """Managed, initialized nodes whose instance is not terminating."""
    disrupting: int = 0
    """Of those, the ones not Ready or already marked for deletion."""


def count_nodes(
    states: Iterable[StateNode], reason: DisruptionReason | None = None
) -> dict[str, BudgetCount]:
    """Count each NodePool's nodes and the ones already disrupting.

    For the ``Unhealthy`` (repair) reason a node that is merely not Ready does not use
    the budget up: not Ready is what repair acts on, and a wave of broken nodes would
    otherwise starve the budget that repairs them (Karpenter v1.15.0
    NodePoolStatsFromNodes); one marked for deletion still does."""
    counts: dict[str, BudgetCount] = {}
    for state in states:
        if not state.managed or not state.initialized or not state.nodepool:
            continue
        if condition_is_true(state.nodeclaim, CONDITION_INSTANCE_TERMINATING):
            continue
        count = counts.setdefault(state.nodepool, BudgetCount())
        count.nodes += 1
        not_ready = not condition_is_true(state.node, "Ready") and reason != "Unhealthy"
        if not_ready or state.marked_for_deletion:
            count.disrupting += 1
    return counts


@dataclass(slots=True)
class Budgets:
    """What is left of each NodePool's budget for one reason during one pass."""

    reason: DisruptionReason
    allowed: dict[str, int] = field(default_factory=dict)
    """What the budgets allow in all (the ``karpenter_nodepools_allowed_disruptions``
    gauge)."""
    remaining: dict[str, int] = field(default_factory=dict)
    counts: dict[str, BudgetCount] = field(default_factory=dict)

    def left(self, nodepool: str) -> int:
        """How many more nodes of ``nodepool`` may be disrupted in this pass."""
        return self.remaining.get(nodepool, 0)

    def take(self, nodepool: str) -> bool:
        """Use one disruption of ``nodepool``'s budget; False (and nothing taken) when
        none is left."""
        left = self.remaining.get(nodepool, 0)
        if left <= 0:
            return False
        self.remaining[nodepool] = left - 1
        return True

    def blocked(self) -> list[str]:
        """NodePools with nodes whose budgets allow no disruption at all for the reason
        (they get Karpenter's DisruptionBlocked event)."""
        return sorted(
            name for name, allowed in self.allowed.items()
            if allowed == 0 and self.counts.get(name, BudgetCount()).nodes
        )


def disruption_budgets(
    pools: Iterable[NodePoolEntry],
    states: Iterable[StateNode],
    reason: DisruptionReason,
    now: datetime,
) -> Budgets:
    """The budgets of every valid NodePool for ``reason`` at ``now``."""
    counts = count_nodes(states, reason)
    budgets = Budgets(reason=reason, counts=counts)
    for entry in pools:
        if entry.model is None:
            continue
        count = counts.get(entry.name, BudgetCount())
        allowed = entry.model.allowed_disruptions(now, count.nodes, reason)
        budgets.allowed[entry.name] = allowed
        budgets.remaining[entry.name] = (
            UNLIMITED if allowed >= UNLIMITED else max(allowed - count.disrupting, 0)
        )
    return budgets
