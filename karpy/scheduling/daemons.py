"""Which DaemonSet pods would land on a node, and what they take from it.

Every node a NodeClaim becomes also runs the DaemonSets whose pods tolerate its taints
and whose node selection matches its labels; their requests are overhead the pods being
scheduled cannot use. Different instance types may attract different DaemonSets (a
DaemonSet selecting ``kubernetes.io/arch=arm64``), so a NodePool's types are grouped by
the set of DaemonSets they would run (Karpenter's DaemonOverheadGroup).
"""

from __future__ import annotations

from collections.abc import Sequence

from karpy.apis.labels import LABEL_INITIALIZED, LABEL_REGISTERED
from karpy.scheduling.catalog import Catalog, DaemonGroup
from karpy.scheduling.nodepool import NodePoolTemplate
from karpy.scheduling.pod import HostPort, Pod
from karpy.scheduling.requirements import IN, Requirement, Requirements
from karpy.scheduling.taints import PREFER_NO_SCHEDULE, NodeTaint, untolerated

__all__ = ["daemon_groups", "daemon_runs_on"]

# NodeClaims get these labels once their node is up; DaemonSets may select on them.
_LIFECYCLE = Requirements(
    (
        Requirement.new(LABEL_REGISTERED, IN, ("true",)),
        Requirement.new(LABEL_INITIALIZED, IN, ("true",)),
    )
)


def _node_terms(pod: Pod) -> list[Requirements]:
    if not pod.required_node_terms:
        return [pod.node_selector]
    return [pod.node_selector.intersect(term) for term in pod.required_node_terms]


def daemon_runs_on(pod: Pod, taints: Sequence[NodeTaint], labels: Requirements) -> bool:
    """Whether a DaemonSet pod would run on a node with these taints and labels.

    PreferNoSchedule taints never keep a DaemonSet pod away.
    """
    if untolerated(taints, pod.tolerations, prefer=False) is not None:
        return False
    return any(labels.compatible(term) is None for term in _node_terms(pod))


def daemon_groups(
    template: NodePoolTemplate,
    catalog: Catalog,
    daemonsets: Sequence[Pod],
    vector: dict[str, int],
    well_known: frozenset[str],
) -> list[DaemonGroup]:
    """The NodePool's instance types grouped by the DaemonSets they would run.

    ``vector`` maps resource names to positions in the simulator's request vectors.
    """
    taints = [t for t in template.taints if t.effect != PREFER_NO_SCHEDULE]
    template_reqs = template.requirements.intersect(_LIFECYCLE)
    candidates = []
    for daemon in daemonsets:
        if untolerated(taints, daemon.tolerations, prefer=False) is not None:
            continue
        terms = [
            term
            for term in _node_terms(daemon)
            if template_reqs.compatible(term, well_known) is None
        ]
        if terms:
            candidates.append((daemon, terms))
    by_set: dict[tuple[int, ...], int] = {}
    for index, instance_type in enumerate(catalog.types):
        chosen = tuple(
            i
            for i, (_, terms) in enumerate(candidates)
            if any(instance_type.requirements.intersects(term) is None for term in terms)
        )
        by_set[chosen] = by_set.get(chosen, 0) | (1 << index)
    groups = []
    for chosen, mask in sorted(by_set.items()):
        overhead = [0] * len(vector)
        ports: list[HostPort] = []
        names = []
        for i in chosen:
            daemon = candidates[i][0]
            names.append(daemon.key)
            ports.extend(daemon.host_ports)
            for name, amount in daemon.requests.items():
                overhead[vector[name]] += amount
        groups.append(DaemonGroup(mask, tuple(overhead), tuple(ports), tuple(names)))
    return groups
