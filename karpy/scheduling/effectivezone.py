"""The zone a pending pod is effectively held to, for Karpenter's
karpenter_scheduler_pending_pods_by_effective_zone_count.

A pod's zone is narrowed by three things: its own required node affinity / nodeSelector
on ``topology.kubernetes.io/zone``, the zones its volumes can be mounted in, and its
zone-keyed topology rules (spread constraints, pod affinity and anti-affinity) given the
pods already counted when the solve starts. Their intersection is one zone (the pod can
only go there), several (``flexible``), or none (``none``: it cannot go anywhere, e.g.
a volume in a zone its nodeSelector excludes). A pod with no zone signal at all is
``flexible``. The answer is per signature: pods with equal signatures share it.
"""

from __future__ import annotations

from typing import Final

from karpy.apis.labels import LABEL_ZONE
from karpy.scheduling.requirements import Requirement, Requirements
from karpy.scheduling.signature import Signature
from karpy.scheduling.topology import AFFINITY, ANTI_AFFINITY, SPREAD, TopologyGroup

__all__ = ["FLEXIBLE", "NONE", "effective_zone"]

FLEXIBLE: Final = "flexible"
"""The pod can still go to more than one zone (or to any)."""
NONE: Final = "none"
"""No zone satisfies all of the pod's zone signals."""

_ANY_ZONE: Final = Requirement.new(LABEL_ZONE, "Exists")


def effective_zone(sig: Signature) -> str:
    """The zone name, :data:`FLEXIBLE` or :data:`NONE` for the pods of ``sig`` (an
    unrelaxed signature whose topology groups are filled in)."""
    topology = _topology_zones(sig)
    if topology is not None and not topology:
        return NONE
    required: Requirement | None = sig.strict.get(LABEL_ZONE)
    volumes = _volume_zones(sig.pod.volume_requirements)
    if required is not None and required.operator == "In":
        candidates = required.values
    elif volumes is not None:
        candidates = volumes
    elif topology:
        candidates = topology
    else:
        return FLEXIBLE
    matches = [
        zone for zone in sorted(candidates)
        if (required is None or required.has(zone))
        and (volumes is None or zone in volumes)
        and (topology is None or zone in topology)
    ]
    if len(matches) > 1:
        return FLEXIBLE
    return matches[0] if matches else NONE


def _topology_zones(sig: Signature) -> frozenset[str] | None:
    """The zones every zone-keyed rule of the pod allows now; None without such rules
    (Karpenter's Topology.GetTopologyZoneConstraints)."""
    allowed: frozenset[str] | None = None
    pod_domains = sig.requirements.get(LABEL_ZONE) or _ANY_ZONE
    for group, self_selecting in sig.owned:
        if group.spec.key != LABEL_ZONE:
            continue
        domains = _valid_domains(group, pod_domains, self_selecting)
        allowed = domains if allowed is None else allowed & domains
        if not allowed:
            return frozenset()
    return allowed


def _valid_domains(
    group: TopologyGroup, pod_domains: Requirement, self_selecting: bool
) -> frozenset[str]:
    counts = group.counts
    kind = group.spec.kind
    if kind == SPREAD:
        spec = group.spec
        honored = spec.node_filter is None or spec.node_filter.affinity_honored
        lowest = group.min_count(pod_domains if honored else _ANY_ZONE)
        return frozenset(d for d, c in counts.items()
                         if c + self_selecting - lowest <= spec.max_skew)
    if kind == AFFINITY:
        present = frozenset(d for d, c in counts.items() if c > 0 and pod_domains.has(d))
        if present or not self_selecting:
            return present
        # the first of pods that attract each other may start anywhere it can go
        return frozenset(d for d in counts if pod_domains.has(d))
    if kind == ANTI_AFFINITY:
        return frozenset(d for d, c in counts.items() if c == 0 and pod_domains.has(d))
    return frozenset(counts)


def _volume_zones(alternatives: tuple[Requirements, ...]) -> frozenset[str] | None:
    """The zones any of the volume alternatives allows; None when some alternative
    does not pin the zone (volumes then do not narrow it)."""
    if not alternatives:
        return None
    zones: set[str] = set()
    for alternative in alternatives:
        requirement = alternative.get(LABEL_ZONE)
        if requirement is None or requirement.operator != "In":
            return None
        zones |= requirement.values
    return frozenset(zones)
