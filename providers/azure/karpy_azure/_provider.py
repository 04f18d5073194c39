"""AzureCloudProvider: AKS nodes as Azure VMs, the way Karpenter's Azure provider makes
them.

- **Instance types** come from Resource SKUs of the location with the AKS allocatable and
  retail prices (:mod:`karpy_azure._instancetypes`); offerings Azure refused recently are
  shown ``available=False`` from the provider's own cache.
- **create** checks that the NodeClaim's AKSNodeClass is Ready and hands the launch to
  the provider's :class:`~karpy_azure._vmlaunch.VmLauncher` (:mod:`karpy_azure._vmlaunch`):
  VM ``aks-<nodeclaim>`` reused as it is when an earlier attempt made it, otherwise the
  cheapest fitting offering's NIC, VM and extensions, as one task that outlives the call
  when the operations take longer than ``launchWait`` (:mod:`karpy_azure._launches`). A
  capacity error marks offerings unavailable and raises InsufficientCapacityError naming
  them; a failed launch deletes what it made, never the VM an earlier attempt made.
- **get / list** read VMs back (list: the node resource group's VMs tagged with this
  cluster); **delete** force-deletes the VM, then its NIC, and raises
  NodeClaimNotFoundError once the VM is gone.
- **register_controllers** adds the AKSNodeClass status controller and the garbage
  collection of NICs no VM or NodeClaim owns (leaked VMs are collected by karpy's core
  through ``list``/``delete``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from azure.core.credentials_async import AsyncTokenCredential
from azure.core.exceptions import HttpResponseError
from azure.mgmt.compute import models as cm

from karpy.apis import NodeClaim, NodePool
from karpy.apis.labels import LABEL_INSTANCE_TYPE
from karpy.cloudprovider import (
    CreateError,
    DriftReason,
    InstanceType,
    LaunchOverlays,
    NodeClaimNotFoundError,
    NodeClassNotReadyError,
    NoOverlays,
    ProviderContext,
    RepairPolicy,
    UnavailableOfferings,
)
from karpy.runtime import Client, Clock, Kind, Manager, SystemClock
from karpy.runtime.errors import NotFound
from karpy.runtime.kinds import NODE
from karpy_azure._arm import ArmClients, is_not_found
from karpy_azure._catalog import Catalog
from karpy_azure._extensions import extension_names
from karpy_azure._gc import register_garbage_collection
from karpy_azure._hash import hash_drifted, register_hash_controller
from karpy_azure._images import image_for, image_requirements, parse_community_image_id
from karpy_azure._inplaceupdate import register_in_place_update, update_tags
from karpy_azure._instancetypes import (
    InstanceTypeParams,
    build_instance_types,
    instance_type_params,
)
from karpy_azure._network import BackendPools, ManagedNsg
from karpy_azure._nodeclasses import (
    AKS_NODE_CLASS,
    NodeClassSource,
)
from karpy_azure._nodedrift import k8s_version_drifted, kubelet_identity_drifted
from karpy_azure._repair import REPAIR_POLICIES
from karpy_azure._resources import TAG_CLUSTER, vm_name_from_provider_id
from karpy_azure._settings import (
    PROVIDER_SETTINGS,
    AzureSettings,
    check_settings,
    required_ca_bundle,
)
from karpy_azure._status import register_status_controller
from karpy_azure._vmlaunch import VmLauncher
from karpy_azure._vms import arm_text, nodeclaim_from_vm
from karpy_azure.apis import AKSNodeClass

if TYPE_CHECKING:
    from karpy_azure._offline import OfflineAzureCloudProvider

__all__ = ["AzureCloudProvider"]

log = logging.getLogger("karpy.cloudprovider.azure")

_INSTANCE_TYPE_CACHE_SECONDS = 60.0

# (catalog version, unavailable generation), built at, instance types
_CachedTypes = tuple[tuple[int, int], float, list[InstanceType]]


class AzureCloudProvider:
    """The CloudProvider for AKS on Azure VMs (see the module docstring).

    Build it from the operator with :meth:`from_context` (the ``azure`` entry point), or
    directly with :class:`AzureSettings`, :class:`ArmClients` and a NodeClass source.
    ``unavailable`` is the provider's unavailable-offerings cache.
    """

    #: Its settings, for ``karpy run --help`` (karpy.cloudprovider.ProviderSetting).
    SETTINGS: Final = PROVIDER_SETTINGS

    @staticmethod
    def check_settings(
        settings: Mapping[str, str], *, cluster_name: str, environ: Mapping[str, str]
    ) -> None:
        """Refuse bad settings at start-up, before any Azure client is made."""
        check_settings(settings, cluster_name=cluster_name, environ=environ)

    def __init__(
        self,
        settings: AzureSettings,
        *,
        arm: ArmClients,
        node_classes: NodeClassSource,
        client: Client | None = None,
        credential: AsyncTokenCredential | None = None,
        clock: Clock | None = None,
        ca_bundle: str = "",
        overlays: LaunchOverlays | None = None,
    ) -> None:
        self.arm = arm
        self.node_classes = node_classes
        clock = clock or SystemClock()
        monotonic = clock.monotonic
        self.catalog = Catalog(settings, arm, monotonic=monotonic)
        self.unavailable = UnavailableOfferings(clock=clock)
        self._credential = credential
        self._monotonic = monotonic
        self._types: dict[InstanceTypeParams, _CachedTypes] = {}
        self._by_name: dict[str, InstanceType] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self.backend_pools = BackendPools(
            arm.network, settings.node_resource_group, monotonic=monotonic
        )
        self.managed_nsg = ManagedNsg(arm.network, settings.node_resource_group)
        #: base64 PEM of the API server's CA, for the nodes' bootstrap
        self.ca_bundle = required_ca_bundle(settings, ca_bundle)
        #: the launch chain (:mod:`karpy_azure._vmlaunch`): plan, NIC, VM, extensions
        self.launcher = VmLauncher(
            settings,
            arm=arm,
            catalog=self.catalog,
            instance_types=self.instance_types_for,
            unavailable=self.unavailable,
            overlays=overlays or NoOverlays(),
            client=client,
            backend_pools=self.backend_pools,
            managed_nsg=self.managed_nsg,
            ca_bundle=self.ca_bundle,
            delete_nic=self.delete_nic,
            monotonic=monotonic,
        )
        #: launches in flight, by VM name (:mod:`karpy_azure._launches`)
        self.launches = self.launcher.launches

    # The launcher's, so that setting one here (tests swap a running provider's settings,
    # client and overlays) changes what the next launch uses too.

    @property
    def settings(self) -> AzureSettings:
        """The provider's settings."""
        return self.launcher.settings

    @settings.setter
    def settings(self, value: AzureSettings) -> None:
        self.launcher.settings = value

    @property
    def client(self) -> Client | None:
        """The Kubernetes client (None: no Node is read for drift, and the NodeClaim of a
        failed handed-over launch is not deleted)."""
        return self.launcher.client

    @client.setter
    def client(self, value: Client | None) -> None:
        self.launcher.client = value

    @property
    def overlays(self) -> LaunchOverlays:
        """The NodeOverlays in force, applied to the sizes a launch chooses from."""
        return self.launcher.overlays

    @overlays.setter
    def overlays(self, value: LaunchOverlays) -> None:
        self.launcher.overlays = value

    @classmethod
    def from_context(
        cls, context: ProviderContext
    ) -> AzureCloudProvider | OfflineAzureCloudProvider:
        """The ``karpy.cloudproviders`` factory (the ``azure`` entry point names this
        class): see :func:`karpy_azure._factory.from_context`."""
        from karpy_azure._factory import from_context

        return from_context(context)

    @property
    def name(self) -> str:
        """``"azure"``."""
        return "azure"

    # -- instance types ----------------------------------------------------------------

    def params_for(self, node_class: AKSNodeClass) -> InstanceTypeParams:
        """What of ``node_class`` and the settings shapes its instance types."""
        return instance_type_params(self.settings, node_class)

    async def instance_types_for(self, node_class: AKSNodeClass) -> list[InstanceType]:
        """Every instance type ``node_class`` can launch, with current availability."""
        skus = await self.catalog.skus()
        prices = self.catalog.prices()
        params = self.params_for(node_class)
        version = (self.catalog.version, self.unavailable.generation)
        cached = self._types.get(params)
        now = self._monotonic()
        if cached is not None and cached[0] == version and now - cached[1] < (
            _INSTANCE_TYPE_CACHE_SECONDS
        ):
            return list(cached[2])
        built = build_instance_types(skus, params, prices, self.unavailable)
        self._types[params] = (version, now, built)
        self._by_name.update((it.name, it) for it in built)
        return list(built)

    async def get_instance_types(self, nodepool: NodePool) -> Sequence[InstanceType]:
        """The instance types of the NodePool's AKSNodeClass (none while it is missing)."""
        ref = nodepool.spec.template.spec.node_class_ref
        if (ref.group, ref.kind) != (AKS_NODE_CLASS.group, AKS_NODE_CLASS.kind):
            return ()
        node_class = await self.node_classes.get(ref.name)
        if node_class is None:
            return ()
        return await self.instance_types_for(node_class)

    # -- create ------------------------------------------------------------------------

    async def _ready_node_class(self, nodeclaim: NodeClaim) -> AKSNodeClass:
        ref = nodeclaim.spec.node_class_ref
        if (ref.group, ref.kind) != (AKS_NODE_CLASS.group, AKS_NODE_CLASS.kind):
            raise CreateError(
                f"nodeclaim {nodeclaim.metadata.name} refers to {ref.kind}.{ref.group}; the "
                f"azure provider serves {AKS_NODE_CLASS}",
                reason="UnsupportedNodeClass",
            )
        node_class = await self.node_classes.get(ref.name)
        if node_class is None:
            raise NodeClassNotReadyError(f"AKSNodeClass {ref.name!r} not found")
        if node_class.metadata.deletion_timestamp is not None:
            raise NodeClassNotReadyError(f"AKSNodeClass {ref.name!r} is terminating")
        ready = node_class.status_conditions().get("Ready")
        if ready is None or ready.status != "True":
            why = f"{ready.reason}: {ready.message}" if ready is not None else "no Ready condition"
            raise NodeClassNotReadyError(f"AKSNodeClass {ref.name!r} is not ready ({why})")
        return node_class

    async def create(self, nodeclaim: NodeClaim) -> NodeClaim:
        """Launch the cheapest fitting offering: NIC, VM, extensions, as a task that
        outlives this call when it must (the launcher's: see :mod:`karpy_azure._vmlaunch`
        and :mod:`karpy_azure._launches`); a VM of this NodeClaim that exists already is
        reused, never replaced or deleted."""
        if not nodeclaim.metadata.name:
            raise CreateError("the nodeclaim has no name", reason="InvalidNodeClaim")
        node_class = await self._ready_node_class(nodeclaim)
        return await self.launcher.launch(nodeclaim, node_class)

    async def update_tags(self, name: str, tags: Mapping[str, str]) -> None:
        """Set ``tags`` on VM ``name``'s NIC, extensions and the VM itself (in place:
        :mod:`karpy_azure._inplaceupdate`)."""
        customscript = self.settings.provision_mode == "customscript"
        extensions = extension_names(
            "" if customscript else None, arm_cloud=self.settings.arm_cloud
        )
        await update_tags(self, name, tags, extensions)

    async def delete_nic(self, name: str) -> bool:
        """Delete NIC ``name``; True once it is gone (or was never there)."""
        try:
            poller = await self.arm.network.network_interfaces.begin_delete(
                self.settings.node_resource_group, name, **self.arm.lro()
            )
            await poller.result()
        except HttpResponseError as exc:
            if is_not_found(exc):
                return True
            log.warning("deleting network interface %s failed: %s", name, exc.message)
            return False
        return True

    # -- get / list --------------------------------------------------------------------

    def _nodeclaim_from_vm(self, vm: cm.VirtualMachine) -> NodeClaim:
        return nodeclaim_from_vm(vm, self.settings, self._by_name)

    async def get(self, provider_id: str) -> NodeClaim:
        """The VM as a NodeClaim; NodeClaimNotFoundError when it does not exist."""
        name = vm_name_from_provider_id(provider_id)
        if name is None:
            raise NodeClaimNotFoundError(
                f"{provider_id!r} is not an Azure VM provider ID", provider_id=provider_id
            )
        try:
            vm = await self.arm.compute.virtual_machines.get(
                self.settings.node_resource_group, name
            )
        except HttpResponseError as exc:
            if is_not_found(exc):
                raise NodeClaimNotFoundError(
                    f"virtual machine {name} not found", provider_id=provider_id
                ) from exc
            raise
        return self._nodeclaim_from_vm(vm)

    async def list_vms(self) -> list[cm.VirtualMachine]:
        """The node resource group's VMs tagged with this cluster."""
        found: list[cm.VirtualMachine] = []
        async for vm in self.arm.compute.virtual_machines.list(self.settings.node_resource_group):
            if (vm.tags or {}).get(TAG_CLUSTER) != self.settings.cluster_name:
                continue
            found.append(vm)
        return found

    async def list(self) -> Sequence[NodeClaim]:
        """Every VM of this cluster that is not being deleted."""
        return [
            self._nodeclaim_from_vm(vm)
            for vm in await self.list_vms()
            if not (vm.properties and arm_text(vm.properties.provisioning_state) == "Deleting")
        ]

    # -- delete ------------------------------------------------------------------------

    async def delete(self, nodeclaim: NodeClaim) -> None:
        """Force-delete the VM and then its NIC; raise NodeClaimNotFoundError once the VM
        is gone (so a second delete of a deleted node raises it)."""
        pid = nodeclaim.status.provider_id or ""
        name = vm_name_from_provider_id(pid)
        if name is None:
            raise NodeClaimNotFoundError(f"{pid!r} is not an Azure VM provider ID",
                                         provider_id=pid)
        self.launches.cancel(name)  # a launch still under way stops here
        lock = self._locks.setdefault(name, asyncio.Lock())
        async with lock:
            await self.delete_vm(name, provider_id_=pid)

    async def delete_vm(self, name: str, *, provider_id_: str = "") -> None:
        """Delete VM ``name`` and its NIC; NodeClaimNotFoundError when it was already gone
        (its NIC, if any, is deleted then too)."""
        rg = self.settings.node_resource_group
        try:
            await self.arm.compute.virtual_machines.get(rg, name)
        except HttpResponseError as exc:
            if not is_not_found(exc):
                raise
            await self.delete_nic(name)
            raise NodeClaimNotFoundError(
                f"virtual machine {name} not found", provider_id=provider_id_
            ) from exc
        log.info("deleting virtual machine and associated resources", extra={"vmName": name})
        try:
            poller = await self.arm.compute.virtual_machines.begin_delete(
                rg, name, force_deletion=True, **self.arm.lro()
            )
            await poller.result()
        except HttpResponseError as exc:
            if not is_not_found(exc):
                raise
        await self.delete_nic(name)

    # -- drift, repair, node classes ---------------------------------------------------

    async def is_drifted(self, nodeclaim: NodeClaim) -> DriftReason | None:
        """``NodeClassDrift`` when the AKSNodeClass spec changed since launch (hash
        annotations); ``K8sVersionDrift`` when the node's kubelet runs another version
        than the class's (ready) Kubernetes version; ``KubeletIdentityDrift`` when the
        node's kubelet identity label differs from the ``kubeletIdentityClientID``
        setting; ``ImageDrift`` when the class now resolves a different image for the
        node's instance type; else None."""
        node_class = await self.node_classes.get(nodeclaim.spec.node_class_ref.name)
        if node_class is None:
            return None
        if hash_drifted(nodeclaim, node_class):
            return DriftReason("NodeClassDrift")
        # Karpenter-Azure's order for VMs: class, Kubernetes version, kubelet identity, image
        node = await self._node_for_drift(nodeclaim)
        if node is not None:
            if k8s_version_drifted(node, node_class):
                return DriftReason("K8sVersionDrift")
            if kubelet_identity_drifted(node, self.settings.kubelet_identity_client_id):
                return DriftReason("KubeletIdentityDrift")
        current = nodeclaim.status.image_id
        size = nodeclaim.metadata.labels.get(LABEL_INSTANCE_TYPE)
        if current and size and node_class.status.images:
            it = self._by_name.get(size)
            if it is None:
                await self.instance_types_for(node_class)
                it = self._by_name.get(size)
            if it is not None:
                want = image_for(image_requirements(node_class), it.requirements)
                if want is not None and parse_community_image_id(want) != (
                    parse_community_image_id(current)
                ):
                    return DriftReason("ImageDrift")
        return None

    async def _node_for_drift(self, nodeclaim: NodeClaim) -> Mapping[str, Any] | None:
        """The NodeClaim's Node, or None when it has none yet, it is being deleted, or the
        provider has no API client (then only the NodeClaim's own drift is judged)."""
        name = nodeclaim.status.node_name
        if not name or self.client is None:
            return None
        try:
            node = await self.client.get(NODE, name)
        except NotFound:
            return None  # not registered yet: expected while it launches
        if (node.get("metadata") or {}).get("deletionTimestamp"):
            return None
        return node

    def repair_policies(self) -> Sequence[RepairPolicy]:
        """Replace a node whose Ready condition is False or Unknown for 10 minutes, and a
        Spot node whose eviction is scheduled (``PreemptionScheduled=True``) at once."""
        return REPAIR_POLICIES

    def supported_node_classes(self) -> Sequence[Kind]:
        """AKSNodeClass (karpenter.azure.com/v1beta1)."""
        return (AKS_NODE_CLASS,)

    def register_controllers(self, manager: Manager) -> None:
        """Add the AKSNodeClass status controller, NIC garbage collection (VMs are
        collected by the core through list/delete), in-place tag updates and the
        AKSNodeClass hash (``nodeclass.hash``)."""
        register_status_controller(self, manager)
        register_hash_controller(manager)
        register_garbage_collection(self, manager)
        register_in_place_update(self, manager)

    async def aclose(self) -> None:
        """Stop the launches in flight; close the SDK clients, the pricing session and
        the credential."""
        await self.launches.aclose()
        await self.catalog.close()
        await self.arm.close()
        if self._credential is not None:
            await self._credential.close()
