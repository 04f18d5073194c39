"""The Kubernetes kinds the AWS provider reads and writes."""

from __future__ import annotations

from typing import Final

from karpy.cloudprovider import NodeClassKind
from karpy.runtime import Kind
from karpy_aws.apis import labels as aws

__all__ = ["EC2_NODE_CLASS", "EC2_NODE_CLASS_KIND", "NODE_CLAIM_KIND", "NODE_KIND"]

EC2_NODE_CLASS: Final = NodeClassKind(
    group=aws.GROUP, version="v1", kind="EC2NodeClass", plural="ec2nodeclasses"
)
EC2_NODE_CLASS_KIND: Final = Kind(
    group=aws.GROUP, version="v1", plural="ec2nodeclasses", kind="EC2NodeClass", namespaced=False
)
NODE_CLAIM_KIND: Final = Kind(
    group="karpenter.sh", version="v1", plural="nodeclaims", kind="NodeClaim", namespaced=False
)
NODE_KIND: Final = Kind(group="", version="v1", plural="nodes", kind="Node", namespaced=False)
