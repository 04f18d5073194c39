"""Resource SKUs as plain data: a ``virtualMachines`` SKU of the Resource SKUs API, parsed
once into :class:`Sku` (capabilities as numbers and flags), and its VM size name parsed
into :class:`VMSize` (family, series, version, accelerator).

Which SKUs AKS can run follows Karpenter's Azure provider: at least 2 vCPUs and 3.5 GiB,
no location restriction, no constrained-CPU sizes, no confidential (DC/EC) sizes, and
GPUs only where AKS installs a driver.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["MalformedSku", "Sku", "VMSize", "gpu_manufacturer", "parse_skus", "parse_vm_size"]

log = logging.getLogger("karpy.cloudprovider.azure")


class MalformedSku(ValueError):  # noqa: N818 - a ValueError, named for what is wrong
    """A Resource SKUs entry karpy cannot read (a capability without a name, a number
    that is ``inf``, ``nan``, negative or not a number). :func:`parse_skus` logs it and
    leaves that SKU out; every other SKU of the listing is still offered."""

# [Family][Subfamily][vCPUs][-constrained vCPUs][additive features][_accelerator][_version]
_VM_SIZE = re.compile(
    r"^(?P<family>[A-Z])(?P<subfamily>[A-Z]*)(?P<cpus>\d+)(?:-(?P<constrained>\d+))?"
    r"(?P<features>[a-z]*)(?:_(?P<accelerator>(?!v\d+$)[A-Za-z0-9]+))?(?:_(?P<version>v\d+))?$"
)
_AZURE_TO_KUBE_ARCH: Final = {"x64": "amd64", "Arm64": "arm64"}
# AMD GPU sizes among the N series (Instinct MI and Radeon V710); every other N-series
# GPU is NVIDIA.
_AMD_GPU = re.compile(r"MI\d+|V710|V620", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class VMSize:
    """The parts of a VM size name such as ``NC24ads_A100_v4``."""

    family: str  # "N"
    subfamily: str  # "C"
    cpus: int  # 24
    constrained_cpus: int | None  # the 2 of M8-2ms
    features: str  # "ads"
    accelerator: str  # "A100"
    version: str  # "v4"

    @property
    def series(self) -> str:
        """Family, subfamily, features and version: ``NCads_v4``, ``Ds_v3``, ``Bs``."""
        base = self.family + self.subfamily + self.features
        return f"{base}_{self.version}" if self.version else base

    @property
    def version_number(self) -> str:
        """The version without its ``v`` (``"3"``); ``"1"`` when the name has none."""
        return self.version[1:] if self.version else "1"


def parse_vm_size(size: str) -> VMSize | None:
    """Parse a VM size (``D2s_v3``, with or without the ``Standard_`` tier); None when the
    name does not follow Azure's naming convention (promo and legacy names)."""
    size = size.removeprefix("Standard_").removeprefix("Basic_")
    m = _VM_SIZE.match(size)
    if m is None:
        return None
    return VMSize(
        family=m["family"],
        subfamily=m["subfamily"],
        cpus=int(m["cpus"]),
        constrained_cpus=int(m["constrained"]) if m["constrained"] else None,
        features=m["features"],
        accelerator=m["accelerator"] or "",
        version=m["version"] or "",
    )


def gpu_manufacturer(name: str, gpus: int) -> str:
    """``nvidia``, ``amd`` or ``""`` for a SKU name with ``gpus`` GPUs."""
    if gpus <= 0:
        return ""
    return "amd" if _AMD_GPU.search(name) else "nvidia"


def _bool(caps: Mapping[str, str], key: str) -> bool:
    return caps.get(key, "").lower() == "true"


