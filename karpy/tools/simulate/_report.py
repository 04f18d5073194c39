"""What ``karpy simulate`` reports: a :class:`Report` (the plan, what stays pending, the
disruption commands, the lower bound and the $/h totals) and, for ``-f``, how a what-if
run differs from the unchanged one (:func:`compare`). ``Report.to_json()`` is the stable
``-o json`` document (docs/tools.md); every price is US dollars per hour.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from karpy.tools.simulate._rows import (
    ClaimRow,
    CommandRow,
    LowerBound,
    NodePoolRow,
    PendingRow,
)

__all__ = ["SCHEMA_VERSION", "Difference", "Report", "compare"]

SCHEMA_VERSION = 1
"""Bumped when a field of the JSON output changes meaning or goes away (new fields may
be added without a bump)."""


@dataclass(frozen=True, slots=True)
class Report:
    """One simulation (see the module docstring)."""

    source: str
    provider: str
    synced: bool
    """False: NodeClaims are still launching; the provisioner would wait for them."""
    nodepools: tuple[NodePoolRow, ...]
    pending_pods: int
    """Pods needing capacity (the provisioner's input)."""
    claims: tuple[ClaimRow, ...]
    on_existing: Mapping[str, int]
    """Node name -> pods that fit on it (existing or in-flight capacity)."""
    pending: tuple[PendingRow, ...]
    lower_bound: LowerBound | None
    disruption_method: str
    commands: tuple[CommandRow, ...]
    nodes: int
    """Managed nodes now."""
    current_price: float
    """$/h of the managed nodes now."""
    what_if: tuple[str, ...] = ()
    """The files whose objects replaced the cluster's (``-f``)."""
    baseline: Report | None = field(default=None, repr=False)
    """The same simulation without the ``-f`` changes."""
    overlays: tuple[str, ...] | None = None
    """The NodeOverlays applied to the catalogue, in precedence order (None: overlays
    were off: the NodeOverlay gate is off and no ``-f`` file brought one)."""
    overlays_not_applied: Mapping[str, str] = field(default_factory=dict)
    """NodeOverlays judged but not applied: name -> why (a conflict, a rule)."""
    reservations: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    """Capacity reservation ID -> (slots the plan takes, slots that were free)."""

    @property
    def plan_price(self) -> float:
        """$/h of the NodeClaims provisioning would create."""
        return sum(c.price for c in self.claims)

    @property
    def savings(self) -> float:
        """$/h the disruption commands would save."""
        return sum(c.savings for c in self.commands)

    @property
    def after_price(self) -> float:
        """$/h once the plan is launched and the commands are done."""
        return self.current_price + self.plan_price - self.savings

    def totals_json(self) -> dict[str, Any]:
        """The ``totals`` object of the JSON form."""
        return {"nodes": self.nodes, "currentPerHour": round(self.current_price, 6),
                "provisioningPerHour": round(self.plan_price, 6),
                "disruptionSavingsPerHour": round(self.savings, 6),
                "afterPerHour": round(self.after_price, 6)}

    def to_json(self) -> dict[str, Any]:
        """The stable ``-o json`` document (docs/tools.md)."""
        out: dict[str, Any] = {
            "schemaVersion": SCHEMA_VERSION,
            "source": self.source,
            "provider": self.provider,
            "synced": self.synced,
            "nodepools": [p.to_json() for p in self.nodepools],
            "provisioning": {
                "pendingPods": self.pending_pods,
                "nodeclaims": [c.to_json() for c in self.claims],
                "existingNodes": [{"node": n, "pods": k} for n, k in
                                  sorted(self.on_existing.items())],
                "pending": [p.to_json() for p in self.pending],
                "pricePerHour": round(self.plan_price, 6),
                "lowerBound": None if self.lower_bound is None else self.lower_bound.to_json(),
                "reservations": [{"id": rid, "used": used, "free": free}
                                 for rid, (used, free) in sorted(self.reservations.items())],
            },
            "disruption": {
                "method": self.disruption_method,
                "commands": [c.to_json() for c in self.commands],
                "savingsPerHour": round(self.savings, 6),
            },
            "totals": self.totals_json(),
            "whatIf": None,
        }
        if self.overlays is not None:
            out["nodeOverlays"] = {"applied": list(self.overlays),
                                   "notApplied": dict(sorted(self.overlays_not_applied.items()))}
        if self.baseline is not None:
            out["whatIf"] = {"files": list(self.what_if),
                             "difference": compare(self.baseline, self).to_json()}
        return out


@dataclass(frozen=True, slots=True)
class Difference:
    """How a what-if simulation differs from the unchanged one."""

    claims_by_pool: Mapping[str, tuple[int, int]]
    """NodePool -> (claims unchanged, claims what-if)."""
    price_by_pool: Mapping[str, tuple[float, float]]
    pending: tuple[int, int]
    plan_price: tuple[float, float]
    savings: tuple[float, float]
    after_price: tuple[float, float]

    def to_json(self) -> dict[str, Any]:
        """The ``whatIf.difference`` object of the JSON form."""
        def pair(values: tuple[float, float]) -> dict[str, float]:
            return {"unchanged": round(values[0], 6), "whatIf": round(values[1], 6),
                    "change": round(values[1] - values[0], 6)}

        return {
            "nodepools": [
                {"name": name, "nodeclaims": {"unchanged": a, "whatIf": b},
                 "pricePerHour": pair(self.price_by_pool[name])}
                for name, (a, b) in sorted(self.claims_by_pool.items())
            ],
            "pendingPods": {"unchanged": self.pending[0], "whatIf": self.pending[1]},
            "provisioningPerHour": pair(self.plan_price),
            "disruptionSavingsPerHour": pair(self.savings),
            "afterPerHour": pair(self.after_price),
        }


def compare(unchanged: Report, what_if: Report) -> Difference:
    """How ``what_if`` differs from ``unchanged`` (same cluster, changed objects)."""
    pools = sorted({c.nodepool for c in (*unchanged.claims, *what_if.claims)})

    def per_pool(report: Report) -> tuple[Counter[str], dict[str, float]]:
        counts: Counter[str] = Counter(c.nodepool for c in report.claims)
        prices: dict[str, float] = {}
        for c in report.claims:
            prices[c.nodepool] = prices.get(c.nodepool, 0.0) + c.price
        return counts, prices

    a_counts, a_prices = per_pool(unchanged)
    b_counts, b_prices = per_pool(what_if)
    return Difference(
        claims_by_pool={p: (a_counts[p], b_counts[p]) for p in pools},
        price_by_pool={p: (a_prices.get(p, 0.0), b_prices.get(p, 0.0)) for p in pools},
        pending=(len(unchanged.pending), len(what_if.pending)),
        plan_price=(unchanged.plan_price, what_if.plan_price),
        savings=(unchanged.savings, what_if.savings),
        after_price=(unchanged.after_price, what_if.after_price),
    )
