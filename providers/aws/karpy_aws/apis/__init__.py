"""The ``karpenter.k8s.aws/v1`` API: the EC2NodeClass model, the AWS well-known labels,
and the ``APIExtension`` that gives karpy's CRD generator and ``karpy convert`` the
AWS kinds (entry point ``karpy.crds: aws``)."""

from __future__ import annotations

from karpy.apis.extension import APIExtension
from karpy_aws.apis import labels
from karpy_aws.apis.convert import CONVERTERS
from karpy_aws.apis.ec2nodeclass import (
    AMISelectorTerm,
    BlockDevice,
    BlockDeviceMapping,
    EC2NodeClass,
    EC2NodeClassSpec,
    EC2NodeClassStatus,
    KubeletConfiguration,
    MetadataOptions,
)

__all__ = [
    "EXTENSION",
    "AMISelectorTerm",
    "BlockDevice",
    "BlockDeviceMapping",
    "EC2NodeClass",
    "EC2NodeClassSpec",
    "EC2NodeClassStatus",
    "KubeletConfiguration",
    "MetadataOptions",
    "labels",
]

#: What the AWS provider adds to karpy's API.
EXTENSION = APIExtension(
    name="aws",
    resources=(EC2NodeClass,),
    restricted_label_domains={labels.GROUP: labels.WELL_KNOWN_LABELS},
    well_known_labels=labels.SCHEDULING_LABELS,
    converters=CONVERTERS,
)
