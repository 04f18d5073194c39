"""The custom resources as runtime :class:`~karpy.runtime.Kind` descriptors, re-exported
for the core's convenience: Karpenter's are declared once, in :mod:`karpy.cloudprovider`,
where providers import them too; karpy's ClusterLimit in :mod:`karpy.state.clusterlimits`.
"""

from __future__ import annotations

from karpy.cloudprovider import NODE_CLAIM, NODE_OVERLAY, NODE_POOL
from karpy.state.clusterlimits import CLUSTER_LIMIT

__all__ = ["CLUSTER_LIMIT", "NODE_CLAIM", "NODE_OVERLAY", "NODE_POOL"]
