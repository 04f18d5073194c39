"""What-if simulations: would the cluster still hold every pod without these machines,
and what would it have to buy? Pure and synchronous, so the consolidation benchmark
runs the same code as the controller.

:class:`WhatIf` is the cluster as one pass sees it: every machine that is not going
away (with its pods and the pods nominated to it), the pending pods, and the pods of
machines already being deleted, which must land somewhere too. :meth:`WhatIf.simulate`
removes the candidates and asks the scheduling simulator where their pods go — onto the
remaining machines first, then onto new NodeClaims — exactly the provisioner's solve.
Two things keep pods out of it, as in Karpenter: a candidate's pods that will not leave
(an active ``karpenter.sh/do-not-disrupt``, a PodDisruptionBudget that can never allow
an eviction: ``Candidate.staying``), and — for consolidation, not drift — machines
whose NodePool's ``consolidateAfter`` has not passed since their last pod event
(``settling``) take no candidate's pods (Karpenter v1.14, PR #3006: moving pods onto a
node that just changed is churn). Pending pods and pods of machines being deleted may
still go there, and so may a candidate's pods still in phase Pending.

:func:`consolidate` turns a simulation into Karpenter's consolidation decision: delete
when nothing new is needed; replace by one cheaper NodeClaim whose instance types are
all cheaper than the candidates, judged by each type's *worst* launch price (spot-to-spot
only behind its feature gate and with 15 cheaper types); and, beyond Karpenter, replace
one machine by *several* cheaper ones when that is what the simulation needs and their
sum costs less (split consolidation), and N machines by M < N cheaper ones (N into M:
when no single type is large enough to take all the candidates' pods, Karpenter stops).
Otherwise it returns the reason, worded for the ``Unconsolidatable`` event.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from karpy.apis.labels import (
    CAPACITY_TYPE_ON_DEMAND,
    CAPACITY_TYPE_RESERVED,
    CAPACITY_TYPE_SPOT,
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
)
from karpy.controllers.disruption._candidates import Candidate
from karpy.controllers.disruption._command import Command
from karpy.scheduling import (
    ExistingNode,
    InstanceType,
    NodeClaimPlan,
    Pod,
    Requirement,
    Requirements,
    Results,
    Simulator,
)
from karpy.scheduling.taints import NO_SCHEDULE, NodeTaint, Toleration

__all__ = [
    "BALANCED_K",
    "MIN_SPOT_TO_SPOT_TYPES",
    "Simulation",
    "WhatIf",
    "balanced_score",
    "cheaper",
    "consolidate",
    "without_same_types",
    "worst_launch_price",
]

MIN_SPOT_TO_SPOT_TYPES = 15
"""Karpenter's MinInstanceTypesForSpotToSpotConsolidation: replacing one spot node by
another needs this many cheaper types, or it would chase the cheapest (most interrupted)
spot pool."""

BALANCED_K = 2
"""The Balanced policy's k: a move is approved when its share of the NodePool's cost
saved is at least 1/k of its share of the NodePool's disruption."""

_LAUNCH_PRECEDENCE = (CAPACITY_TYPE_RESERVED, CAPACITY_TYPE_SPOT, CAPACITY_TYPE_ON_DEMAND)
"""The capacity type a launch uses when several are allowed (Karpenter's
WorstLaunchPrice order)."""
_ONLY_SPOT = Requirement.new(LABEL_CAPACITY_TYPE, "In", [CAPACITY_TYPE_SPOT])

# Settling machines are kept from candidates' pods with a taint only the simulation
# sees: the simulator already keeps untolerated pods off a node, remembers per pod
# signature that it did, and still counts the node's pods for topology. The pods that
# may go there (pending ones, those of deleting machines) tolerate it. (A spread with
# nodeTaintsPolicy: Honor would not count a settling node's domain for the candidates'
# pods; Karpenter counts it. A rare policy on a short-lived state: accepted.)
_SETTLING = NodeTaint(key="karpy.sh/consolidate-after", effect=NO_SCHEDULE)
_TOLERATES_SETTLING = Toleration(key=_SETTLING.key, operator="Exists", effect=NO_SCHEDULE)


@dataclass(frozen=True, slots=True, eq=False)
class Simulation:
    """One what-if solve."""

    results: Results
    errors: tuple[str, ...]
    """Why pods that must move (the candidates', the deleting machines') fit nowhere."""
    new_nodeclaims: tuple[NodeClaimPlan, ...]
    """The NodeClaims the moving pods need (claims holding only pending pods left out:
    provisioning buys those anyway)."""

    @property
    def all_scheduled(self) -> bool:
        """Every pod that must move has a place."""
        return not self.errors


