"""The AKSNodeClass hash: a stable digest of the spec, written on the class and on every
NodeClaim launched from it, so a changed class shows as ``NodeClassDrift``."""

from __future__ import annotations

import hashlib
import json
from typing import Final

from karpy_azure.apis import AKSNodeClass

__all__ = ["NODECLASS_HASH_VERSION", "node_class_hash"]

#: Bumped when the hash changes meaning; NodeClaims with another version are not compared.
NODECLASS_HASH_VERSION: Final = "karpy-v1"


def node_class_hash(node_class: AKSNodeClass) -> str:
    """A stable hash of the AKSNodeClass spec."""
    spec = node_class.spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()
    return str(int(digest[:16], 16))
