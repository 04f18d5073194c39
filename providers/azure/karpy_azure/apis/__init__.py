"""The ``karpenter.azure.com/v1beta1`` API: the AKSNodeClass model, the Azure well-known
labels, and the ``APIExtension`` that gives karpy's CRD generator and ``karpy convert``
the Azure kinds (entry point ``karpy.crds: azure``)."""

from __future__ import annotations

from karpy.apis.extension import APIExtension
from karpy_azure.apis import labels
from karpy_azure.apis.aksnodeclass import (
    AKSNodeClass,
    AKSNodeClassSpec,
    AKSNodeClassStatus,
    KubeletConfiguration,
)
from karpy_azure.apis.convert import CONVERTERS

__all__ = [
    "EXTENSION",
    "AKSNodeClass",
    "AKSNodeClassSpec",
    "AKSNodeClassStatus",
    "KubeletConfiguration",
    "labels",
]

#: What the Azure provider adds to karpy's API.
EXTENSION = APIExtension(
    name="azure",
    resources=(AKSNodeClass,),
    restricted_label_domains={
        labels.GROUP: labels.WELL_KNOWN_LABELS,
        labels.AKS_LABEL_DOMAIN: labels.AKS_WELL_KNOWN_LABELS,
    },
    restricted_labels=labels.RESTRICTED_LABELS,
    well_known_labels=(*labels.WELL_KNOWN_LABELS, *labels.AKS_WELL_KNOWN_LABELS),
    converters=CONVERTERS,
)
