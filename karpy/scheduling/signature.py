"""Scheduling signatures: the constraints a group of interchangeable pods carries,
at one step of preference relaxation.

Pods with equal :attr:`Pod.signature` (same namespace, labels, node selection,
tolerations, spread and affinity rules, host ports and volume topology) can go to
exactly the same places, so the simulator works out their constraints once and keeps
per-signature memory of which candidates rejected them for good.

Preferences are first treated as rules, then relaxed one at a time in Karpenter's
order (preferences.go) when a pod fits nowhere:

1. drop the first required node-affinity term while more than one remains (the terms
   are OR'ed: the next one is tried),
2. drop the heaviest preferred pod-affinity term,
3. drop the heaviest preferred pod anti-affinity term,
4. drop the heaviest preferred node-affinity term (the next one becomes the rule),
5. drop a ScheduleAnyway topology spread,
6. tolerate PreferNoSchedule taints (only when some node or NodePool has one).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from karpy.apis.labels import LABEL_HOSTNAME
from karpy.scheduling.pod import AffinityTerm, HostPort, Pod, SpreadConstraint
from karpy.scheduling.requirements import Requirement, Requirements
from karpy.scheduling.taints import Toleration

if TYPE_CHECKING:
    from karpy.scheduling.topology import TopologyGroup

__all__ = ["Relaxation", "Signature"]


@dataclass(frozen=True, slots=True)
class Relaxation:
    """How far a signature's preferences have been relaxed."""

    required_term: int = 0
    pod_affinity: int = 0
    pod_anti_affinity: int = 0
    node_affinity: int = 0
    schedule_anyway: int = 0
    tolerate_prefer_no_schedule: bool = False


@dataclass(slots=True, eq=False)
class Signature:
    """The effective constraints of a pod group at one relaxation step.

    Topology fields are filled in by the simulator (they need the solve's groups):
    ``owned`` are the groups whose rules constrain these pods (with whether the rule
    also selects the pods themselves), ``inverse`` the inverse anti-affinity groups that
    select these pods, ``inverse_owned`` the inverse groups these pods feed, and
    ``counted`` every non-inverse group that counts these pods.
    """

    pod: Pod
    relaxation: Relaxation
    prefer_policy: bool
    requirements: Requirements = field(init=False)
    strict: Requirements = field(init=False)
    claim_requirements: Requirements = field(init=False)
    hostname: Requirement | None = field(init=False)
    tolerations: tuple[Toleration, ...] = field(init=False)
    spreads: tuple[SpreadConstraint, ...] = field(init=False)
    affinity: tuple[AffinityTerm, ...] = field(init=False)
    anti_affinity: tuple[AffinityTerm, ...] = field(init=False)
    host_ports: tuple[HostPort, ...] = field(init=False)
    owned: list[tuple[TopologyGroup, bool]] = field(default_factory=list)
    inverse: list[TopologyGroup] = field(default_factory=list)
    inverse_owned: list[TopologyGroup] = field(default_factory=list)
    counted: list[TopologyGroup] = field(default_factory=list)
    # Simulator bookkeeping: candidates not yet ruled out for good, round-robin cursor.
    dead_groups: set[int] = field(default_factory=set)
    dead_nodes: set[int] = field(default_factory=set)
    claims: list[Any] = field(default_factory=list)
    claims_seen: int = 0
    claims_dead: int = 0
    cursor: int = 0
    template_reasons: dict[int, str] = field(default_factory=dict)
    tolerates: dict[int, str | None] = field(default_factory=dict)
    relaxed: Signature | bool | None = False
    relaxed_because: str = ""

    def __post_init__(self) -> None:
        pod, rel = self.pod, self.relaxation
        strict = pod.node_selector
        if pod.required_node_terms:
            strict = strict.intersect(pod.required_node_terms[rel.required_term])
        requirements = strict
        preferred = pod.preferred_node_terms if self.prefer_policy else ()
        if rel.node_affinity < len(preferred):
            requirements = requirements.intersect(preferred[rel.node_affinity][1])
        self.strict = strict
        self.requirements = requirements
        self.hostname = requirements.get(LABEL_HOSTNAME)
        self.claim_requirements = requirements.without(LABEL_HOSTNAME)
        self.tolerations = pod.tolerations
        spreads = [s for s in pod.spread_constraints if s.required]
        if self.prefer_policy:
            anyway = [s for s in pod.spread_constraints if not s.required]
            spreads += anyway[rel.schedule_anyway :]
        self.spreads = tuple(spreads)
        affinity = pod.pod_affinity
        anti = pod.pod_anti_affinity
        if self.prefer_policy:
            affinity += pod.preferred_pod_affinity[rel.pod_affinity :]
            anti += pod.preferred_pod_anti_affinity[rel.pod_anti_affinity :]
        self.affinity = affinity
        self.anti_affinity = anti
        self.host_ports = pod.host_ports

    def next_relaxation(self, prefer_no_schedule_exists: bool) -> tuple[Relaxation, str] | None:
        """The next relaxation step and a description of what it drops, or None when
        nothing is left to relax."""
        pod, rel = self.pod, self.relaxation
        if rel.required_term + 1 < len(pod.required_node_terms):
            node_term = pod.required_node_terms[rel.required_term]
            return (
                replace(rel, required_term=rel.required_term + 1),
                f"required node affinity term [{node_term}]",
            )
        if not self.prefer_policy:
            return None
        if rel.pod_affinity < len(pod.preferred_pod_affinity):
            term = pod.preferred_pod_affinity[rel.pod_affinity]
            return (
                replace(rel, pod_affinity=rel.pod_affinity + 1),
                f"preferred pod affinity {term}",
            )
        if rel.pod_anti_affinity < len(pod.preferred_pod_anti_affinity):
            term = pod.preferred_pod_anti_affinity[rel.pod_anti_affinity]
            return (
                replace(rel, pod_anti_affinity=rel.pod_anti_affinity + 1),
                f"preferred pod anti-affinity {term}",
            )
        if rel.node_affinity < len(pod.preferred_node_terms):
            weight, preference = pod.preferred_node_terms[rel.node_affinity]
            return (
                replace(rel, node_affinity=rel.node_affinity + 1),
                f"preferred node affinity (weight {weight}) [{preference}]",
            )
        anyway = [s for s in pod.spread_constraints if not s.required]
        if rel.schedule_anyway < len(anyway):
            return (
                replace(rel, schedule_anyway=rel.schedule_anyway + 1),
                f"ScheduleAnyway {anyway[rel.schedule_anyway]}",
            )
        if prefer_no_schedule_exists and not rel.tolerate_prefer_no_schedule:
            return (
                replace(rel, tolerate_prefer_no_schedule=True),
                "PreferNoSchedule taints (now tolerated)",
            )
        return None
