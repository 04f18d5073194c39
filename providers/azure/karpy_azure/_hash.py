"""The AKSNodeClass hash: a stable digest of the spec, written on the class and on every
NodeClaim launched from it, so a changed class shows as ``NodeClassDrift``."""

from __future__ import annotations

import hashlib
import json
from typing import Final

from karpy.apis import NodeClaim
from karpy_azure.apis import AKSNodeClass
from karpy_azure.apis import labels as az

__all__ = ["NODECLASS_HASH_VERSION", "hash_drifted", "node_class_hash"]

#: Bumped when the hash changes meaning; NodeClaims with another version are not compared.
NODECLASS_HASH_VERSION: Final = "karpy-v1"


def node_class_hash(node_class: AKSNodeClass) -> str:
    """A stable hash of the AKSNodeClass spec."""
    spec = node_class.spec.model_dump(mode="json", by_alias=True, exclude_none=True)
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
