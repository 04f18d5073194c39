"""Garbage collection of what karpy leaves in Azure.

VMs: karpy's core ``nodeclaim.garbagecollection`` already deletes every VM that
:meth:`AzureCloudProvider.list` returns and no NodeClaim owns, after its grace period,
through :meth:`AzureCloudProvider.delete` (VM, then NIC) — the provider adds nothing there.

NICs (this module, ``nodeclaim.garbagecollection.nic``, every two minutes): a NIC tagged
with this cluster whose VM (same name) does not exist and whose NodeClaim (the name
without ``aks-``) does not exist either is deleted once it has been seen that way for
the whole grace period — a launch creates the NIC a moment before its VM, and its
NodeClaim exists throughout. That is what a VM create leaves when the cleanup after a
failure could not finish, or a VM deleted without its NIC.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Final, Protocol

from azure.mgmt.compute import models as cm

from karpy.cloudprovider import NODE_CLAIM
from karpy.runtime import Manager, Result
from karpy_azure._arm import ArmAccess
from karpy_azure._resources import TAG_CLUSTER

__all__ = ["NicGarbageCollector", "VmOwner", "register_garbage_collection"]

log = logging.getLogger("karpy.cloudprovider.azure.gc")

PERIOD: Final = 120.0
GRACE: Final = 300.0


class VmOwner(ArmAccess, Protocol):
    """What NIC garbage collection needs of the provider: ARM, the cluster's VMs, and
    deleting a NIC."""

    async def list_vms(self) -> list[cm.VirtualMachine]:
        """The cluster's VMs."""
        ...

    async def delete_nic(self, name: str) -> bool:
        """Delete NIC ``name``; whether it is gone."""
        ...


class NicGarbageCollector:
    """Deletes NICs no VM and no NodeClaim owns (see the module docstring)."""

    name = "nodeclaim.garbagecollection.nic"

    def __init__(
        self,
        provider: VmOwner,
        nodeclaim_names: Callable[[], Awaitable[set[str]]],
        *,
        grace: float = GRACE,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.provider = provider
        self.nodeclaim_names = nodeclaim_names
        self.grace = grace
        self._monotonic = monotonic
        self._orphaned_since: dict[str, float] = {}

    async def reconcile(self) -> Result:
        """One round: find orphaned NICs, delete the ripe ones."""
        settings = self.provider.settings
        nics = [
            str(nic.name)
            async for nic in self.provider.arm.network.network_interfaces.list(
                settings.node_resource_group
            )
            if (nic.tags or {}).get(TAG_CLUSTER) == settings.cluster_name
        ]
        vms = {str(vm.name) for vm in await self.provider.list_vms()}
        claims = await self.nodeclaim_names()
        now = self._monotonic()
        orphaned = [n for n in nics if n not in vms and n.removeprefix("aks-") not in claims]
        self._orphaned_since = {n: self._orphaned_since.get(n, now) for n in orphaned}
        next_round = PERIOD
        for name in orphaned:
            left = self.grace - (now - self._orphaned_since[name])
            if left > 0:
                next_round = min(next_round, left)
                continue
            if await self.provider.delete_nic(name):
                self._orphaned_since.pop(name, None)
                log.info("garbage collected network interface", extra={"nicName": name})
        return Result(requeue_after=max(next_round, 1.0))


def register_garbage_collection(provider: VmOwner, manager: Manager) -> None:
    """Add the NIC garbage collector to ``manager`` (VMs are the core's; module doc)."""
    client = manager.client

    async def nodeclaim_names() -> set[str]:
        return {str(o["metadata"]["name"]) for o in await client.list(NODE_CLAIM, live=True)}

    collector = NicGarbageCollector(provider, nodeclaim_names)
    manager.singleton(collector.name, collector, period=PERIOD)
