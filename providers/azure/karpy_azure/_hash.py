"""The AKSNodeClass hash: a stable digest of the spec, written on the class and on every
NodeClaim launched from it, so a changed class shows as ``NodeClassDrift``.

``spec.tags`` is left out (Karpenter-Azure's ``hash:"ignore"``): a tags change is applied
in place to the existing VMs, NICs and extensions (:mod:`karpy_azure._inplaceupdate`)
instead of replacing every node. Version ``karpy-v2`` is the hash without tags;
NodeClaims stamped ``karpy-v1`` are not compared (not hash-drifted)."""

from __future__ import annotations

import hashlib
import json
from typing import Final

from karpy.apis import NodeClaim
from karpy_azure.apis import AKSNodeClass
from karpy_azure.apis import labels as az

__all__ = ["NODECLASS_HASH_VERSION", "hash_drifted", "node_class_hash"]

#: Bumped when the hash changes meaning; NodeClaims with another version are not compared.
NODECLASS_HASH_VERSION: Final = "karpy-v2"


def node_class_hash(node_class: AKSNodeClass) -> str:
    """A stable hash of the AKSNodeClass spec, tags excepted."""
    spec = node_class.spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    spec.pop("tags", None)
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()
    return str(int(digest[:16], 16))


def hash_drifted(nodeclaim: NodeClaim, node_class: AKSNodeClass) -> bool:
    """Whether the class's spec changed since ``nodeclaim`` was launched from it (hash
    annotations of the same version that differ)."""
    annotations = nodeclaim.metadata.annotations
    return (
        annotations.get(az.ANNOTATION_AKSNODECLASS_HASH_VERSION) == NODECLASS_HASH_VERSION
        and az.ANNOTATION_AKSNODECLASS_HASH in annotations
        and annotations[az.ANNOTATION_AKSNODECLASS_HASH] != node_class_hash(node_class)
    )
