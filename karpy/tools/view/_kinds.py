"""Which kinds a cluster view reads: what the cluster model, the provisioner and
disruption read from the manager's cache, plus every installed provider's NodeClass."""

from __future__ import annotations

from functools import cache

from karpy.apis.extension import load_extensions
from karpy.runtime import Kind, kinds
from karpy.state import NODE_CLAIM, NODE_POOL
from karpy.state.kinds import CLUSTER_LIMIT, NODE_OVERLAY

__all__ = ["CORE_KINDS", "OPTIONAL_KINDS", "node_class_kinds", "view_kinds"]

CORE_KINDS: tuple[Kind, ...] = (
    kinds.NAMESPACE,
    NODE_POOL,
    NODE_CLAIM,
    kinds.NODE,
    kinds.DAEMON_SET,
    kinds.POD,
    kinds.POD_DISRUPTION_BUDGET,
    kinds.PERSISTENT_VOLUME_CLAIM,
    kinds.PERSISTENT_VOLUME,
    kinds.STORAGE_CLASS,
    kinds.CSI_NODE,
)
"""The core kinds: what :meth:`karpy.state.Cluster.attach` follows, and the
PodDisruptionBudgets disruption reads."""

OPTIONAL_KINDS: tuple[Kind, ...] = (NODE_OVERLAY, CLUSTER_LIMIT)
"""Core kinds a cluster may not serve (NodeOverlay's CRD is needed only with its gate;
ClusterLimit's is karpy's own, absent where only Karpenter's CRDs are installed)."""


@cache
def node_class_kinds() -> tuple[Kind, ...]:
    """Every installed provider's NodeClass kinds (entry-point group ``karpy.crds``)."""
    found: list[Kind] = []
    for extension in load_extensions(include_core=False):
        for resource in extension.resources:
            crd = resource.crd
            found.append(Kind(
                group=crd.group, version=crd.version, plural=crd.plural, kind=crd.kind,
                namespaced=crd.scope == "Namespaced",
            ))
    return tuple(found)


def view_kinds() -> tuple[Kind, ...]:
    """Every kind a view reads and a snapshot holds, in the order a snapshot lists them."""
    return (*CORE_KINDS, *OPTIONAL_KINDS, *node_class_kinds())
