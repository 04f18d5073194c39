"""The AWS provider's NodeClass kind (the core kinds it reads, NodeClaims and Nodes,
come from :mod:`karpy.cloudprovider` and :mod:`karpy.runtime.kinds`)."""

from __future__ import annotations

from typing import Final

from karpy.runtime import Kind
from karpy_aws.apis import labels as aws

__all__ = ["EC2_NODE_CLASS", "EC2_NODE_CLASS_KIND"]

EC2_NODE_CLASS: Final = Kind(
    group=aws.GROUP, version="v1", plural="ec2nodeclasses", kind="EC2NodeClass", namespaced=False
)
"""Karpenter AWS's EC2NodeClass: what the provider serves, and what it reads and writes."""
EC2_NODE_CLASS_KIND: Final = EC2_NODE_CLASS
"""Deprecated: the same descriptor as :data:`EC2_NODE_CLASS` (once a second type)."""
