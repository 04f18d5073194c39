"""``karpy explain node``: is the node a disruption candidate, for which methods, and if
not, every reason why.

The reasons are disruption's own: :func:`~karpy.controllers.disruption.node_blockers`
and :func:`~karpy.controllers.disruption.pod_blockers` (the DisruptionBlocked events
read them), each method's ``should_disrupt`` (the Unconsolidatable events), the
budgets for the method's reason, and for a consolidation candidate the what-if
:func:`~karpy.controllers.disruption.consolidate` -- delete, or replace with cheaper
capacity, and the $/h saved -- computed, never executed. Expiration is reported from
the NodeClaim's ``expireAfter`` (it is not voluntary disruption: no budget or blocker
holds it back).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from karpy.apis.conditions import condition_is_true
from karpy.apis.duration import parse_nillable_duration
from karpy.apis.labels import LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE, LABEL_ZONE
from karpy.apis.v1 import CONDITION_CONSOLIDATABLE, CONDITION_DRIFTED
from karpy.controllers.disruption import (
    Budgets,
    Candidate,
    Command,
    Snapshot,
    WhatIf,
    build_candidate,
    consolidate,
    node_blockers,
    pod_blockers,
)
from karpy.controllers.disruption._method import Method
from karpy.runtime import parse_time
from karpy.state.statenode import StateNode
from karpy.tools.explain._reason import Reason

__all__ = ["MethodVerdict", "NodeExplanation", "explain_node"]


@dataclass(frozen=True, slots=True)
class MethodVerdict:
    """One disruption method's view of the node."""

    method: str
    """``Empty``, ``Drifted`` or ``Underutilized``."""
    candidate: bool
    """The method would consider the node now (blockers, its filter and budget pass);
    for consolidation, ``action`` says whether it would then act."""
    reasons: tuple[Reason, ...] = ()
    action: Mapping[str, Any] = field(default_factory=dict)
    """For a consolidation candidate, what consolidating it alone would do."""

    def to_dict(self) -> dict[str, Any]:
        """The ``-o json`` form."""
        return {"method": self.method, "candidate": self.candidate,
                "reasons": [r.to_dict() for r in self.reasons], "action": dict(self.action)}


@dataclass(frozen=True, slots=True)
class NodeExplanation:
    """The answer for one node (see the module docstring)."""

    node: str
    found: bool
    summary: str
    nodeclaim: str = ""
    nodepool: str = ""
    instance_type: str = ""
    zone: str = ""
    capacity_type: str = ""
    price: float | None = None
    pods: int = 0
    """Pods that would need a new home if the node went away."""
    blockers: tuple[Reason, ...] = ()
    """Why no method may disrupt it (node_blockers, then pod_blockers)."""
    methods: tuple[MethodVerdict, ...] = ()
    expiration: Mapping[str, Any] = field(default_factory=dict)

    @property
    def candidate_for(self) -> list[str]:
        """The methods the node is a candidate for."""
        return [m.method for m in self.methods if m.candidate]

    def to_dict(self) -> dict[str, Any]:
        """The ``-o json`` form (docs/tools.md)."""
        return {
            "kind": "NodeExplanation",
            "node": self.node,
            "found": self.found,
            "summary": self.summary,
            "nodeclaim": self.nodeclaim,
            "nodepool": self.nodepool,
            "instanceType": self.instance_type,
            "zone": self.zone,
            "capacityType": self.capacity_type,
            "price": self.price,
            "pods": self.pods,
            "candidateFor": self.candidate_for,
            "blockers": [r.to_dict() for r in self.blockers],
            "methods": [m.to_dict() for m in self.methods],
            "expiration": dict(self.expiration),
        }


