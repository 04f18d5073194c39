"""When karpy replaces an EC2 node that has gone bad (the provider's repair policies,
Karpenter AWS's)."""

from __future__ import annotations

from datetime import timedelta
from typing import Final

from karpy.cloudprovider import RepairPolicy

__all__ = ["REPAIR_POLICIES"]

REPAIR_POLICIES: Final = (
    RepairPolicy("Ready", "False", timedelta(minutes=30)),
    RepairPolicy("Ready", "Unknown", timedelta(minutes=30)),
    RepairPolicy("AcceleratedHardwareReady", "False", timedelta(minutes=10)),
    RepairPolicy("StorageReady", "False", timedelta(minutes=30)),
    RepairPolicy("NetworkingReady", "False", timedelta(minutes=30)),
    RepairPolicy("KernelReady", "False", timedelta(minutes=30)),
    RepairPolicy("ContainerRuntimeReady", "False", timedelta(minutes=30)),
)
