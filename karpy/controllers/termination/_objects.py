"""The cache indexes termination looks objects up by, and the lookups built on them
(pods on a node, the NodeClaim of a Node and back)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from karpy.apis.labels import nodeclass_label_key
from karpy.cloudprovider import CloudProvider
from karpy.controllers.indexes import Index, nodeclaims_for_provider_id, nodes_for_provider_id
from karpy.runtime import Object, kinds
from karpy.runtime.indexes import INDEX_NODE_NAME, index_by_node_name

__all__ = [
    "INDEX_NODE_NAME",
    "INDEX_VA_NODE_NAME",
    "index_by_node_name",
    "index_va_node_name",
    "is_managed_node",
    "is_managed_nodeclaim",
    "nodeclaims_for_node",
    "nodes_for_nodeclaim",
    "pods_on_node",
]

# The index name carries this package's prefix: another controller may index the same
# field with its own function, and the cache refuses one name bound to two functions.
INDEX_VA_NODE_NAME = "karpy.termination/spec.nodeName"


def index_va_node_name(obj: Object) -> Iterable[str]:
    """Index value of a VolumeAttachment: spec.nodeName."""
    node = (obj.get("spec") or {}).get("nodeName")
    return (node,) if node else ()


def pods_on_node(index: Index, node_name: str) -> list[Object]:
    """Every cached pod bound to ``node_name``."""
    return index.by_index(kinds.POD, INDEX_NODE_NAME, node_name) if node_name else []


def nodeclaims_for_node(index: Index, node: Mapping[str, Any]) -> list[Object]:
    """NodeClaims whose providerID is the Node's (none when the Node has no providerID)."""
    return nodeclaims_for_provider_id(index, (node.get("spec") or {}).get("providerID"))


def nodes_for_nodeclaim(index: Index, nodeclaim: Mapping[str, Any]) -> list[Object]:
    """Nodes whose providerID is the NodeClaim's (none before it launched)."""
    return nodes_for_provider_id(index, (nodeclaim.get("status") or {}).get("providerID"))


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
