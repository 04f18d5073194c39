"""The kinds termination reads and writes, the cache indexes it looks objects up by,
and the lookups built on them (pods on a node, the NodeClaim of a Node and back)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from karpy.apis.labels import nodeclass_label_key
from karpy.cloudprovider import CloudProvider
from karpy.runtime import INDEX_NODE_NAME, Kind, Object, index_by_node_name, kinds
from karpy.state.kinds import NODE_CLAIM

__all__ = [
    "INDEX_NODE_NAME",
    "INDEX_PROVIDER_ID",
    "INDEX_VA_NODE_NAME",
    "Index",
    "index_by_node_name",
    "index_node_provider_id",
    "index_nodeclaim_provider_id",
    "index_va_node_name",
    "is_managed_node",
    "is_managed_nodeclaim",
    "nodeclaims_for_node",
    "nodes_for_nodeclaim",
    "pods_on_node",
]

# Index names carry this package's prefix: another controller may index the same field
# with its own function, and the cache refuses one name bound to two functions.
INDEX_PROVIDER_ID = "karpy.termination/providerID"
INDEX_VA_NODE_NAME = "karpy.termination/spec.nodeName"


class Index(Protocol):
    """Indexed reads of cached objects (the manager's Cache is one)."""

    def by_index(self, kind: Kind, index: str, value: str) -> list[Object]:
        """Cached objects of ``kind`` whose index ``index`` holds ``value``."""
        ...


def index_nodeclaim_provider_id(obj: Object) -> Iterable[str]:
    """Index value of a NodeClaim: status.providerID."""
    pid = (obj.get("status") or {}).get("providerID")
    return (pid,) if pid else ()


def index_node_provider_id(obj: Object) -> Iterable[str]:
    """Index value of a Node: spec.providerID."""
    pid = (obj.get("spec") or {}).get("providerID")
    return (pid,) if pid else ()


def index_va_node_name(obj: Object) -> Iterable[str]:
    """Index value of a VolumeAttachment: spec.nodeName."""
    node = (obj.get("spec") or {}).get("nodeName")
    return (node,) if node else ()


def pods_on_node(index: Index, node_name: str) -> list[Object]:
    """Every cached pod bound to ``node_name``."""
    return index.by_index(kinds.POD, INDEX_NODE_NAME, node_name) if node_name else []


def nodeclaims_for_node(index: Index, node: Mapping[str, Any]) -> list[Object]:
    """NodeClaims whose providerID is the Node's (none when the Node has no providerID)."""
    pid = (node.get("spec") or {}).get("providerID")
    return index.by_index(NODE_CLAIM, INDEX_PROVIDER_ID, pid) if pid else []


def nodes_for_nodeclaim(index: Index, nodeclaim: Mapping[str, Any]) -> list[Object]:
    """Nodes whose providerID is the NodeClaim's (none before it launched)."""
    pid = (nodeclaim.get("status") or {}).get("providerID")
    return index.by_index(kinds.NODE, INDEX_PROVIDER_ID, pid) if pid else []


def _supported(provider: CloudProvider) -> Sequence[tuple[str, str]]:
    return [(k.group, k.kind) for k in provider.supported_node_classes()]


def is_managed_nodeclaim(nodeclaim: Mapping[str, Any], provider: CloudProvider) -> bool:
    """Whether the NodeClaim's nodeClassRef names a NodeClass the provider serves."""
    ref = (nodeclaim.get("spec") or {}).get("nodeClassRef") or {}
    return (ref.get("group"), ref.get("kind")) in _supported(provider)


def is_managed_node(
    node: Mapping[str, Any], provider: CloudProvider, index: Index | None = None
) -> bool:
    """Whether karpy manages the Node: it carries the label of a NodeClass the provider
    serves (as Karpenter checks), or a managed NodeClaim has its providerID."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    if any(nodeclass_label_key(g, k) in labels for g, k in _supported(provider)):
        return True
    if index is None:
        return False
    return any(is_managed_nodeclaim(nc, provider) for nc in nodeclaims_for_node(index, node))
