"""What the consolidation methods (emptiness, multi- and single-node) share: which
candidates consolidation may touch at all, which machines may not receive their pods
yet, and the Balanced policy's approval (with Karpenter's karpenter_consolidation_moves_total
and karpenter_consolidation_score for each move scored)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from karpy.apis.labels import LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE, LABEL_ZONE
from karpy.apis.pods import is_owned_by_daemonset
from karpy.controllers.disruption._candidates import (
    PER_NODE_DISRUPTION_COST,
    Candidate,
    Snapshot,
    _price,
    eviction_cost,
)
from karpy.controllers.disruption._command import Command
from karpy.controllers.disruption._whatif import BALANCED_K, balanced_score
from karpy.controllers.instruments import KarpenterMetrics
from karpy.runtime import parse_time
from karpy.state import NodePoolEntry
from karpy.state.statenode import StateNode

__all__ = [
    "BalancedVerdict",
    "approved_message",
    "balanced_approves",
    "balanced_verdict",
    "consolidatable_reason",
    "record_move",
    "settling_machines",
]


def settling_machines(
    states: Iterable[StateNode],
    nodepool: Callable[[str], NodePoolEntry | None],
    *,
    now: datetime,
) -> frozenset[str]:
    """The machines still under their NodePool's ``consolidateAfter`` at ``now``
    (Karpenter's IsUnderConsolidateAfter, pkg/utils/disruption, v1.14.1): the NodeClaim
    Initialized, the NodePool's consolidateAfter set and non-zero, and less than that
    since the NodeClaim's ``status.lastPodEventTime`` — or, with no pod event yet, since
    its Initialized condition's lastTransitionTime. Measured on the clock here, as
    Karpenter's scheduler does, not read from the ``Consolidatable`` condition, which
    ``nodeclaim.disruption`` updates only on its next reconcile after a pod event (a
    node that just took a pod would still be a destination until then). Consolidation
    does not move a candidate's pods onto these (see ``_whatif``)."""
    out: set[str] = set()
    for state in states:
        claim = state.nodeclaim
        if claim is None:
            continue
        entry = nodepool(state.nodepool)
        if entry is None or entry.model is None:
            continue
        after = entry.model.spec.disruption.consolidate_after_timedelta
        if after is None or after <= timedelta(0):
            continue
        since = _settling_since(claim)
        if since is not None and now - since < after:
            out.add(state.name)
    return frozenset(out)


def _settling_since(claim: Mapping[str, Any]) -> datetime | None:
    """When consolidateAfter starts counting for this NodeClaim: its last pod event, or
    its initialization; None while it is not Initialized."""
    status = claim.get("status") or {}
    initialized = next(
        (c for c in status.get("conditions") or () if c.get("type") == "Initialized"), None
    )
    if initialized is None or initialized.get("status") != "True":
        return None
    last_pod_event = parse_time(status.get("lastPodEventTime"))
    if last_pod_event is not None:
        return last_pod_event
    return parse_time(initialized.get("lastTransitionTime"))


def consolidatable_reason(candidate: Candidate, *, empty_only: bool) -> bool | str:
    """Karpenter's consolidation ShouldDisrupt: True, or why not (an Unconsolidatable
    message), or False when the node simply is not ready for it yet."""
    if candidate.static:
        return False  # a static NodePool keeps its replicas; it is never consolidated
    model = candidate.pool.entry.model
    assert model is not None
    disruption = model.spec.disruption
    if empty_only:
        # Deleting an empty node compares no prices: Karpenter's Emptiness asks for
        # neither a known instance type nor the capacity-type and zone labels.
        if disruption.consolidate_after_timedelta is None:
            return f'NodePool "{candidate.nodepool}" has consolidation disabled'
        return candidate.empty and candidate.consolidatable()
    labels = candidate.state.labels
    if candidate.instance_type is None:
        return f'Instance Type "{labels.get(LABEL_INSTANCE_TYPE, "")}" not found'
    if LABEL_CAPACITY_TYPE not in labels:
        return f'Node does not have label "{LABEL_CAPACITY_TYPE}"'
    if LABEL_ZONE not in labels:
        return f'Node does not have label "{LABEL_ZONE}"'
    if disruption.consolidate_after_timedelta is None:
        return f'NodePool "{candidate.nodepool}" has consolidation disabled'
    if candidate.empty:
        return False  # emptiness handles it
    if disruption.consolidation_policy == "WhenEmpty":
        return (
            f'NodePool "{candidate.nodepool}" has consolidation policy WhenEmpty, '
            "but node is not empty"
        )
    return candidate.consolidatable()


PoolTotals = Mapping[str, tuple[float, float]]
"""Per NodePool: (total cost, total disruption cost), the Balanced score's denominators."""


def _pool_totals(candidates: Sequence[Candidate]) -> dict[str, tuple[float, float]]:
    """Per NodePool: the candidates' price and disruption cost (the denominators when the
    pass's nodes are not known, as in a what-if over candidates alone)."""
    totals: dict[str, tuple[float, float]] = {}
    for c in candidates:
        cost, disruption = totals.get(c.nodepool, (0.0, 0.0))
        totals[c.nodepool] = (cost + c.price, disruption + c.disruption_cost)
    return totals


def pool_totals(
    all_candidates: Sequence[Candidate], states: Iterable[StateNode], snapshot: Snapshot
) -> dict[str, tuple[float, float]]:
    """Karpenter's computeNodePoolTotals (v1.14.1 balanced.go), for every NodePool among
    ``all_candidates``: the cost of **all** the NodePool's machines (Karpenter's
    ClusterCost; the candidates' prices when that is 0) and the disruption cost of all
    its nodes, candidates or not ("non-candidate nodes still contribute to the
    denominators"): a candidate's own, else 1 plus the positive eviction costs of its
    bound pods that are not DaemonSet pods (StateNode.DisruptionCost)."""
    by_name = {c.name: c for c in all_candidates}
    fallback: dict[str, float] = {}
    for c in all_candidates:
        fallback[c.nodepool] = fallback.get(c.nodepool, 0.0) + c.price
    cost: dict[str, float] = {}
    disruption: dict[str, float] = {}
    for state in states:
        pool = state.labels.get("karpenter.sh/nodepool")
        if pool is None or pool not in fallback:
            continue
        candidate = by_name.get(state.name)
        if candidate is not None:
            disruption[pool] = disruption.get(pool, 0.0) + candidate.disruption_cost
            cost[pool] = cost.get(pool, 0.0) + candidate.price
            continue
        pods = [p for p in snapshot.pods_on(state.node_name) if not is_owned_by_daemonset(p)
                and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
        disruption[pool] = disruption.get(pool, 0.0) + PER_NODE_DISRUPTION_COST + sum(
            max(0.0, eviction_cost(p)) for p in pods)
        catalogue = snapshot.pools.get(pool)
        if state.nodeclaim is not None and catalogue is not None:
            labels = state.labels
            it = catalogue.instance_types.get(labels.get(LABEL_INSTANCE_TYPE, ""))
            cost[pool] = cost.get(pool, 0.0) + _price(
                it, labels.get(LABEL_ZONE, ""), labels.get(LABEL_CAPACITY_TYPE, ""))
    return {
        pool: (cost[pool] if cost.get(pool, 0.0) > 0 else total, disruption.get(pool, 0.0))
        for pool, total in fallback.items()
    }


@dataclass(frozen=True, slots=True)
class BalancedVerdict:
    """A move's Balanced evaluation: approved when every Balanced NodePool among its
    candidates approves; ``scores`` has (score, approved) per Balanced NodePool (other
    policies are not scored)."""

    approved: bool = True
    scores: dict[str, tuple[float, bool]] = field(default_factory=dict)
    shares: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Per scored NodePool: (share of its cost saved, share of its disruption cost), for
    the ConsolidationApproved message."""


def balanced_verdict(
    command: Command, all_candidates: Sequence[Candidate], totals: PoolTotals | None = None
) -> BalancedVerdict:
    """Score ``command`` for every Balanced NodePool among its candidates (Karpenter's
    EvaluateBalancedMove), against ``totals`` (:func:`pool_totals`; without them, the
    candidates' own sums). A command without candidates is not approved (as Karpenter's:
    there is nothing to weigh)."""
    if not command.candidates:
        return BalancedVerdict(approved=False)
    if totals is None:
        totals = _pool_totals(all_candidates)
    savings = command.estimated_savings
    source = command.source_price
    by_pool = _by_pool(command)
    scores: dict[str, tuple[float, bool]] = {}
    shares: dict[str, tuple[float, float]] = {}
    for pool, members in by_pool.items():
        if _policy(members) != "Balanced":
            continue
        pool_savings = savings
        if source > 0 and len(by_pool) > 1:
            pool_savings = savings * sum(c.price for c in members) / source
        cost, disruption = totals.get(pool, (0.0, 0.0))
        moved = sum(c.disruption_cost for c in members)
        scores[pool] = balanced_score(pool_savings, moved, cost, disruption)
        if cost > 0 and disruption > 0:
            shares[pool] = (pool_savings / cost, moved / disruption)
    return BalancedVerdict(all(ok for _, ok in scores.values()), scores, shares)


def approved_message(verdict: BalancedVerdict, pool: str) -> str | None:
    """Karpenter's ConsolidationApproved message for ``pool``'s part of an approved
    Balanced move ("score 1.20 >= threshold 0.50 (k: 2, savings 10.0%, disruption
    8.3%)"), or None when the pool was not scored or did not approve."""
    scored = verdict.scores.get(pool)
    if scored is None or not scored[1]:
        return None
    saved, disrupted = verdict.shares.get(pool, (0.0, 0.0))
    score = "+Inf" if math.isinf(scored[0]) else f"{scored[0]:.2f}"  # Go's %.2f of +Inf
    return (f"score {score} >= threshold {1.0 / BALANCED_K:.2f} (k: {BALANCED_K}, "
            f"savings {saved * 100:.1f}%, disruption {disrupted * 100:.1f}%)")


def balanced_approves(command: Command, all_candidates: Sequence[Candidate]) -> bool:
    """Whether every Balanced NodePool among the command's candidates approves the move
    (Karpenter's EvaluateBalancedMove); other policies always approve."""
    return balanced_verdict(command, all_candidates).approved


def record_move(
    metrics: KarpenterMetrics | None, command: Command, verdict: BalancedVerdict
) -> None:
    """Count a consolidation move per NodePool of its candidates, under the move's
    decision, and each Balanced NodePool's score under that NodePool's own decision
    (Karpenter's ApproveCommand for one candidate, EmitMultiNodeEvents for several)."""
    if metrics is None:
        return
    move = "approved" if verdict.approved else "rejected"
    for pool, members in _by_pool(command).items():
        policy = _policy(members)
        metrics.consolidation_moves.add(
            1, {"decision": move, "nodepool": pool, "policy": policy}
        )
        scored = verdict.scores.get(pool)
        # an infinite score (a move without disruption cost; every node costs 1) cannot
        # be recorded: OpenTelemetry drops non-finite measurements
        if scored is not None and math.isfinite(scored[0]):
            score, ok = scored
            metrics.consolidation_score.record(score, {
                "decision": "approved" if ok else "rejected", "nodepool": pool,
                "policy": policy,
            })


def _by_pool(command: Command) -> dict[str, list[Candidate]]:
    by_pool: dict[str, list[Candidate]] = {}
    for c in command.candidates:
        by_pool.setdefault(c.nodepool, []).append(c)
    return by_pool


def _policy(members: Sequence[Candidate]) -> str:
    model = members[0].pool.entry.model
    return model.spec.disruption.consolidation_policy if model is not None else ""
