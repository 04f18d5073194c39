"""The Karpenter custom resources as runtime :class:`~karpy.runtime.Kind` descriptors,
re-exported for the core's convenience: they are declared once, in
:mod:`karpy.cloudprovider`, where providers import them too.
"""

from __future__ import annotations

from karpy.cloudprovider import NODE_CLAIM, NODE_OVERLAY, NODE_POOL

__all__ = ["NODE_CLAIM", "NODE_OVERLAY", "NODE_POOL"]
