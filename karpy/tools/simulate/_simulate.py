"""Simulating on a :class:`~karpy.tools.view.ClusterView`: :func:`simulate` asks the
view's provisioner for one round's decision, lets it land (in memory), asks the
disruption controller for its next pass, and turns both into a :class:`Report` — with
the LP lower bound (:func:`karpy.scheduling.cost_floor`) on what any plan for the new
capacity's pods could cost.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from karpy.apis.labels import LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE, LABEL_ZONE
from karpy.controllers.disruption import Command
from karpy.scheduling import NodeClaimPlan, NodePoolTemplate, cost_floor
from karpy.tools.simulate._report import Report
from karpy.tools.simulate._rows import (
    CandidateRow,
    ClaimRow,
    CommandRow,
    LowerBound,
    NodePoolRow,
    PendingRow,
)
from karpy.tools.view import ClusterView, LiveCluster

__all__ = ["claim_row", "simulate"]


def claim_row(plan: NodeClaimPlan) -> ClaimRow:
    """A planned NodeClaim as a row: the offerings it can launch and the cheapest."""
    zones: set[str] = set()
    capacity: set[str] = set()
    best: tuple[float, str, str, str, str] | None = None
    for it in plan.instance_types:
        for offering in it.offerings:
            if not offering.available or not plan.requirements.overlaps(offering.requirements):
                continue
            zones.add(offering.zone)
            capacity.add(offering.capacity_type)
            key = (offering.price, it.name, offering.zone, offering.capacity_type,
                   offering.overlay)
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
        priced_by=best[4] if best is not None else "",
        reservations=plan.reservation_ids,
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
        overlays=(None if view.overlays is None
                  else tuple(o.name for o in view.overlays.applied)),
        overlays_not_applied=({} if view.overlays is None
                              else {**view.overlays.problems, **view.overlays.conflicts}),
        reservations=dict(results.reservations) if results is not None else {},
    )


