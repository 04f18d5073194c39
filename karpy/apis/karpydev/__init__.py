"""karpy's own API group, ``karpy.dev``: kinds for what goes beyond Karpenter.

Karpenter's kinds (``karpenter.sh``) stay exactly Karpenter's; what karpy adds lives
here, so a cluster handed back to Karpenter keeps every Karpenter object valid and
Karpenter never reads these.
"""

from karpy.apis.karpydev.clusterlimit import (
    CONDITION_LIMIT_REACHED,
    CONDITION_READY,
    GROUP,
    ClusterLimit,
    ClusterLimitSpec,
    ClusterLimitStatus,
    LabelSelector,
    LabelSelectorRequirement,
)

__all__ = [
    "CONDITION_LIMIT_REACHED",
    "CONDITION_READY",
    "GROUP",
    "ClusterLimit",
    "ClusterLimitSpec",
    "ClusterLimitStatus",
    "LabelSelector",
    "LabelSelectorRequirement",
]
