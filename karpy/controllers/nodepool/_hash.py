"""``nodepool.hash``: the ``karpenter.sh/nodepool-hash`` annotation (and its version) on
every NodePool, for observability and static drift detection.

The hash is Karpenter's own (version ``v3``, :mod:`karpy.apis.v1.nodepool_hash`), so
NodeClaims Karpenter launched compare equal after a move to karpy. When a NodePool's
hash version is not the current one (written by an older karpy as ``karpy-v1``, or by
another Karpenter version), its NodeClaims' hashes cannot be compared with the new one:
they are re-stamped with the current hash and version — except NodeClaims already
judged (a ``Drifted`` condition), which keep theirs, as Karpenter does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from karpy.apis.annotations import (
    ANNOTATION_NODEPOOL_HASH,
    ANNOTATION_NODEPOOL_HASH_VERSION,
    NODEPOOL_HASH_VERSION,
)
from karpy.apis.v1 import CONDITION_DRIFTED
from karpy.cloudprovider import CloudProvider
from karpy.controllers.indexes import INDEX_NODEPOOL, Index
from karpy.controllers.nodepool._objects import get_managed, parse_nodepool
from karpy.runtime import Client, Request, Result, errors
from karpy.state.kinds import NODE_CLAIM, NODE_POOL

__all__ = ["NodePoolHash"]


def _annotations(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("annotations") or {}


class NodePoolHash:
    """The ``nodepool.hash`` reconciler (see the module docs)."""

    name = "nodepool.hash"

    def __init__(self, *, client: Client, index: Index, cloud_provider: CloudProvider) -> None:
        self._client = client
        self._index = index
        self._provider = cloud_provider

    async def reconcile(self, request: Request) -> Result:
        """Stamp the hash on the NodePool (and re-stamp its NodeClaims on a new version)."""
        found = await get_managed(self._client, self._provider, request.name)
        if found is None:
            return Result()
        stored, _ = found
        nodepool, problems = parse_nodepool(stored)
        if problems:
            return Result()  # nothing to hash; nodepool.validation reports why
        digest = nodepool.hash()
        annotations = _annotations(stored)
        if annotations.get(ANNOTATION_NODEPOOL_HASH_VERSION) != NODEPOOL_HASH_VERSION:
            await self._restamp_nodeclaims(request.name, digest)
        want = {ANNOTATION_NODEPOOL_HASH: digest,
                ANNOTATION_NODEPOOL_HASH_VERSION: NODEPOOL_HASH_VERSION}
        if any(annotations.get(k) != v for k, v in want.items()):
            try:
                await self._client.patch(NODE_POOL, request.name,
                                         {"metadata": {"annotations": want}})
            except errors.NotFound:
                return Result()
        return Result()

    async def _restamp_nodeclaims(self, nodepool: str, digest: str) -> None:
        for nodeclaim in self._index.by_index(NODE_CLAIM, INDEX_NODEPOOL, nodepool):
            annotations = _annotations(nodeclaim)
            if annotations.get(ANNOTATION_NODEPOOL_HASH_VERSION) == NODEPOOL_HASH_VERSION:
                continue
            want = {ANNOTATION_NODEPOOL_HASH_VERSION: NODEPOOL_HASH_VERSION}
            conditions = (nodeclaim.get("status") or {}).get("conditions") or ()
            if not any(c.get("type") == CONDITION_DRIFTED for c in conditions):
                want[ANNOTATION_NODEPOOL_HASH] = digest
            try:
                await self._client.patch(NODE_CLAIM, nodeclaim["metadata"]["name"],
                                         {"metadata": {"annotations": want}})
            except errors.NotFound:
                continue
