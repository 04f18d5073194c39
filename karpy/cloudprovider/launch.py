"""Helpers for a provider's ``create``: choose the instance type and offering to launch
for a NodeClaim, and describe the launched NodeClaim the way Karpenter's providers do.

:func:`choose_launch` picks the cheapest available offering that satisfies the
NodeClaim's requirements and requests (raising
:class:`~karpy.cloudprovider.InsufficientCapacityError` when none does);
:func:`launched_nodeclaim` builds the NodeClaim ``create`` returns, with
:func:`launched_labels` for its labels; :func:`overlay_order` ranks the types of a
NodeClaim a NodeOverlay priced. A provider adds only what is specific to its
cloud (see docs/providers.md and examples/provider-plugin).
"""

from karpy.cloudprovider._launch import (
    LaunchChoice,
    choose_launch,
    launched_labels,
    launched_nodeclaim,
    nodeclaim_requests,
    nodeclaim_requirements,
    offering_key,
    overlay_order,
)

__all__ = [
    "LaunchChoice",
    "choose_launch",
    "launched_labels",
    "launched_nodeclaim",
    "nodeclaim_requests",
    "nodeclaim_requirements",
    "offering_key",
    "overlay_order",
]
