"""The catalogue and prices of Karpenter's fake cloud provider (pkg/cloudprovider/fake),
rebuilt with karpy's types, so the ported disruption cases decide over the same
instance types and prices as Karpenter's own suite.

karpy's :mod:`karpy.cloudprovider.fake` catalogue is not Karpenter's: it has five
types priced ``0.025 x vCPU + 0.001 x GiB`` (spot at 70 %) in zones ``test-zone-a..c``
with 110 pods each; Karpenter's fake prices every offering at
``0.1 x vCPU + 0.1 x memory in GB`` (spot and on-demand alike), allows 5 pods unless
told otherwise, reserves 100m CPU and 10Mi memory for the kubelet and sells in
``test-zone-1..3``. This module is what the ported cases use instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from karpy.scheduling import InstanceType, Offering, Overhead, Requirement
from karpy.scheduling import resources as res

ZONES = ("test-zone-1", "test-zone-2", "test-zone-3")
GIB = 2**30
OVERHEAD = Overhead(kube_reserved={res.CPU: 100, res.MEMORY: 10 * 2**20})
LINUX, WINDOWS = "linux", "windows"


def price_from_resources(cpu: float, memory_gib: float, gpus: int = 0) -> float:
    """Karpenter's fake PriceFromResources: $0.1 per vCPU, $0.1 per GB (10^9 bytes) of
    memory, $1 per GPU resource."""
    return 0.1 * cpu + 0.1 * memory_gib * GIB / 1e9 + 1.0 * (1 if gpus else 0)


def default_offerings(price: float) -> list[Offering]:
    """Spot in zones 1 and 2, on-demand in zones 1 to 3, all at ``price``."""
    return [
        Offering(zone="test-zone-1", capacity_type="spot", price=price),
        Offering(zone="test-zone-2", capacity_type="spot", price=price),
        Offering(zone="test-zone-1", capacity_type="on-demand", price=price),
        Offering(zone="test-zone-2", capacity_type="on-demand", price=price),
        Offering(zone="test-zone-3", capacity_type="on-demand", price=price),
    ]


def new_instance_type(
    name: str,
    *,
    cpu: int = 4,
    memory_gib: int = 4,
    pods: int = 5,
    gpus: int = 0,
    offerings: Iterable[Offering] | None = None,
    architecture: str = "amd64",
    operating_systems: Sequence[str] = (LINUX, WINDOWS, "darwin"),
) -> InstanceType:
    """Karpenter's fake NewInstanceType: 4 vCPU, 4Gi, 5 pods by default."""
    capacity = {res.CPU: cpu * 1000, res.MEMORY: memory_gib * GIB, res.PODS: pods}
    if gpus:
        capacity["fake.com/vendor-a"] = gpus
    price = price_from_resources(cpu, memory_gib, gpus)
    return InstanceType.build(
        name,
        capacity=capacity,
        offerings=list(offerings) if offerings is not None else default_offerings(price),
        overhead=OVERHEAD,
        architecture=architecture,
        operating_systems=operating_systems,
        requirements=[Requirement.new("integer", "In", (str(cpu),))],
    )


def assorted_name(cpu: int, mem: int, arch: str, os: str, zone: str, ct: str) -> str:
    """How InstanceTypesAssorted names a type."""
    return f"{cpu}-cpu-{mem}-mem-{arch}-{os}-{zone}-{ct}"


def instance_types_assorted() -> list[InstanceType]:
    """Karpenter's fake InstanceTypesAssorted: every (vCPU 1..64, memory 1..128 GiB,
    zone, capacity type, OS, architecture), each sold as exactly one offering."""
    out = []
    for cpu in (1, 2, 4, 8, 16, 32, 64):
        for mem in (1, 2, 4, 8, 16, 32, 64, 128):
            for zone in ZONES:
                for ct in ("spot", "on-demand"):
                    for os in (LINUX, WINDOWS):
                        for arch in ("amd64", "arm64"):
                            price = price_from_resources(cpu, mem)
                            out.append(new_instance_type(
                                assorted_name(cpu, mem, arch, os, zone, ct),
                                cpu=cpu, memory_gib=mem, architecture=arch,
                                operating_systems=(os,),
                                offerings=[Offering(zone=zone, capacity_type=ct, price=price)],
                            ))
    return out


def fake_instance_types(count: int) -> list[InstanceType]:
    """Karpenter's fake InstanceTypes(n): fake-it-i with i+1 vCPU, 2(i+1) GiB, 10(i+1)
    pods."""
    return [
        new_instance_type(f"fake-it-{i}", cpu=i + 1, memory_gib=(i + 1) * 2, pods=(i + 1) * 10)
        for i in range(count)
    ]


# The suite's mostExpensiveInstance / leastExpensiveInstance (on-demand) and their spot
# twins: the dearest and cheapest assorted types (Karpenter sorts by price, and which of
# the equally priced variants comes first or last is not specified; these are one).
MOST_EXPENSIVE = assorted_name(64, 128, "amd64", LINUX, "test-zone-1", "on-demand")
LEAST_EXPENSIVE = assorted_name(1, 1, "amd64", LINUX, "test-zone-1", "on-demand")
MOST_EXPENSIVE_SPOT = assorted_name(64, 128, "amd64", LINUX, "test-zone-1", "spot")
LEAST_EXPENSIVE_SPOT = assorted_name(1, 1, "amd64", LINUX, "test-zone-1", "spot")
