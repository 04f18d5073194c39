"""A disruption decision: which candidates go, what replaces them, and why.

A :class:`Command` is what a method computes and the orchestration queue executes:
``delete`` (the pods fit on what exists) or ``replace`` (some need new NodeClaims,
``replacements``). It prints the way Karpenter's does in the "disrupting node(s)" log
line, and estimates its savings from the cheapest offering of each replacement.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from typing import Any

from karpy.apis.labels import (
    CAPACITY_TYPE_ON_DEMAND,
    CAPACITY_TYPE_RESERVED,
    CAPACITY_TYPE_SPOT,
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
)
from karpy.controllers.disruption._candidates import Candidate
from karpy.scheduling import NodeClaimPlan, Results

__all__ = ["Command", "Decision"]


class Decision(StrEnum):
    """Karpenter's decisions (the ``decision`` metric label)."""

    NOOP = "no-op"
    REPLACE = "replace"
    DELETE = "delete"


@dataclass(slots=True, eq=False)
class Command:
    """One decision of one method (see the module docstring)."""

    reason: str
    """The disruption reason: ``Empty``, ``Drifted``, ``Underutilized`` or ``Unhealthy``."""
    consolidation_type: str
    """``empty``, ``single``, ``multi`` or "" (drift): the metrics' consolidation_type."""
    candidates: list[Candidate]
    replacements: list[NodeClaimPlan] = field(default_factory=list)
    results: Results | None = None
    """The what-if simulation the command came from (placements for nominations)."""
    id: str = field(default_factory=lambda: str(uuid.uuid4()))
    created: float = 0.0
    """Monotonic time the queue accepted it (for its timeout)."""
    replacement_names: list[str] = field(default_factory=list)
    """The replacement NodeClaims' names once created."""
    initialized: set[str] = field(default_factory=set)
    repaired_conditions: dict[str, str] = field(default_factory=dict)
    """Repair's governing node condition type per candidate NodeClaim (the ``condition``
    of ``karpenter_nodeclaims_unhealthy_disrupted_total``, counted at deletion)."""
    drain_bounds: dict[str, timedelta] = field(default_factory=dict)
    """Repair's drain bound per candidate NodeClaim: the queue stamps
    ``karpenter.sh/nodeclaim-termination-timestamp`` to now + bound just before it deletes
    the NodeClaim (tightening, never extending, one already there)."""

    @property
    def decision(self) -> Decision:
        """``replace``, ``delete`` or ``no-op``."""
        if self.candidates and self.replacements:
            return Decision.REPLACE
        if self.candidates:
            return Decision.DELETE
        return Decision.NOOP

    @property
    def source_price(self) -> float:
        """What the candidates cost per hour now."""
        return sum(c.price for c in self.candidates)

    @property
    def replacement_price(self) -> float:
        """What the replacements would cost per hour (their cheapest offerings)."""
        return sum(plan.price for plan in self.replacements)

    @property
    def estimated_savings(self) -> float:
        """$/h saved if the command completes."""
        return self.source_price - self.replacement_price

    @property
    def nodepools(self) -> list[str]:
        """The candidates' NodePools, each once, in order."""
        return list(dict.fromkeys(c.nodepool for c in self.candidates))

    def __str__(self) -> str:
        sources = ", ".join(c.name for c in self.candidates)
        pools = ",".join(self.nodepools)
        text = f"{self.reason}/{self.id}: {self.decision}: nodepools=[{pools}]: [{sources}]"
        if self.replacements:
            plural = "replacement" if len(self.replacements) == 1 else "replacements"
            text += f" -> [{len(self.replacements)} {plural}]"
        return text + f" (savings: ${self.estimated_savings:.2f})"

    def for_node(self, candidate: Candidate) -> str:
        """How an event on one candidate describes the command."""
        if len(self.candidates) == 1:
            return str(self)
        return (
            f"{self.decision}: [{candidate.name}] (part of {len(self.candidates)}-node "
            "consolidation)"
        )

    def log_values(self) -> dict[str, Any]:
        """The JSON fields of Karpenter's "disrupting node(s)" log line."""
        return {
            "command": str(self),
            "reason": self.reason,
            "decision": str(self.decision),
            "disrupted-node-count": len(self.candidates),
            "replacement-node-count": len(self.replacements),
            "pod-count": sum(len(c.pods) for c in self.candidates),
            "disrupted-nodes": [
                {
                    "Node": {"name": c.name},
                    "NodeClaim": {"name": c.state.nodeclaim_name},
                    "instance-type": c.state.labels.get(LABEL_INSTANCE_TYPE, ""),
                    "capacity-type": c.state.labels.get(LABEL_CAPACITY_TYPE, ""),
                }
                for c in self.candidates
            ],
            "replacement-nodes": [_replacement_values(p, single=len(self.replacements) == 1)
                                  for p in self.replacements],
        }


def _replacement_values(plan: NodeClaimPlan, *, single: bool) -> dict[str, Any]:
    capacity = plan.requirements.get(LABEL_CAPACITY_TYPE)
    if capacity is None or capacity.complement:
        capacity_type = CAPACITY_TYPE_ON_DEMAND
    elif capacity.has(CAPACITY_TYPE_RESERVED):
        capacity_type = CAPACITY_TYPE_RESERVED
    elif capacity.has(CAPACITY_TYPE_SPOT):
        capacity_type = CAPACITY_TYPE_SPOT
    else:
        capacity_type = CAPACITY_TYPE_ON_DEMAND
    out: dict[str, Any] = {"capacity-type": capacity_type}
    if single:
        out["instance-types"] = _type_list(plan.instance_type_names)
    return out


def _type_list(names: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(names[:limit])
    more = len(names) - limit
    return f"{shown} and {more} other(s)" if more > 0 else shown
