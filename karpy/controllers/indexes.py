"""Cache indexes the controllers read through: the indexed-read protocol they take, the
provider-ID index that joins NodeClaims and Nodes (a NodeClaim's status.providerID is
its Node's spec.providerID), the NodePool index of Nodes and NodeClaims (their
``karpenter.sh/nodepool`` label) and the NodeClass index of NodePools and NodeClaims
(their nodeClassRef).

Every controller that needs one of these registers the same index name with the same
function, so the manager's cache keeps one index per kind however many controllers
ask for it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final, Protocol

from karpy.apis.labels import LABEL_NODEPOOL
from karpy.runtime import Cache, Kind, Object
from karpy.runtime.kinds import NODE
from karpy.state.kinds import NODE_CLAIM

__all__ = [
    "INDEX_NODECLASS_REF",
    "INDEX_NODEPOOL",
    "INDEX_PROVIDER_ID",
    "Index",
    "index_node_provider_id",
    "index_nodeclaim_provider_id",
    "index_nodeclass_ref",
    "index_nodepool_label",
    "index_provider_ids",
    "nodeclaims_for_provider_id",
    "nodeclass_ref_key",
    "nodes_for_provider_id",
]

# The prefix keeps this index apart from other packages' indexes of the same field: the
# cache refuses one index name bound to two functions.
INDEX_PROVIDER_ID = "karpy.controllers/providerID"
#: Nodes and NodeClaims by their ``karpenter.sh/nodepool`` label.
INDEX_NODEPOOL: Final = "karpy.controllers/nodepool"
#: NodePools and NodeClaims by the NodeClass they name (:func:`nodeclass_ref_key`).
INDEX_NODECLASS_REF: Final = "karpy.controllers/nodeClassRef"


class Index(Protocol):
    """Indexed reads of cached objects (the manager's Cache is one)."""

    def by_index(self, kind: Kind, index: str, value: str) -> list[Object]:
        """Cached objects of ``kind`` whose index ``index`` holds ``value``."""
        ...


def index_nodeclaim_provider_id(obj: Object) -> Iterable[str]:
    """Index value of a NodeClaim: its status.providerID."""
    pid = (obj.get("status") or {}).get("providerID")
    return (pid,) if pid else ()


def index_node_provider_id(obj: Object) -> Iterable[str]:
    """Index value of a Node: its spec.providerID."""
    pid = (obj.get("spec") or {}).get("providerID")
    return (pid,) if pid else ()


def index_provider_ids(cache: Cache) -> None:
    """Watch NodeClaims and Nodes through ``cache``, indexed by provider ID."""
    cache.informer(NODE_CLAIM, indexers={INDEX_PROVIDER_ID: index_nodeclaim_provider_id})
    cache.informer(NODE, indexers={INDEX_PROVIDER_ID: index_node_provider_id})


def nodes_for_provider_id(index: Index, provider_id: str | None) -> list[Object]:
    """Cached Nodes with this provider ID (none for an empty one)."""
    return index.by_index(NODE, INDEX_PROVIDER_ID, provider_id) if provider_id else []


def nodeclaims_for_provider_id(index: Index, provider_id: str | None) -> list[Object]:
    """Cached NodeClaims with this provider ID (none for an empty one)."""
    return index.by_index(NODE_CLAIM, INDEX_PROVIDER_ID, provider_id) if provider_id else []


def index_nodepool_label(obj: Object) -> Iterable[str]:
    """Index value of a Node or NodeClaim: its ``karpenter.sh/nodepool`` label."""
    pool = ((obj.get("metadata") or {}).get("labels") or {}).get(LABEL_NODEPOOL)
    return (pool,) if pool else ()


def nodeclass_ref_key(group: str, kind: str, name: str) -> str:
    """The :data:`INDEX_NODECLASS_REF` value naming one NodeClass object."""
    return f"{group}/{kind}/{name}"


def index_nodeclass_ref(obj: Object) -> Iterable[str]:
    """Index value of a NodePool (its template's nodeClassRef) or a NodeClaim (its own):
    ``group/kind/name`` of the NodeClass it names."""
    spec: Mapping[str, Any] = obj.get("spec") or {}
    if "template" in spec:  # a NodePool; a NodeClaim's spec has no template
        spec = (spec.get("template") or {}).get("spec") or {}
    ref = spec.get("nodeClassRef") or {}
    return (nodeclass_ref_key(
        str(ref.get("group", "")), str(ref.get("kind", "")), str(ref.get("name", ""))),)
