"""The Azure provider's well-known labels and values (``karpenter.azure.com/sku-*``, the AKS
``kubernetes.azure.com/*`` labels), exactly as Karpenter's Azure provider names them."""

from __future__ import annotations

from typing import Final

GROUP: Final = "karpenter.azure.com"
AKS_LABEL_DOMAIN: Final = "kubernetes.azure.com"

LABEL_SKU_NAME: Final = GROUP + "/sku-name"
LABEL_SKU_FAMILY: Final = GROUP + "/sku-family"
LABEL_SKU_SERIES: Final = GROUP + "/sku-series"
LABEL_SKU_VERSION: Final = GROUP + "/sku-version"
LABEL_SKU_CPU: Final = GROUP + "/sku-cpu"
LABEL_SKU_MEMORY: Final = GROUP + "/sku-memory"
LABEL_SKU_ACCELERATED_NETWORKING: Final = GROUP + "/sku-networking-accelerated"
LABEL_SKU_STORAGE_PREMIUM_CAPABLE: Final = GROUP + "/sku-storage-premium-capable"
LABEL_SKU_STORAGE_ULTRA_SSD: Final = GROUP + "/sku-storage-ultra-ssd"
LABEL_SKU_STORAGE_EPHEMERAL_OS_MAX_SIZE: Final = GROUP + "/sku-storage-ephemeralos-maxsize"
LABEL_SKU_GPU_NAME: Final = GROUP + "/sku-gpu-name"
LABEL_SKU_GPU_MANUFACTURER: Final = GROUP + "/sku-gpu-manufacturer"
LABEL_SKU_GPU_COUNT: Final = GROUP + "/sku-gpu-count"
LABEL_SKU_HYPERV_GENERATION: Final = GROUP + "/sku-hyperv-generation"
LABEL_PLACEMENT_SCOPE: Final = GROUP + "/placement-scope"
#: The name of the node's AKSNodeClass.
LABEL_NODECLASS: Final = GROUP + "/aksnodeclass"

AKS_LABEL_CLUSTER: Final = AKS_LABEL_DOMAIN + "/cluster"
AKS_LABEL_MODE: Final = AKS_LABEL_DOMAIN + "/mode"
AKS_LABEL_SCALE_SET_PRIORITY: Final = AKS_LABEL_DOMAIN + "/scalesetpriority"
AKS_LABEL_PRIORITY: Final = AKS_LABEL_DOMAIN + "/priority"
AKS_LABEL_OS_SKU: Final = AKS_LABEL_DOMAIN + "/os-sku"
AKS_LABEL_FIPS_ENABLED: Final = AKS_LABEL_DOMAIN + "/fips_enabled"
AKS_LABEL_CPU: Final = AKS_LABEL_DOMAIN + "/sku-cpu"
AKS_LABEL_MEMORY: Final = AKS_LABEL_DOMAIN + "/sku-memory"
AKS_LABEL_EBPF_DATAPLANE: Final = AKS_LABEL_DOMAIN + "/ebpf-dataplane"
AKS_LABEL_EBPF_HOST_ROUTING: Final = AKS_LABEL_DOMAIN + "/ebpf-host-routing"
AKS_LABEL_NETWORK_POLICY: Final = AKS_LABEL_DOMAIN + "/network-policy"
AKS_LABEL_HOSTED_VM: Final = AKS_LABEL_DOMAIN + "/hostedvm"

#: Labels the Azure provider sets that NodePools may use despite the reserved domain.
WELL_KNOWN_LABELS: Final = (
    LABEL_NODECLASS,
    LABEL_SKU_NAME,
    LABEL_SKU_FAMILY,
    LABEL_SKU_SERIES,
    LABEL_SKU_VERSION,
    LABEL_SKU_CPU,
    LABEL_SKU_MEMORY,
    LABEL_SKU_ACCELERATED_NETWORKING,
    LABEL_SKU_STORAGE_PREMIUM_CAPABLE,
    LABEL_SKU_STORAGE_ULTRA_SSD,
    LABEL_SKU_STORAGE_EPHEMERAL_OS_MAX_SIZE,
    LABEL_SKU_GPU_NAME,
    LABEL_SKU_GPU_MANUFACTURER,
    LABEL_SKU_GPU_COUNT,
    LABEL_PLACEMENT_SCOPE,
)
#: The AKS labels NodePools may use.
AKS_WELL_KNOWN_LABELS: Final = (
    AKS_LABEL_MODE,
    AKS_LABEL_SCALE_SET_PRIORITY,
    AKS_LABEL_PRIORITY,
    AKS_LABEL_FIPS_ENABLED,
    AKS_LABEL_OS_SKU,
    AKS_LABEL_CLUSTER,
    AKS_LABEL_CPU,
    AKS_LABEL_MEMORY,
    AKS_LABEL_EBPF_DATAPLANE,
    AKS_LABEL_EBPF_HOST_ROUTING,
    AKS_LABEL_NETWORK_POLICY,
    AKS_LABEL_HOSTED_VM,
)
#: Legacy AKS labels a NodePool may not set.
RESTRICTED_LABELS: Final = ("agentpool", "storageprofile", "storagetier", "accelerator")

ANNOTATION_AKSNODECLASS_HASH: Final = GROUP + "/aksnodeclass-hash"
ANNOTATION_AKSNODECLASS_HASH_VERSION: Final = GROUP + "/aksnodeclass-hash-version"
#: the hash of the tags a NodeClaim's VM, NIC and extensions carry (Karpenter-Azure's name)
ANNOTATION_IN_PLACE_UPDATE_HASH: Final = GROUP + "/in-place-update-hash"
TERMINATION_FINALIZER: Final = GROUP + "/termination"

IMAGE_FAMILY_UBUNTU: Final = "Ubuntu"
IMAGE_FAMILY_UBUNTU2204: Final = "Ubuntu2204"
IMAGE_FAMILY_UBUNTU2404: Final = "Ubuntu2404"
IMAGE_FAMILY_AZURE_LINUX: Final = "AzureLinux"

MODE_SYSTEM: Final = "system"
MODE_USER: Final = "user"
PRIORITY_REGULAR: Final = "regular"
PRIORITY_SPOT: Final = "spot"
MANUFACTURER_NVIDIA: Final = "nvidia"
MANUFACTURER_AMD: Final = "amd"