@dataclass(frozen=True, slots=True, eq=False)
class WhatIf:
    """The cluster as one disruption pass sees it (see the module docstring)."""

    simulator: Simulator
    nodes: tuple[ExistingNode, ...]
    pending: tuple[Pod, ...] = ()
    deleting: tuple[Pod, ...] = ()
    namespaces: Mapping[str, Mapping[str, str]] = dataclasses.field(default_factory=dict)
    settling: frozenset[str] = frozenset()
    """Machines under their NodePool's consolidateAfter (see the module docstring)."""
    buffer: tuple[Pod, ...] = ()
    """CapacityBuffer virtual pods: headroom that must still fit after a move, like the
    candidates' own pods, so consolidation never takes it away."""
    _protected: dict[str, tuple[Any, ...]] = dataclasses.field(
        default_factory=dict, repr=False, compare=False
    )

    def simulate(
        self, candidates: Sequence[Candidate], *, consolidation: bool = True
    ) -> Simulation:
        """Remove ``candidates`` and place their pods (and the rest) again; a
        ``consolidation`` simulation keeps the candidates' pods off settling machines."""
        gone = {c.name for c in candidates}
        all_nodes, pending_pods, deleting_pods, buffer_pods = self._view(consolidation)
        nodes = [n for n in all_nodes if n.name not in gone]
        moving = [pod for c in candidates for pod in c.pods if pod.key not in c.staying]
        if all_nodes is not self.nodes and any(c.starting for c in candidates):
            starting = {k for c in candidates for k in c.starting}
            moving = [_tolerating((p,))[0] if p.key in starting else p for p in moving]
        results = self.simulator.solve(
            [*pending_pods, *moving, *deleting_pods, *buffer_pods], nodes=nodes,
            namespaces=self.namespaces,
        )
        pending = {p.key for p in self.pending}
        # Headroom may sit on a node still initializing; only real pods may not move there.
        from_deleting = {p.key for p in (*self.deleting, *self.buffer)}
        errors = [
            f"{e.pod.key}: {e.reason}" for e in results.errors if e.pod.key not in pending
        ]
        by_name = {n.name: n for n in nodes}
        for placement in results.existing_nodes:
            node = by_name.get(placement.node)
            if node is None or node.initialized:
                continue
            for pod in placement.pods:
                if pod.key not in pending and pod.key not in from_deleting:
                    errors.append(
                        f"{pod.key}: would schedule against uninitialized node {node.name}"
                    )
        needed = tuple(
            plan for plan in results.new_nodeclaims
            if any(p.key not in pending for p in plan.pods)
        )
        return Simulation(results=results, errors=tuple(errors), new_nodeclaims=needed)

    def keeps_buffer_without(self, candidates: Sequence[Candidate]) -> bool:
        """Whether every CapacityBuffer pod still fits the machines left once
        ``candidates`` are gone, with nothing new bought (True without buffers)."""
        if not self.buffer:
            return True
        gone = {c.name for c in candidates}
        nodes = [n for n in self.nodes if n.name not in gone]
        results = self.simulator.solve(
            [*self.pending, *self.deleting, *self.buffer], nodes=nodes,
            namespaces=self.namespaces,
        )
        buffer = {p.key for p in self.buffer}
        return not any(e.pod.key in buffer for e in results.errors) and not any(
            p.key in buffer for plan in results.new_nodeclaims for p in plan.pods
        )

    def _view(
        self, consolidation: bool
    ) -> tuple[tuple[ExistingNode, ...], tuple[Pod, ...], tuple[Pod, ...], tuple[Pod, ...]]:
        """(nodes, pending, deleting, buffer) as one kind of simulation sees them; the
        protected view is built once per pass. Only the candidates' pods are kept off
        settling machines: pending pods, deleting machines' pods and CapacityBuffer
        headroom may go there."""
        if not consolidation or not self.settling:
            return self.nodes, self.pending, self.deleting, self.buffer
        view = self._protected.get("view")
        if view is None:
            nodes = tuple(
                dataclasses.replace(n, taints=(*n.taints, _SETTLING))
                if n.name in self.settling else n
                for n in self.nodes
            )
            view = self._protected["view"] = (
                nodes, _tolerating(self.pending), _tolerating(self.deleting),
                _tolerating(self.buffer),
            )
        return cast(
            tuple[tuple[ExistingNode, ...], tuple[Pod, ...], tuple[Pod, ...], tuple[Pod, ...]],
            view,
        )


def _tolerating(pods: Sequence[Pod]) -> tuple[Pod, ...]:
    return tuple(
        dataclasses.replace(p, tolerations=(*p.tolerations, _TOLERATES_SETTLING)) for p in pods
    )


def _price(instance_type: InstanceType, requirements: Requirements) -> float | None:
    return instance_type.cheapest_price(requirements)


