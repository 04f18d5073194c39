"""Names the kwok provider shares with Karpenter's kwok provider: its label domain,
the instance labels, the annotation kwok acts on, its NodeClass and provider IDs."""

from __future__ import annotations

from typing import Final

from karpy.runtime import Kind

GROUP: Final = "karpenter.kwok.sh"

LABEL_INSTANCE_SIZE: Final = GROUP + "/instance-size"
LABEL_INSTANCE_FAMILY: Final = GROUP + "/instance-family"
LABEL_INSTANCE_CPU: Final = GROUP + "/instance-cpu"
LABEL_INSTANCE_MEMORY: Final = GROUP + "/instance-memory"
#: The capacity reservation a ``reserved`` offering (and its node) belongs to.
LABEL_RESERVATION_ID: Final = GROUP + "/reservation-id"
#: The labels the kwok catalogue adds to the core's well-known labels.
WELL_KNOWN_LABELS: Final = frozenset(
    {
        LABEL_INSTANCE_SIZE,
        LABEL_INSTANCE_FAMILY,
        LABEL_INSTANCE_CPU,
        LABEL_INSTANCE_MEMORY,
        LABEL_RESERVATION_ID,
    }
)

#: kwok only plays the kubelet for Nodes annotated (and, by Karpenter, labelled) so.
KWOK_NODE_KEY: Final = "kwok.x-k8s.io/node"
KWOK_NODE_VALUE: Final = "fake"
#: The hourly price, read by eks-node-viewer and the demo.
LABEL_INSTANCE_PRICE: Final = "eks-node-viewer/instance-price"

PROVIDER_ID_PREFIX: Final = "kwok://"

KWOK_NODE_CLASS: Final = Kind(
    group=GROUP, version="v1alpha1", kind="KWOKNodeClass", plural="kwoknodeclasses",
    namespaced=False,
)