def explain_node(
    name: str,
    state: StateNode | None,
    *,
    snapshot: Snapshot,
    methods: Sequence[Method],
    budgets: Mapping[str, Budgets],
    whatif: WhatIf | None,
    spot_to_spot: bool = False,
    split: bool = True,
) -> NodeExplanation:
    """Explain node ``name`` (``state`` is its machine in the model, None if unknown).

    ``methods`` are disruption's (their ``should_disrupt`` and class are used),
    ``budgets`` maps each method's reason to its budgets now, ``whatif`` the cluster as
    a what-if simulation sees it (None: consolidation outcomes are not computed).
    """
    if state is None:
        return NodeExplanation(name, False, f"node {name} not found")
    labels = state.labels
    base = {
        "nodeclaim": state.nodeclaim_name if state.nodeclaim is not None else "",
        "nodepool": state.nodepool,
        "instance_type": labels.get(LABEL_INSTANCE_TYPE, ""),
        "zone": labels.get(LABEL_ZONE, ""),
        "capacity_type": labels.get(LABEL_CAPACITY_TYPE, ""),
    }
    blockers = [Reason("blocked", r) for r in node_blockers(state, snapshot)]
    if not blockers:
        raw_pods = snapshot.pods_on(state.node_name)
        blockers += [Reason("blocked", r) for r in pod_blockers(raw_pods, snapshot)]
    expiration = _expiration(state, snapshot.now)
    verdicts: list[MethodVerdict] = []
    price: float | None = None
    pods = 0
    for method in methods:
        built = build_candidate(state, snapshot, method.disruption_class)
        if isinstance(built, list):
            reasons = [Reason("blocked", r) for r in built] or [
                Reason("in-progress", "the node is part of a disruption command being "
                                      "executed")]
            verdicts.append(MethodVerdict(str(method.reason), False, tuple(reasons)))
            continue
        price, pods = built.price, len(built.pods)
        verdicts.append(_method_verdict(method, built, budgets, whatif,
                                        spot_to_spot=spot_to_spot, split=split))
    found = NodeExplanation(name, True, "", price=price, pods=pods,
                            blockers=tuple(blockers), methods=tuple(verdicts),
                            expiration=expiration, **base)
    return _summarised(found)


def _summarised(found: NodeExplanation) -> NodeExplanation:
    candidate_for = found.candidate_for
    if candidate_for:
        summary = f"node {found.node} is a disruption candidate for {', '.join(candidate_for)}"
        for verdict in found.methods:
            if verdict.candidate and verdict.action.get("description"):
                summary += f"; {verdict.action['description']}"
                break
    elif found.blockers:
        summary = f"node {found.node} cannot be disrupted: {found.blockers[0].message}"
    else:
        first = next((m.reasons[0].message for m in found.methods if m.reasons), "")
        summary = f"node {found.node} is not a disruption candidate" + (
            f": {first}" if first else "")
    return NodeExplanation(
        found.node, True, summary, nodeclaim=found.nodeclaim, nodepool=found.nodepool,
        instance_type=found.instance_type, zone=found.zone,
        capacity_type=found.capacity_type, price=found.price, pods=found.pods,
        blockers=found.blockers, methods=found.methods, expiration=found.expiration,
    )


def _method_verdict(
    method: Method,
    candidate: Candidate,
    budgets: Mapping[str, Budgets],
    whatif: WhatIf | None,
    *,
    spot_to_spot: bool,
    split: bool,
) -> MethodVerdict:
    reason = str(method.reason)
    verdict = method.should_disrupt(candidate)
    if verdict is not True:
        text = verdict if isinstance(verdict, str) else _why_not(reason, candidate)
        return MethodVerdict(reason, False, (Reason(_code(text), text),))
    budget = budgets.get(reason)
    if budget is not None and budget.left(candidate.nodepool) <= 0:
        count = budget.counts.get(candidate.nodepool)
        nodes = count.nodes if count else 0
        disrupting = count.disrupting if count else 0
        allowed = budget.allowed.get(candidate.nodepool, 0)
        text = (f"disruption budget exhausted: nodepool {candidate.nodepool} allows "
                f"{allowed} disruption(s) for reason {reason} now, and {disrupting} of its "
                f"{nodes} node(s) are already disrupting")
        return MethodVerdict(reason, False, (Reason("budget", text, {
            "nodepool": candidate.nodepool, "reason": reason, "allowed": allowed,
            "nodes": nodes, "disrupting": disrupting}),))
    if reason == "Drifted" or whatif is None:
        return MethodVerdict(reason, True)
    if reason == "Empty":
        return MethodVerdict(reason, True, action={
            "decision": "delete", "savings": candidate.price,
            "description": f"emptiness would delete it (saving ${candidate.price:.4f}/h)"})
    outcome = consolidate(whatif, [candidate], spot_to_spot=spot_to_spot, split=split)
    if isinstance(outcome, str):
        # A candidate all the same (Karpenter's word): consolidation looked and found
        # nothing better; the Unconsolidatable event says why.
        return MethodVerdict(reason, True, (Reason("unconsolidatable", outcome),), action={
            "decision": "none", "savings": 0.0,
            "description": f"consolidation would leave it: {outcome}"})
    return MethodVerdict(reason, True, action=_action(outcome))


