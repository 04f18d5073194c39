"""Disruption candidates, and every reason a node is not one.

A *candidate* is a managed, initialized machine that a disruption method may remove:
its NodePool, its instance type and the price it costs now, the pods that would need
a new home, and what moving them costs (Karpenter's Candidate).

:func:`node_blockers` is the one place that says why a node is **not** a candidate —
it is not managed, not initialized, already going away, nominated for pending pods,
annotated ``karpenter.sh/do-not-disrupt``, or one of its pods is protected by that
annotation or by a PodDisruptionBudget, or has ResourceClaims (karpy's: the what-if
solves do not carry allocated devices yet). The controller turns its first answer into a
``DisruptionBlocked`` event, exactly as Karpenter words it; it returns all of them, and
``karpy explain node`` shows every one.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, Literal

from karpy.apis.annotations import ANNOTATION_DO_NOT_DISRUPT
from karpy.apis.conditions import condition_is_true
from karpy.apis.labels import LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE, LABEL_NODEPOOL, LABEL_ZONE
from karpy.apis.pods import has_dra_requirements, is_active
from karpy.apis.v1 import CONDITION_CONSOLIDATABLE
from karpy.controllers.disruption._pdb import PdbLimits
from karpy.runtime import Object
from karpy.scheduling import InstanceType, Pod
from karpy.state import NodePoolEntry
from karpy.state.cost import offering_price

# Termination and disruption must agree on which pods an eviction concerns: one copy.
from karpy.state.pods import do_not_disrupt_active, is_evictable, is_reschedulable
from karpy.state.statenode import StateNode

__all__ = [
    "EVENTUAL",
    "GRACEFUL",
    "PER_NODE_DISRUPTION_COST",
    "REPAIR",
    "Candidate",
    "DisruptionClass",
    "PoolCatalogue",
    "Snapshot",
    "build_candidate",
    "eviction_cost",
    "node_blockers",
    "pod_blockers",
]

DisruptionClass = Literal["graceful", "eventual", "repair"]
GRACEFUL: DisruptionClass = "graceful"
"""Respects do-not-disrupt pods and PDBs always (emptiness, consolidation)."""
EVENTUAL: DisruptionClass = "eventual"
"""Bounded by the NodeClaim's terminationGracePeriod (drift): with one set, blocking
pods do not keep the node from being a candidate — termination forces them later."""
REPAIR: DisruptionClass = "repair"
"""Voluntary node repair (Karpenter v1.15.0 RepairDisruptionClass): a node's
do-not-disrupt annotation and not being initialized do not keep it from being a
candidate, and blocking pods are only noted (``pod_blockers``): the repair method
admits such a node only with a drain bound. The what-if makes room for every pod,
blocked or not."""

PER_NODE_DISRUPTION_COST = 1.0
"""What disrupting a node costs before counting its pods (Karpenter's base cost)."""


def eviction_cost(pod: Mapping[str, Any]) -> float:
    """How much evicting ``pod`` hurts (Karpenter's EvictionCost): 1, raised by the
    ``controller.kubernetes.io/pod-deletion-cost`` annotation and the pod's priority,
    clamped to [-10, 10]."""
    cost = 1.0
    meta = pod.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    deletion_cost = annotations.get("controller.kubernetes.io/pod-deletion-cost")
    if deletion_cost is not None:
        with contextlib.suppress(ValueError):  # a malformed annotation adds nothing
            cost += float(deletion_cost) / 2.0**27
    priority = (pod.get("spec") or {}).get("priority")
    if isinstance(priority, int):
        cost += priority / 2.0**25
    return min(max(cost, -10.0), 10.0)


@dataclass(frozen=True, slots=True)
class PoolCatalogue:
    """A NodePool as disruption sees it: the parsed entry and its instance types."""

    entry: NodePoolEntry
    instance_types: Mapping[str, InstanceType]


@dataclass(slots=True)
class Snapshot:
    """What one evaluation reads besides the machines themselves."""

    now: datetime
    """Wall-clock time (budget schedules, do-not-disrupt durations)."""
    pools: Mapping[str, PoolCatalogue]
    pdbs: PdbLimits
    pods_on: Callable[[str], Sequence[Object]]
    """Raw pods bound to a node name (annotations, owners, priorities)."""
    queued: Callable[[str], bool] = lambda _provider_id: False
    """Whether a provider ID is part of a command being executed."""
    nominated: Callable[[str], bool] = lambda _provider_id: False
    """Whether pending pods were recently expected on a provider ID."""
    moving: Callable[[Pod], Pod] = lambda pod: pod
    """A candidate's pod as it will be rescheduled: restricted to where its persistent
    volumes can be mounted, as Karpenter restricts every pod it simulates (a local
    volume's hostname pin, which dies with the node, dropped)."""
    surging: frozenset[str] = frozenset()
    """Keys (``namespace/name``) of pods that will leave by surge before evict
    (karpy.controllers.surge), not by eviction: their PodDisruptionBudgets do not keep
    their nodes."""


@dataclass(slots=True, eq=False)
class Candidate:
    """A machine a disruption method may remove (see the module docstring)."""

    state: StateNode
    pool: PoolCatalogue
    instance_type: InstanceType | None
    capacity_type: str
    zone: str
    price: float
    pods: tuple[Pod, ...]
    """The pods that need a new home if the machine goes (the simulator's view)."""
    raw_pods: tuple[Object, ...] = field(repr=False)
    disruption_cost: float
    """PER_NODE_DISRUPTION_COST plus the eviction cost of every reschedulable pod."""
    staying: frozenset[str] = frozenset()
    """Keys of ``pods`` that will not leave for now — an active do-not-disrupt, a
    PodDisruptionBudget that can never allow the eviction (Karpenter's
    IsCurrentlyReschedulable): a what-if buys no capacity for them. Only an eventual
    (drift) candidate with a terminationGracePeriod can have any."""
    pod_blockers: bool = False
    """A repair candidate whose pods (do-not-disrupt, PDBs) block eviction now."""
    starting: frozenset[str] = frozenset()
    """Keys of ``pods`` still in phase Pending (bound, not started): like pending pods,
    a what-if may put them on a node under consolidateAfter (Karpenter exempts them)."""

    @property
    def name(self) -> str:
        """The Node's name (how the simulator and Karpenter's logs name it)."""
        return self.state.name

    @property
    def provider_id(self) -> str:
        """The machine's provider ID."""
        return self.state.provider_id

    @property
    def nodeclaim(self) -> Object:
        """The cached NodeClaim (candidates are always managed)."""
        claim = self.state.nodeclaim
        assert claim is not None
        return claim

    @property
    def node(self) -> Object | None:
        """The cached Node."""
        return self.state.node

    @property
    def nodepool(self) -> str:
        """The owning NodePool's name."""
        return self.pool.entry.name

    @property
    def static(self) -> bool:
        """Owned by a static NodePool (``spec.replicas``): never consolidated, and
        replaced one for one when drifted (Karpenter's OwnedByStaticNodePool)."""
        return self.pool.entry.replicas is not None

    @property
    def empty(self) -> bool:
        """No pod's eviction costs anything (Karpenter's IsEmpty): no pod would need a
        new home, or only pods whose eviction cost clamps to zero (a
        ``controller.kubernetes.io/pod-deletion-cost`` or priority low enough) — the
        Empty reason and its budgets govern deleting such a node."""
        return self.disruption_cost <= PER_NODE_DISRUPTION_COST

    @property
    def savings_ratio(self) -> float:
        """Price per unit of disruption: the order consolidation tries candidates in."""
        return self.price / self.disruption_cost

    def consolidatable(self) -> bool:
        """The NodeClaim's ``Consolidatable`` condition is True (consolidateAfter passed)."""
        return condition_is_true(self.nodeclaim, CONDITION_CONSOLIDATABLE)

    def condition_time(self, condition: str) -> str:
        """The lastTransitionTime of a condition ("" when absent): drift goes oldest first."""
        for cond in (self.nodeclaim.get("status") or {}).get("conditions") or ():
            if cond.get("type") == condition:
                return str(cond.get("lastTransitionTime") or "")
        return ""


_REPAIR_IGNORES: Final = frozenset({
    "node isn't initialized",
    f'disruption is blocked through the "{ANNOTATION_DO_NOT_DISRUPT}" annotation',
})  # fmt: skip


def node_blockers(state: StateNode, snapshot: Snapshot) -> list[str]:
    """Why the machine itself cannot be disrupted now, most basic reason first ([] if
    nothing about the machine stands in the way). Karpenter's wording."""
    reasons: list[str] = []
    if state.nodeclaim is None:
        return ["node isn't managed by karpenter"]
    if state.node is None:
        reasons.append("nodeclaim does not have an associated node")
    if not state.initialized:
        reasons.append("node isn't initialized")
    if state.marked_for_deletion:
        reasons.append("node is deleting or marked for deletion")
    if snapshot.nominated(state.provider_id):
        reasons.append("node is nominated for a pending pod")
    # The Node's annotations once it exists (users annotate Nodes), else the NodeClaim's.
    annotations = _annotations(state.node if state.node is not None else state.nodeclaim)
    if annotations.get(ANNOTATION_DO_NOT_DISRUPT) == "true":
        reasons.append(
            f'disruption is blocked through the "{ANNOTATION_DO_NOT_DISRUPT}" annotation'
        )
    pool = state.nodepool
    if not pool:
        reasons.append(f"node doesn't have required label (label={LABEL_NODEPOOL})")
    elif pool not in snapshot.pools:
        reasons.append(f"NodePool not found (NodePool={pool})")
    return reasons


def pod_blockers(pods: Sequence[Object], snapshot: Snapshot) -> list[str]:
    """Why the machine's pods keep it (do-not-disrupt, PodDisruptionBudgets)."""
    reasons: list[str] = []
    for pod in pods:
        if is_active(pod) and do_not_disrupt_active(pod, snapshot.now):
            meta = pod.get("metadata") or {}
            reasons.append(
                f'pod has "{ANNOTATION_DO_NOT_DISRUPT}" annotation '
                f"(Pod={meta.get('namespace') or 'default'}/{meta.get('name')})"
            )
    for pod in pods:
        # karpy's what-if solves do not move a pod's allocated devices yet: a pod with
        # ResourceClaims could be "rescheduled" onto a node without them (issue 40).
        if is_active(pod) and has_dra_requirements(pod):
            meta = pod.get("metadata") or {}
            reasons.append(
                "pod has Dynamic Resource Allocation claims, which disruption does not "
                f"simulate yet (Pod={meta.get('namespace') or 'default'}/{meta.get('name')})"
            )
    for pod in pods:
        if not _evictable_for_pdbs(pod, snapshot.now) or _key(pod) in snapshot.surging:
            continue
        keys = snapshot.pdbs.blocking(pod)
        if len(keys) > 1:
            reasons.append(
                "eviction does not support multiple PDBs "
                f"(PodDisruptionBudget(s)=[{', '.join(keys)}])"
            )
        elif keys:
            reasons.append(f"pdb prevents pod evictions (PodDisruptionBudget=[{keys[0]}])")
    return list(dict.fromkeys(reasons))


def _evictable_for_pdbs(pod: Mapping[str, Any], now: datetime) -> bool:
    """Karpenter's IsEvictable: only pods an eviction would be asked for count."""
    return is_evictable(pod, now)


def _annotations(obj: Mapping[str, Any] | None) -> dict[str, str]:
    return dict(((obj or {}).get("metadata") or {}).get("annotations") or {})


def build_candidate(
    state: StateNode, snapshot: Snapshot, disruption_class: DisruptionClass
) -> Candidate | list[str]:
    """The machine as a candidate, or the reasons it is not one.

    A machine already part of a command being executed is not a candidate either, with
    no reason reported (it is being disrupted, not blocked).
    """
    if snapshot.queued(state.provider_id):
        return []
    reasons = node_blockers(state, snapshot)
    if disruption_class == REPAIR:
        # Repair is voluntary but not discretionary: do-not-disrupt never meant to
        # strand a broken node, nor is a node that never initializes left (v1.15.0).
        reasons = [r for r in reasons if r not in _REPAIR_IGNORES]
    if reasons:
        return reasons
    pool = snapshot.pools[state.nodepool]
    raw_pods = tuple(snapshot.pods_on(state.node_name))
    blocked = pod_blockers(raw_pods, snapshot)
    repair_blocked = bool(blocked) and disruption_class == REPAIR
    if blocked and not repair_blocked:
        grace = (state.nodeclaim or {}).get("spec", {}).get("terminationGracePeriod")
        if not (disruption_class == EVENTUAL and grace):
            return blocked
    if repair_blocked:
        blocked = []  # the what-if makes room for every pod (nothing "stays")
    labels = state.labels
    instance_type = pool.instance_types.get(labels.get(LABEL_INSTANCE_TYPE, ""))
    capacity_type = labels.get(LABEL_CAPACITY_TYPE, "")
    zone = labels.get(LABEL_ZONE, "")
    moving = [p for p in raw_pods if is_reschedulable(p)]
    moving_keys = {_key(p) for p in moving}
    pods = tuple(
        snapshot.moving(pod) for key, pod in state.bound.pods.items() if key in moving_keys
    )
    # A pod that stays is also one pod_blockers names: without blockers, none stays.
    staying = frozenset(_key(p) for p in moving if _stays(p, snapshot)) if blocked else frozenset()
    return Candidate(
        state=state,
        pool=pool,
        instance_type=instance_type,
        capacity_type=capacity_type,
        zone=zone,
        price=_price(instance_type, zone, capacity_type),
        pods=pods,
        raw_pods=tuple(moving),
        disruption_cost=PER_NODE_DISRUPTION_COST
        + sum(max(0.0, eviction_cost(p)) for p in moving),
        staying=staying,
        pod_blockers=repair_blocked,
        starting=frozenset(
            _key(p) for p in moving if (p.get("status") or {}).get("phase") == "Pending"
        ),
    )


def _stays(pod: Mapping[str, Any], snapshot: Snapshot) -> bool:
    """The pod will not be evicted for now: do-not-disrupt is active on it, or a
    PodDisruptionBudget can never allow its eviction (Karpenter's
    IsCurrentlyReschedulable, negated)."""
    if is_active(pod) and do_not_disrupt_active(pod, snapshot.now):
        return True
    if _key(pod) in snapshot.surging:
        return False  # its Deployment replaces it first; no eviction is asked for
    return _evictable_for_pdbs(pod, snapshot.now) and bool(snapshot.pdbs.blocking(pod, fully=True))


def _key(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name')}"


def _price(instance_type: InstanceType | None, zone: str, capacity_type: str) -> float:
    """What the machine costs now: its offering's price (:func:`offering_price`).
    Unknown counts as 0 here: consolidation sums and compares the candidates' prices,
    and removing a machine nobody can price saves nothing that can be counted."""
    price = offering_price(instance_type, zone, capacity_type) if instance_type else None
    return 0.0 if price is None else price
