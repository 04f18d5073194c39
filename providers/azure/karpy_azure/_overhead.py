"""What an AKS node keeps for itself, by the formulas AKS uses (and Karpenter's Azure
provider copies), so that karpy's allocatable matches what the kubelet will report.

- **kube-reserved memory**: a tax on the VM's memory in brackets: 25% of the first 4 GiB,
  20% of the next 4, 10% of the next 8, 6% of the next 112 and 2% above 128 GiB.
- **kube-reserved CPU**: 6% of the first core, 4% of the second, 2% of cores 3-4 and 1%
  of every further core.
- **eviction threshold**: ``memory.available`` 750Mi; no system-reserved.
- **memory capacity**: the SKU's whole GiB minus the hypervisor's share
  (``vmMemoryOverheadPercent``, 7.5% by default).
- **max pods**: the AKSNodeClass's ``maxPods`` if set, else by network plugin: 250 for
  ``none`` and Azure CNI overlay, 30 for Azure CNI with pod IPs from the node subnet,
  110 otherwise (kubenet).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final

from karpy.scheduling import Overhead
from karpy.scheduling import resources as res

__all__ = [
    "EVICTION_MEMORY_AVAILABLE",
    "aks_overhead",
    "kube_reserved_cpu_millis",
    "kube_reserved_memory_mib",
    "max_pods",
    "memory_capacity_bytes",
]

GiB: Final = 2**30
MiB: Final = 2**20
EVICTION_MEMORY_AVAILABLE: Final = 750 * MiB

# (upper bound, rate) brackets; the first bracket starts at 0.
_MEMORY_BRACKETS_GIB: Final = ((4.0, 0.25), (8.0, 0.20), (16.0, 0.10), (128.0, 0.06),
                               (math.inf, 0.02))
_CPU_BRACKETS_CORES: Final = ((1.0, 0.06), (2.0, 0.04), (4.0, 0.02), (math.inf, 0.01))


def _tax(brackets: Sequence[tuple[float, float]], amount: float) -> float:
    tax = lower = 0.0
    for upper, rate in brackets:
        if lower > amount:
            break
        tax += (min(upper, amount) - lower) * rate
        lower = upper
    return tax


def kube_reserved_memory_mib(memory_gib: float) -> int:
    """kube-reserved memory in MiB for a VM with ``memory_gib`` GiB."""
    return int(1024 * _tax(_MEMORY_BRACKETS_GIB, memory_gib))


def kube_reserved_cpu_millis(vcpus: int) -> int:
    """kube-reserved CPU in millicores for a VM with ``vcpus`` vCPUs."""
    return int(1000 * _tax(_CPU_BRACKETS_CORES, float(vcpus)))


def memory_capacity_bytes(memory_gib: float, overhead_percent: float) -> int:
    """The node's memory capacity: whole GiB of the SKU minus the hypervisor's share."""
    whole = int(memory_gib) * GiB
    return whole - math.ceil(whole * overhead_percent)


def aks_overhead(vcpus: int, memory_gib: float) -> Overhead:
    """kube-reserved and eviction threshold of an AKS node (no system-reserved)."""
    return Overhead(
        kube_reserved={
            res.CPU: kube_reserved_cpu_millis(vcpus),
            res.MEMORY: kube_reserved_memory_mib(memory_gib) * MiB,
        },
        system_reserved={},
        eviction_threshold={res.MEMORY: EVICTION_MEMORY_AVAILABLE},
    )


def max_pods(node_class_max_pods: int | None, network_plugin: str, network_plugin_mode: str) -> int:
    """Pods per node: the AKSNodeClass's ``maxPods``, else AKS's default for the network."""
    if node_class_max_pods is not None:
        return node_class_max_pods
    if network_plugin == "none":
        return 250
    if network_plugin == "azure":
        return 250 if network_plugin_mode == "overlay" else 30
    return 110
