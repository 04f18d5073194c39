"""Instance types from Resource SKUs: the labels Karpenter's Azure provider defines, the
AKS allocatable (see :mod:`karpy_azure._overhead`), and one offering per zone x capacity
type priced from the retail price table.

Zones are labelled as AKS labels nodes: ``<location>-<n>`` for a zonal SKU, ``"0"`` for a
SKU without availability zones (placement scope ``regional``). Spot offerings are
available only where the SKU is ``LowPriorityCapable``; offerings the provider's
unavailable-offerings cache holds are shown with ``available=False``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from karpy.apis.labels import CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_SPOT, LABEL_REGION
from karpy.cloudprovider import InstanceType, Offering, OfferingKey, UnavailableOfferings
from karpy.scheduling import DOES_NOT_EXIST, IN, Requirement, Requirements
from karpy.scheduling import resources as res
from karpy_azure._overhead import aks_overhead, max_pods, memory_capacity_bytes
from karpy_azure._pricing import PriceTable
from karpy_azure._settings import AzureSettings
from karpy_azure._skus import Sku
from karpy_azure.apis import AKSNodeClass
from karpy_azure.apis import labels as az

__all__ = [
    "AZURE_DISK_CSI_DRIVER",
    "REGIONAL_ZONE",
    "InstanceTypeParams",
    "arm_zone",
    "build_instance_types",
    "cluster_label",
    "instance_type_params",
    "os_sku",
    "zone_label",
]

REGIONAL_ZONE = "0"
NVIDIA_GPU = "nvidia.com/gpu"
AMD_GPU = "amd.com/gpu"


@dataclass(frozen=True, slots=True)
class InstanceTypeParams:
    """What of the AKSNodeClass and settings shapes the instance types."""

    location: str
    node_resource_group: str
    image_family: str = "Ubuntu"
    os_disk_size_gb: int = 128
    max_pods: int = 250
    fips: bool = False
    encryption_at_host: bool = False
    memory_overhead_percent: float = 0.075
    #: ``artifactStreaming.enabled``: AKS streams images on amd64 nodes only
    artifact_streaming: bool = False


def zone_label(location: str, arm_zone_number: str) -> str:
    """The zone label AKS puts on a node in ARM zone ``arm_zone_number`` ("" = regional)."""
    return f"{location.lower()}-{arm_zone_number}" if arm_zone_number else REGIONAL_ZONE


def arm_zone(zone: str) -> str:
    """The ARM zone number of a zone label ("" for the regional ``"0"``)."""
    return "" if zone == REGIONAL_ZONE else zone.rsplit("-", 1)[-1]


def cluster_label(node_resource_group: str) -> str:
    """The ``kubernetes.azure.com/cluster`` value: the node resource group, made a valid
    label value as AKS does (parentheses to dashes, at most 63 characters, ending in an
    alphanumeric)."""
    value = node_resource_group.replace("(", "-").replace(")", "-")[:63]
    if value.endswith(("-", "_", ".")):
        value = value[:62] + "z" if len(value) > 62 else value + "z"
    return value


def os_sku(image_family: str) -> str:
    """The ``kubernetes.azure.com/os-sku`` of an image family."""
    return "AzureLinux" if image_family == az.IMAGE_FAMILY_AZURE_LINUX else "Ubuntu"


def _req(key: str, *values: str) -> Requirement:
    return Requirement.new(key, IN, values) if values else Requirement.new(key, DOES_NOT_EXIST)


def _ultra_ssd(sku: Sku, zone: str) -> tuple[str, ...]:
    ok = sku.ultra_ssd_regional if zone == REGIONAL_ZONE else arm_zone(zone) in sku.ultra_ssd_zones
    return ("true", "false") if ok else ("false",)


def _offerings(
    sku: Sku, params: InstanceTypeParams, prices: PriceTable, unavailable: UnavailableOfferings
) -> list[Offering]:
    zones = [zone_label(params.location, z) for z in sku.zones] or [REGIONAL_ZONE]
    offerings: list[Offering] = []
    for zone in sorted(zones):
        scope = "regional" if zone == REGIONAL_ZONE else "zonal"
        for capacity_type, priority, price, capable in (
            (CAPACITY_TYPE_ON_DEMAND, az.PRIORITY_REGULAR, prices.on_demand_price(sku.name), True),
            (
                CAPACITY_TYPE_SPOT,
                az.PRIORITY_SPOT,
                prices.spot_price(sku.name),
                sku.low_priority_capable,
            ),
        ):
            key = OfferingKey(sku.name, zone, capacity_type)
            offerings.append(
                Offering(
                    zone=zone,
                    capacity_type=capacity_type,
                    price=price,
                    available=capable and not unavailable.is_unavailable(key),
                    requirements=Requirements(
                        (
                            _req(az.AKS_LABEL_SCALE_SET_PRIORITY, priority),
                            _req(az.AKS_LABEL_PRIORITY, priority),
                            _req(az.LABEL_PLACEMENT_SCOPE, scope),
                            _req(az.LABEL_SKU_STORAGE_ULTRA_SSD, *_ultra_ssd(sku, zone)),
                        )
                    ),
                )
            )
    return offerings


def _requirements(sku: Sku, params: InstanceTypeParams, offerings: Sequence[Offering]) -> list[
    Requirement
]:
    size = sku.vm_size
    assert size is not None  # filtered by supported_by_aks
    available = [o for o in offerings if o.available]
    memory_mib = str(int(sku.memory_gib * 1024))
    gpu_manufacturer = sku.gpu_manufacturer
    ephemeral = sku.ephemeral_os_max_gb
    hyperv = [g.removeprefix("V") for g in sku.hyperv_generations]
    return [
        _req(LABEL_REGION, params.location),
        _req(az.LABEL_PLACEMENT_SCOPE, *sorted({o.requirements[az.LABEL_PLACEMENT_SCOPE]
                                                .sorted_values()[0] for o in available})),
        _req(az.LABEL_SKU_STORAGE_ULTRA_SSD, *sorted({v for o in available for v in
                                                      o.requirements[az.LABEL_SKU_STORAGE_ULTRA_SSD]
                                                      .sorted_values()})),
        _req(az.LABEL_SKU_NAME, sku.name),
        _req(az.LABEL_SKU_FAMILY, size.family),
        _req(az.LABEL_SKU_SERIES, size.series),
        _req(az.LABEL_SKU_VERSION, size.version_number),
        _req(az.LABEL_SKU_CPU, str(sku.vcpus)),
        _req(az.LABEL_SKU_MEMORY, memory_mib),
        _req(az.AKS_LABEL_CPU, str(sku.vcpus)),
        _req(az.AKS_LABEL_MEMORY, memory_mib),
        _req(az.LABEL_SKU_GPU_COUNT, str(sku.gpus if gpu_manufacturer else 0)),
        _req(az.LABEL_SKU_GPU_MANUFACTURER, *([gpu_manufacturer] if gpu_manufacturer else [])),
        _req(az.LABEL_SKU_GPU_NAME,
             *([size.accelerator] if gpu_manufacturer and size.accelerator else [])),
        _req(az.AKS_LABEL_CLUSTER, cluster_label(params.node_resource_group)),
        _req(az.AKS_LABEL_MODE, az.MODE_SYSTEM, az.MODE_USER),
        _req(az.AKS_LABEL_SCALE_SET_PRIORITY, az.PRIORITY_REGULAR, az.PRIORITY_SPOT),
        _req(az.AKS_LABEL_PRIORITY, az.PRIORITY_REGULAR, az.PRIORITY_SPOT),
        _req(az.AKS_LABEL_OS_SKU, os_sku(params.image_family)),
        _req(az.AKS_LABEL_FIPS_ENABLED, *(["true"] if params.fips else [])),
        _req(az.LABEL_SKU_STORAGE_EPHEMERAL_OS_MAX_SIZE, *([str(ephemeral)] if ephemeral else [])),
        _req(az.LABEL_SKU_STORAGE_PREMIUM_CAPABLE, str(sku.premium_io).lower()),
        _req(az.LABEL_SKU_ACCELERATED_NETWORKING, str(sku.accelerated_networking).lower()),
        _req(az.LABEL_SKU_HYPERV_GENERATION, *hyperv),
    ]


def _capacity(sku: Sku, params: InstanceTypeParams) -> dict[str, int]:
    capacity = {
        res.CPU: sku.vcpus * 1000,
        res.MEMORY: memory_capacity_bytes(sku.memory_gib, params.memory_overhead_percent),
        res.EPHEMERAL_STORAGE: params.os_disk_size_gb * 10**9,
        res.PODS: params.max_pods,
    }
    if sku.gpu_manufacturer == "nvidia":
        capacity[NVIDIA_GPU] = sku.gpus
    elif sku.gpu_manufacturer == "amd":
        capacity[AMD_GPU] = sku.gpus
    return capacity


_AZURE_LINUX_GPU = re.compile(r"^Standard_N(C|D)")  # AzureLinux ships NVIDIA drivers for NC/ND


def _supported_by_node_class(sku: Sku, params: InstanceTypeParams) -> bool:
    if params.encryption_at_host and not sku.encryption_at_host:
        return False
    if params.artifact_streaming and sku.architecture == "arm64":
        # arm64 images cannot stream; as Karpenter-Azure does, a class that asks for
        # streaming offers no arm64 size rather than nodes where it silently is off
        return False
    if sku.gpu_manufacturer == "amd" and params.image_family == az.IMAGE_FAMILY_AZURE_LINUX:
        return False
    return not (
        sku.gpu_manufacturer == "nvidia"
        and params.image_family == az.IMAGE_FAMILY_AZURE_LINUX
        and not _AZURE_LINUX_GPU.match(sku.name)
    )


AZURE_DISK_CSI_DRIVER = "disk.csi.azure.com"
"""The CSI driver of Azure managed disks, which a VM attaches up to its SKU's limit."""