def worst_launch_price(instance_type: InstanceType, requirements: Requirements) -> float | None:
    """The most a launch of ``instance_type`` under ``requirements`` may cost (Karpenter's
    WorstLaunchPrice): the dearest available offering of the capacity type the launch
    would use (reserved before spot before on-demand), whichever zone it lands in.
    None when no offering is compatible."""
    compatible = [
        o for o in instance_type.offerings
        if o.available and requirements.overlaps(o.requirements)
    ]
    for capacity_type in _LAUNCH_PRECEDENCE:
        prices = [o.price for o in compatible if o.capacity_type == capacity_type]
        if prices:
            return max(prices)
    return None


def _min_values_unmet(requirements: Requirements, types: Sequence[InstanceType]) -> list[str]:
    unmet = []
    for requirement in requirements.values():
        if requirement.min_values is None:
            continue
        if requirement.key == LABEL_INSTANCE_TYPE:
            count = len(types)
        else:
            values: set[str] = set()
            for it in types:
                own = it.requirements.get(requirement.key)
                if own is not None and not own.complement:
                    values.update(v for v in own.values if requirement.has(v))
            count = len(values)
        if count < requirement.min_values:
            unmet.append(requirement.key)
    return unmet


def _narrow(
    plan: NodeClaimPlan, types: Iterable[InstanceType], extra: Requirement | None = None
) -> NodeClaimPlan:
    """``plan`` limited to ``types`` (and ``extra``), cheapest first."""
    requirements = plan.requirements
    if extra is not None:
        requirements = requirements.add(extra)
    priced = [(p, it) for it in types if (p := _price(it, requirements)) is not None]
    priced.sort(key=lambda pair: (pair[0], pair[1].name))
    kept = tuple(it for _, it in priced)
    requirements = requirements.add(
        Requirement.new(LABEL_INSTANCE_TYPE, "In", [it.name for it in kept])
    )
    return dataclasses.replace(plan, instance_types=kept, requirements=requirements)


def cheaper(plan: NodeClaimPlan, max_price: float) -> NodeClaimPlan | str:
    """``plan`` keeping only instance types whose worst launch price is strictly below
    ``max_price`` (Karpenter's RemoveInstanceTypeOptionsByPriceAndMinValues), or why
    none remain. The worst price, not the cheapest: the launch picks the offering, and
    a replacement that may cost more than the candidates is no saving."""
    kept = [
        it for it in plan.instance_types
        if (p := worst_launch_price(it, plan.requirements)) is not None and p < max_price
    ]
    if not kept:
        return "Can't replace with a cheaper node"
    unmet = _min_values_unmet(plan.requirements, kept)
    if unmet:
        # Karpenter's wording: its error carries the labels as a structured value.
        return (
            "Filtering by price: minValues requirement is not met for label(s) "
            f"(label(s)=[{', '.join(sorted(unmet))}])"
        )
    return _narrow(plan, kept)


def _capacity_types(plan: NodeClaimPlan) -> Requirement | None:
    found: Requirement | None = plan.requirements.get(LABEL_CAPACITY_TYPE)
    return found


def _allows(requirement: Requirement | None, value: str) -> bool:
    return requirement is None or requirement.has(value)


def without_same_types(
    plan: NodeClaimPlan, candidates: Sequence[Candidate]
) -> NodeClaimPlan | str:
    """``plan`` without instance types costing as much as a candidate's own type, when
    it offers one of the candidates' types (Karpenter's filterOutSameInstanceType):
    replacing several nodes by one of their own type only shuffles pods around —
    deleting the others does the same with less disruption."""
    existing: dict[str, float] = {}
    for c in candidates:
        if c.instance_type is None:
            continue
        price = existing.get(c.instance_type.name, math.inf)
        existing[c.instance_type.name] = min(price, c.price) if c.price > 0 else price
    max_price = math.inf
    for it in plan.instance_types:
        if it.name in existing:
            max_price = min(max_price, existing[it.name])
    if max_price == math.inf:
        return plan
    return cheaper(plan, max_price)


