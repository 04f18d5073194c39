"""What ``karpy simulate`` reports, computed from a :class:`~karpy.tools.view.ClusterView`.

:func:`simulate` asks the view's provisioner for one round's decision and the
disruption controller for its next pass, and turns both into plain values: the
NodeClaims provisioning would create (with the offerings they can launch and the price
of the cheapest), the pods that stay pending with the provisioner's own reason, the
consolidation commands, the cluster's $/h before and after, and the LP lower bound
(:func:`karpy.scheduling.cost_floor`) on what any plan for those pods could cost.
:func:`compare` says how a what-if run differs from the unchanged one.

``Report.to_json()`` is the stable ``-o json`` schema (docs/tools.md); every price is
US dollars per hour.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from karpy.apis.labels import LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE, LABEL_ZONE
from karpy.controllers.disruption import Command
from karpy.scheduling import NodeClaimPlan, NodePoolTemplate, cost_floor
from karpy.tools.view import ClusterView, LiveCluster

__all__ = [
    "SCHEMA_VERSION",
    "CandidateRow",
    "ClaimRow",
    "CommandRow",
    "Difference",
    "LowerBound",
    "NodePoolRow",
    "PendingRow",
    "Report",
    "compare",
    "simulate",
]

SCHEMA_VERSION = 1
"""Bumped when a field of the JSON output changes meaning or goes away (new fields may
be added without a bump)."""

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

    def to_json(self) -> dict[str, Any]:
        """The ``-o json`` form."""
        return {
            "nodepool": self.nodepool,
            "instanceTypes": {"count": len(self.instance_types),
                              "cheapest": list(self.instance_types[:CHEAPEST_SHOWN])},
            "zones": list(self.zones),
            "capacityTypes": list(self.capacity_types),
            "pods": self.pods,
            "requests": dict(self.requests),
            "pricePerHour": round(self.price, 6),
            "cheapestOffering": {"instanceType": self.cheapest[0], "zone": self.cheapest[1],
                                 "capacityType": self.cheapest[2]},
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
            },
            "disruption": {
                "method": self.disruption_method,
                "commands": [c.to_json() for c in self.commands],
                "savingsPerHour": round(self.savings, 6),
            },
            "totals": self.totals_json(),
            "whatIf": None,
        }
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


# -- building ------------------------------------------------------------------------------


def claim_row(plan: NodeClaimPlan) -> ClaimRow:
    """A planned NodeClaim as a row: the offerings it can launch and the cheapest."""
    zones: set[str] = set()
    capacity: set[str] = set()
    best: tuple[float, str, str, str] | None = None
    for it in plan.instance_types:
        for offering in it.offerings:
            if not offering.available or not plan.requirements.overlaps(offering.requirements):
                continue
            zones.add(offering.zone)
            capacity.add(offering.capacity_type)
            key = (offering.price, it.name, offering.zone, offering.capacity_type)
            if best is None or key < best:
                best = key
    return ClaimRow(
        nodepool=plan.nodepool,
        instance_types=tuple(plan.instance_type_names),
        zones=tuple(sorted(zones)),
        capacity_types=tuple(sorted(capacity)),
        pods=len(plan.pods),
        requests=plan.resource_requests(),
        price=plan.price,
        cheapest=(best[1], best[2], best[3]) if best is not None else ("", "", ""),
    )


def _lower_bound(claims: Sequence[NodeClaimPlan],
                 templates: Sequence[NodePoolTemplate]) -> LowerBound | None:
    pods = [pod for plan in claims for pod in plan.pods]
    if not pods or not templates:
        return None
    try:
        floor = cost_floor(pods, templates)
    except ValueError:  # no offering can hold them: no floor to speak of
        return None
    return LowerBound(price=floor.price, plan_price=sum(p.price for p in claims),
                      forced_nodes=floor.forced_nodes)


def _command_row(command: Command) -> CommandRow:
    rows = []
    for c in command.candidates:
        labels = c.state.labels
        rows.append(CandidateRow(
            node=c.name, nodeclaim=c.state.nodeclaim_name, nodepool=c.nodepool,
            instance_type=labels.get(LABEL_INSTANCE_TYPE, ""),
            zone=labels.get(LABEL_ZONE, ""), capacity_type=labels.get(LABEL_CAPACITY_TYPE, ""),
            price=c.price, pods=len(c.pods),
        ))
    return CommandRow(
        reason=command.reason, decision=str(command.decision), candidates=tuple(rows),
        replacements=tuple(claim_row(p) for p in command.replacements),
        savings=command.estimated_savings,
    )


async def _nodepools(view: ClusterView) -> tuple[list[NodePoolRow], int, float]:
    nodes: Counter[str] = Counter()
    prices: dict[str, float] = {}
    for state in view.cluster.nodes():
        if not state.managed or state.marked_for_deletion:
            continue
        nodes[state.nodepool] += 1
        prices[state.nodepool] = prices.get(state.nodepool, 0.0) + (
            await view.node_price(state) or 0.0)
    rows = []
    for entry in view.cluster.nodepools():
        reason = ""
        count = 0
        if entry.model is None:
            reason = f"invalid: {entry.error}"
        elif entry.deleting:
            reason = "being deleted"
        elif not entry.ready:
            reason = "not ready"
        else:
            try:
                count = len(await view.instance_types(entry.name))
            except Exception as exc:
                reason = f"unable to resolve instance types: {exc}"
            else:
                reason = "" if count else "no instance types"
        rows.append(NodePoolRow(name=entry.name, usable=not reason, reason=reason,
                                instance_types=count, nodes=nodes[entry.name],
                                price=prices.get(entry.name, 0.0)))
    return rows, sum(nodes.values()), sum(prices.values())


def _source_name(view: ClusterView) -> str:
    source = view.source
    if isinstance(source, LiveCluster):
        return f"cluster ({source.kubeconfig or 'default kubeconfig'})"
    return source.source


async def simulate(view: ClusterView) -> Report:
    """Simulate one provisioning round, then one disruption pass, on ``view``."""
    pending_pods = view.pending_pods()
    templates = await view.templates()
    results = await view.schedule()
    claims = results.new_nodeclaims if results is not None else ()
    pending = [PendingRow(e.pod.key, e.reason) for e in (results.errors if results else ())]
    placed = {p.key for plan in claims for p in plan.pods}
    if results is not None:
        placed |= {p.key for n in results.existing_nodes for p in n.pods}
    named = {row.pod for row in pending}
    for event in view.recorder.events:
        key = f"{event.namespace}/{event.name}"
        if (event.kind == "Pod" and event.reason == "FailedScheduling"
                and key not in named and key not in placed):
            named.add(key)
            pending.append(PendingRow(key, event.message.removeprefix("Failed to schedule pod, ")))
    if results is None and pending_pods and not templates:
        pending += [PendingRow(p.key, "no usable NodePool") for p in pending_pods
                    if p.key not in named]
    pools, nodes, current = await _nodepools(view)
    if results is not None:
        # Ask disruption about the cluster provisioning is heading for, not about the
        # moment before it acts (pending pods would count twice otherwise).
        view.land(results)
    decision = await view.disruption_pass()
    return Report(
        source=_source_name(view),
        provider=view.provider_name,
        synced=view.synced,
        nodepools=tuple(pools),
        pending_pods=len(pending_pods),
        claims=tuple(claim_row(p) for p in claims),
        on_existing={n.node: len(n.pods) for n in (results.existing_nodes if results else ())
                     if n.pods},
        pending=tuple(sorted(pending, key=lambda r: r.pod)),
        lower_bound=_lower_bound(claims, templates),
        disruption_method=decision.method if decision is not None else "",
        commands=tuple(_command_row(c) for c in decision.commands) if decision else (),
        nodes=nodes,
        current_price=current,
    )


