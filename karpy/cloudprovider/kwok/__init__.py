"""The kwok provider: "launches" a machine by creating a Node object that kwok then
plays the kubelet for. It needs no cloud, so the demo and the end-to-end tests use it.

It mirrors Karpenter's kwok provider: a synthetic catalogue (or one from a JSON file in
Karpenter kwok's format), the KWOKNodeClass NodeClass, providerIDs ``kwok://<node>``
and the ``karpenter.kwok.sh/instance-*`` labels. Options add what tests need: launch
and registration delays, injected insufficient capacity, launches that never register,
and cloud faults drawn at set rates (create failing or slow, delete failing, get stale).
Launched instances outlive the karpy process, as a real cloud's do: a booted one is its
Node, one still booting is a record in the cluster (``InstanceRecords``).
"""

from karpy.cloudprovider.kwok._catalogue import (
    CatalogueError,
    InstanceTypeSpec,
    OfferingSpec,
    dump_catalogue,
    generate_catalogue,
    load_catalogue,
    to_instance_type,
    to_instance_types,
)
from karpy.cloudprovider.kwok._nodeclass import (
    API_EXTENSION,
    KWOKNodeClass,
    KWOKNodeClassSpec,
    KWOKNodeClassStatus,
)
from karpy.cloudprovider.kwok._options import (
    FAULT_CREATE_ERROR,
    FAULT_CREATE_SLOW,
    FAULT_DELETE_ERROR,
    FAULT_GET_NOT_FOUND,
    KwokFaults,
    KwokOptions,
    KwokSettingsError,
    OfferingPattern,
)
from karpy.cloudprovider.kwok._provider import KwokCloudProvider
from karpy.cloudprovider.kwok._records import (
    RECORD_LABEL,
    RECORD_NAMESPACE,
    InstanceRecord,
    InstanceRecords,
)
from karpy.cloudprovider.kwok._wellknown import (
    KWOK_NODE_CLASS,
    PROVIDER_ID_PREFIX,
    WELL_KNOWN_LABELS,
)

__all__ = [
    "API_EXTENSION",
    "FAULT_CREATE_ERROR",
    "FAULT_CREATE_SLOW",
    "FAULT_DELETE_ERROR",
    "FAULT_GET_NOT_FOUND",
    "KWOK_NODE_CLASS",
    "PROVIDER_ID_PREFIX",
    "RECORD_LABEL",
    "RECORD_NAMESPACE",
    "WELL_KNOWN_LABELS",
    "CatalogueError",
    "InstanceRecord",
    "InstanceRecords",
    "InstanceTypeSpec",
    "KWOKNodeClass",
    "KWOKNodeClassSpec",
    "KWOKNodeClassStatus",
    "KwokCloudProvider",
    "KwokFaults",
    "KwokOptions",
    "KwokSettingsError",
    "OfferingPattern",
    "OfferingSpec",
    "dump_catalogue",
    "generate_catalogue",
    "load_catalogue",
    "to_instance_type",
    "to_instance_types",
]
