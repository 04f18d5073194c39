"""Cache indexes the controllers read through: the indexed-read protocol they take, and
the provider-ID index that joins NodeClaims and Nodes (a NodeClaim's status.providerID is
its Node's spec.providerID).

Every controller that needs the join registers the same index name with the same
functions (:func:`index_provider_ids`), so the manager's cache keeps one index per kind
however many controllers ask for it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from karpy.runtime import Cache, Kind, Object
from karpy.runtime.kinds import NODE
from karpy.state.kinds import NODE_CLAIM

__all__ = [
    "INDEX_PROVIDER_ID",
    "Index",
    "index_node_provider_id",
    "index_nodeclaim_provider_id",
    "index_provider_ids",
    "nodeclaims_for_provider_id",
    "nodes_for_provider_id",
]

# The prefix keeps this index apart from other packages' indexes of the same field: the
# cache refuses one index name bound to two functions.
INDEX_PROVIDER_ID = "karpy.controllers/providerID"


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
