"""The VM launch chain: what one NodeClaim's launch makes on Azure, in order, and how
it recovers, as Karpenter's Azure provider launches (its ``BeginCreate``).

:class:`VmLauncher` is the provider's (``AzureCloudProvider.create`` hands it a NodeClaim
whose AKSNodeClass is Ready):

- **plan**: the cheapest fitting offering (overlays applied, unavailable offerings
  refused), its image, the node's labels, tags and bootstrap
  (:mod:`karpy_azure._nodebootstrap`), and the NodeClaim as launched;
- **launch**, as one task of the launch registry (:mod:`karpy_azure._launches`) that
  outlives ``create`` when the operations take longer than ``launchWait``: the NIC
  (in the AKS load balancers' backend pools, with the managed NSG on a
  bring-your-own VNet: :mod:`karpy_azure._network`), the VM, then its extensions
  (:mod:`karpy_azure._extensions`);
- **adopt**: a VM ``aks-<nodeclaim>`` an earlier attempt made is reused as it is (its
  size, zone and priority) and finished: its provisioning waited for, missing
  extensions created;
- **failures**: a capacity error marks offerings unavailable and raises
  InsufficientCapacityError naming them; a VM whose creation failed after ARM accepted
  it, or whose extension failed, is deleted with its NIC; a PUT that ARM refused
  deletes only the NIC, and only when no VM of that name exists; a handed-over launch
  that fails has its NodeClaim deleted so its pods are planned again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from azure.core.exceptions import HttpResponseError
from azure.mgmt.compute import models as cm

from karpy.apis import NodeClaim
from karpy.apis.labels import CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_SPOT
from karpy.cloudprovider import (
    NODE_CLAIM,
    CreateError,
    InstanceType,
    InsufficientCapacityError,
    LaunchOverlays,
    NodeClassNotReadyError,
    UnavailableOfferings,
)
from karpy.cloudprovider.launch import (
    LaunchChoice,
    choose_launch,
    launched_labels,
    launched_nodeclaim,
    nodeclaim_requirements,
)
from karpy.runtime import Client
from karpy.runtime.errors import Conflict, NotFound
from karpy_azure._arm import ArmClients, classify_capacity_error, error_code, is_not_found
from karpy_azure._capacity import capacity_keys, capacity_ttl
from karpy_azure._catalog import Catalog
from karpy_azure._extensions import (
    BILLING_EXTENSION,
    CSE_EXTENSION,
    billing_extension,
    cse_extension,
    extension_names,
)
from karpy_azure._hash import NODECLASS_HASH_VERSION, node_class_hash
from karpy_azure._images import image_for, image_requirements
from karpy_azure._inplaceupdate import tags_hash
from karpy_azure._instancetypes import REGIONAL_ZONE, arm_zone, instance_type_params, zone_label
from karpy_azure._launches import Launch, Launches
from karpy_azure._network import (
    BackendPools,
    ManagedNsg,
    PoolIDs,
    is_aks_managed_vnet,
    is_missing_backend_pool,
)
from karpy_azure._nodebootstrap import node_bootstrap, startup_taints
from karpy_azure._resources import (
    network_interface,
    provider_id,
    resource_name,
    tags_for,
    virtual_machine,
)
from karpy_azure._settings import AzureSettings
from karpy_azure._skus import Sku
from karpy_azure._vms import arm_text
from karpy_azure.apis import AKSNodeClass
from karpy_azure.apis import labels as az

__all__ = ["VmLauncher", "ultra_ssd_requested"]

# the provider's logger: the launch's log lines read as they did from the provider
log = logging.getLogger("karpy.cloudprovider.azure")

#: how often an adopted VM (no LRO to poll: its creator's answer is lost) is re-read (at
#: least a second apart even with pollInterval 0), and for how long at most: Karpenter's
#: registration TTL is 15 minutes
_ADOPT_POLL_SECONDS = 10.0
_ADOPT_TIMEOUT_SECONDS = 20 * 60.0


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


class VmLauncher:
    """Launches NodeClaims as Azure VMs (see the module docstring), and owns the
    registry of those in flight (:attr:`launches`).

    Given what a launch uses: the ARM clients, the SKU catalog, ``instance_types`` (the
    provider's instance types of a class, cached there), the unavailable-offerings cache,
    the load balancers' backend pools, the managed NSG, the API server's CA for the
    bootstrap, ``delete_nic`` (the provider's) and a monotonic clock. ``settings``,
    ``client`` (to delete the NodeClaim of a failed handed-over launch; None: not
    deleted) and ``overlays`` are plain attributes: the provider's own are these, so
    setting the provider's changes what the next launch uses.
    """

    def __init__(
        self,
        settings: AzureSettings,
        *,
        arm: ArmClients,
        catalog: Catalog,
        instance_types: Callable[[AKSNodeClass], Awaitable[list[InstanceType]]],
        unavailable: UnavailableOfferings,
        overlays: LaunchOverlays,
        client: Client | None,
        backend_pools: BackendPools,
        managed_nsg: ManagedNsg,
        ca_bundle: str,
        delete_nic: Callable[[str], Awaitable[bool]],
        monotonic: Callable[[], float],
    ) -> None:
        self.settings = settings
        self.overlays = overlays
        self.client = client
        self._arm = arm
        self._catalog = catalog
        self._instance_types = instance_types
        self._unavailable = unavailable
        self._backend_pools = backend_pools
        self._managed_nsg = managed_nsg
        self._ca_bundle = ca_bundle
        self._delete_nic = delete_nic
        self._monotonic = monotonic
        #: launches in flight, by VM name (:mod:`karpy_azure._launches`)
        self.launches = Launches(self._launch_failed)

    async def launch(self, nodeclaim: NodeClaim, node_class: AKSNodeClass) -> NodeClaim:
        """Launch ``nodeclaim`` of the Ready ``node_class``, or adopt the VM an earlier
        attempt made: the NodeClaim as launched once the launch finished, or once ARM
        accepted the VM and ``launchWait`` passed (the launch goes on alone)."""
        name = resource_name(nodeclaim.metadata.name or "")  # create refused no name
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

    async def _sku(self, name: str) -> Sku | None:
        for sku in await self._catalog.skus():
            if sku.name == name:
                return sku
        return None

    async def _existing_vm(self, name: str) -> cm.VirtualMachine | None:
        """VM ``name`` if it exists (an earlier attempt's, before a restart)."""
        try:
            return await self._arm.compute.virtual_machines.get(
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
        params = instance_type_params(self.settings, node_class)
        labels = launched_labels(nodeclaim, choice)
        labels[az.LABEL_NODECLASS] = node_class.metadata.name or ""
        ultra_ssd = ultra_ssd_requested(nodeclaim)
        labels[az.LABEL_SKU_STORAGE_ULTRA_SSD] = "true" if ultra_ssd else "false"
        subnet_id = node_class.spec.vnet_subnet_id or self.settings.vnet_subnet_id
        nsg = await self._managed_nsg.get()
        try:
            bootstrap = node_bootstrap(
                self.settings,
                node_class,
                instance_type=it,
                labels=labels,
                taints=startup_taints(nodeclaim),
                max_pods=params.max_pods,
                subnet_id=subnet_id,
                ca_bundle=self._ca_bundle,
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
        instance_types = self.overlays.apply(nodeclaim, await self._instance_types(node_class))
        choice = choose_launch(nodeclaim, instance_types, refuse=self._unavailable.is_unavailable)
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
            poller = await self._arm.compute.virtual_machines.begin_create_or_update(
                rg, name, vm, **self._arm.lro()
            )
        except HttpResponseError as exc:
            # ARM made nothing of a refused PUT; a VM of that name is an earlier attempt's
            if await self._existing_vm(name) is None:
                await self._delete_nic(name)
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
        found = [it for it in await self._instance_types(node_class) if it.name == size]
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
        interval = (_ADOPT_POLL_SECONDS if self._arm.poll_interval is None
                    else max(self._arm.poll_interval, 1.0))
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
        for extension in extension_names(plan.cse_command, arm_cloud=self.settings.arm_cloud):
            try:
                await self._arm.compute.virtual_machine_extensions.get(
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
        pools = await self._backend_pools.get()
        for attempt in (1, 2):
            try:
                return await self._put_nic(name, subnet_id, tags, sku, pods, pools, nsg_id)
            except HttpResponseError as exc:
                if attempt == 2 or not is_missing_backend_pool(exc, pools):
                    await self._delete_nic(name)
                    raise _nic_error(name, exc) from exc
                log.info(
                    "network interface creation failed due to stale load balancer backend "
                    "pool reference, refreshing",
                    extra={"nicName": name, "error": str(exc.message)},
                )
            pools = await self._backend_pools.refresh(pools)
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
        poller = await self._arm.network.network_interfaces.begin_create_or_update(
            self.settings.node_resource_group, name, nic, **self._arm.lro()
        )
        created = await poller.result()
        return str(created.id)

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
        for extension_name in extension_names(cse_command, arm_cloud=self.settings.arm_cloud):
            if only is not None and extension_name not in only:
                continue
            try:
                poller = await self._arm.compute.virtual_machine_extensions.begin_create_or_update(
                    self.settings.node_resource_group, name, extension_name,
                    bodies[extension_name](), **self._arm.lro()
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
        self._unavailable.mark(keys, reason=cap.reason,
                               ttl=capacity_ttl(cap, offering.capacity_type, message))
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
            poller = await self._arm.compute.virtual_machines.begin_delete(
                self.settings.node_resource_group, name, force_deletion=True, **self._arm.lro()
            )
            await poller.result()
        except HttpResponseError as exc:
            if not is_not_found(exc):
                log.warning("cleaning up virtual machine %s failed: %s", name, exc.message)
        await self._delete_nic(name)


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
