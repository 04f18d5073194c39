"""The Karpenter custom resources as runtime :class:`~karpy.runtime.Kind` descriptors.

``Kind`` compares by value, so a controller that declares the same descriptor elsewhere
still shares the one informer per kind.
"""

from __future__ import annotations

from typing import Final

from karpy.runtime import Kind

__all__ = ["NODE_CLAIM", "NODE_OVERLAY", "NODE_POOL"]

NODE_POOL: Final = Kind(
    group="karpenter.sh", version="v1", plural="nodepools", kind="NodePool", namespaced=False
)
"""karpenter.sh/v1 NodePool (cluster-scoped)."""
NODE_CLAIM: Final = Kind(
    group="karpenter.sh", version="v1", plural="nodeclaims", kind="NodeClaim", namespaced=False
)
"""karpenter.sh/v1 NodeClaim (cluster-scoped)."""
NODE_OVERLAY: Final = Kind(
    group="karpenter.sh",
    version="v1alpha1",
    plural="nodeoverlays",
    kind="NodeOverlay",
    namespaced=False,
)
