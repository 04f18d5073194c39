"""The rows of a ``karpy simulate`` report: one value per NodeClaim, pending pod,
disruption candidate, command and NodePool, each with its ``-o json`` form (the schema
in docs/tools.md; every price is US dollars per hour)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CHEAPEST_SHOWN",
    "CandidateRow",
    "ClaimRow",
    "CommandRow",
    "LowerBound",
    "NodePoolRow",
    "PendingRow",
]

CHEAPEST_SHOWN = 5
"""How many of a claim's instance types are named (cheapest first)."""


@dataclass(frozen=True, slots=True)
class ClaimRow:
    """A NodeClaim provisioning (or a replacement) would create."""

    nodepool: str
    instance_types: tuple[str, ...]
    """Every type it may launch as, cheapest first."""
    zones: tuple[str, ...]
    capacity_types: tuple[str, ...]
    pods: int
    requests: Mapping[str, str]
    """The pods' requests plus DaemonSet overhead, as the NodeClaim would carry them."""
    price: float
    """$/h of the cheapest offering it can launch."""
    cheapest: tuple[str, str, str]
    """(instance type, zone, capacity type) of that offering."""
    priced_by: str = ""
    """The NodeOverlay that set that offering's price (empty: the provider's price)."""
    reservations: tuple[str, ...] = ()
    """The capacity reservations it holds a slot of and launches into."""

    def to_json(self) -> dict[str, Any]:
        """The ``-o json`` form (``cheapestOffering.pricedBy`` only when an overlay
        set the price)."""
        offering = {"instanceType": self.cheapest[0], "zone": self.cheapest[1],
                    "capacityType": self.cheapest[2]}
        if self.priced_by:
            offering["pricedBy"] = self.priced_by
        return {
            "nodepool": self.nodepool,
            "instanceTypes": {"count": len(self.instance_types),
                              "cheapest": list(self.instance_types[:CHEAPEST_SHOWN])},
            "zones": list(self.zones),
            "capacityTypes": list(self.capacity_types),
            "pods": self.pods,
            "requests": dict(self.requests),
            "pricePerHour": round(self.price, 6),
            "cheapestOffering": offering,
            "reservations": list(self.reservations),
        }


@dataclass(frozen=True, slots=True)
class PendingRow:
    """A pod provisioning cannot place, and the provisioner's reason."""

    pod: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        """The ``-o json`` form."""
        return {"pod": self.pod, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class CandidateRow:
    """A node a disruption command would remove."""

    node: str
    nodeclaim: str
    nodepool: str
    instance_type: str
    zone: str
    capacity_type: str
    price: float
    pods: int

    def to_json(self) -> dict[str, Any]:
        """The ``-o json`` form."""
        return {"node": self.node, "nodeclaim": self.nodeclaim, "nodepool": self.nodepool,
                "instanceType": self.instance_type, "zone": self.zone,
                "capacityType": self.capacity_type, "pricePerHour": round(self.price, 6),
                "pods": self.pods}


@dataclass(frozen=True, slots=True)
class CommandRow:
    """A disruption command: candidates out, replacements in, what it saves."""

    reason: str
    decision: str
    candidates: tuple[CandidateRow, ...]
    replacements: tuple[ClaimRow, ...]
    savings: float

    def to_json(self) -> dict[str, Any]:
        """The ``-o json`` form."""
        return {"reason": self.reason, "decision": self.decision,
                "candidates": [c.to_json() for c in self.candidates],
                "replacements": [r.to_json() for r in self.replacements],
                "savingsPerHour": round(self.savings, 6)}


@dataclass(frozen=True, slots=True)
class NodePoolRow:
    """A NodePool and whether provisioning can use it."""

    name: str
    usable: bool
    reason: str
    """Why not ("" when usable)."""
    instance_types: int
    nodes: int
    price: float
    """$/h of its nodes now."""

    def to_json(self) -> dict[str, Any]:
        """The ``-o json`` form."""
        return {"name": self.name, "usable": self.usable, "reason": self.reason,
                "instanceTypes": self.instance_types, "nodes": self.nodes,
                "pricePerHour": round(self.price, 6)}


@dataclass(frozen=True, slots=True)
class LowerBound:
    """The LP floor on the plan's new capacity, and how far above it the plan is."""

    price: float
    plan_price: float
    forced_nodes: int

    @property
    def above_percent(self) -> float | None:
        """How much more the plan costs than the floor, in percent (None: floor 0)."""
        if self.price <= 0:
            return None
        return (self.plan_price / self.price - 1.0) * 100.0

    def to_json(self) -> dict[str, Any]:
        """The ``-o json`` form."""
        above = self.above_percent
        return {"pricePerHour": round(self.price, 6),
                "planPricePerHour": round(self.plan_price, 6),
                "abovePercent": None if above is None else round(above, 2),
                "forcedNodes": self.forced_nodes}