def _action(command: Command) -> dict[str, Any]:
    replacements: list[dict[str, Any]] = [
        {"nodepool": plan.nodepool, "instanceTypes": plan.instance_type_names,
         "price": plan.price}
        for plan in command.replacements
    ]
    savings = command.estimated_savings
    if replacements:
        first = ", ".join(command.replacements[0].instance_type_names[:3])
        description = (f"consolidation would replace it with {len(replacements)} cheaper "
                       f"node(s) ({first}; ${command.replacement_price:.4f}/h), saving "
                       f"${savings:.4f}/h")
    else:
        description = (f"consolidation would delete it (its pods fit elsewhere), saving "
                       f"${savings:.4f}/h")
    return {"decision": str(command.decision), "replacements": replacements,
            "savings": savings, "description": description}


def _why_not(reason: str, candidate: Candidate) -> str:
    """Why a method's filter said a silent no."""
    if reason == "Drifted":
        return "the nodeclaim is not Drifted"
    if reason == "Empty" and not candidate.empty:
        return (f"the node is not empty: {len(candidate.pods)} pod(s) would need a new "
                "home")
    if reason == "Underutilized" and candidate.empty:
        return "the node is empty: emptiness handles it"
    if not candidate.consolidatable():
        model = candidate.pool.entry.model
        after = model.spec.disruption.consolidate_after if model is not None else ""
        return (f"consolidateAfter ({after}) has not elapsed since the node's last pod "
                f"change (the nodeclaim is not {CONDITION_CONSOLIDATABLE})")
    return "the method does not consider this node"


def _code(text: str) -> str:
    if text.startswith("consolidateAfter"):
        return "consolidate-after"
    if "WhenEmpty" in text:
        return "consolidation-policy"
    if "consolidation disabled" in text:
        return "consolidation-disabled"
    if text.startswith("the node is not empty"):
        return "not-empty"
    if text.startswith("the nodeclaim is not Drifted"):
        return "not-drifted"
    return "not-considered"


def _expiration(state: StateNode, now: datetime) -> dict[str, Any]:
    claim = state.nodeclaim
    if claim is None:
        return {}
    raw = str((claim.get("spec") or {}).get("expireAfter") or "")
    created = str((claim.get("metadata") or {}).get("creationTimestamp") or "")
    try:
        after = parse_nillable_duration(raw) if raw else None
    except ValueError:
        after = None
    if after is None or not created:
        return {"expireAfter": raw or "Never", "expiresAt": None,
                "description": "the nodeclaim never expires"}
    born = parse_time(created)
    assert born is not None  # created is not empty
    expires = born + after
    left = expires - now
    drifted = condition_is_true(claim, CONDITION_DRIFTED)
    text = (f"expires at {expires.isoformat()} (in {_short(left)})" if left > timedelta(0)
            else f"expired at {expires.isoformat()}: the expiration controller deletes it")
    return {"expireAfter": raw, "expiresAt": expires.isoformat(), "description": text,
            "drifted": drifted}


def _short(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes = rest // 60
    if days:
        return f"{days}d{hours}h"
    if hours:
        return f"{hours}h{minutes}m"
    return f"{minutes}m"