def _num(caps: Mapping[str, str], key: str) -> float:
    # Absent or empty reads as 0, as before; anything else must be a finite number >= 0,
    # or the SKU is malformed (int(float("inf")) would raise OverflowError further on).
    text = caps.get(key, "") or "0"
    try:
        value = float(text)
    except ValueError:
        raise MalformedSku(f"capability {key}={text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise MalformedSku(f"capability {key}={text!r} is not a finite number >= 0")
    return value


def _capabilities(raw: Mapping[str, Any]) -> dict[str, str]:
    caps: dict[str, str] = {}
    for i, cap in enumerate(raw.get("capabilities") or ()):
        name = cap.get("name") if isinstance(cap, Mapping) else None
        if not isinstance(name, str) or not name:
            raise MalformedSku(f"capabilities[{i}] has no name")
        caps[name] = str(cap.get("value", ""))
    return caps


@dataclass(frozen=True, slots=True)
class Sku:
    """One VM SKU in one location, as the Resource SKUs API describes it."""

    name: str  # "Standard_D2s_v3"
    size: str  # "D2s_v3"
    family: str  # the quota family, "standardDSv3Family"
    vcpus: int
    memory_gib: float  # the "MemoryGB" capability is in GiB
    architecture: str  # amd64 / arm64
    zones: tuple[str, ...]  # ARM zone numbers, "1", "2", "3"; empty when regional
    restricted: bool  # a location restriction (NotAvailableForSubscription ...)
    low_priority_capable: bool
    premium_io: bool
    accelerated_networking: bool
    encryption_at_host: bool
    ephemeral_os_disk: bool
    max_cached_disk_bytes: int
    max_resource_volume_mib: int
    nvme_disk_mib: int
    nvme_ephemeral_placement: bool
    hyperv_generations: tuple[str, ...]  # ("V1", "V2")
    trusted_launch_disabled: bool
    gpus: int
    ultra_ssd_zones: tuple[str, ...]  # zones where Ultra SSD can attach
    ultra_ssd_regional: bool  # Ultra SSD without an availability zone
    vm_size: VMSize | None
    max_data_disks: int | None = None  # MaxDataDiskCount; None when the SKU does not say

    @property
    def gpu_manufacturer(self) -> str:
        """``nvidia``, ``amd`` or ``""``."""
        return gpu_manufacturer(self.name, self.gpus)

    @property
    def ephemeral_os_max_gb(self) -> int:
        """The largest ephemeral OS disk, in GB (10^9 bytes), as Karpenter's Azure provider
        computes it: the NVMe disk, else the cache disk, else the resource disk; 0 when
        ephemeral OS disks are not supported."""
        if not self.ephemeral_os_disk:
            return 0
        if self.nvme_disk_mib > 0 and self.nvme_ephemeral_placement:
            return self.nvme_disk_mib * 2**20 // 10**9
        if self.max_cached_disk_bytes > 0:
            return self.max_cached_disk_bytes // 10**9
        if self.max_resource_volume_mib > 0:
            return self.max_resource_volume_mib * 2**20 // 10**9
        return 0

    @property
    def ephemeral_os_placement(self) -> tuple[str, int]:
        """Where an ephemeral OS disk goes and how large it may be, in GiB (ARM's
        ``diskSizeGB`` unit, the limit ARM enforces): ``NvmeDisk``, else ``CacheDisk``,
        else ``ResourceDisk`` — Karpenter's Azure provider's order; ``("", 0)`` when the
        SKU supports no ephemeral OS disk."""
        if not self.ephemeral_os_disk:
            return "", 0
        if self.nvme_disk_mib > 0 and self.nvme_ephemeral_placement:
            return "NvmeDisk", self.nvme_disk_mib // 1024
        if self.max_cached_disk_bytes > 0:
            return "CacheDisk", self.max_cached_disk_bytes // 2**30
        if self.max_resource_volume_mib > 0:
            return "ResourceDisk", self.max_resource_volume_mib // 1024
        return "", 0

    def ephemeral_os_placement_for(self, os_disk_size_gb: int) -> str:
        """The ephemeral OS disk placement for an OS disk of ``os_disk_size_gb``, or ""
        when the SKU cannot hold it (then the OS disk is a managed disk)."""
        placement, max_gib = self.ephemeral_os_placement
        return placement if placement and os_disk_size_gb <= max_gib else ""

    def supported_by_aks(self) -> str | None:
        """None if AKS can run this SKU, else why not."""
        if self.restricted:
            return "restricted in this location"
        if self.vm_size is None:
            return f"unparseable size {self.size!r}"
        if self.vcpus < 2:
            return "fewer than 2 vCPUs"
        if self.memory_gib < 3.5:
            return "less than 3.5 GiB of memory"
        if self.vm_size.constrained_cpus is not None:
            return "constrained vCPUs"
        if self.vm_size.family in ("D", "E") and self.vm_size.subfamily.startswith("C"):
            return "confidential VM"
        return None

    @classmethod
    def from_arm(cls, raw: Mapping[str, Any], location: str) -> Sku:
        """Parse one entry of a Resource SKUs list response (wire format).

        Raises :class:`MalformedSku` naming the capability or field it cannot read.
        """
        if not isinstance(raw.get("name"), str) or not raw["name"]:
            raise MalformedSku("the SKU has no name")
        caps = _capabilities(raw)
        zones: tuple[str, ...] = ()
        ultra: tuple[str, ...] = ()
        for info in raw.get("locationInfo") or ():
            if str(info.get("location", "")).lower() == location.lower():
                zones = tuple(sorted(str(z) for z in info.get("zones") or ()))
                for detail in info.get("zoneDetails") or ():
                    for cap in detail.get("capabilities") or ():
                        if cap.get("name") == "UltraSSDAvailable" and cap.get("value") == "True":
                            ultra += tuple(str(z) for z in detail.get("name") or ())
        restricted = any(
            r.get("type") == "Location"
            and location.lower() in [v.lower() for v in r.get("values") or ()]
            for r in raw.get("restrictions") or ()
        )
        name = str(raw["name"])
        size = str(raw.get("size") or name.removeprefix("Standard_"))
        return cls(
            name=name,
            size=size,
            family=str(raw.get("family", "")),
            vcpus=int(_num(caps, "vCPUs")),
            memory_gib=_num(caps, "MemoryGB"),
            architecture=_AZURE_TO_KUBE_ARCH.get(caps.get("CpuArchitectureType", "x64"), "amd64"),
            zones=zones,
            restricted=restricted,
            low_priority_capable=_bool(caps, "LowPriorityCapable"),
            premium_io=_bool(caps, "PremiumIO"),
            accelerated_networking=_bool(caps, "AcceleratedNetworkingEnabled"),
            encryption_at_host=_bool(caps, "EncryptionAtHostSupported"),
            ephemeral_os_disk=_bool(caps, "EphemeralOSDiskSupported"),
            max_cached_disk_bytes=int(_num(caps, "CachedDiskBytes")),
            max_resource_volume_mib=int(_num(caps, "MaxResourceVolumeMB")),
            nvme_disk_mib=int(_num(caps, "NvmeDiskSizeInMiB")),
            nvme_ephemeral_placement="NvmeDisk"
            in caps.get("SupportedEphemeralOSDiskPlacements", "").split(","),
            hyperv_generations=tuple(
                g.strip() for g in caps.get("HyperVGenerations", "").split(",") if g.strip()
            ),
            trusted_launch_disabled=_bool(caps, "TrustedLaunchDisabled"),
            gpus=int(_num(caps, "GPUs")),
            ultra_ssd_zones=tuple(sorted(set(ultra))),
            ultra_ssd_regional=_bool(caps, "UltraSSDAvailable"),
            vm_size=parse_vm_size(size),
            max_data_disks=(int(_num(caps, "MaxDataDiskCount"))
                            if caps.get("MaxDataDiskCount") else None),
        )


def parse_skus(raw: Iterable[Mapping[str, Any]], location: str) -> Sequence[Sku]:
    """The ``virtualMachines`` SKUs of ``location`` in a Resource SKUs listing."""
    found: dict[str, Sku] = {}
    for item in raw:
        if not isinstance(item, Mapping) or item.get("resourceType") != "virtualMachines":
            continue
        try:
            locations = [str(loc).lower() for loc in item.get("locations") or ()]
            if locations and location.lower() not in locations:
                continue
            sku = Sku.from_arm(item, location)
        except (MalformedSku, AttributeError, TypeError) as err:
            # Malformed cloud data: one SKU left out (and said so), not the whole listing.
            log.warning("skipping a malformed Resource SKU", extra={
                "sku": str(item.get("name")), "error": f"{type(err).__name__}: {err}"})  # fmt: skip
            continue
        found.setdefault(sku.name, sku)
    return tuple(found.values())
