"""The NodeClaim a static NodePool launches: its template, not a fit for pods.

As in Karpenter (``NodeClaimTemplate.ToNodeClaim`` for a static NodeClaim), the
requirements are the NodePool's own, not narrowed to a list of instance types: the
cloud provider chooses the machine, as it does for any NodeClaim it is handed.
"""

from __future__ import annotations

from karpy.apis.labels import RESTRICTED_LABELS, WELL_KNOWN_LABELS
from karpy.scheduling import NodeClaimPlan, NodePoolTemplate
from karpy.state import NodePoolEntry

__all__ = ["static_plan"]


def static_plan(entry: NodePoolEntry) -> NodeClaimPlan:
    """A plan for one node of the static NodePool ``entry`` (no pods, no requests)."""
    pool = NodePoolTemplate.from_nodepool_dict(entry.raw, ())
    labels = dict(pool.labels)
    # Custom labels the requirements pin to one value go on the NodeClaim (Karpenter's
    # resolveCustomLabelsFromRequirements); well-known ones depend on the instance.
    for key, value in pool.requirements.labels().items():
        if key not in WELL_KNOWN_LABELS and key not in RESTRICTED_LABELS:
            labels.setdefault(key, value)
    return NodeClaimPlan(
        nodepool=pool.name,
        pods=(),
        requirements=pool.requirements,
        instance_types=(),
        requests={},
        labels=labels,
        taints=pool.taints,
        startup_taints=pool.startup_taints,
    )