def _volume_limits(sku: Sku) -> dict[str, int]:
    """The SKU's data-disk limit for the Azure Disk CSI driver, which publishes
    ``MaxDataDiskCount`` as its node's attachable count (the OS disk is not a data
    disk); none when the SKU does not say, so the CSINode decides."""
    if sku.max_data_disks is None:
        return {}
    return {AZURE_DISK_CSI_DRIVER: sku.max_data_disks}


def build_instance_types(
    skus: Iterable[Sku],
    params: InstanceTypeParams,
    prices: PriceTable,
    unavailable: UnavailableOfferings,
) -> list[InstanceType]:
    """Every instance type AKS can run from ``skus`` for a NodeClass shaped by
    ``params``, sorted by name; unsupported SKUs are left out."""
    found: list[InstanceType] = []
    for sku in skus:
        if sku.supported_by_aks() is not None or not _supported_by_node_class(sku, params):
            continue
        offerings = _offerings(sku, params, prices, unavailable)
        found.append(
            InstanceType.build(
                sku.name,
                capacity=_capacity(sku, params),
                offerings=offerings,
                overhead=aks_overhead(sku.vcpus, sku.memory_gib),
                architecture=sku.architecture,
                operating_systems=("linux",),
                requirements=_requirements(sku, params, offerings),
                volume_attachment_limits=_volume_limits(sku),
            )
        )
    found.sort(key=lambda it: it.name)
    return found


def instance_type_params(settings: AzureSettings, node_class: AKSNodeClass) -> InstanceTypeParams:
    """What of ``node_class`` and ``settings`` shapes the class's instance types."""
    spec = node_class.spec
    return InstanceTypeParams(
        location=settings.location,
        node_resource_group=settings.node_resource_group,
        image_family=spec.image_family,
        os_disk_size_gb=spec.os_disk_size_gb,
        max_pods=max_pods(spec.max_pods, settings.network_plugin, settings.network_plugin_mode),
        fips=spec.fips_mode == "FIPS",
        encryption_at_host=bool(spec.security and spec.security.encryption_at_host),
        memory_overhead_percent=settings.vm_memory_overhead_percent,
        artifact_streaming=bool(spec.artifact_streaming and spec.artifact_streaming.enabled),
    )
