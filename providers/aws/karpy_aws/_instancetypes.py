"""From EC2's description of an instance type to karpy's :class:`InstanceType`: labels,
capacity, overhead (hence allocatable) and offerings, as Karpenter AWS computes them
(pkg/providers/instancetype/types.go).

Pure and synchronous: the EC2 calls, caches and prices live in
:mod:`karpy_aws._catalog`; this module only turns data into data, so every formula is
unit-tested on its own:

* memory: ``MemoryInfo.SizeInMiB`` (less 64 MiB on Graviton, kept by the kernel's CMA),
  less the VM overhead ``ceil(memory * vmMemoryOverheadPercent)`` in MiB;
* pods: ``kubelet.maxPods``, else the ENI limit ``(ENIs - reservedENIs) * (IPv4 per ENI
  - 1) + 2`` of the default network card, else 110; capped by ``podsPerCore * vCPUs``;
* kube-reserved: memory ``11 MiB * pods + 255 MiB`` (pods from the ENI limit for the
  families that size it so), CPU 6% of the first core, 1% of the second, 0.5% of the
  next two and 0.25% of the rest, ephemeral storage 1Gi; ``kubelet.kubeReserved`` wins;
* eviction threshold: memory 100Mi and 10% of the root volume, or ``evictionHard``;
* ephemeral storage: the root volume of ``blockDeviceMappings``, else the family's
  default (20Gi), or the instance store when ``instanceStorePolicy: RAID0``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from karpy.apis import labels as wk
from karpy.cloudprovider import InstanceType, Offering, OfferingKey, Overhead
from karpy.scheduling import Requirement, Requirements
from karpy.scheduling import resources as res
from karpy_aws._reservations import ReservedSlot, reserved_offerings
from karpy_aws.apis import labels as aws
from karpy_aws.apis.ec2nodeclass import EC2NodeClass

__all__ = [
    "EBS_CSI_DRIVER",
    "AMIFamilyTraits",
    "NodeClassShape",
    "SubnetZone",
    "build_instance_type",
    "ebs_attachment_limit",
    "eni_limited_pods",
    "eviction_threshold",
    "kube_reserved",
    "memory_capacity",
    "traits_of",
]

MIB = 2**20
GIB = 2**30
_FAMILY_SCHEME = re.compile(r"(^[a-z]+)(-[0-9]+tb)?([0-9]+).*\.")
_ARCHITECTURES = {"x86_64": "amd64", "arm64": "arm64"}
_DEFAULT_PODS = 110
_DEFAULT_ROOT_VOLUME = 20 * GIB
_CPU_RESERVED_STEPS = (
    (0, 1000, 0.06),
    (1000, 2000, 0.01),
    (2000, 4000, 0.005),
    (4000, 1 << 31, 0.0025),
)


@dataclass(frozen=True, slots=True)
class AMIFamilyTraits:
    """What an AMI family changes in sizing (Karpenter's amifamily FeatureFlags)."""

    eni_limited_pod_density: bool = True
    eni_limited_memory_overhead: bool = True
    pods_per_core: bool = True
    windows: bool = False
    #: the device the kubelet's root volume is on
    ephemeral_device: str | None = "/dev/xvda"


_TRAITS = {
    aws.AMI_FAMILY_AL2: AMIFamilyTraits(),
    aws.AMI_FAMILY_AL2023: AMIFamilyTraits(),
    aws.AMI_FAMILY_BOTTLEROCKET: AMIFamilyTraits(
        eni_limited_memory_overhead=False, pods_per_core=False, ephemeral_device="/dev/xvdb"
    ),
    aws.AMI_FAMILY_WINDOWS2019: AMIFamilyTraits(
        eni_limited_pod_density=False, windows=True, ephemeral_device="/dev/sda1"
    ),
    aws.AMI_FAMILY_WINDOWS2022: AMIFamilyTraits(
        eni_limited_pod_density=False, windows=True, ephemeral_device="/dev/sda1"
    ),
    aws.AMI_FAMILY_WINDOWS2025: AMIFamilyTraits(
        eni_limited_pod_density=False, windows=True, ephemeral_device="/dev/sda1"
    ),
    aws.AMI_FAMILY_CUSTOM: AMIFamilyTraits(ephemeral_device=None),
}


def traits_of(family: str) -> AMIFamilyTraits:
    """The traits of an AMI family (Custom's for an unknown name)."""
    return _TRAITS.get(family, _TRAITS[aws.AMI_FAMILY_CUSTOM])


@dataclass(frozen=True, slots=True)
class SubnetZone:
    """A zone the NodeClass's subnets cover."""

    zone: str
    zone_id: str | None = None


@dataclass(frozen=True, slots=True)
class NodeClassShape:
    """What of an EC2NodeClass shapes its instance types, parsed once (hashable, so it
    keys the catalogue cache)."""

    ami_family: str = aws.AMI_FAMILY_AL2023
    max_pods: int | None = None
    pods_per_core: int | None = None
    kube_reserved: tuple[tuple[str, str], ...] = ()
    system_reserved: tuple[tuple[str, str], ...] = ()
    eviction_hard: tuple[tuple[str, str], ...] = ()
    root_volume_bytes: int | None = None
    raid0: bool = False
    efa_only_interfaces: int = 0
    zones: tuple[SubnetZone, ...] = field(default=())
    #: the capacity reservations of ``status.capacityReservations`` (reserved offerings)
    reservations: tuple[ReservedSlot, ...] = field(default=())
    #: ``connectionTracking`` is set: only Nitro types can apply it
    nitro_only: bool = False
    #: ``cpuOptions.nestedVirtualization: enabled``: only types whose processor supports it
    nested_virtualization: bool = False

    def admits(self, info: Mapping[str, Any]) -> bool:
        """Whether a DescribeInstanceTypes entry can launch this class at all, as Karpenter
        AWS v1.14.1's compatibility checks (pkg/providers/instancetype/compatibility)."""
        if self.nitro_only and info.get("Hypervisor") != "nitro":
            return False
        if self.nested_virtualization:
            features = (info.get("ProcessorInfo") or {}).get("SupportedFeatures") or ()
            return "nested-virtualization" in features
        return True

    @classmethod
    def of(cls, node_class: EC2NodeClass) -> NodeClassShape:
        """The shape of ``node_class`` (its spec and resolved subnets)."""
        spec = node_class.spec
        family = spec.ami_family_resolved()
        kubelet = spec.kubelet
        return cls(
            ami_family=family,
            max_pods=kubelet.max_pods if kubelet else None,
            pods_per_core=kubelet.pods_per_core if kubelet else None,
            kube_reserved=tuple(sorted((kubelet.kube_reserved if kubelet else {}).items())),
            system_reserved=tuple(sorted((kubelet.system_reserved if kubelet else {}).items())),
            eviction_hard=tuple(sorted((kubelet.eviction_hard if kubelet else {}).items())),
            root_volume_bytes=_root_volume(node_class, traits_of(family)),
            raid0=spec.instance_store_policy == "RAID0",
            efa_only_interfaces=sum(
                1
                for nic in spec.network_interfaces
                if nic.network_card_index == 0 and nic.interface_type == "efa-only"
            ),
            zones=tuple(
                sorted(
                    {SubnetZone(s.zone, s.zone_id) for s in node_class.status.subnets},
                    key=lambda z: z.zone,
                )
            ),
            reservations=tuple(ReservedSlot.of(r) for r in node_class.status.capacity_reservations),
            nitro_only=spec.connection_tracking is not None,
            nested_virtualization=spec.cpu_options is not None
            and spec.cpu_options.nested_virtualization == "enabled",
        )


def _root_volume(node_class: EC2NodeClass, traits: AMIFamilyTraits) -> int | None:
    mappings = node_class.spec.block_device_mappings
    for mapping in mappings:
        if mapping.root_volume and mapping.ebs and mapping.ebs.volume_size:
            return res.to_canonical(res.EPHEMERAL_STORAGE, mapping.ebs.volume_size)
    if not mappings:
        return None
    if traits.ephemeral_device is None:  # Custom: the last mapping is the best guess
        last = mappings[-1].ebs
        return (
            res.to_canonical(res.EPHEMERAL_STORAGE, last.volume_size)
            if last and last.volume_size
            else None
        )
    for mapping in mappings:
        if (
            mapping.device_name == traits.ephemeral_device
            and mapping.ebs
            and mapping.ebs.volume_size
        ):
            return res.to_canonical(res.EPHEMERAL_STORAGE, mapping.ebs.volume_size)
    return None


def architecture(info: Mapping[str, Any]) -> str:
    """The Kubernetes architecture of an EC2 instance type (amd64, arm64)."""
    for arch in info.get("ProcessorInfo", {}).get("SupportedArchitectures", []):
        if arch in _ARCHITECTURES:
            return _ARCHITECTURES[arch]
    return str(info.get("ProcessorInfo", {}).get("SupportedArchitectures"))


def memory_capacity(info: Mapping[str, Any], vm_memory_overhead_percent: float) -> int:
    """Memory in bytes after the Graviton CMA reservation and the VM overhead."""
    mib = int(info["MemoryInfo"]["SizeInMiB"])
    archs = info.get("ProcessorInfo", {}).get("SupportedArchitectures", [])
    if archs and archs[0] == "arm64":
        mib -= 64
    overhead_mib = math.ceil(mib * MIB * vm_memory_overhead_percent / MIB)
    return (mib - overhead_mib) * MIB


def eni_limited_pods(info: Mapping[str, Any], *, reserved_enis: int, efa_only: int = 0) -> int:
    """``usable ENIs * (IPv4 addresses per ENI - 1) + 2`` (the EKS AMI's eni-max-pods),
    counting the default network card's ENIs only, as the VPC CNI does."""
    network = info.get("NetworkInfo", {})
    cards = network.get("NetworkCards") or []
    default_index = int(network.get("DefaultNetworkCardIndex", 0) or 0)
    enis = next(
        (
            int(c["MaximumNetworkInterfaces"])
            for c in cards
            if c.get("NetworkCardIndex") == default_index
        ),
        int(network.get("MaximumNetworkInterfaces", 0) or 0),
    )
    usable = max(enis - reserved_enis - efa_only, 0)
    if usable == 0:
        return 0
    return usable * (int(network.get("Ipv4AddressesPerInterface", 1)) - 1) + 2


def _pods(
    info: Mapping[str, Any], shape: NodeClassShape, traits: AMIFamilyTraits, reserved_enis: int
) -> int:
    if shape.max_pods is not None:
        count = shape.max_pods
    elif traits.eni_limited_pod_density:
        count = eni_limited_pods(
            info, reserved_enis=reserved_enis, efa_only=shape.efa_only_interfaces
        )
    else:
        count = _DEFAULT_PODS
    if shape.pods_per_core and traits.pods_per_core:
        count = min(shape.pods_per_core * int(info["VCpuInfo"]["DefaultVCpus"]), count)
    return count


def kube_reserved(cpu_millis: int, pods: int, overrides: Mapping[str, str] = {}) -> dict[str, int]:
    """Karpenter AWS's kube-reserved for a node of ``cpu_millis`` and ``pods``."""
    cpu = 0
    for start, end, fraction in _CPU_RESERVED_STEPS:
        if cpu_millis >= start:
            span = (min(cpu_millis, end)) - start
            cpu += int(span * fraction)
    reserved = {
        res.CPU: cpu,
        res.MEMORY: (11 * pods + 255) * MIB,
        res.EPHEMERAL_STORAGE: GIB,
    }
    reserved.update(res.parse_resource_list(dict(overrides)))
    return reserved


def _signal(capacity: int, value: str, resource: str) -> int:
    if value.endswith("%"):
        percent = float(value[:-1])
        if percent == 100:  # 100% disables the threshold (kubelet semantics)
            percent = 0
        return math.ceil(capacity / 100 * percent)
    return res.to_canonical(resource, value)


def eviction_threshold(
    memory: int, storage: int, eviction_hard: Mapping[str, str] = {}
) -> dict[str, int]:
    """Memory 100Mi and 10% of the root volume, or the ``evictionHard`` signals."""
    threshold = {res.MEMORY: 100 * MIB, res.EPHEMERAL_STORAGE: math.ceil(storage / 100 * 10)}
    if "memory.available" in eviction_hard:
        threshold[res.MEMORY] = _signal(memory, eviction_hard["memory.available"], res.MEMORY)
    if "nodefs.available" in eviction_hard:
        threshold[res.EPHEMERAL_STORAGE] = _signal(
            storage, eviction_hard["nodefs.available"], res.EPHEMERAL_STORAGE
        )
    return threshold


def _ephemeral_storage(info: Mapping[str, Any], shape: NodeClassShape) -> int:
    storage = info.get("InstanceStorageInfo") or {}
    if shape.raid0 and storage.get("TotalSizeInGB"):
        return int(storage["TotalSizeInGB"]) * 10**9
    return shape.root_volume_bytes or _DEFAULT_ROOT_VOLUME


def _count(devices: Iterable[Mapping[str, Any]], manufacturer: str) -> int:
    return sum(int(d.get("Count", 0)) for d in devices if d.get("Manufacturer") == manufacturer)


EBS_CSI_DRIVER = "ebs.csi.aws.com"
"""The CSI driver of EBS volumes, whose attachments each type limits."""
# What Kubernetes assumes of an EBS node it knows nothing about (the in-tree plugin's
# default), for a description without MaximumEbsAttachments: a Xen type's limit.
_XEN_EBS_ATTACHMENTS = 39
# A Nitro type's attachment slots, shared by EBS volumes, network interfaces and NVMe
# instance-store volumes, for a description without MaximumEbsAttachments.
_NITRO_SHARED_ATTACHMENTS = 28


def ebs_attachment_limit(info: Mapping[str, Any], *, pods: int, reserved_enis: int) -> int:
    """How many EBS volumes a node of this type can attach for pods.

    EC2 says it in ``EbsInfo.MaximumEbsAttachments``: for a ``dedicated`` limit that
    many, whatever else is attached; for a ``shared`` limit on a Nitro type the count
    with one network interface attached (and the type's NVMe instance stores), so
    every further interface the node attaches takes one. The node attaches as many as
    the VPC CNI needs for its pods (``pods - 2`` IPs at ``Ipv4AddressesPerInterface -
    1`` per interface, the eni-max-pods rule backwards), plus ``reserved_enis``, at
    most the default card's interfaces: the upper bound, as the CNI's prefix mode is not
    known here. The root volume takes one more. A description without the field (an
    older API answer) falls back to 28 shared slots on Nitro minus the instance-store
    disks, and to 39 on Xen, Kubernetes' own default.
    """
    ebs = info.get("EbsInfo") or {}
    network = info.get("NetworkInfo") or {}
    nitro = info.get("Hypervisor") == "nitro"
    maximum = ebs.get("MaximumEbsAttachments")
    shared = ebs.get("AttachmentLimitType", "shared") == "shared" and nitro
    if maximum is None:
        if not nitro:
            return _XEN_EBS_ATTACHMENTS - 1
        disks = ((info.get("InstanceStorageInfo") or {}).get("Disks")) or []
        maximum = _NITRO_SHARED_ATTACHMENTS - 1 - sum(int(d.get("Count", 0)) for d in disks)
    limit = int(maximum)
    if shared:
        per_eni = max(int(network.get("Ipv4AddressesPerInterface", 1) or 1) - 1, 1)
        most = max(int(network.get("MaximumNetworkInterfaces", 1) or 1), 1)
        enis = min(max(math.ceil(max(pods - 2, 1) / per_eni), 1) + reserved_enis, most)
        limit -= enis - 1
    return max(limit - 1, 0)


def capacity(
    info: Mapping[str, Any],
    shape: NodeClassShape,
    *,
    reserved_enis: int,
    vm_memory_overhead_percent: float,
    branch_enis: int = 0,
) -> dict[str, int]:
    """The instance type's capacity (zero-valued extended resources left out)."""
    traits = traits_of(shape.ami_family)
    gpus = (info.get("GpuInfo") or {}).get("Gpus") or []
    neuron = (info.get("NeuronInfo") or {}).get("NeuronDevices") or []
    efa = (info.get("NetworkInfo", {}).get("EfaInfo") or {}).get("MaximumEfaInterfaces", 0)
    found = {
        res.CPU: int(info["VCpuInfo"]["DefaultVCpus"]) * 1000,
        res.MEMORY: memory_capacity(info, vm_memory_overhead_percent),
        res.EPHEMERAL_STORAGE: _ephemeral_storage(info, shape),
        res.PODS: _pods(info, shape, traits, reserved_enis),
        aws.RESOURCE_AWS_POD_ENI: branch_enis,
        aws.RESOURCE_NVIDIA_GPU: _count(gpus, "NVIDIA"),
        aws.RESOURCE_AMD_GPU: _count(gpus, "AMD"),
        aws.RESOURCE_HABANA_GAUDI: _count(gpus, "Habana"),
        aws.RESOURCE_AWS_NEURON: sum(int(d.get("Count", 0)) for d in neuron),
        aws.RESOURCE_AWS_NEURON_CORE: sum(
            int(d.get("Count", 0)) * int((d.get("CoreInfo") or {}).get("Count", 0)) for d in neuron
        ),
        aws.RESOURCE_EFA: shape.efa_only_interfaces if shape.efa_only_interfaces else int(efa or 0),
    }
    return {k: v for k, v in found.items() if v > 0 or k in (res.CPU, res.MEMORY, res.PODS)}


def overhead(
    info: Mapping[str, Any],
    shape: NodeClassShape,
    cap: Mapping[str, int],
    *,
    reserved_enis: int,
) -> Overhead:
    """kube-reserved, system-reserved and eviction threshold of the instance type."""
    traits = traits_of(shape.ami_family)
    pods_for_memory = (
        eni_limited_pods(info, reserved_enis=0, efa_only=shape.efa_only_interfaces)
        if traits.eni_limited_memory_overhead
        else cap[res.PODS]
    )
    return Overhead(
        kube_reserved=kube_reserved(cap[res.CPU], pods_for_memory, dict(shape.kube_reserved)),
        system_reserved=res.parse_resource_list(dict(shape.system_reserved)),
        eviction_threshold=eviction_threshold(
            cap[res.MEMORY], cap.get(res.EPHEMERAL_STORAGE, 0), dict(shape.eviction_hard)
        ),
    )


def _kebab(text: str) -> str:
    return text.lower().replace(" ", "-")


def labels_requirements(
    info: Mapping[str, Any], *, region: str, bandwidth_mbps: int | None, reserved: bool = False
) -> list[Requirement]:
    """The ``karpenter.k8s.aws/instance-*`` requirements (and region, windows-build),
    and the capacity-reservation labels as absent unless the type is ``reserved`` (has
    reserved offerings)."""
    name = str(info["InstanceType"])

    def req(key: str, *values: object) -> Requirement:
        if not values:
            return Requirement.new(key, "DoesNotExist", ())
        return Requirement.new(key, "In", tuple(str(v) for v in values))

    network = info.get("NetworkInfo", {})
    processor = info.get("ProcessorInfo") or {}
    found: dict[str, Requirement] = {
        wk.LABEL_REGION: req(wk.LABEL_REGION, region),
        aws.LABEL_INSTANCE_CPU: req(aws.LABEL_INSTANCE_CPU, info["VCpuInfo"]["DefaultVCpus"]),
        aws.LABEL_INSTANCE_MEMORY: req(aws.LABEL_INSTANCE_MEMORY, info["MemoryInfo"]["SizeInMiB"]),
        aws.LABEL_INSTANCE_HYPERVISOR: req(
            aws.LABEL_INSTANCE_HYPERVISOR, info.get("Hypervisor", "")
        ),
        aws.LABEL_INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED: req(
            aws.LABEL_INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED,
            str(bool(network.get("EncryptionInTransitSupported"))).lower(),
        ),
        aws.LABEL_INSTANCE_TENANCY: req(
            aws.LABEL_INSTANCE_TENANCY, aws.TENANCY_DEFAULT, aws.TENANCY_DEDICATED
        ),
        aws.LABEL_INSTANCE_CAPABILITY_FLEX: req(
            aws.LABEL_INSTANCE_CAPABILITY_FLEX, str("-flex" in name.split(".")[0]).lower()
        ),
    }
    match = _FAMILY_SCHEME.match(name)
    if match:
        found[aws.LABEL_INSTANCE_CATEGORY] = req(aws.LABEL_INSTANCE_CATEGORY, match.group(1))
        found[aws.LABEL_INSTANCE_GENERATION] = req(aws.LABEL_INSTANCE_GENERATION, match.group(3))
    parts = name.split(".")
    if len(parts) == 2:
        found[aws.LABEL_INSTANCE_FAMILY] = req(aws.LABEL_INSTANCE_FAMILY, parts[0])
        found[aws.LABEL_INSTANCE_SIZE] = req(aws.LABEL_INSTANCE_SIZE, parts[1])
    storage = info.get("InstanceStorageInfo") or {}
    if storage.get("TotalSizeInGB") and storage.get("NvmeSupport", "unsupported") != "unsupported":
        found[aws.LABEL_INSTANCE_LOCAL_NVME] = req(
            aws.LABEL_INSTANCE_LOCAL_NVME, storage["TotalSizeInGB"]
        )
    if bandwidth_mbps is not None:
        found[aws.LABEL_INSTANCE_NETWORK_BANDWIDTH] = req(
            aws.LABEL_INSTANCE_NETWORK_BANDWIDTH, bandwidth_mbps
        )
    gpus = (info.get("GpuInfo") or {}).get("Gpus") or []
    if len(gpus) == 1:
        gpu = gpus[0]
        found[aws.LABEL_INSTANCE_GPU_NAME] = req(
            aws.LABEL_INSTANCE_GPU_NAME, _kebab(gpu.get("Name", ""))
        )
        found[aws.LABEL_INSTANCE_GPU_MANUFACTURER] = req(
            aws.LABEL_INSTANCE_GPU_MANUFACTURER, _kebab(gpu.get("Manufacturer", ""))
        )
        found[aws.LABEL_INSTANCE_GPU_COUNT] = req(aws.LABEL_INSTANCE_GPU_COUNT, gpu.get("Count", 0))
        found[aws.LABEL_INSTANCE_GPU_MEMORY] = req(
            aws.LABEL_INSTANCE_GPU_MEMORY, (gpu.get("MemoryInfo") or {}).get("SizeInMiB", 0)
        )
    neuron = (info.get("NeuronInfo") or {}).get("NeuronDevices") or []
    if len(neuron) == 1:
        found[aws.LABEL_INSTANCE_ACCELERATOR_NAME] = req(
            aws.LABEL_INSTANCE_ACCELERATOR_NAME, _kebab(neuron[0].get("Name", ""))
        )
        found[aws.LABEL_INSTANCE_ACCELERATOR_MANUFACTURER] = req(
            aws.LABEL_INSTANCE_ACCELERATOR_MANUFACTURER, "aws"
        )
        found[aws.LABEL_INSTANCE_ACCELERATOR_COUNT] = req(
            aws.LABEL_INSTANCE_ACCELERATOR_COUNT, neuron[0].get("Count", 0)
        )
    if processor.get("Manufacturer"):
        found[aws.LABEL_INSTANCE_CPU_MANUFACTURER] = req(
            aws.LABEL_INSTANCE_CPU_MANUFACTURER, _kebab(processor["Manufacturer"])
        )
    if processor.get("SustainedClockSpeedInGhz") is not None:
        found[aws.LABEL_INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ] = req(
            aws.LABEL_INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ,
            round(float(processor["SustainedClockSpeedInGhz"]) * 1000),
        )
    ebs = info.get("EbsInfo") or {}
    if ebs.get("EbsOptimizedSupport") == "default" and ebs.get("EbsOptimizedInfo"):
        found[aws.LABEL_INSTANCE_EBS_BANDWIDTH] = req(
            aws.LABEL_INSTANCE_EBS_BANDWIDTH, ebs["EbsOptimizedInfo"]["MaximumBandwidthInMbps"]
        )
    # every AWS label not set above is DoesNotExist, so a NodePool's In on it rules the type out
    for key in aws.WELL_KNOWN_LABELS:
        if key not in found and key.startswith(aws.GROUP + "/instance-"):
            found[key] = req(key)
    found[wk.LABEL_WINDOWS_BUILD] = req(wk.LABEL_WINDOWS_BUILD)
    if not reserved:
        # a type sold in no reservation has none of the reservation labels; a type with
        # reserved offerings leaves them to those offerings (its on-demand and spot
        # offerings launch outside any reservation), as karpy's kwok provider does
        for key in (
            aws.LABEL_CAPACITY_RESERVATION_ID,
            aws.LABEL_CAPACITY_RESERVATION_TYPE,
            aws.LABEL_CAPACITY_RESERVATION_INTERRUPTIBLE,
        ):
            found[key] = req(key)
    return list(found.values())


PriceOf = Callable[[str, str, str], float | None]
"""``price(instance_type, zone, capacity_type)`` -> USD/h, or None when unknown."""


def build_instance_type(
    info: Mapping[str, Any],
    *,
    region: str,
    offered_zones: Iterable[str],
    shape: NodeClassShape,
    price: PriceOf,
    unavailable: Callable[[OfferingKey], bool],
    reserved_enis: int = 0,
    vm_memory_overhead_percent: float = 0.075,
    branch_enis: int = 0,
    bandwidth_mbps: int | None = None,
    reservation_capacity: Callable[[str], int] = lambda _: 0,
) -> InstanceType | None:
    """The :class:`InstanceType` for ``info`` as the NodeClass would launch it, or None
    when it cannot run that NodeClass's OS (an arm64 type for Windows).

    An offering exists per NodeClass zone x supported capacity type; it is available
    when EC2 offers the type in that zone, its price is known, and it is not in the
    unavailable-offerings cache. The shape's capacity reservations of this type add one
    ``reserved`` offering each (:func:`karpy_aws._reservations.reserved_offerings`),
    with ``reservation_capacity(id)`` instances left.
    """
    traits = traits_of(shape.ami_family)
    arch = architecture(info)
    if traits.windows and arch != "amd64":
        return None
    name = str(info["InstanceType"])
    offered = set(offered_zones)
    capacity_types = [
        c
        for c in info.get("SupportedUsageClasses", [])
        if c in (wk.CAPACITY_TYPE_ON_DEMAND, wk.CAPACITY_TYPE_SPOT)
    ]
    offerings: list[Offering] = []
    for zone in shape.zones:
        for capacity_type in capacity_types:
            found = price(name, zone.zone, capacity_type)
            key = OfferingKey(name, zone.zone, capacity_type)
            extra = (
                Requirements((Requirement.new(aws.LABEL_TOPOLOGY_ZONE_ID, "In", (zone.zone_id,)),))
                if zone.zone_id
                else Requirements()
            )
            offerings.append(
                Offering(
                    zone=zone.zone,
                    capacity_type=capacity_type,
                    price=found if found is not None else 0.0,
                    available=found is not None and zone.zone in offered and not unavailable(key),
                    requirements=extra,
                )
            )
    reserved = reserved_offerings(
        name,
        shape.reservations,
        zones={z.zone: z.zone_id or "" for z in shape.zones},
        offered_zones=offered,
        on_demand_price=next(
            (
                p
                for z in shape.zones
                if (p := price(name, z.zone, wk.CAPACITY_TYPE_ON_DEMAND)) is not None
            ),
            None,
        ),
        capacity=reservation_capacity,
    )
    offerings.extend(reserved)
    if not offerings:
        return None
    cap = capacity(
        info,
        shape,
        reserved_enis=reserved_enis,
        vm_memory_overhead_percent=vm_memory_overhead_percent,
        branch_enis=branch_enis,
    )
    zone_ids = sorted({z.zone_id for z in shape.zones if z.zone_id and z.zone in offered})
    extra_reqs = labels_requirements(
        info, region=region, bandwidth_mbps=bandwidth_mbps, reserved=bool(reserved)
    )
    if zone_ids:
        extra_reqs.append(Requirement.new(aws.LABEL_TOPOLOGY_ZONE_ID, "In", tuple(zone_ids)))
    return InstanceType.build(
        name,
        capacity=cap,
        offerings=offerings,
        overhead=overhead(info, shape, cap, reserved_enis=reserved_enis),
        architecture=arch,
        operating_systems=("windows",) if traits.windows else ("linux",),
        requirements=extra_reqs,
        volume_attachment_limits={EBS_CSI_DRIVER: ebs_attachment_limit(
            info, pods=cap[res.PODS], reserved_enis=reserved_enis)},
    )


def cheapest_first(instance_types: Sequence[InstanceType]) -> list[InstanceType]:
    """Sorted by their cheapest available offering (types with none last)."""
    return sorted(
        instance_types,
        key=lambda it: (it.cheapest_price() is None, it.cheapest_price() or 0, it.name),
    )
