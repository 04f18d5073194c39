"""The ``karpenter.sh/v1alpha1`` kinds: NodeOverlay (nodeoverlay.py)."""

from karpy.apis.v1alpha1.nodeoverlay import (
    CONDITION_VALIDATION_SUCCEEDED,
    REASON_CONFLICT,
    REASON_RUNTIME_VALIDATION,
    RESTRICTED_CAPACITY,
    NodeOverlay,
    NodeOverlaySpec,
    NodeOverlayStatus,
    NodeSelectorRequirement,
)

#: The group/version of these kinds.
API_VERSION = "karpenter.sh/v1alpha1"

__all__ = [
    "API_VERSION",
    "CONDITION_VALIDATION_SUCCEEDED",
    "REASON_CONFLICT",
    "REASON_RUNTIME_VALIDATION",
    "RESTRICTED_CAPACITY",
    "NodeOverlay",
    "NodeOverlaySpec",
    "NodeOverlayStatus",
    "NodeSelectorRequirement",
]
