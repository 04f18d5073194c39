"""AzureCloudProvider: AKS nodes as Azure VMs, the way Karpenter's Azure provider makes
them.

- **Instance types** come from Resource SKUs of the location with the AKS allocatable and
  retail prices (:mod:`karpy_azure._instancetypes`); offerings Azure refused recently are
  shown ``available=False`` from the provider's own cache.
- **create** first reads VM ``aks-<nodeclaim>``: if an earlier attempt made it, it is
  reused as it is (its size, zone and priority are the launch's, whatever this attempt
  would choose) and whatever that attempt left undone is finished. Otherwise it picks
  the cheapest fitting offering, creates the NIC ``aks-<nodeclaim>`` (in the AKS load
  balancers' backend pools, with the managed NSG on a bring-your-own VNet:
  :mod:`karpy_azure._network`), then the VM with AKS's node bootstrap
  (:mod:`karpy_azure._nodebootstrap`), then its extensions
  (:mod:`karpy_azure._extensions`) — as one task that outlives the call when the
  operations take longer than ``launchWait`` (:mod:`karpy_azure._launches`). A capacity
  error (SkuNotAvailable, ZonalAllocationFailed, AllocationFailed, Overconstrained*,
  quota) marks offerings unavailable and raises InsufficientCapacityError naming them. A
  VM whose creation failed after ARM accepted it (state Failed) or whose extension
  failed is deleted with its NIC; a PUT that ARM refused deletes only the NIC, and only
  when no VM of that name exists: a retry never deletes the VM an earlier attempt made.
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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from azure.core.credentials_async import AsyncTokenCredential
from azure.core.exceptions import HttpResponseError
from azure.mgmt.compute import models as cm

from karpy.apis import NodeClaim, NodePool
from karpy.apis.labels import CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_SPOT, LABEL_INSTANCE_TYPE
from karpy.cloudprovider import (
    NODE_CLAIM,
    CreateError,
    DriftReason,
    InstanceType,
    InsufficientCapacityError,
    LaunchOverlays,
    NodeClaimNotFoundError,
    NodeClassNotReadyError,
    NoOverlays,
    ProviderContext,
    RepairPolicy,
    UnavailableOfferings,
)
from karpy.cloudprovider.launch import (
    LaunchChoice,
    choose_launch,
    launched_labels,
    launched_nodeclaim,
    nodeclaim_requirements,
)
from karpy.runtime import Client, Clock, Kind, Manager, SystemClock
from karpy.runtime.errors import Conflict, NotFound
from karpy.runtime.kinds import NODE
from karpy_azure._arm import (
    ArmClients,
    classify_capacity_error,
    error_code,
    is_not_found,
)
from karpy_azure._capacity import capacity_keys, capacity_ttl
from karpy_azure._catalog import Catalog
from karpy_azure._extensions import (
    BILLING_EXTENSION,
    CSE_EXTENSION,
    billing_applies,
    billing_extension,
    cse_extension,
)
from karpy_azure._gc import register_garbage_collection
from karpy_azure._hash import (
    NODECLASS_HASH_VERSION,
    hash_drifted,
    node_class_hash,
    register_hash_controller,
)
from karpy_azure._images import image_for, image_requirements, parse_community_image_id
from karpy_azure._inplaceupdate import register_in_place_update, tags_hash, update_tags
from karpy_azure._instancetypes import (
    REGIONAL_ZONE,
    InstanceTypeParams,
    arm_zone,
    build_instance_types,
    instance_type_params,
    zone_label,
)
from karpy_azure._launches import Launch, Launches
from karpy_azure._network import (
    BackendPools,
    ManagedNsg,
    PoolIDs,
    is_aks_managed_vnet,
    is_missing_backend_pool,
)
from karpy_azure._nodebootstrap import node_bootstrap, startup_taints
from karpy_azure._nodeclasses import (
    AKS_NODE_CLASS,
    NodeClassSource,
)
from karpy_azure._nodedrift import k8s_version_drifted, kubelet_identity_drifted
from karpy_azure._repair import REPAIR_POLICIES
from karpy_azure._resources import (
    TAG_CLUSTER,
    network_interface,
    provider_id,
    resource_name,
    tags_for,
    virtual_machine,
    vm_name_from_provider_id,
)
from karpy_azure._settings import (
    PROVIDER_SETTINGS,
    AzureSettings,
    check_settings,
    required_ca_bundle,
)
from karpy_azure._skus import Sku
from karpy_azure._status import register_status_controller
from karpy_azure._vms import arm_text, nodeclaim_from_vm
from karpy_azure.apis import AKSNodeClass
from karpy_azure.apis import labels as az

if TYPE_CHECKING:
    from karpy_azure._offline import OfflineAzureCloudProvider

__all__ = ["AzureCloudProvider"]

log = logging.getLogger("karpy.cloudprovider.azure")

_INSTANCE_TYPE_CACHE_SECONDS = 60.0
#: how often an adopted VM (no LRO to poll: its creator's answer is lost) is re-read (at
#: least a second apart even with pollInterval 0), and for how long at most: Karpenter's
#: registration TTL is 15 minutes
_ADOPT_POLL_SECONDS = 10.0
_ADOPT_TIMEOUT_SECONDS = 20 * 60.0

# (catalog version, unavailable generation), built at, instance types
_CachedTypes = tuple[tuple[int, int], float, list[InstanceType]]


@dataclass(slots=True)
class _Plan:
    """What one launch's NIC, VM and extensions are made from."""

    name: str
    choice: LaunchChoice
    image_id: str
    tags: dict[str, str]
    subnet_id: str
    nsg_id: str
    max_pods: int
    custom_data: str | None
    cse_command: str | None
    ultra_ssd: bool
    launched: NodeClaim


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
        self.settings = settings
        #: the NodeOverlays in force, applied to the sizes a launch chooses from
        self.overlays: LaunchOverlays = overlays or NoOverlays()
        self.arm = arm
        self.node_classes = node_classes
        self.client = client
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
        #: launches in flight, by VM name (:mod:`karpy_azure._launches`)
        self.launches = Launches(self._launch_failed)
        #: base64 PEM of the API server's CA, for the nodes' bootstrap
        self.ca_bundle = required_ca_bundle(settings, ca_bundle)

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

    async def _sku(self, name: str) -> Sku | None:
        for sku in await self.catalog.skus():
            if sku.name == name:
                return sku
        return None

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
        outlives this call when it must (see :mod:`karpy_azure._launches`); a VM of this
        NodeClaim that exists already is reused, never replaced or deleted."""
        if not nodeclaim.metadata.name:
            raise CreateError("the nodeclaim has no name", reason="InvalidNodeClaim")
        node_class = await self._ready_node_class(nodeclaim)
        name = resource_name(nodeclaim.metadata.name)
        launch = self.launches.get(name)
        if launch is None:
            existing = await self._existing_vm(name)
            if existing is not None:
                return await self._adopt(nodeclaim, node_class, existing)
            launch = await self._begin_launch(nodeclaim, node_class, name)
        if await self.launches.wait(launch, self.settings.launch_wait, accepted=True):
            self.launches.collect(launch)  # raises the launch's error
            return launch.launched.model_copy(deep=True)
        self.launches.hand_over(launch)
        log.info(
            "virtual machine accepted, still provisioning; reporting it launched",
            extra={"vmName": name, "waited": self.settings.launch_wait},
        )
        return launch.launched.model_copy(deep=True)

    async def _existing_vm(self, name: str) -> cm.VirtualMachine | None:
        """VM ``name`` if it exists (an earlier attempt's, before a restart)."""
        try:
            return await self.arm.compute.virtual_machines.get(
                self.settings.node_resource_group, name
            )
        except HttpResponseError as exc:
            if is_not_found(exc):
                return None
            raise

    async def _plan(
        self, nodeclaim: NodeClaim, node_class: AKSNodeClass, choice: LaunchChoice
    ) -> _Plan:
        """Everything the NIC, VM and extensions of ``choice`` are made from."""
        it = choice.instance_type
        image_id = image_for(image_requirements(node_class), it.requirements)
        if image_id is None:
            raise CreateError(
                f"no image of AKSNodeClass {node_class.metadata.name} suits {it.name} "
                f"(status.images: {[i.id for i in node_class.status.images]})",
                reason="ImageNotFound",
            )
        params = self.params_for(node_class)
        labels = launched_labels(nodeclaim, choice)
        labels[az.LABEL_NODECLASS] = node_class.metadata.name or ""
        ultra_ssd = ultra_ssd_requested(nodeclaim)
        labels[az.LABEL_SKU_STORAGE_ULTRA_SSD] = "true" if ultra_ssd else "false"
        subnet_id = node_class.spec.vnet_subnet_id or self.settings.vnet_subnet_id
        nsg = await self.managed_nsg.get()
        try:
            bootstrap = node_bootstrap(
                self.settings,
                node_class,
                instance_type=it,
                labels=labels,
                taints=startup_taints(nodeclaim),
                max_pods=params.max_pods,
                subnet_id=subnet_id,
                ca_bundle=self.ca_bundle,
                nsg_name=nsg.name,
            )
        except ValueError as exc:
            raise NodeClassNotReadyError(str(exc)) from exc
        byo_vnet = not is_aks_managed_vnet(self.settings.node_resource_group, subnet_id)
        name = resource_name(nodeclaim.metadata.name or "")
        launched = launched_nodeclaim(
            nodeclaim,
            choice,
            provider_id=provider_id(
                self.settings.subscription_id, self.settings.node_resource_group, name
            ),
            labels=labels,
            image_id=image_id,
        )
        launched.metadata.annotations[az.ANNOTATION_AKSNODECLASS_HASH] = node_class_hash(node_class)
        launched.metadata.annotations[az.ANNOTATION_AKSNODECLASS_HASH_VERSION] = (
            NODECLASS_HASH_VERSION
        )
        tags = tags_for(self.settings, node_class, nodeclaim)
        launched.metadata.annotations[az.ANNOTATION_IN_PLACE_UPDATE_HASH] = tags_hash(tags)
        return _Plan(
            name=name,
            choice=choice,
            image_id=image_id,
            tags=tags,
            subnet_id=subnet_id,
            nsg_id=nsg.id if byo_vnet else "",
            max_pods=params.max_pods,
            custom_data=bootstrap.custom_data,
            cse_command=bootstrap.cse_command,
            ultra_ssd=ultra_ssd,
            launched=launched,
        )

    async def _begin_launch(
        self, nodeclaim: NodeClaim, node_class: AKSNodeClass, name: str
    ) -> Launch:
        # as the core planned them: an overlay's extended resource must fit here too
        instance_types = self.overlays.apply(nodeclaim, await self.instance_types_for(node_class))
        choice = choose_launch(nodeclaim, instance_types, refuse=self.unavailable.is_unavailable)
        plan = await self._plan(nodeclaim, node_class, choice)
        launch = Launch(
            name=name,
            nodeclaim_name=nodeclaim.metadata.name or "",
            nodeclaim_uid=nodeclaim.metadata.uid or "",
            launched=plan.launched,
        )
        return self.launches.start(launch, self._run_launch(launch, plan, node_class))

    async def _run_launch(self, launch: Launch, plan: _Plan, node_class: AKSNodeClass) -> None:
        """NIC, VM, extensions: the launch's task. A VM PUT that ARM refuses leaves any VM
        of that name alone (it is an earlier attempt's); a VM whose creation failed after
        ARM accepted it (state Failed) is deleted with its NIC."""
        name, choice = plan.name, plan.choice
        it = choice.instance_type
        sku = await self._sku(it.name)
        nic_id = await self._create_nic(name, plan.subnet_id, plan.tags, sku, plan.max_pods,
                                        nsg_id=plan.nsg_id)
        vm = virtual_machine(
            self.settings,
            node_class,
            name=name,
            size=it.name,
            zone_number=arm_zone(choice.offering.zone),
            capacity_type=choice.offering.capacity_type,
            nic_id=nic_id,
            image_id=plan.image_id,
            premium_storage=bool(sku and sku.premium_io),
            custom_data=plan.custom_data,
            tags=plan.tags,
            ephemeral_placement=(
                sku.ephemeral_os_placement_for(node_class.spec.os_disk_size_gb) if sku else ""
            ),
            ultra_ssd=plan.ultra_ssd,
        )
        rg = self.settings.node_resource_group
        try:
            poller = await self.arm.compute.virtual_machines.begin_create_or_update(
                rg, name, vm, **self.arm.lro()
            )
        except HttpResponseError as exc:
            # ARM made nothing of a refused PUT; a VM of that name is an earlier attempt's
            if await self._existing_vm(name) is None:
                await self.delete_nic(name)
            raise self._launch_error(exc, choice, name) from exc
        launch.accepted.set()
        try:
            await poller.result()
        except HttpResponseError as exc:
            await self._cleanup_failed_launch(name)
            raise self._launch_error(exc, choice, name) from exc
        await self._create_extensions(name, plan.tags, plan.cse_command)
        log.info(
            "launched virtual machine",
            extra={"vmName": name, "instance-type": it.name, "zone": choice.offering.zone,
                   "capacity-type": choice.offering.capacity_type},
        )

    async def _adopt(
        self, nodeclaim: NodeClaim, node_class: AKSNodeClass, vm: cm.VirtualMachine
    ) -> NodeClaim:
        """Report VM ``vm`` (an earlier attempt's) as this NodeClaim's launch, with its
        own size, zone and priority whatever this attempt would choose, and finish what
        that attempt may not have: wait for its provisioning, create missing extensions."""
        name = str(vm.name)
        props = vm.properties
        size = arm_text(props.hardware_profile.vm_size) if props and props.hardware_profile else ""
        zones = list(vm.zones or [])
        zone = zone_label(self.settings.location, zones[0]) if zones else REGIONAL_ZONE
        spot = props is not None and arm_text(props.priority).lower() == "spot"
        capacity_type = CAPACITY_TYPE_SPOT if spot else CAPACITY_TYPE_ON_DEMAND
        found = [it for it in await self.instance_types_for(node_class) if it.name == size]
        offerings = [
            o for it in found for o in it.offerings
            if o.zone == zone and o.capacity_type == capacity_type
        ]
        if not offerings:
            raise CreateError(
                f"virtual machine {name} exists ({size}, {zone}, {capacity_type}) but "
                f"AKSNodeClass {node_class.metadata.name} no longer offers that; it is "
                "left as it is (delete the NodeClaim to remove it)",
                reason="VirtualMachineMismatch",
            )
        plan = await self._plan(nodeclaim, node_class, LaunchChoice(found[0], offerings[0]))
        image = ""
        if props and props.storage_profile and props.storage_profile.image_reference:
            image = str(props.storage_profile.image_reference.community_gallery_image_id or "")
        plan.launched.status.image_id = image or plan.image_id
        log.info("found existing virtual machine, reusing it",
                 extra={"vmName": name, "instance-type": size, "zone": zone,
                        "capacity-type": capacity_type})
        launch = Launch(
            name=name,
            nodeclaim_name=nodeclaim.metadata.name or "",
            nodeclaim_uid=nodeclaim.metadata.uid or "",
            launched=plan.launched,
        )
        launch.accepted.set()
        self.launches.start(launch, self._finish_launch(plan))
        if await self.launches.wait(launch, self.settings.launch_wait):
            self.launches.collect(launch)
        else:
            self.launches.hand_over(launch)
        return plan.launched.model_copy(deep=True)

    async def _finish_launch(self, plan: _Plan) -> None:
        """Wait for an adopted VM's provisioning (ARM's answer to the earlier attempt's
        PUT is lost with that attempt), then create the extensions it lacks."""
        name = plan.name
        interval = (_ADOPT_POLL_SECONDS if self.arm.poll_interval is None
                    else max(self.arm.poll_interval, 1.0))
        state = ""
        deadline = self._monotonic() + _ADOPT_TIMEOUT_SECONDS
        while self._monotonic() < deadline:
            vm = await self._existing_vm(name)
            if vm is None:
                raise CreateError(f"virtual machine {name} disappeared while launching",
                                  reason="VirtualMachineCreationFailed")
            state = arm_text(vm.properties.provisioning_state) if vm.properties else ""
            if state in ("Succeeded", "Failed", "Canceled"):
                break
            await asyncio.sleep(interval)
        if state != "Succeeded":
            await self._cleanup_failed_launch(name)
            raise CreateError(
                f"virtual machine {name} ended in provisioning state {state!r} (or stayed "
                f"there {_ADOPT_TIMEOUT_SECONDS / 60:g} minutes)",
                reason="VirtualMachineCreationFailed",
            )
        missing = []
        for extension in self._extension_names(plan.cse_command):
            try:
                await self.arm.compute.virtual_machine_extensions.get(
                    self.settings.node_resource_group, name, extension
                )
            except HttpResponseError as exc:
                if not is_not_found(exc):
                    raise
                missing.append(extension)
        await self._create_extensions(name, plan.tags, plan.cse_command, only=missing)

    async def _launch_failed(self, launch: Launch, error: BaseException) -> None:
        """A launch reported launched has failed (its VM and NIC are cleaned up): delete
        its NodeClaim so that its pods are planned again, as Karpenter-Azure does."""
        log.error("failed launching nodeclaim",
                  extra={"vmName": launch.name, "error": str(error)})
        if self.client is None:
            return
        try:
            await self.client.delete(NODE_CLAIM, launch.nodeclaim_name,
                                     uid=launch.nodeclaim_uid or None)
        except (NotFound, Conflict):
            return  # gone already, or a newer NodeClaim of that name

    async def _create_nic(
        self,
        name: str,
        subnet_id: str,
        tags: dict[str, str],
        sku: Sku | None,
        pods: int,
        *,
        nsg_id: str,
    ) -> str:
        """Create the NIC in the load balancers' backend pools; when ARM says a pool is
        gone (the cached list was stale), re-read the pools and try once more. A NIC
        that cannot be created is deleted."""
        pools = await self.backend_pools.get()
        for attempt in (1, 2):
            try:
                return await self._put_nic(name, subnet_id, tags, sku, pods, pools, nsg_id)
            except HttpResponseError as exc:
                if attempt == 2 or not is_missing_backend_pool(exc, pools):
                    await self.delete_nic(name)
                    raise _nic_error(name, exc) from exc
                log.info(
                    "network interface creation failed due to stale load balancer backend "
                    "pool reference, refreshing",
                    extra={"nicName": name, "error": str(exc.message)},
                )
            pools = await self.backend_pools.refresh(pools)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _put_nic(
        self,
        name: str,
        subnet_id: str,
        tags: dict[str, str],
        sku: Sku | None,
        pods: int,
        pools: PoolIDs,
        nsg_id: str,
    ) -> str:
        nic = network_interface(
            self.settings,
            name=name,
            subnet_id=subnet_id,
            tags=tags,
            accelerated_networking=bool(sku and sku.accelerated_networking),
            max_pods=pods,
            backend_pool_ids=pools.ipv4,
            nsg_id=nsg_id,
        )
        poller = await self.arm.network.network_interfaces.begin_create_or_update(
            self.settings.node_resource_group, name, nic, **self.arm.lro()
        )
        created = await poller.result()
        return str(created.id)

    def _extension_names(self, cse_command: str | None) -> list[str]:
        """The extensions karpy makes on a VM: the Custom Script Extension when there is a
        provisioning command to run, the billing extension where it applies."""
        names = [] if cse_command is None else [CSE_EXTENSION]
        if billing_applies(self.settings.arm_cloud):
            names.append(BILLING_EXTENSION)
        return names

    async def update_tags(self, name: str, tags: Mapping[str, str]) -> None:
        """Set ``tags`` on VM ``name``'s NIC, extensions and the VM itself (in place:
        :mod:`karpy_azure._inplaceupdate`)."""
        customscript = self.settings.provision_mode == "customscript"
        extensions = self._extension_names("" if customscript else None)
        await update_tags(self, name, tags, extensions)

    async def _create_extensions(
        self,
        name: str,
        tags: Mapping[str, str],
        cse_command: str | None,
        *,
        only: Sequence[str] | None = None,
    ) -> None:
        """The Custom Script Extension (provision mode ``customscript``), then the AKS
        billing extension (in the clouds it exists in); ``only``: just those. A failure
        deletes the VM and NIC and raises CreateError."""
        bodies = {
            CSE_EXTENSION: lambda: cse_extension(self.settings.location, tags, cse_command or ""),
            BILLING_EXTENSION: lambda: billing_extension(self.settings.location, tags),
        }
        for extension_name in self._extension_names(cse_command):
            if only is not None and extension_name not in only:
                continue
            try:
                poller = await self.arm.compute.virtual_machine_extensions.begin_create_or_update(
                    self.settings.node_resource_group, name, extension_name,
                    bodies[extension_name](), **self.arm.lro()
                )
                await poller.result()
            except HttpResponseError as exc:
                await self._cleanup_failed_launch(name)
                raise CreateError(
                    f"creating extension {extension_name} of virtual machine {name} failed: "
                    f"{error_code(exc) or exc.status_code}: {exc.message}",
                    reason="VirtualMachineExtensionFailed",
                ) from exc

    def _launch_error(self, exc: HttpResponseError, choice: LaunchChoice, name: str) -> Exception:
        code = error_code(exc)
        message = str(exc.message or exc)
        offering = choice.offering
        cap = classify_capacity_error(
            code,
            message,
            instance_type=choice.instance_type.name,
            zone=offering.zone,
            capacity_type=offering.capacity_type,
        )
        if cap is None:
            return CreateError(
                f"creating virtual machine {name} ({choice.key}) failed: "
                f"{code or exc.status_code}: {message}",
                reason="VirtualMachineCreationFailed",
            )
        keys = capacity_keys(cap, choice)
        self.unavailable.mark(keys, reason=cap.reason, ttl=capacity_ttl(cap, offering.capacity_type,
                                                                  message))
        log.warning(
            "marked offerings unavailable",
            extra={"reason": cap.reason, "code": code, "offerings": [str(k) for k in keys]},
        )
        return InsufficientCapacityError(f"{cap.message} ({code})", offerings=keys)

    async def _cleanup_failed_launch(self, name: str) -> None:
        """Delete what a failed VM create left: the VM (if ARM kept it, state Failed),
        then the NIC, so nothing is half-created. Failures are left to garbage
        collection, which finds both by their cluster tag."""
        try:
            poller = await self.arm.compute.virtual_machines.begin_delete(
                self.settings.node_resource_group, name, force_deletion=True, **self.arm.lro()
            )
            await poller.result()
        except HttpResponseError as exc:
            if not is_not_found(exc):
                log.warning("cleaning up virtual machine %s failed: %s", name, exc.message)
        await self.delete_nic(name)

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


def ultra_ssd_requested(nodeclaim: NodeClaim) -> bool:
    """True only when the NodeClaim asks for Ultra SSD explicitly
    (``karpenter.azure.com/sku-storage-ultra-ssd`` allows ``true`` and not ``false``), as
    Karpenter's Azure provider decides it: the capability is then set on the VM."""
    found = nodeclaim_requirements(nodeclaim).get(az.LABEL_SKU_STORAGE_ULTRA_SSD)
    if found is None:
        return False
    return bool(found.has("true") and not found.has("false"))


def _nic_error(name: str, exc: HttpResponseError) -> CreateError:
    return CreateError(
        f"creating network interface {name} failed: {error_code(exc) or exc.status_code}: "
        f"{exc.message}",
        reason="NetworkInterfaceCreationFailed",
    )
