"""In-place tag updates (``nodeclaim.inplaceupdate``, Karpenter-Azure's controller of that
name): a change of an AKSNodeClass's ``spec.tags`` (or of the ``additionalTags``
setting) reaches the existing nodes' resources instead of replacing the nodes.

Each NodeClaim carries ``karpenter.azure.com/in-place-update-hash``, the hash of the tags
its resources were given. When the tags its class would give now hash differently, the
controller sets them on the NIC (``UpdateTags``), on the VM's extensions karpy made, then
on the VM (a PATCH) — the VM last, so a failure half-way is retried whole — and writes
the new hash on the NodeClaim. Like Karpenter-Azure it waits until the NodeClaim is
Registered (its extensions exist by then), skips NodeClaims being deleted, and is woken
by a NodeClaim's change or its AKSNodeClass's. ``spec.tags`` is not in the class's drift
hash (:mod:`karpy_azure._hash`). OS disks keep the tags they were created with, as with
Karpenter-Azure.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
from collections.abc import Iterable, Mapping
from typing import Final, Protocol

from azure.core.exceptions import HttpResponseError
from azure.mgmt.compute import models as cm
from azure.mgmt.network import models as nm

from karpy.apis import NodeClaim
from karpy.apis.v1.nodeclaim import CONDITION_REGISTERED
from karpy.cloudprovider import NODE_CLAIM
from karpy.runtime import Client, Manager, Object, Request, Result
from karpy.runtime import errors as api_errors
from karpy_azure._arm import ArmAccess, is_not_found
from karpy_azure._nodeclasses import AKS_NODE_CLASS, NodeClassSource
from karpy_azure._resources import tags_for, vm_name_from_provider_id
from karpy_azure._settings import AzureSettings
from karpy_azure.apis import labels as az

__all__ = [
    "InPlaceUpdateReconciler",
    "TagUpdater",
    "register_in_place_update",
    "tags_hash",
    "update_tags",
]

log = logging.getLogger("karpy.cloudprovider.azure.inplaceupdate")

#: how soon a NodeClaim not registered yet is looked at again (Karpenter-Azure's minute)
NOT_REGISTERED_RETRY: Final = 60.0


def tags_hash(tags: Mapping[str, str]) -> str:
    """A stable hash of a node's tags (the in-place update annotation's value)."""
    digest = hashlib.sha256(json.dumps(dict(tags), sort_keys=True).encode()).hexdigest()
    return str(int(digest[:16], 16))


class TagUpdater(Protocol):
    """What in-place update needs of the provider: its settings and NodeClasses, and
    setting a node's tags (NIC, extensions, VM)."""

    @property
    def settings(self) -> AzureSettings:
        """The provider's settings."""
        ...

    @property
    def node_classes(self) -> NodeClassSource:
        """Where AKSNodeClasses are read."""
        ...

    async def update_tags(self, name: str, tags: Mapping[str, str]) -> None:
        """Set ``tags`` on the NIC, extensions and VM ``name``."""
        ...


class InPlaceUpdateReconciler:
    """Bring one NodeClaim's VM, NIC and extensions to its class's tags (see the module
    docstring)."""

    def __init__(self, provider: TagUpdater, client: Client) -> None:
        self._provider = provider
        self._client = client

    async def reconcile(self, request: Request) -> Result:
        try:
            obj = await self._client.get(NODE_CLAIM, request.name)
        except api_errors.NotFound:
            return Result()
        nodeclaim = NodeClaim.model_validate(obj)
        if nodeclaim.metadata.deletion_timestamp is not None:
            return Result()
        node_class = await self._provider.node_classes.get(nodeclaim.spec.node_class_ref.name)
        if node_class is None:
            return Result()
        tags = tags_for(self._provider.settings, node_class, nodeclaim)
        goal = tags_hash(tags)
        if nodeclaim.metadata.annotations.get(az.ANNOTATION_IN_PLACE_UPDATE_HASH) == goal:
            return Result()
        registered = nodeclaim.status_conditions().get(CONDITION_REGISTERED)
        name = vm_name_from_provider_id(nodeclaim.status.provider_id or "")
        if registered is None or registered.status != "True" or name is None:
            return Result(requeue_after=NOT_REGISTERED_RETRY)
        await self._provider.update_tags(name, tags)
        log.info("updated tags in place", extra={"NodeClaim": {"name": request.name},
                                                  "vmName": name})
        with contextlib.suppress(api_errors.NotFound):  # deleted meanwhile
            await self._client.patch(
                NODE_CLAIM, request.name,
                {"metadata": {"annotations": {az.ANNOTATION_IN_PLACE_UPDATE_HASH: goal}}},
            )
        return Result()


async def update_tags(provider: ArmAccess, name: str, tags: Mapping[str, str],
                      extensions: Iterable[str]) -> None:
    """Set ``tags`` on NIC ``name``, on VM ``name``'s ``extensions`` (one it lacks is
    skipped) and on the VM, in that order."""
    rg = provider.settings.node_resource_group
    arm = provider.arm
    await arm.network.network_interfaces.update_tags(rg, name, nm.TagsObject(tags=dict(tags)))
    for extension in extensions:
        try:
            poller = await arm.compute.virtual_machine_extensions.begin_update(
                rg, name, extension, cm.VirtualMachineExtensionUpdate(tags=dict(tags)),
                **arm.lro(),
            )
            await poller.result()
        except HttpResponseError as exc:
            if not is_not_found(exc):
                raise
    poller_vm = await arm.compute.virtual_machines.begin_update(
        rg, name, cm.VirtualMachineUpdate(tags=dict(tags)), **arm.lro()
    )
    await poller_vm.result()


def register_in_place_update(provider: TagUpdater, manager: Manager) -> None:
    """Add ``nodeclaim.inplaceupdate`` to ``manager``: NodeClaims, woken also by a change
    of their AKSNodeClass."""
    cache = manager.cache

    def of_class(obj: Object) -> list[Request]:
        name = (obj.get("metadata") or {}).get("name")
        return [
            Request(namespace="", name=str(nc["metadata"]["name"]))
            for nc in cache.informer(NODE_CLAIM).store.list()
            if ((nc.get("spec") or {}).get("nodeClassRef") or {}).get("name") == name
        ]

    (
        manager.controller("nodeclaim.inplaceupdate")
        .for_(NODE_CLAIM)
        .watches(AKS_NODE_CLASS, of_class)
        .complete(InPlaceUpdateReconciler(provider, manager.client))
    )

