"""The EC2NodeClass hash: which spec fields, changed, drift the nodes launched from it
(Karpenter AWS's hashed fields, stamped on each NodeClaim as an annotation)."""

from __future__ import annotations

import hashlib
import json
from typing import Final

from karpy.apis import NodeClaim
from karpy_aws.apis import labels as aws
from karpy_aws.apis.ec2nodeclass import EC2NodeClass

__all__ = ["HASH_VERSION", "hash_drifted", "node_class_hash"]

#: bumped when _HASHED_FIELDS changes, so nodes stamped with the old hash do not all drift
HASH_VERSION: Final = "karpy-v2"
#: spec fields whose change means instances must be replaced (Karpenter's hashed fields)
_HASHED_FIELDS: Final = (
    "userData",
    "tags",
    "blockDeviceMappings",
    "detailedMonitoring",
    "metadataOptions",
    "associatePublicIPAddress",
    "instanceStorePolicy",
    "kubelet",
    "amiFamily",
    "networkInterfaces",
    "placementGroupSelector",
    "context",
)


def node_class_hash(node_class: EC2NodeClass) -> str:
    """A hash of the EC2NodeClass fields whose change drifts its nodes (not the
    selectors: their drift is detected against the resolved status)."""
    spec = node_class.spec.to_dict()
    static = {k: spec.get(k) for k in _HASHED_FIELDS}
    return str(
        int(hashlib.sha256(json.dumps(static, sort_keys=True).encode()).hexdigest()[:15], 16)
    )


def hash_drifted(nodeclaim: NodeClaim, node_class: EC2NodeClass) -> bool:
    """Whether the class's hashed fields changed since ``nodeclaim`` was launched from it
    (hash annotations of the same version that differ)."""
    annotations = nodeclaim.metadata.annotations
    stored = annotations.get(aws.ANNOTATION_EC2NODECLASS_HASH)
    return (
        stored is not None
        and annotations.get(aws.ANNOTATION_EC2NODECLASS_HASH_VERSION) == HASH_VERSION
        and stored != node_class_hash(node_class)
    )
