"""How the NodeClaim controllers reach the API: the client surface they use and the
cache indexes that join NodeClaims and Nodes by provider ID."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from karpy.apis import NodeClaim
from karpy.cloudprovider import CloudProvider
from karpy.runtime import Kind, Object, PatchType
from karpy.runtime.kinds import NODE
from karpy.state.kinds import NODE_CLAIM

__all__ = [
    "INDEX_PROVIDER_ID",
    "Index",
    "KubeClient",
    "index_node_provider_id",
    "index_nodeclaim_provider_id",
    "is_managed",
    "nodeclaims_for_provider_id",
    "nodes_for_provider_id",
]

# The prefix keeps this index apart from other packages' indexes of the same field: the
# cache refuses one index name bound to two functions.
INDEX_PROVIDER_ID = "karpy.nodeclaim/providerID"


class KubeClient(Protocol):
    """The part of :class:`karpy.runtime.Client` the NodeClaim controllers use.

    Reads of cached kinds come from the manager's cache; ``live=True`` asks the server.
    """

    async def get(
        self, kind: Kind, name: str, *, namespace: str | None = None, live: bool = False
    ) -> Object:
        """One object; ``errors.NotFound`` if absent."""
        ...

    async def list(
        self,
        kind: Kind,
        *,
        namespace: str | None = None,
        label_selector: str | Mapping[str, str] | None = None,
        live: bool = False,
    ) -> list[Object]:
        """Matching objects."""
        ...

    async def patch(
        self,
        kind: Kind,
        name: str,
        patch: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        *,
        namespace: str | None = None,
        patch_type: PatchType = PatchType.MERGE,
    ) -> Object:
        """Patch an object; ``errors.Conflict`` if a resourceVersion in it is stale."""
        ...

    async def patch_status(
        self,
        kind: Kind,
        name: str,
        patch: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        *,
        namespace: str | None = None,
        patch_type: PatchType = PatchType.MERGE,
    ) -> Object:
        """Patch the status subresource."""
        ...

    async def delete(
        self, kind: Kind, name: str, *, namespace: str | None = None, uid: str | None = None
    ) -> Object | None:
        """Delete an object (``uid`` makes it conditional); ``errors.NotFound`` if gone."""
        ...


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


def nodes_for_provider_id(index: Index, provider_id: str | None) -> list[Object]:
    """Cached Nodes with this provider ID (none for an empty one)."""
    return index.by_index(NODE, INDEX_PROVIDER_ID, provider_id) if provider_id else []


def nodeclaims_for_provider_id(index: Index, provider_id: str | None) -> list[Object]:
    """Cached NodeClaims with this provider ID (none for an empty one)."""
    return index.by_index(NODE_CLAIM, INDEX_PROVIDER_ID, provider_id) if provider_id else []


def is_managed(nodeclaim: NodeClaim, provider: CloudProvider) -> bool:
    """Whether ``provider`` serves the NodeClaim's NodeClass (Karpenter's IsManaged):
    NodeClaims for another provider's NodeClass are left alone."""
    ref = nodeclaim.spec.node_class_ref
    return any(
        (kind.group, kind.kind) == (ref.group, ref.kind)
        for kind in provider.supported_node_classes()
    )