def consolidate(
    whatif: WhatIf,
    candidates: Sequence[Candidate],
    *,
    spot_to_spot: bool = False,
    split: bool = True,
    consolidation_type: str = "single",
    exclude_own_types: bool = False,
) -> Command | str:
    """The consolidation command for ``candidates``, or why there is none.

    ``exclude_own_types`` (multi-node consolidation) drops replacement types that cost
    as much as a candidate's own type — before the replacement is narrowed to spot,
    which would otherwise drop an on-demand-only own type first and hide it.
    """
    simulation = whatif.simulate(candidates)
    if not simulation.all_scheduled:
        return "; ".join(simulation.errors[:3])
    command = Command(
        reason="Underutilized", consolidation_type=consolidation_type,
        candidates=list(candidates), results=simulation.results,
    )
    plans = simulation.new_nodeclaims
    if not plans:
        return command
    source = sum(c.price for c in candidates)
    if len(plans) > 1:
        # One node into several, or N nodes into fewer than N: never more nodes than before.
        return _split(command, plans, source, enabled=split and (
            len(candidates) == 1 or len(plans) < len(candidates)))
    plan = plans[0]
    all_spot = all(c.capacity_type == CAPACITY_TYPE_SPOT for c in candidates)
    if all_spot and _allows(_capacity_types(plan), CAPACITY_TYPE_SPOT):
        return _spot_to_spot(command, plan, source, enabled=spot_to_spot,
                             exclude_own_types=exclude_own_types)
    narrowed = cheaper(plan, source)
    if isinstance(narrowed, str):
        return narrowed
    if exclude_own_types:
        narrowed = without_same_types(narrowed, candidates)
        if isinstance(narrowed, str):
            return narrowed
    capacity = _capacity_types(narrowed)
    if (
        capacity is not None
        and capacity.has(CAPACITY_TYPE_SPOT)
        and capacity.has(CAPACITY_TYPE_ON_DEMAND)
    ):
        # The price filter used the spot price (a launch prefers spot): launching
        # on-demand instead could cost more than the candidates (Karpenter does the same).
        narrowed = _narrow(narrowed, narrowed.instance_types, _ONLY_SPOT)
    command.replacements = [narrowed]
    return command


def _spot_to_spot(
    command: Command, plan: NodeClaimPlan, source: float, *, enabled: bool,
    exclude_own_types: bool,
) -> Command | str:
    if not enabled:
        return "SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node"
    spot = _narrow(plan, plan.instance_types, _ONLY_SPOT)
    narrowed = cheaper(spot, source)
    if isinstance(narrowed, str):
        return narrowed
    if exclude_own_types:
        narrowed = without_same_types(narrowed, command.candidates)
        if isinstance(narrowed, str):
            return narrowed
    if len(command.candidates) == 1:
        if len(narrowed.instance_types) < MIN_SPOT_TO_SPOT_TYPES:
            return (
                f"SpotToSpotConsolidation requires {MIN_SPOT_TO_SPOT_TYPES} cheaper instance "
                "type options than the current candidate to consolidate, got "
                f"{len(narrowed.instance_types)}"
            )
        keep = MIN_SPOT_TO_SPOT_TYPES
        if narrowed.requirements.has_min_values():
            keep = max(keep, _min_types_for_min_values(narrowed))
        narrowed = _narrow(narrowed, narrowed.instance_types[:keep])
    command.replacements = [narrowed]
    return command


def _min_types_for_min_values(plan: NodeClaimPlan) -> int:
    """The fewest cheapest-first types that still satisfy every minValues."""
    for n in range(1, len(plan.instance_types) + 1):
        if not _min_values_unmet(plan.requirements, plan.instance_types[:n]):
            return n
    return len(plan.instance_types)


def _split(
    command: Command, plans: Sequence[NodeClaimPlan], source: float, *, enabled: bool
) -> Command | str:
    """Replace one machine by several cheaper ones, or N machines by M < N cheaper ones
    (beyond Karpenter, which stops at "Can't remove without creating N candidates").
    The candidates' own types are not excluded here as for one replacement: M < N nodes
    of the same type is fewer nodes, not a shuffle."""
    refused = f"Can't remove without creating {len(plans)} candidates"
    if not enabled:
        return refused
    cheapest = [p.price for p in plans]
    total = sum(cheapest)
    if total >= source:
        what = "the node" if len(command.candidates) == 1 else "the nodes"
        return f"{refused} (they would cost ${total:.4f}/h, {what} ${source:.4f}/h)"
    narrowed: list[NodeClaimPlan] = []
    for i, plan in enumerate(plans):
        # Each replacement may cost at most what the others leave of the node's price,
        # so whichever types launch, the sum stays cheaper.
        budget = source - (total - cheapest[i])
        kept = cheaper(plan, budget)
        if isinstance(kept, str):
            return refused
        narrowed.append(kept)
    command.replacements = narrowed
    return command


def balanced_score(
    savings: float, disruption_cost: float, pool_cost: float, pool_disruption_cost: float
) -> tuple[float, bool]:
    """Karpenter's Balanced score of a move: (savings share / disruption share, whether
    it reaches 1/k). A NodePool without cost or disruption totals approves nothing."""
    if pool_cost <= 0 or pool_disruption_cost <= 0:
        return 0.0, False
    savings_fraction = savings / pool_cost
    disruption_fraction = disruption_cost / pool_disruption_cost
    if savings_fraction <= 0:
        score = 0.0
    elif disruption_fraction == 0:
        score = float("inf")
    else:
        score = savings_fraction / disruption_fraction
    return score, score >= 1.0 / BALANCED_K
