"""Annotations and the finalizer that karpy shares with Karpenter."""

from __future__ import annotations

from typing import Final

from karpy.apis.labels import COMPATIBILITY_GROUP, GROUP

__all__ = [
    "ANNOTATION_CAPACITY_OVERLAY_APPLIED",
    "ANNOTATION_DO_NOT_DISRUPT",
    "ANNOTATION_DO_NOT_REPAIR",
    "ANNOTATION_DRIFT_COST_CHECKED",
    "ANNOTATION_NODECLAIM_MIN_VALUES_RELAXED",
    "ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP",
    "ANNOTATION_NODEPOOL_HASH",
    "ANNOTATION_NODEPOOL_HASH_VERSION",
    "ANNOTATION_PRICE_OVERLAY_APPLIED",
    "ANNOTATION_PROVIDER_COMPATIBILITY",
    "ANNOTATION_REQUESTED_DRA_DRIVERS",
    "FINALIZER_TERMINATION",
    "KARPENTER_NODEPOOL_HASH_VERSION",
    "NODEPOOL_HASH_VERSION",
]

#: On a NodeClaim: the DRA drivers (comma-separated) whose devices its pods were
#: allocated; initialization waits for their ResourceSlices (Karpenter v1.14.1).
ANNOTATION_REQUESTED_DRA_DRIVERS: Final = GROUP + "/requested-dra-drivers"
#: On a pod or node: Karpenter must not voluntarily disrupt it.
ANNOTATION_DO_NOT_DISRUPT: Final = GROUP + "/do-not-disrupt"
ANNOTATION_DO_NOT_REPAIR: Final = GROUP + "/do-not-repair"
"""Karpenter v1.15.0: ``"true"`` on a Node (or its NodeClaim) blocks all node repair of
it; ``do-not-disrupt`` no longer does."""
#: On a NodeClaim: the hash of its NodePool's template when it was created (drift).
ANNOTATION_NODEPOOL_HASH: Final = GROUP + "/nodepool-hash"
#: On a NodeClaim: which hash algorithm produced ``ANNOTATION_NODEPOOL_HASH``.
ANNOTATION_NODEPOOL_HASH_VERSION: Final = GROUP + "/nodepool-hash-version"
#: On a NodeClaim: when its termination grace period ends (RFC 3339).
ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP: Final = GROUP + "/nodeclaim-termination-timestamp"
#: On a NodeClaim: the scheduler relaxed minValues to launch it.
ANNOTATION_NODECLAIM_MIN_VALUES_RELAXED: Final = GROUP + "/nodeclaim-min-values-relaxed"
#: On a NodeClaim: a NodeOverlay priced one of its instance types ("true").
ANNOTATION_PRICE_OVERLAY_APPLIED: Final = GROUP + "/price-overlay-applied"
#: On a NodeClaim: a NodeOverlay added capacity to one of its instance types ("true").
ANNOTATION_CAPACITY_OVERLAY_APPLIED: Final = GROUP + "/capacity-overlay-applied"
ANNOTATION_DRIFT_COST_CHECKED: Final = "karpy.dev/drift-cost-checked"
"""karpy's own, on a NodeClaim: ``"true"`` makes its drift replacement cost-checked like
a consolidation's: the drift method replaces it only when the replacements cost no more
per hour than it does (a provider that drifts a node early, as karpy-aws does on a spot
rebalance recommendation, sets it). Karpenter ignores it."""
#: Provider-specific compatibility data carried across API versions.
ANNOTATION_PROVIDER_COMPATIBILITY: Final = COMPATIBILITY_GROUP + "/provider"

#: The hash version Karpenter v1 writes next to ``ANNOTATION_NODEPOOL_HASH``.
KARPENTER_NODEPOOL_HASH_VERSION: Final = "v3"
#: The hash version karpy writes: Karpenter's, since karpy's hash is Karpenter's own
#: algorithm (karpy.apis.v1.nodepool_hash), so NodeClaims launched by either compare
#: equal and a cluster moving between the two sees no drift. (karpy before this wrote
#: "karpy-v1"; such NodeClaims are re-stamped, as any version change is.)
NODEPOOL_HASH_VERSION: Final = KARPENTER_NODEPOOL_HASH_VERSION

#: Held by NodeClaims and Nodes until their instance is gone.
FINALIZER_TERMINATION: Final = GROUP + "/termination"
